"""The daemon hands freed heap pages back to the system (``heap.trim``), so the peak of a
batch of large files does not stay with the process. Run in a child process, whose heap
holds only this test's blocks."""

from __future__ import annotations

import subprocess
import sys

import pytest
from kbindex.daemon import heap

CHILD = """
from kbindex.daemon import heap

def rss_mb():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS")) // 1024

blocks = [bytes(4000) for _ in range(25_000)]  # 100 MB from the heap, below mmap's threshold
guard = bytes(4000)  # a block above them: glibc cannot just shrink the heap's top
del blocks
before = rss_mb()
heap.trim()
print(before - rss_mb())
"""


@pytest.mark.slow
@pytest.mark.skipif(
    heap._malloc_trim is None, reason="the C library has no malloc_trim (not glibc)"
)
def test_freed_heap_pages_go_back_to_the_system() -> None:
    out = subprocess.run(
        [sys.executable, "-c", CHILD], capture_output=True, text=True, check=True
    ).stdout
    assert int(out) >= 60, f"only {out.strip()} MB went back"
