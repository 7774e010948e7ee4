"""Documents (kbindex[documents]): real PDF, Office, OpenDocument, HTML and EPUB files
written here are searched by their text, with pages; hostile ones cost themselves alone.

The hostile files a real reader cannot be made to choke on (a PDF that loops, eats
memory, hangs or crashes PDFium) use the worker's test hook (``KBINDEX_EXTRACT_TEST_HOOK``,
``extracting/worker.py``): the document is real, its reader's misbehaviour is staged, and
the limits that stop it (RLIMIT_CPU, RLIMIT_AS, the deadline, a crash) are the real ones.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import anyio
import pytest
from conftest import Daemon, MakeDaemon, bump_mtime, wait_for, write
from document_files import docx, docx_bomb, encrypted_pdf, epub, html, odt, pdf, xlsx
from kbindex.proto.messages import Grep, GrepReply, Reload, ReloadReply

pytestmark = pytest.mark.anyio
pytest.importorskip("pypdfium2", reason="kbindex[documents] is not installed")
pytest.importorskip("selectolax", reason="kbindex[documents] is not installed")

PAPER = [
    ["Gradient descent notes", "an introduction"],
    ["Stochastic methods", "the momentum of zeppelin updates", "more on page two"],
    ["Conclusion", "nothing else"],
]


def _library(root: Path) -> None:
    write(root / "paper.pdf", pdf(PAPER))
    write(root / "report.docx", docx(["Quarterly report", "revenue of the walrus division"], "Q3"))
    write(root / "sheet.xlsx", xlsx({"Budget": [["item", "cost"]], "Animals": [["narwhal"]]}))
    write(root / "minutes.odt", odt(["Minutes of the meeting", "the okapi motion carried"]))
    write(root / "page.html", html("Saved Page Title", ["the quokka paragraph", "second"]))
    write(root / "book.epub", epub("A Book", ["chapter one", "the axolotl chapter"]))
    write(root / "plain.md", "# Plain\n\nzeppelin in a text file too\n")


@pytest.mark.slow
@pytest.mark.backends
async def test_documents_are_searched_by_their_text_with_pages(daemon: Daemon) -> None:
    _library(daemon.root)
    await daemon.refresh()
    for word, relpath in [
        ("walrus", "report.docx"),
        ("narwhal", "sheet.xlsx"),
        ("okapi", "minutes.odt"),
        ("quokka", "page.html"),
        ("axolotl", "book.epub"),
    ]:
        assert await daemon.search_paths(word) == [relpath], word
    async with daemon.client() as c:
        reply = await c.search("momentum")
        assert [h.relpath for h in reply.hits] == ["paper.pdf"]
        hit = reply.hits[0]
        assert "momentum" in hit.snippet
        # page 2's second line; the line of the whole text is what read_file numbers
        assert (hit.page, hit.page_line) == (2, 2)
        read = await c.read_file(str(daemon.root / "paper.pdf"), start_line=hit.line)
        assert read.text.splitlines()[:2] == [
            "[page 2]",
            f"{hit.line}| the momentum of zeppelin updates",
        ]
        whole = await c.read_file(str(daemon.root / "paper.pdf"))
        assert "[page 1]" in whole.text and "[page 3]" in whole.text
        # a web page is its readable text and title, not its markup
        page = (await c.search("quokka")).hits[0]
        assert page.title == "Saved Page Title"
        for markup in ("scriptword", "markupstyle", "navclass"):
            assert (await c.search(markup)).hits == [], markup
        # a text file's hit has no page
        text_hit = [h for h in (await c.search("zeppelin")).hits if h.relpath == "plain.md"]
        assert text_hit[0].page == 0


@pytest.mark.slow
async def test_hostile_documents_are_skipped_with_their_reason(make_daemon: MakeDaemon) -> None:
    d = make_daemon()
    d.extra_env = {"KBINDEX_EXTRACT_TEST_HOOK": "1"}
    root = d.root
    good = pdf([["a harmless pelican"]])
    write(root / "good.pdf", good)
    write(root / "truncated.pdf", good[: len(good) // 2])
    write(root / "locked.pdf", encrypted_pdf([["secret heron"]], "hunter2"))
    write(root / "scan.pdf", pdf([[], []]))
    write(root / "bomb.docx", docx_bomb())
    write(root / "garbage.docx", os.urandom(4000))
    write(root / "loop.pdf", pdf([["x"]], comment="KBINDEX-TEST-LOOP"))
    write(root / "eat.pdf", pdf([["x"]], comment="KBINDEX-TEST-EAT"))
    write(root / "crash.pdf", pdf([["x"]], comment="KBINDEX-TEST-CRASH"))
    await d.start("--extract-seconds", "3", "--extract-memory-mb", "200")
    assert await d.search_paths("pelican") == ["good.pdf"]
    expected = {
        "truncated.pdf": "damaged",
        "locked.pdf": "encrypted",
        "scan.pdf": "no_text",
        "bomb.docx": "over_limit",
        "garbage.docx": "damaged",
        "loop.pdf": "over_limit",  # CPU time, or the deadline on a busy machine
        "eat.pdf": "over_limit",
        "crash.pdf": "extractor_crashed",
    }
    async with d.client() as c:
        for name, reason in expected.items():
            why = await c.why(str(root / name))
            assert f"skipped: {reason}" in why.reason, (name, why.reason)
        status = await c.status()
    assert status.skipped == {"damaged": 2, "encrypted": 1, "no_text": 1, "over_limit": 3,
                              "extractor_crashed": 1}  # fmt: skip
    assert "zip bomb" in d.kbctl("why", str(root / "bomb.docx")).stdout
    assert "memory" in d.kbctl("why", str(root / "eat.pdf")).stdout


def _workers_of(pid: int) -> list[int]:
    """The extraction workers the daemon ``pid`` has running."""
    found = []
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            children = Path(f"/proc/{pid}/task/{task}/children").read_text().split()
        except OSError:
            continue
        for child in children:
            try:
                cmdline = Path(f"/proc/{child}/cmdline").read_bytes()
            except OSError:
                continue
            if b"kbindex.daemon.extracting.worker" in cmdline:
                found.append(int(child))
    return found


@pytest.mark.slow
async def test_searches_are_answered_while_an_extraction_hangs(make_daemon: MakeDaemon) -> None:
    d = make_daemon()
    d.extra_env = {"KBINDEX_EXTRACT_TEST_HOOK": "1"}
    write(d.root / "plain.md", "the lighthouse keeper\n")
    await d.start("--extract-seconds", "15")
    assert d.proc is not None
    hang = write(d.root / "hang.pdf", pdf([["x"]], comment="KBINDEX-TEST-HANG"))

    async def refresh() -> None:
        await d.refresh(str(hang))

    async with anyio.create_task_group() as tg:
        tg.start_soon(refresh)
        await wait_for(lambda: _async(_workers_of(d.proc.pid)), timeout=20)  # type: ignore[union-attr]
        # The hung extraction holds the indexer (up to its 30 s deadline), not the
        # daemon: a search, a read and a why are answered meanwhile.
        assert await d.search_paths("lighthouse") == ["plain.md"]
        async with d.client() as c:
            assert "lighthouse" in (await c.read_file(str(d.root / "plain.md"))).text
            why = await c.why(str(hang))
        assert "not indexed yet" in why.reason
        assert _workers_of(d.proc.pid)  # type: ignore[union-attr]  # still hanging
    async with d.client() as c:
        why = await c.why(str(hang))
    assert "skipped: over_limit (time: over 30 s)" in why.reason


async def _async(value: object) -> object:
    return value


@pytest.mark.slow
async def test_a_document_is_extracted_once_whatever_its_name(
    make_daemon: MakeDaemon, tmp_path: Path
) -> None:
    log = tmp_path / "extractions.log"
    d = make_daemon()
    d.extra_env = {"KBINDEX_EXTRACT_TEST_HOOK": "1", "KBINDEX_EXTRACT_TEST_LOG": str(log)}
    paper = write(d.root / "paper.pdf", pdf(PAPER))
    await d.start()
    assert await d.search_paths("momentum") == ["paper.pdf"]
    assert len(log.read_text().splitlines()) == 1
    # a rename, a copy, a restart and a full rescan: the cache answers
    paper.rename(d.root / "renamed.pdf")
    shutil.copy(d.root / "renamed.pdf", d.root / "copy.pdf")
    await d.refresh()
    d.stop()
    await d.start()
    await d.refresh(full=True)
    assert sorted(await d.search_paths("momentum")) == ["copy.pdf", "renamed.pdf"]
    assert len(log.read_text().splitlines()) == 1
    async with d.client() as c:
        status = await c.status()
    cache = sum(f.stat().st_size for f in (d.state_dir / "extracted-v1").rglob("*"))
    assert 0 < cache <= status.index_size_mb * (1 << 20)
    # an edit is read again
    edited = d.root / "copy.pdf"
    edited.write_bytes(pdf([["an edited page about kestrels"]]))
    bump_mtime(edited)
    await d.refresh()
    assert await d.search_paths("kestrels") == ["copy.pdf"]
    assert len(log.read_text().splitlines()) == 2


@pytest.mark.slow
async def test_a_shutdown_does_not_wait_for_a_hung_extraction(make_daemon: MakeDaemon) -> None:
    d = make_daemon()
    d.extra_env = {"KBINDEX_EXTRACT_TEST_HOOK": "1"}
    await d.start("--extract-seconds", "60")  # a deadline past stop()'s 15 s patience
    assert d.proc is not None
    pid = d.proc.pid
    hang = write(d.root / "hang.pdf", pdf([["a page about ospreys"]], comment="KBINDEX-TEST-HANG"))
    async with anyio.create_task_group() as tg:
        tg.start_soon(d.refresh, str(hang))
        workers = await wait_for(lambda: _async(_workers_of(pid)), timeout=20)
        assert d.stop() == 0  # SIGTERM, and a clean exit (not killed after 15 s)
        tg.cancel_scope.cancel()
    assert not any(Path(f"/proc/{w}").exists() for w in workers)  # type: ignore[attr-defined]
    # given up, not judged: the next start reads the same file again (without the hook
    # that hung it, it is a fine PDF)
    d.extra_env = {}
    await d.start()
    assert await d.search_paths("ospreys") == ["hang.pdf"]


@pytest.mark.slow
async def test_documents_have_their_own_size_cap(make_daemon: MakeDaemon, tmp_path: Path) -> None:
    d = make_daemon()
    root = d.root
    config = tmp_path / "kb.toml"
    caps = "max_file_size_mb = 0.002\nmax_document_size_mb = {}\n"
    config.write_text(caps.format(0.008))  # 2 KiB of text, 8 KiB of document
    d.extra_args = ["--config", str(config)]
    within = pdf([["the pelican page"]], comment="x" * 4000)
    over = pdf([["the cormorant page"]], comment="x" * 12000)
    assert 2 << 10 < len(within) < 8 << 10 < len(over) < 20 << 10
    write(root / "within.pdf", within)
    write(root / "over.pdf", over)
    write(root / "long.md", "gannet " * 500)  # 3.5 KiB of text
    await d.start()
    # a document over the text cap and under its own is read, searched, grepped, read
    assert await d.search_paths("pelican") == ["within.pdf"]
    async with d.client() as c:
        assert "pelican" in (await c.read_file(str(root / "within.pdf"))).text
        grep = await c.request(Grep(pattern="pelican"), GrepReply)
        assert [g.text for g in grep.lines] == ["the pelican page"]
        # one over its cap is not, and a text file keeps the text cap
        for name in ("over.pdf", "long.md"):
            assert "skipped: too_large" in (await c.why(str(root / name))).reason, name
        # raised at a reload, the cap lets the larger document in, unchanged on disk
        config.write_text(caps.format(0.02))
        await c.request(Reload(), ReloadReply)
    assert await wait_for(lambda: d.search_paths("cormorant")) == ["over.pdf"]
    assert "too_large" in d.kbctl("why", str(root / "long.md")).stdout


@pytest.mark.slow
async def test_extraction_settings_are_taken_at_a_reload(
    make_daemon: MakeDaemon, tmp_path: Path
) -> None:
    d = make_daemon()
    d.extra_env = {"KBINDEX_EXTRACT_TEST_HOOK": "1"}
    root = d.root
    config = tmp_path / "kb.toml"
    config.write_text("extract_seconds = 1\n")
    d.extra_args = ["--config", str(config)]
    write(root / "loop.pdf", pdf([["x"]], comment="KBINDEX-TEST-LOOP"))
    write(root / "plain.pdf", pdf([["a harmless pelican"]]))
    await d.start()
    cache = d.state_dir / "extracted-v1"
    async with d.client() as c:
        first = (await c.why(str(root / "loop.pdf"))).reason
        # CPU time over 1 s, or on a busy machine the deadline, twice that
        assert "over 1 s" in first or "over 2 s" in first, first
        assert any(cache.rglob("*.pdf"))
        config.write_text("extract_seconds = 3\nextract_cache_mb = 0\n")
        await c.request(Reload(), ReloadReply)
        # the cache bound is taken at once: nothing is kept under a bound of 0
        assert not any(cache.rglob("*.pdf"))
        write(root / "loop2.pdf", pdf([["y"]], comment="KBINDEX-TEST-LOOP"))
        await d.refresh()
        second = (await c.why(str(root / "loop2.pdf"))).reason
        assert "over 3 s" in second or "over 6 s" in second, second
