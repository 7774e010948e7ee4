"""Every passage vector in memory, searched exactly: one matrix product per query.

Why exact and in memory: at the sizes embedded here (tens to hundreds of thousands of
passages; a million takes days to embed) a product over every row is fast and needs
no index to build or tune.

Rows are kept as int8 with a scale each (388 bytes a passage, a quarter of float32):
converting int8 blocks to float32 is cheaper than float16's conversion, and the
rounding hardly moves which passages rank first. Blocks of BLOCK_ROWS rows keep the
product on one thread (BLAS would spread larger ones over both cores) and the scratch
memory in the cache.

The embedder appends and retires rows; searches run in reader threads at the same
time, so both take one lock (a search holds it for the product only).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final, TypeVar

import numpy as np
import numpy.typing as npt

BLOCK_ROWS: Final = 1024
_GROW: Final = 1.5
A = TypeVar("A", bound=np.ndarray[Any, Any])


@dataclass(frozen=True, slots=True)
class Passage:
    """A file's best passage for a query: its cosine similarity and its lines."""

    file_id: int
    score: float
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class Ranking:
    nearest: list[Passage]
    """The files nearest the query, best first."""
    named: dict[int, Passage]
    """The best passage of each file asked for by id (those that have passages)."""
    above: int
    """How many files have a passage at or above the floor the search was given."""


class Matrix:
    def __init__(self, dim: int) -> None:
        self.dim = dim
        self._lock = threading.Lock()
        self._rows = np.zeros((0, dim), dtype=np.int8)
        self._scale = np.zeros(0, dtype=np.float32)
        self._file = np.zeros(0, dtype=np.int64)
        self._lines = np.zeros((0, 2), dtype=np.int32)
        self._live = np.zeros(0, dtype=bool)
        self._used = 0
        self._by_file: dict[int, list[int]] = {}
        self._count = 0

    @property
    def passages(self) -> int:
        return self._count

    def put(
        self, file_id: int, lines: list[tuple[int, int]], vectors: npt.NDArray[np.floating[Any]]
    ) -> None:
        """Replace the passages of ``file_id`` with these (one vector row each)."""
        with self._lock:
            self._retire(file_id)
            count = len(lines)
            if not count:
                return
            self._reserve(self._used + count)
            at = slice(self._used, self._used + count)
            self._rows[at], self._scale[at] = _quantised(vectors)
            self._file[at] = file_id
            self._lines[at] = lines
            self._live[at] = True
            self._by_file[file_id] = list(range(at.start, at.stop))
            self._used += count
            self._count += count

    def drop(self, file_id: int) -> None:
        with self._lock:
            self._retire(file_id)
            if self._used > 1024 and self.passages < self._used // 2:
                self._compact()

    def _retire(self, file_id: int) -> None:
        rows = self._by_file.pop(file_id, None)
        if rows:
            self._live[rows] = False
            self._count -= len(rows)

    def _reserve(self, needed: int) -> None:
        if needed <= len(self._rows):
            return
        size = max(needed, int(len(self._rows) * _GROW), 1024)
        self._rows = _grown(self._rows, size)
        self._scale = _grown(self._scale, size)
        self._file = _grown(self._file, size)
        self._lines = _grown(self._lines, size)
        self._live = _grown(self._live, size)

    def _compact(self) -> None:
        keep = np.flatnonzero(self._live[: self._used])
        self._rows = self._rows[keep].copy()
        self._scale = self._scale[keep].copy()
        self._file = self._file[keep].copy()
        self._lines = self._lines[keep].copy()
        self._live = np.ones(len(keep), dtype=bool)
        self._used = len(keep)
        self._by_file = {}
        for row, file_id in enumerate(self._file.tolist()):
            self._by_file.setdefault(file_id, []).append(row)

    def search(
        self,
        query: npt.NDArray[np.float32],
        limit: int,
        allowed: npt.NDArray[np.int64] | None = None,
        named: Sequence[int] = (),
        floor: float = -1.0,
    ) -> Ranking:
        """The ``limit`` files whose best passage is nearest ``query`` (a unit vector),
        best first, of those whose best passage's similarity is at least ``floor`` and,
        when given, in ``allowed`` (sorted ids); and the best passage of each file in
        ``named``, whatever its similarity."""
        with self._lock:
            used = self._used
            scores = np.empty(used, dtype=np.float32)
            scratch = np.empty((BLOCK_ROWS, self.dim), dtype=np.float32)
            for begin in range(0, used, BLOCK_ROWS):
                block = self._rows[begin : min(used, begin + BLOCK_ROWS)]
                rows = scratch[: len(block)]
                np.copyto(rows, block, casting="unsafe")
                scores[begin : begin + len(block)] = rows @ query
            scores *= self._scale[:used]
            files = self._file[:used].copy()
            lines = self._lines[:used].copy()
            keep = self._live[:used].copy()
            rows_of = {i: self._by_file[i] for i in named if i in self._by_file}
        if allowed is not None:
            keep &= np.isin(files, allowed, assume_unique=False)
        scores[~keep] = -np.inf
        given = {}
        for file_id, owned in rows_of.items():
            row = owned[int(np.argmax(scores[owned]))]
            if np.isfinite(scores[row]):
                given[file_id] = Passage(file_id, float(scores[row]), *map(int, lines[row]))
        scores[scores < floor] = -np.inf
        above = len(np.unique(files[np.isfinite(scores)]))
        return Ranking(self._nearest(scores, files, lines, limit), given, above)

    @staticmethod
    def _nearest(
        scores: npt.NDArray[np.float32],
        files: npt.NDArray[np.int64],
        lines: npt.NDArray[np.int32],
        limit: int,
    ) -> list[Passage]:
        used = len(scores)
        if not used or limit <= 0:
            return []
        # Best rows first, then the first (best) row of each file: take more rows than
        # files wanted, since one file may own many of the best rows.
        wanted = min(used, max(limit * 8, 256))
        while True:
            top = np.argpartition(-scores, wanted - 1)[:wanted] if wanted < used else None
            order = np.arange(used) if top is None else top
            order = order[np.argsort(-scores[order], kind="stable")]
            order = order[np.isfinite(scores[order])]
            _, first = np.unique(files[order], return_index=True)
            best = order[np.sort(first)]
            if len(best) >= limit or wanted >= used:
                break
            wanted = min(used, wanted * 4)
        return [
            Passage(int(files[r]), float(scores[r]), int(lines[r, 0]), int(lines[r, 1]))
            for r in best[:limit]
        ]


def _quantised(
    vectors: npt.NDArray[np.floating[Any]],
) -> tuple[npt.NDArray[np.int8], npt.NDArray[np.float32]]:
    """Each row as int8 times a scale of its own (its largest magnitude over 127)."""
    rows = np.asarray(vectors, dtype=np.float32)
    scale = np.maximum(np.abs(rows).max(axis=1), 1e-12) / 127.0
    return np.rint(rows / scale[:, None]).astype(np.int8), scale.astype(np.float32)


def _grown(array: A, size: int) -> A:
    grown = np.zeros((size, *array.shape[1:]), dtype=array.dtype)
    grown[: len(array)] = array
    return grown  # type: ignore[return-value]
