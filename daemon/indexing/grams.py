"""The trigram tokens of a document, for grep's candidate index (``docs_grams``).

A trigram here is three consecutive bytes of the text as ripgrep reads the file: its
UTF-8 bytes (a UTF-16 file is read as UTF-8 by both), or the file's own bytes when it
was decoded as cp1252, since ripgrep matches those bytes as they are. ASCII letters are
folded to lower case; other bytes are kept. A document's tokens are its distinct
trigrams, each written as six hex digits (``abc`` is ``616263``), so FTS5's plain
``ascii`` tokenizer takes them as words.

Why not FTS5's own ``trigram`` tokenizer: it hands every character's trigram to the
index, duplicates included; finding the distinct ones first with numpy makes the whole
write path faster (``bench/README.md``, "grep"). Bytes rather than characters make
every trigram one 24-bit number.
"""

from __future__ import annotations

import threading
from typing import Final

import numpy as np

_HEX: Final = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)
_SHIFTS: Final = np.arange(20, -1, -4, dtype=np.uint32)
"""The six hex digits of a 24-bit number, most significant first."""


def source(text: str, encoding: str | None) -> bytes:
    """The bytes ripgrep matches in a file whose text is ``text``, ASCII-folded."""
    return text.encode("cp1252" if encoding == "cp1252" else "utf-8", "replace").lower()


def of_text(text: str, encoding: str | None) -> str:
    """The distinct trigram tokens of a document, space-separated ("" under 3 bytes)."""
    data = source(text, encoding)
    if len(data) < 3:
        return ""
    b = np.frombuffer(data, dtype=np.uint8).astype(np.uint32)
    ids = (b[:-2] << 16) | (b[1:-1] << 8) | b[2:]
    unique = ids[_first_of_each(ids)]
    digits = np.empty((len(unique), 7), dtype=np.uint8)
    digits[:, :6] = _HEX[(unique[:, None] >> _SHIFTS) & 15]
    digits[:, 6] = 32
    return digits.tobytes().decode("ascii")


_scratch = threading.local()


def _first_of_each(ids: np.ndarray) -> np.ndarray:
    """A mask keeping one position of each distinct value of ``ids`` (24-bit numbers).

    Each position is written into a table indexed by value; where several positions
    hold one value, one write wins, and only the winner reads its own position back.
    No sort (``np.unique`` was most of the indexer's trigram time), and no clearing:
    the table is read only where this document wrote. One table per thread (the
    indexer's reader and writer both call this), 64 MB of address space each, of
    which only the pages the texts touch become memory.
    """
    table = getattr(_scratch, "table", None)
    if table is None:
        table = _scratch.table = np.empty(1 << 24, dtype=np.int32)
    positions = np.arange(len(ids), dtype=np.int32)
    table[ids] = positions
    kept: np.ndarray = table[ids] == positions
    return kept


def tokens(literal: bytes) -> list[str]:
    """The trigram tokens of an (already folded) byte string, in order."""
    return [literal[i : i + 3].hex() for i in range(len(literal) - 2)]
