"""Search by meaning, alone or fused with search by words.

A file matches by meaning when the best of its passages is at least FLOOR similar to
the query (cosine similarity of the two vectors, from -1 to 1; unrelated text lands
near 0.1, a passage that says what a question asks near 0.6). Below the floor nothing
is a match, so a word that no passage holds and nothing means answers "no matches",
as it does by words. The floor is set where relevant passages stay above it and
nonsense words fall below it (``bench/meaning_floor.py`` finds both).

``semantic``: the files that match by meaning, nearest first, scored by similarity.
``hybrid``: the files that match by words or by meaning. Each is scored ALPHA times its
similarity (its best passage's, below 0 counted as 0) plus 1 - ALPHA times its bm25
relative to the best word hit's (0 when its words do not match): a scale that says the
same for every query, where min-max over the hits made the best of nothing look good.
A word hit with no passages (not embedded yet, too large, a root without meaning)
stands in for its similarity with its word share of the best similarity found, so it
is ranked by its words, not as if its meaning were far from the query.
Why a weighted sum and not reciprocal rank fusion: it keeps how far apart the scores
are, not only their order, so a strong match by one signal is not levelled with a weak one.

A hit found by words shows its best word passage; a hit found by meaning alone shows
the passage that matched, and its ``line`` is that passage's.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Final

import numpy as np
import numpy.typing as npt
from kbindex.daemon.index.interface import Index
from kbindex.daemon.index.plan import Filters, Plan
from kbindex.daemon.index.values import Hit, SearchResult
from kbindex.daemon.searching import passages
from kbindex.daemon.semantic.matrix import Passage, Ranking

CANDIDATES: Final = 100
ALPHA: Final = 0.7
"""Weight of the similarity in ``hybrid`` (the word share has 1 - ALPHA)."""
FLOOR: Final = 0.35
"""The least similarity of a match by meaning (``bench/meaning_floor.py``)."""

Nearest = Callable[[int, npt.NDArray[np.int64] | None, Sequence[int], float], Ranking]
"""``Matrix.search`` for the query: (limit, allowed ids or None, named ids, floor)."""


@dataclass(frozen=True, slots=True)
class _Candidate:
    file_id: int
    score: float
    words: bool
    passage: Passage | None


def search(
    index: Index,
    plan: Plan,
    nearest: Nearest,
    *,
    words: bool,
) -> SearchResult:
    """Hybrid (``words``) or semantic search, on a reader thread."""
    allowed = _allowed(index, plan.filters)
    limit = plan.limit
    wanted = max(limit, CANDIDATES)
    if not words:
        ranking = nearest(wanted, allowed, (), FLOOR)
        found = [_Candidate(p.file_id, p.score, False, p) for p in ranking.nearest[:limit]]
        return SearchResult(_hits(index, found, plan.needles), ranking.above, "semantic")
    ranked, total, _ = index.rank(replace(plan, limit=wanted))
    ranking = nearest(wanted, allowed, [i for i, _ in ranked], FLOOR)
    by_meaning = {p.file_id: p for p in ranking.nearest} | ranking.named
    similarity = {i: p.score for i, p in by_meaning.items()}
    nearest_ids = [(p.file_id, p.score) for p in ranking.nearest]
    scored = fuse(ranked, nearest_ids, similarity)
    lexical = {i for i, _ in ranked}
    fused = [_Candidate(i, score, i in lexical, by_meaning.get(i)) for i, score in scored[:limit]]
    # Matches by words or by meaning, each once. Beyond the listed word hits a file that
    # matches both ways may count twice: only when more than CANDIDATES match by words.
    meaning_only = ranking.above - sum(1 for i in lexical if similarity.get(i, -1.0) >= FLOOR)
    return SearchResult(_hits(index, fused, plan.needles), total + meaning_only, "hybrid")


def fuse(
    words: Sequence[tuple[int, float]],
    nearest: Sequence[tuple[int, float]],
    similarity: Mapping[int, float],
    *,
    floor: float = FLOOR,
    alpha: float = ALPHA,
) -> list[tuple[int, float]]:
    """Every word hit (id, bm25) and every file of ``nearest`` (id, similarity) at or
    above ``floor``, with its fused score, best first; ``similarity`` has the best
    passage's of each file that has passages."""
    best = max((score for _, score in words), default=0.0)
    share = {i: score / best if best > 0 else 1.0 for i, score in words}
    top = max(similarity.values(), default=0.0)
    scores = {}
    for i in {*share, *(i for i, s in nearest if s >= floor)}:
        meant = similarity[i] if i in similarity else share[i] * top
        scores[i] = alpha * max(meant, 0.0) + (1 - alpha) * share.get(i, 0.0)
    return sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))


def _allowed(index: Index, filters: Filters) -> npt.NDArray[np.int64] | None:
    """The ids of the indexed files the filters keep (None: no filter). Applied before
    the vector ranking is cut, never after (that would return false empties)."""
    if filters.path is None and not filters.structured:
        return None
    typed = None if filters.path is None else filters.path.typed
    listed = index.files(typed, None, filters).files
    return np.array(sorted(f.id for f in listed), dtype=np.int64)


def _hits(index: Index, fused: list[_Candidate], needles: tuple[str, ...]) -> list[Hit]:
    if not fused:
        return []
    found = {doc.id: doc for doc in index.records([c.file_id for c in fused])}
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
