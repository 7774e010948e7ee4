"""Snippet highlights: matches are marked ``⟦`` ``⟧``, characters Markdown and ordinary
text do not use, the same through the protocol, kbctl and MCP; a note's own ``**bold**``
is its text, never a match. kbctl shows real bold on a terminal."""

from __future__ import annotations

import os
import pty
import re
import subprocess
import sys

import pytest
from conftest import Daemon, MakeDaemon, write
from kbindex.mcpfront import results
from kbindex.proto.messages import MATCH_CLOSE, MATCH_OPEN, Hit, SearchReply
from mcp_helpers import mcp_stdio, structured, text

pytestmark = pytest.mark.anyio

BOLD_NOTE = "# Style\n\nThis is **strong** text about semantics.\n"
MARKS_NOTE = "# Marks\n\nThe text has its own ⟦brackets⟧ beside the needle.\n"


def marked(snippet: str) -> list[str]:
    return re.findall(f"{MATCH_OPEN}(.*?){MATCH_CLOSE}", snippet)


async def test_markdown_bold_in_a_note_is_text_not_a_match(daemon: Daemon) -> None:
    write(daemon.root / "style.md", BOLD_NOTE)
    await daemon.refresh()
    async with daemon.client() as c:
        other = (await c.search("semantics")).hits[0]
        itself = (await c.search("strong")).hits[0]
    # Before: "This is **strong** text about **semantics**." (which was the match?)
    assert other.snippet == "This is **strong** text about ⟦semantics⟧."
    assert marked(other.snippet) == ["semantics"]
    assert itself.snippet == "This is **⟦strong⟧** text about semantics."


async def test_marker_characters_in_the_text_never_look_like_a_match(daemon: Daemon) -> None:
    """Decision: the text's own ⟦ ⟧ show as [ ], so every ⟦ ⟧ of a snippet is a mark."""
    write(daemon.root / "marks.md", MARKS_NOTE)
    await daemon.refresh()
    async with daemon.client() as c:
        hit = (await c.search("needle")).hits[0]
        own = (await c.search("brackets")).hits[0]
    assert hit.snippet == "The text has its own [brackets] beside the ⟦needle⟧."
    assert own.snippet == "The text has its own [⟦brackets⟧] beside the needle."


def kbctl_on_a_terminal(daemon: Daemon, *args: str, env: dict[str, str]) -> str:
    """kbctl with its stdout on a pseudo-terminal (real: isatty() is true), as a person runs it."""
    leader, follower = pty.openpty()
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "kbindex.ctl.main", "--socket", str(daemon.socket), *args],
            stdout=follower,
            stderr=subprocess.PIPE,
            env=env,
            timeout=30,
        )
        os.close(follower)
        follower = -1
        out = b""
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # EIO: the terminal's other side is closed and drained
                break
            if not chunk:
                break
            out += chunk
        assert proc.returncode == 0, proc.stderr
        return out.decode()
    finally:
        if follower != -1:
            os.close(follower)
        os.close(leader)


@pytest.mark.slow
async def test_kbctl_bold_on_a_terminal_and_marks_otherwise(daemon: Daemon) -> None:
    write(daemon.root / "style.md", BOLD_NOTE)
    await daemon.refresh()
    env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}

    terminal = kbctl_on_a_terminal(daemon, "search", "strong", env=env)
    assert "This is **\x1b[1mstrong\x1b[0m** text about semantics." in terminal
    assert MATCH_OPEN not in terminal

    no_color = kbctl_on_a_terminal(daemon, "search", "strong", env={**env, "NO_COLOR": "1"})
    assert "This is **⟦strong⟧** text about semantics." in no_color
    assert "\x1b[" not in no_color

    piped = daemon.kbctl("search", "strong")
    assert piped.returncode == 0, piped.stderr
    assert "This is **⟦strong⟧** text about semantics." in piped.stdout
    assert "\x1b[" not in piped.stdout


RELEASE_NOTE = (
    "# Release Notes\n\n"
    + "".join(f"item {i}\n" for i in range(9))
    + ("Do not start the tar extraction twice.\n")
)


@pytest.mark.backends
async def test_marks_and_lines_point_at_the_words_that_matched(make_daemon: MakeDaemon) -> None:
    """``not`` matched the word on line 12, not ``Notes`` on line 1 (which stems to
    ``note``); ``tar`` is not inside ``start``. An agent reads the line it is given."""
    d = make_daemon()
    write(d.root / "release.md", RELEASE_NOTE)
    await d.start()
    async with d.client() as c:
        negation = (await c.search("not")).hits[0]
        archive = (await c.search("tar")).hits[0]
    assert (negation.line, marked(negation.snippet)) == (12, ["not"])
    assert (archive.line, marked(archive.snippet)) == (12, ["tar"])
    assert "s⟦" not in archive.snippet


@pytest.mark.slow
async def test_mcp_search_gives_the_line_of_the_word_that_matched(daemon: Daemon) -> None:
    write(daemon.root / "release.md", RELEASE_NOTE)
    await daemon.refresh()
    async with mcp_stdio(daemon.socket) as client:
        found = structured(await client.call_tool("search", {"query": "not"}))
    hit = found["results"][0]
    assert hit["line"] == 12 and marked(hit["snippet"]) == ["not"]


@pytest.mark.slow
async def test_mcp_search_marks_matches_and_not_markdown(daemon: Daemon) -> None:
    write(daemon.root / "style.md", BOLD_NOTE)
    await daemon.refresh()
    async with mcp_stdio(daemon.socket) as client:
        result = await client.call_tool("search", {"query": "semantics"})
        found = structured(result)
        listed = {t.name: t for t in (await client.list_tools()).tools}
    snippet = "This is **strong** text about ⟦semantics⟧."
    assert found["results"][0]["snippet"] == snippet
    assert snippet in text(result)
    # The output schema keeps to types (tools/list has a size budget): the tool's own
    # description tells an agent how matches are marked.
    assert "⟦" in (listed["search"].description or "")


def test_mcp_clip_never_leaves_a_mark_open() -> None:
    """A snippet longer than the front end's clip (many short matches) loses its tail;
    a ⟦ whose ⟧ was cut off goes too, so no mark runs to the end of the text."""
    snippet = " ".join(f"{MATCH_OPEN}xyz{MATCH_CLOSE}" for _ in range(200))
    hit = Hit(path="/r/a.md", root="/r", relpath="a.md", score=1.0, snippet=snippet, line=1,
              size=1, last_modified=0.0)  # fmt: skip
    reply = SearchReply(hits=[hit], total_hits=1, truncated=False)
    shown = results.search(reply, "xyz", [])[0]["results"][0]["snippet"]
    assert len(shown) <= results.SNIPPET_CHARS
    assert shown.count(MATCH_OPEN) == shown.count(MATCH_CLOSE) > 0
