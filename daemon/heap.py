"""The C library's heap, told how to hold less: the daemon reads trees with files of
several MB (a kernel's register headers) and must not keep their peak afterwards.

glibc only (``mallopt`` and ``malloc_trim``); where the C library has neither (musl,
macOS), both are no-ops. Called through ctypes, which releases the GIL meanwhile.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import Final, cast

M_MMAP_THRESHOLD: Final = -3
"""glibc's ``mallopt`` parameter (malloc.h)."""
MMAP_THRESHOLD_BYTES: Final = 1 << 20


def _libc_function(name: str, *argtypes: object) -> Callable[..., int] | None:
    try:
        function = getattr(ctypes.CDLL(None), name)
    except (OSError, AttributeError, TypeError):
        return None
    function.argtypes = argtypes
    function.restype = ctypes.c_int
    return cast("Callable[..., int]", function)


_mallopt: Final = _libc_function("mallopt", ctypes.c_int, ctypes.c_int)
_malloc_trim: Final = _libc_function("malloc_trim", ctypes.c_size_t)


def map_large_allocations() -> None:
    """Give every allocation of 1 MB or more its own mapping, returned to the system when
    freed. Why: glibc raises its threshold for that to 32 MB once a large block is freed,
    so the multi-MB texts and statements of a tree with big files then come from the
    heap, which fragments and keeps them. Set at start-up, before any thread exists."""
    if _mallopt is not None:
        _mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)


def trim() -> None:
    """Hand the free pages of every heap (glibc keeps several, for the threads) back to
    the system. After a batch of large files the next batch may be allocated from
    another heap, beside the pages the last one freed; returned at once, they do not
    add up to the indexing's peak."""
    if _malloc_trim is not None:
        _malloc_trim(0)
