"""grep over documents (kbindex[documents]): real generated PDF, Word, EPUB and HTML files
are read as their extracted text, each line marked as such and numbered within its
page, in the protocol, kbctl and MCP; nothing is written inside a root."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from conftest import Daemon, MakeDaemon, write
from document_files import docx, epub, html, pdf
from grep_helpers import needs_rg
from kbindex.proto.messages import Grep, GrepReply
from mcp_helpers import mcp_stdio, structured, text

pytestmark = [pytest.mark.anyio, pytest.mark.slow, needs_rg]
pytest.importorskip("pypdfium2", reason="kbindex[documents] is not installed")
pytest.importorskip("selectolax", reason="kbindex[documents] is not installed")

PAPER = [
    ["Gradient descent notes", "an introduction"],
    ["Stochastic methods", "the momentum of zeppelin updates", "more on page two"],
    ["Conclusion", "zeppelin again, at the end"],
]


def _library(root: Path) -> None:
    write(root / "paper.pdf", pdf(PAPER))
    write(root / "report.docx", docx(["Quarterly report", "zeppelin revenue grew"], "Q3"))
    write(root / "book.epub", epub("A Book", ["chapter one", "the zeppelin chapter"]))
    write(root / "page.html", html("Saved", ["a zeppelin paragraph", "second"]))
    write(root / "plain.md", "# Plain\n\nzeppelin in a text file\n")


def _files_under(root: Path) -> set[str]:
    return {str(Path(d, f)) for d, _, files in os.walk(root) for f in files}


async def _grep(daemon: Daemon, pattern: str, **kwargs: object) -> GrepReply:
    async with daemon.client() as c:
        return await c.request(Grep(pattern=pattern, **kwargs), GrepReply)  # type: ignore[arg-type]


@pytest.mark.backends
async def test_grep_reads_documents_extracted_text_by_page(daemon: Daemon) -> None:
    root = daemon.root
    _library(root)
    await daemon.refresh()
    before = _files_under(root)

    reply = await _grep(daemon, "zeppelin")
    found = [
        (os.path.relpath(g.path, root), g.page, g.line, g.text, g.extracted, g.column)
        for g in reply.lines
    ]
    assert found == [
        # a book's pages are its chapters; a web page has one
        ("book.epub", 2, 1, "the zeppelin chapter", True, 5),
        ("page.html", 0, 1, "a zeppelin paragraph", True, 3),
        # lines within the page: page 2's second line, page 3's second line
        ("paper.pdf", 2, 2, "the momentum of zeppelin updates", True, 17),
        ("paper.pdf", 3, 2, "zeppelin again, at the end", True, 1),
        ("plain.md", 0, 3, "zeppelin in a text file", False, 1),
        ("report.docx", 0, 2, "zeppelin revenue grew", True, 1),
    ]
    assert (reply.total, reply.files, reply.complete) == (6, 5, True)
    # a page's first line (it begins with the form feed) is shown without it
    first = await _grep(daemon, "^Conclusion$")
    assert [(g.page, g.line, g.text) for g in first.lines] == [(3, 1, "Conclusion")]
    # context stays within the document, numbered within the page
    context = await _grep(daemon, "momentum", before=1, after=1)
    assert [(g.page, g.line, g.text, g.match) for g in context.lines] == [
        (2, 1, "Stochastic methods", False),
        (2, 2, "the momentum of zeppelin updates", True),
        (2, 3, "more on page two", False),
    ]
    # -l names the document; a pattern with no literal reads documents too
    listed = await _grep(daemon, "zeppelin", files_only=True)
    assert [os.path.relpath(g.path, root) for g in listed.lines] == [
        "book.epub",
        "page.html",
        "paper.pdf",
        "plain.md",
        "report.docx",
    ]
    swept = await _grep(daemon, r"z\w{6}n\b")
    assert swept.scanned_all
    assert [(os.path.relpath(g.path, root), g.page, g.line) for g in swept.lines] == [
        (p, pg, ln) for p, pg, ln, *_ in found
    ]
    assert swept.total == 6
    # the markup of the web page is not what grep reads: its readable text is
    assert (await _grep(daemon, "<p>")).total == 0
    # nothing was written in the root, and the scratch files are gone
    assert _files_under(root) == before
    assert not [p for p in os.listdir(daemon.state_dir) if p.startswith("grep-")]

    # kbctl marks the lines as extracted, with the page
    shown = daemon.kbctl("grep", "momentum", cwd=root)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.splitlines() == [
        "paper.pdf:2:[extracted, page 2] the momentum of zeppelin updates"
    ]
    as_json = json.loads(daemon.kbctl("grep", "--json", "momentum", cwd=root).stdout)
    assert as_json["lines"][0] | {"path": ""} == {
        "path": "",
        "line": 2,
        "text": "the momentum of zeppelin updates",
        "match": True,
        "column": 5,
        "page": 2,
        "extracted": True,
    }
    plain = json.loads(daemon.kbctl("grep", "--json", "text file", cwd=root).stdout)
    assert "extracted" not in plain["lines"][0]

    # and so does MCP, in both its forms
    async with mcp_stdio(daemon.socket) as client:
        result = await client.call_tool("grep", {"pattern": "momentum"})
        line = structured(result)["files"][0]["lines"][0]
        assert line == {
            "line": 2,
            "text": "the momentum of zeppelin updates",
            "match": True,
            "page": 2,
            "extracted": True,
        }
        assert "  paper.pdf:2:[extracted, page 2] the momentum of zeppelin updates" in (
            text(result).splitlines()
        )


async def test_read_file_continues_a_document_by_page(daemon: Daemon) -> None:
    root = daemon.root
    _library(root)
    await daemon.refresh()
    paper = str(root / "paper.pdf")
    async with daemon.client() as c:
        second = await c.read_file(paper, page=2)
        assert second.text.splitlines() == [
            "[page 2]",
            "3| Stochastic methods",
            "4| the momentum of zeppelin updates",
            "5| more on page two",
        ]
        assert (second.page, second.pages, second.start_line, second.end_line) == (2, 3, 3, 5)
        last = await c.read_file(paper, page=3)
        assert last.text.splitlines()[0] == "[page 3]" and last.end_line == last.total_lines
        # a page past the end, a page and lines at once, a page of a text file: refused
        for path, kwargs, said in [
            (paper, {"page": 4}, r"has 3 page\(s\): page 4 is past its end"),
            (paper, {"page": 2, "start_line": 1}, "not both"),
            (str(root / "plain.md"), {"page": 1}, "no pages"),
        ]:
            with pytest.raises(Exception, match=said):
                await c.read_file(path, **kwargs)  # type: ignore[arg-type]
        # a text file reads as before, with no pages
        plain = await c.read_file(str(root / "plain.md"))
        assert plain.pages == 0 and plain.text.splitlines()[0] == "1| # Plain"

    shown = daemon.kbctl("read", "paper.pdf", "--page", "2", cwd=root)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.splitlines()[0] == "[page 2]"
    assert "next: --page 3" in shown.stderr

    async with mcp_stdio(daemon.socket) as client:
        result = await client.call_tool("read_file", {"path": "paper.pdf", "page": 2})
        data = structured(result)
        assert data["text"].splitlines() == [
            "[page 2]",
            "Stochastic methods",
            "the momentum of zeppelin updates",
            "more on page two",
        ]
        assert (data["start_line"], data["end_line"], data["next_page"]) == (3, 5, 3)
        assert "page 2 of 3; next: page=3" in text(result).splitlines()[0]
        whole = structured(await client.call_tool("read_file", {"path": "paper.pdf"}))
        assert whole["end_line"] == whole["total_lines"] and "next_page" not in whole


async def test_scratch_text_a_killed_daemon_left_is_removed_at_start(
    make_daemon: MakeDaemon,
) -> None:
    d = make_daemon()
    left = d.state_dir / "grep-x1y2z3"
    write(left / "0", "the text of a document a grep was reading\n")
    await d.start()
    assert not left.exists()
