"""The daemon's memory while documents are read: a document's bytes go to its worker
without a second copy."""

from __future__ import annotations

import tracemalloc

import pytest
from document_files import html
from kbindex.daemon.extracting.results import Extracted
from kbindex.daemon.extracting.workers import Limits, Worker

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
