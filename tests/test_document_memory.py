"""The daemon's memory while documents are read: a document's bytes go to its worker
without a second copy, and two large documents are never held at once."""

from __future__ import annotations

import threading
import tracemalloc
from pathlib import Path

import pytest
from conftest import write
from document_files import html, pdf
from kbindex.daemon.extracting.results import Extracted
from kbindex.daemon.extracting.workers import Limits, Worker
from kbindex.daemon.indexing import indexer as indexer_module
from kbindex.daemon.indexing import textfile
from kbindex.daemon.indexing.indexer import Indexer

LIMITS = Limits(cpu_seconds=20, memory_bytes=1 << 30, wall_seconds=40, max_chars=1 << 20)


def _padded_page(title: str, body: list[str], size: int) -> bytes:
    """A web page of ``size`` bytes or more: ``body`` and a comment that pads it."""
    page = html(title, body)
    cut = page.rindex(b"</body>")
    padding = b"<!--" + b"x" * size + b"-->"
    return page[:cut] + padding + page[cut:]


@pytest.mark.slow
def test_a_document_goes_to_its_worker_whole_and_without_a_copy() -> None:
    pytest.importorskip("selectolax", reason="kbindex[documents] is not installed")
    size = 24 << 20
    pages = [
        _padded_page("First", ["the first page reads fenugreek"], size),
        _padded_page("Second", ["the second page reads asafoetida"], 1000),
    ]
    worker = Worker(LIMITS)
    try:
        # The daemon's own allocations while the worker reads (the worker is another
        # process): the bytes read from the file are the only copy of the document.
        tracemalloc.start()
        try:
            first = worker.run("html", pages[0])
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        # The same worker, a second document: each frame ends exactly where its bytes do.
        second = worker.run("html", pages[1])
    finally:
        worker.close()
    assert isinstance(first, Extracted) and "fenugreek" in first.text, first
    assert isinstance(second, Extracted) and "asafoetida" in second.text, second
    assert peak < size // 4, f"{peak:,} bytes allocated to send {size:,}"


@pytest.mark.slow
@pytest.mark.anyio
async def test_two_large_documents_are_never_read_at_once_but_small_ones_are(
    indexer: Indexer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "root"
    large = 4096
    # Small ones first, in path order: the two extraction threads take them together,
    # then the two large ones.
    write(root / "a-small.pdf", pdf([["small one"]]))
    write(root / "b-small.pdf", pdf([["small two"]]))
    write(root / "c-large.pdf", pdf([[f"large one line {i}" for i in range(200)]]))
    write(root / "d-large.pdf", pdf([[f"large two line {i}" for i in range(200)]]))
    assert (root / "c-large.pdf").stat().st_size > large > (root / "a-small.pdf").stat().st_size
    monkeypatch.setattr(indexer_module, "LARGE_DOCUMENT_BYTES", large)

    # The real load, watched: each read waits (at most a second) for another to begin
    # beside it, so that two the indexer lets run at once are seen together.
    load = textfile.load
    reading: set[str] = set()
    together: list[frozenset[str]] = []
    changed = threading.Condition()

    def watched(path: str, *args: object, **kwargs: object) -> object:
        name = Path(path).name
        with changed:
            reading.add(name)
            changed.notify_all()
            changed.wait_for(lambda: len(reading) > 1, timeout=1.0)
            if len(reading) > 1:
                together.append(frozenset(reading))
        try:
            return load(path, *args, **kwargs)  # type: ignore[arg-type]
        finally:
            with changed:
                reading.discard(name)

    monkeypatch.setattr(textfile, "load", watched)
    outcome = await indexer.refresh()
    assert outcome.changed == 4
    assert frozenset({"a-small.pdf", "b-small.pdf"}) in together
    assert not any({"c-large.pdf", "d-large.pdf"} <= pair for pair in together), together
