"""Search by meaning, alone or fused with search by words.

``semantic``: the files whose best passage is nearest the query's vector. ``hybrid``:
a convex combination of the two rankings. The word side is the best CANDIDATES of the
``auto`` search, their bm25 min-max normalised over that list. The vector side is every
candidate's best passage (a word hit outside the nearest CANDIDATES keeps its own
similarity: exact search knows every file's), normalised over the range the whole
index spans (the lowest passage to the nearest). A file is ranked by ALPHA of the
second plus 1 - ALPHA of the first; a file missing from the word list gets 0 there,
and a file without passages is ranked by its words alone.
Why this and not reciprocal rank fusion: it keeps how far apart the scores are, not
only their order, and it measured better on SciFact (``bench/README.md``, "Ranking details
measured on SciFact").

A hit found by words shows its best word passage; a hit found by meaning alone shows
the passage that matched, and its ``line`` is that passage's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np
import numpy.typing as npt
from kbindex.daemon.searching import passages
from kbindex.daemon.searching.query import Compiled
from kbindex.daemon.semantic.matrix import Passage, Ranking
from kbindex.daemon.storage.index import Hit, Index, SearchResult

CANDIDATES: Final = 100
ALPHA: Final = 0.7
"""Weight of the vector side in ``hybrid`` (the word side has 1 - ALPHA)."""

Nearest = Callable[[int, npt.NDArray[np.int64] | None, Sequence[int]], Ranking]
"""``Matrix.search`` for the query: (limit, allowed ids or None, named ids)."""


@dataclass(frozen=True, slots=True)
class _Candidate:
    file_id: int
    score: float
    words: bool
    passage: Passage | None


def search(
    index: Index,
    compiled: Compiled,
    limit: int,
    path_filter: str | None,
    nearest: Nearest,
    *,
    words: bool,
) -> SearchResult:
    """Hybrid (``words``) or semantic search, on a reader thread."""
    allowed = _allowed(index, path_filter)
    wanted = max(limit, CANDIDATES)
    if not words:
        found = nearest(wanted, allowed, ()).nearest
        fused = [_Candidate(p.file_id, p.score, False, p) for p in found[:limit]]
        return SearchResult(_hits(index, fused, compiled.terms), len(found), "semantic")
    ranked, total, _ = index.rank(compiled, wanted, path_filter)
    lexical = _normalised(dict(ranked))
    ranking = nearest(wanted, allowed, list(lexical))
    by_meaning = {p.file_id: p for p in ranking.nearest} | ranking.named
    top = ranking.nearest[0].score if ranking.nearest else 0.0
    span = top - ranking.lowest
    semantic = {
        i: (p.score - ranking.lowest) / span if span > 0 else 1.0 for i, p in by_meaning.items()
    }
    # A word hit with no passages (not embedded yet, too large, a root without meaning)
    # is ranked by its words alone, not as if its meaning were far from the query.
    scores = {
        i: ALPHA * semantic.get(i, lexical.get(i, 0.0)) + (1 - ALPHA) * lexical.get(i, 0.0)
        for i in {*lexical, *(p.file_id for p in ranking.nearest)}
    }
    best = sorted(scores, key=lambda i: (-scores[i], i))[:limit]
    fused = [_Candidate(i, scores[i], i in lexical, by_meaning.get(i)) for i in best]
    return SearchResult(_hits(index, fused, compiled.terms), max(total, len(scores)), "hybrid")


def _allowed(index: Index, path_filter: str | None) -> npt.NDArray[np.int64] | None:
    """The ids of the indexed files a path filter keeps (None: no filter). Applied
    before the vector ranking is cut, never after (that would return false empties)."""
    if not path_filter:
        return None
    return np.array(index.allowed(path_filter), dtype=np.int64)


def _normalised(scores: dict[int, float]) -> dict[int, float]:
    if not scores:
        return {}
    low, high = min(scores.values()), max(scores.values())
    if high <= low:
        return dict.fromkeys(scores, 1.0)
    return {i: (s - low) / (high - low) for i, s in scores.items()}


def _hits(index: Index, fused: list[_Candidate], needles: tuple[str, ...]) -> list[Hit]:
    if not fused:
        return []
    found = {doc.id: doc for doc in index.stored([c.file_id for c in fused])}
    hits = []
    for c in fused:
        if c.file_id not in found:
            continue  # removed since the vectors were taken
        doc = found[c.file_id]
        body = doc.body or ""
        shown = passages.best_passage(body, needles) if c.words else None
        if shown is None and c.passage is not None:
            shown = passages.in_lines(body, c.passage.start, c.passage.end, needles)
        snippet, line = shown or (passages.head(body), 1)
        f = doc.file
        hits.append(
            Hit(
                f.path,
                f.root,
                f.relpath,
                f.size,
                f.mtime_ns,
                doc.title,
                round(c.score, 4),
                snippet,
                line,
                machine=f.machine,
            )
        )
    return hits
