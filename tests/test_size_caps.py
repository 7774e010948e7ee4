"""Each file's size cap, applied to the stamps a scan compares (``Index.known``): a file
whose recorded decision (indexed, or skipped as too large) its cap now reverses is read
again, and no other file is, whichever cap changed, on both backends."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from conftest import MakeDaemon, note, reading, write
from document_files import pdf
from hypothesis import given, settings
from hypothesis import strategies as st
from kbindex.daemon.backends.sqlite.store import Store
from kbindex.daemon.extracting import formats
from kbindex.daemon.index.values import Batch, SizeCaps, Skipped, SkipReason, Update

# Names that a suffix match can get wrong: upper case, a name that is a suffix alone (no
# extension, as ``os.path.splitext`` says), a dotted folder, a text kind (html).
STEMS = st.sampled_from(["a", "", ".", "..", "x.y", "a.", "K"])
SUFFIXES = st.sampled_from(
    [".pdf", ".PDF", ".Pdf", ".docx", ".DOCX", ".epub", ".html", ".HTM", ".md", "", ".pdf.md"]
)
FOLDERS = st.sampled_from(["", "d/", "d.pdf/", ".pdf/", "d/e/"])
STATES = st.sampled_from(["indexed", SkipReason.TOO_LARGE, SkipReason.BINARY])
SIZES = st.integers(min_value=0, max_value=40)
FILES = st.lists(
    st.tuples(st.builds(lambda f, s, x: f + s + x, FOLDERS, STEMS, SUFFIXES), SIZES, STATES),
    max_size=25,
    unique_by=lambda f: f[0],
).map(lambda files: [f for f in files if f[0].rsplit("/", 1)[-1] not in ("", ".", "..")])


def _update(name: str, size: int, state: str) -> Update:
    """The file ``/r/name`` of ``size`` bytes as a scan recorded it: indexed, or skipped."""
    indexed = note(name, "w" * size)
    if state == "indexed":
        return indexed
    return indexed._replace(given=Skipped(state, "", size, indexed.seen.mtime_ns))


@settings(max_examples=150, deadline=None)
@given(files=FILES, text=SIZES, document=SIZES, under=st.sampled_from([None, "/r/d"]))
def test_one_read_gives_each_file_its_own_cap(
    files: list[tuple[str, int, str]], text: int, document: int, under: str | None
) -> None:
    """``known`` under both caps at once marks exactly the files ``formats.size_cap``
    says their cap reverses (the two reads it replaces, merged in Python, did)."""
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(Path(tmp) / "index.sqlite3", reading(Path(tmp)))
        store.open()
        try:
            store.apply(Batch(updates=[_update(*f) for f in files]))
            caps = SizeCaps(text, document, formats.CAPPED_SUFFIXES)
            got = {p: size for p, size, *_ in store.known(None if under is None else [under], caps)}
        finally:
            store.close()
    expected = {}
    for name, size, state in files:
        path = f"/r/{name}"
        if under is not None and not path.startswith(under + "/"):
            continue
        cap = formats.size_cap(path, text, document)
        reversed_ = (state == "indexed" and size > cap) or (
            state == SkipReason.TOO_LARGE and size <= cap
        )
        expected[path] = -1 if reversed_ else size
    assert got == expected


KIB = 1 << 10


def _caps(config: Path, text_kib: int, document_kib: int) -> None:
    config.write_text(
        f"max_file_size_mb = {text_kib / 1024}\nmax_document_size_mb = {document_kib / 1024}\n"
    )


@pytest.mark.slow
@pytest.mark.backends
@pytest.mark.anyio
async def test_a_changed_cap_reads_again_exactly_the_files_it_decides_otherwise(
    make_daemon: MakeDaemon, tmp_path: Path
) -> None:
    pytest.importorskip("pypdfium2", reason="kbindex[documents] is not installed")
    pytest.importorskip("selectolax", reason="kbindex[documents] is not installed")
    d = make_daemon()
    config = tmp_path / "kb.toml"
    d.extra_args = ["--config", str(config), "--include-ext", "*"]  # ".pdf" has none
    root = d.root
    write(root / "small.md", "petrel " * 100)  # 0.7 KiB: under every cap
    # 3 KiB each, text: a web page is text-sized, and neither name ends in a document's
    # extension (".pdf" is a name without one)
    for name in ("mid.md", "page.html", "notes.pdf.md", ".pdf"):
        write(root / name, "<p>" + "gannet " * 430 + "</p>")
    write(root / "big.md", "fulmar " * 2000)  # 14 KiB: over every cap
    write(root / "within.pdf", pdf([["the pelican page"]], comment="x" * 4000))  # 4.5 KiB
    write(root / "WITHIN.PDF", pdf([["the puffin page"]], comment="x" * 4000))
    write(root / "over.pdf", pdf([["the cormorant page"]], comment="x" * 12000))  # 12.5 KiB
    sizes = {p.name: p.stat().st_size for p in root.iterdir()}
    texts = {"mid.md", "page.html", "notes.pdf.md", ".pdf"}
    assert all(2 * KIB < sizes[name] < 4 * KIB for name in texts)
    assert 4 * KIB < sizes["WITHIN.PDF"] < 8 * KIB
    assert 4 * KIB < sizes["within.pdf"] < 8 * KIB < sizes["over.pdf"] < 16 * KIB

    async def restarted(text_kib: int, document_kib: int) -> tuple[int, set[str]]:
        """The daemon started again under new caps: the files its first scan read,
        and the files it skips as too large."""
        d.stop()
        _caps(config, text_kib, document_kib)
        await d.start()
        async with d.client() as c:
            report = (await c.status()).roots[0].last_reconcile
            assert report is not None
            skipped = {
                name for name in sizes if "too_large" in (await c.why(str(root / name))).reason
            }
        return report.changed, skipped

    _caps(config, 2, 8)
    await d.start()
    async with d.client() as c:
        assert "too_large" in (await c.why(str(root / ".pdf"))).reason
        assert "puffin" in (await c.read_file(str(root / "WITHIN.PDF"))).text
    # the text cap raised: the text files between the caps, and no document
    assert await restarted(4, 8) == (4, {"big.md", "over.pdf"})
    # the documents' cap raised: the document over the old cap only
    assert await restarted(4, 16) == (1, {"big.md"})
    # both lowered again: those five
    assert await restarted(2, 8) == (5, {*texts, "big.md", "over.pdf"})
    # the documents' cap under the text cap: the text files and the smaller documents
    assert await restarted(4, 2) == (6, {"big.md", "within.pdf", "WITHIN.PDF", "over.pdf"})
