"""The trigram tokens of a document, for grep's candidate index (``docs_grams``).

A trigram here is three consecutive bytes of the text as ripgrep reads the file: its
UTF-8 bytes (a UTF-16 file is read as UTF-8 by both), or the file's own bytes when it
was decoded as cp1252, since ripgrep matches those bytes as they are. ASCII letters are
folded to lower case; other bytes are kept. A document's tokens are its distinct
trigrams, each written as six hex digits (``abc`` is ``616263``), so FTS5's plain
``ascii`` tokenizer takes them as words.

Why not FTS5's own ``trigram`` tokenizer: it hands every character's trigram to the
index, duplicates included; finding the distinct ones first with numpy leaves FTS5
far fewer tokens to write. Bytes
rather than characters make every trigram one 24-bit number.
"""

from __future__ import annotations

import mmap
import threading
from typing import Final

import numpy as np

_HEX: Final = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)
_SHIFTS: Final = np.arange(20, -1, -4, dtype=np.uint32)
"""The six hex digits of a 24-bit number, most significant first."""


MARKS: Final = 1 << 16
"""Positions have this many numbers in the scratch table (2 bytes a cell: half the
memory of 4-byte cells, each page of the table covering twice the trigrams)."""
CHUNK_BYTES: Final = 1 << 18
"""Bytes of a text turned into trigram numbers at a time. The numpy arrays of a chunk
take about 16 bytes per byte of text: a text of several MB done at once would hold
several times its size at the indexer's peak; in chunks they stay small."""


def of_text(text: str, encoding: str | None) -> str:
    """The distinct trigram tokens of a document, space-separated ("" under 3 bytes)."""
    data = text.encode("cp1252" if encoding == "cp1252" else "utf-8", "replace")
    starts = range(0, len(data) - 2, CHUNK_BYTES)
    if not starts:
        return ""
    # A table indexed by trigram: every position writes its number, modulo 2^16, into
    # its trigram's cell, and a position that reads its own number back is kept. All
    # chunks write before any reads, so the last writer of each cell is kept and no
    # trigram is lost; no sort (``np.unique`` over every position was most of the
    # indexer's trigram time) and no clearing (a document reads only the cells it
    # wrote). Positions 64 KB apart share a number: past that, what was kept (a few
    # per distinct trigram) goes through ``np.unique``.
    with _table_lock:
        table = _table()
        for start in starts:
            ids = _ids(data, start)
            table[ids] = _marks(start, len(ids))
        parts = []
        for start in starts:
            if len(starts) > 1:
                ids = _ids(data, start)
            parts.append(ids[table[ids] == _marks(start, len(ids))])
    unique = parts[0] if len(parts) == 1 else np.concatenate(parts)
    if len(data) - 2 > MARKS:
        unique = np.unique(unique)
    digits = np.empty((len(unique), 7), dtype=np.uint8)
    digits[:, :6] = _HEX[(unique[:, None] >> _SHIFTS) & 15]
    digits[:, 6] = 32
    return digits.tobytes().decode("ascii")


def _marks(start: int, count: int) -> np.ndarray:
    """The numbers the positions ``start`` to ``start + count`` write, modulo MARKS."""
    return np.arange(start, start + count, dtype=np.uint32).astype(np.uint16)


def _ids(data: bytes, start: int) -> np.ndarray:
    """The trigram numbers (24 bits) of the windows starting in ``data[start:start +
    CHUNK_BYTES]``, ASCII-folded; shifted in place, no temporaries of their size."""
    b = np.frombuffer(data[start : start + CHUNK_BYTES + 2].lower(), dtype=np.uint8)
    ids = b[:-2].astype(np.uint32)
    ids <<= 8
    ids |= b[1:-1]
    ids <<= 8
    ids |= b[2:]
    return ids


_table_lock = threading.Lock()
_tables: list[np.ndarray] = []


def _table() -> np.ndarray:
    """The scratch table: 32 MB of address space, of which only the pages texts touch
    become memory. One for the process, behind a lock: one per thread cost as many
    times that memory, and only the indexer's reader calls this while a tree is read
    (the writer only to take rewritten documents out).

    An anonymous mapping of its own, advised against huge pages: numpy advises them for
    its large arrays, and then a cell written makes 2 MB resident rather than 4 KB, which
    for source code is most of the table."""
    if not _tables:
        scratch = mmap.mmap(-1, 2 << 24)
        if hasattr(mmap, "MADV_NOHUGEPAGE"):  # Linux only
            scratch.madvise(mmap.MADV_NOHUGEPAGE)
        _tables.append(np.frombuffer(scratch, dtype=np.uint16))
    return _tables[0]


def tokens(literal: bytes) -> list[str]:
    """The trigram tokens of an (already folded) byte string, in order."""
    return [literal[i : i + 3].hex() for i in range(len(literal) - 2)]
