"""The parts of document reading that need no daemon: what a file without the extra
says, pages located by line, read_file's page markers, the cache's bound."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from conftest import write
from document_files import docx, html, pdf
from kbindex.daemon.extracting.cache import Cache
from kbindex.daemon.extracting.extractor import Extractor
from kbindex.daemon.extracting.pages import locate
from kbindex.daemon.extracting.results import Extracted, Failed
from kbindex.daemon.extracting.workers import Limits
from kbindex.daemon.indexing import textfile
from kbindex.daemon.roots import Roots
from kbindex.daemon.searching.texts import Texts


def test_without_the_extra_a_document_names_the_extra_that_reads_it(tmp_path: Path) -> None:
    # No documents' reader given: the daemon as it is where kbindex[documents] is not
    # installed.
    for name, data in (("a.pdf", pdf([["hello"]])), ("b.docx", docx(["hello"]))):
        outcome = textfile.load(str(write(tmp_path / name, data)), 1 << 20)
        assert isinstance(outcome, textfile.Skipped)
        assert outcome.reason == "binary"
        assert "the extra kbindex[documents] reads it" in outcome.detail


def test_without_the_extra_a_web_page_is_text_as_before(tmp_path: Path) -> None:
    outcome = textfile.load(str(write(tmp_path / "p.html", html("T", ["quokka"]))), 1 << 20)
    assert isinstance(outcome, textfile.Loaded)
    assert "<script>" in outcome.text


def test_a_line_of_a_paged_text_has_its_page_and_line_in_the_page() -> None:
    text = "one\ntwo\n\fthree\nfour\n\f\n\ffive"
    assert locate(text, 1) == (1, 1)
    assert locate(text, 4) == (2, 2)
    assert locate(text, 5) == (3, 1)
    assert locate(text, 6) == (4, 1)
    assert locate("no pages\nhere", 2) == (0, 2)


def test_read_file_of_a_paged_text_marks_pages_and_numbers_lines_as_hits_do() -> None:
    text = "one\ntwo\n\fthree\nfour"
    out, first, last, total, _ = textfile.line_slice(text, 2, None, 1000, paged=True)
    assert out.splitlines() == ["[page 1]", "2| two", "[page 2]", "3| three", "4| four"]
    assert (first, last, total) == (2, 4, 4)
    out, *_ = textfile.line_slice(text, 4, None, 1000, paged=True)
    assert out.splitlines() == ["[page 2]", "4| four"]


def test_the_cache_keeps_outcomes_and_drops_the_least_recently_used_past_its_bound(
    tmp_path: Path,
) -> None:
    cache = Cache(tmp_path, max_bytes=20_000)
    texts = {f"{i:064x}": os.urandom(3000).hex() for i in range(12)}  # incompressible
    for n, (digest, text) in enumerate(texts.items()):
        cache.put(digest, "pdf", Extracted(text))
        path = cache.directory / digest[:2] / f"{digest}.pdf"
        os.utime(path, ns=(n * 10**9, n * 10**9))  # written in order, a second apart
    assert cache.size_bytes() <= 20_000
    kept = [d for d in texts if cache.get(d, "pdf") is not None]
    assert kept and kept == list(texts)[-len(kept) :]  # the newest stay
    assert cache.get(list(texts)[-1], "pdf") == Extracted(list(texts.values())[-1])
    cache.put("f" * 64, "docx", Failed("encrypted", "a password"))
    assert Cache(tmp_path, 20_000).get("f" * 64, "docx") == Failed("encrypted", "a password")
    assert Cache(tmp_path, 20_000).size_bytes() == sum(
        f.stat().st_size for f in cache.directory.rglob("*") if f.is_file()
    )


def test_read_file_of_a_one_page_document_has_no_marker_and_counts_lines_by_newline() -> None:
    out, _first, _last, total, _ = textfile.line_slice("a\x0bb\nc", None, None, 1000, paged=True)
    assert out.split("\n") == ["1| a\x0bb", "2| c"]
    assert total == 2


@pytest.mark.slow
# Extractor.close kills its idle worker without waiting for it (the daemon exits right
# after): Popen's finalizer warns that it still runs.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_each_reader_of_texts_reads_documents_through_the_extractor_it_was_given(
    tmp_path: Path,
) -> None:
    """The documents' reader is a value the app hands over, not a setting of the process:
    a ``Texts`` given one reads a PDF's text (read_file extracts it, a snippet takes it
    from the cache), one given none skips it, side by side in one process."""
    root = tmp_path / "root"
    path = write(root / "a.pdf", pdf([["quokka habitat"]]))
    size = path.stat().st_size
    limits = Limits(cpu_seconds=30, memory_bytes=1 << 30, wall_seconds=60, max_chars=1 << 20)
    extractor = Extractor(tmp_path / "state", limits, 1 << 20)
    try:
        reading, plain = Texts(Roots([root]), extractor), Texts(Roots([root]))
        assert reading.current(str(path), size) is None  # not extracted yet: never waited for
        loaded = reading.load(str(path), 1 << 20)
        assert isinstance(loaded, textfile.Loaded) and "quokka habitat" in loaded.text
        assert "quokka habitat" in (reading.current(str(path), size) or "")
        assert reading.extracted_bytes() > 0
        assert plain.current(str(path), size) is None
        skipped = plain.load(str(path), 1 << 20)
        assert isinstance(skipped, textfile.Skipped) and skipped.reason == "binary"
        assert plain.extracted_bytes() == 0
    finally:
        extractor.close()
