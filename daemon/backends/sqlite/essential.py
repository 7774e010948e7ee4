"""Ranking an ``any`` expression without scoring the documents that cannot make the list.

bm25 scores every match: a question over a large tree matches tens of thousands of
documents, and scoring them is most of its time. But a document holding only the
commonest items can score only so much. FTS5's bm25 gives
each phrase of the expression ``idf * f * (k1 + 1) / (f + k1 * (1 - b + b * len /
avglen))`` (f: its weighted count in the document), which stays below ``idf * (k1 +
1)`` whatever f and the document's length. So the searcher first ranks only the
documents holding one of the rarer, *essential* items (still scored on the whole
expression); when the last of the best ``limit`` scores more than the other items can
add up to, no document left out could have entered the list, and it is the list the
whole ranking gives: same documents, scores and order. Otherwise the whole expression
is ranked. This is the MaxScore idea (Turtle and Flood, 1995), with FTS5 doing the
scoring. It holds while the ranking is FTS5's bm25 with weights of 0 or more (the
searcher checks the weights); a ranking with another signal must not use it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final

from kbindex.daemon.backends.sqlite.frequency import Held
from kbindex.daemon.backends.sqlite.render import Expr, has_prefix, join, render

K1: Final = 1.2
"""FTS5's bm25 constant k1 (``fts5_aux.c``); ``b`` does not enter the bound."""
SLACK: Final = 1.001
"""The bound is raised by this factor, against rounding: FTS5 sums its scores in its
own order. (Its row count, which the idf takes, is ``Held.documents``: both are read in
the search's one transaction, and FTS5's integrity check holds them equal.)"""


@dataclass(frozen=True, slots=True)
class Split:
    essential: str
    """MATCH expression on ``docs``: the documents ranked first."""
    bound: float
    """The most the other items add to a document's bm25 score, together."""

    def decides(self, last_score: float) -> bool:
        """Whether a list whose last document scores ``last_score`` (bm25 as FTS5
        returns it, negative) is the whole ranking's."""
        return -last_score > self.bound


def split(items: tuple[Expr, ...], held: Held, limit: int) -> Split | None:
    """The essential items of an ``any`` expression over ``items``: the rarest, until
    they find ``limit`` documents or more, and every item that is more than one phrase
    (its documents counted together say nothing of each phrase's idf); None when no
    item would be left to bound, or one is a prefix term. An item ``held`` counted only
    up to its cap is bounded as if held by the cap: more documents, a lower idf."""
    if any(has_prefix(i) for i in items):
        return None  # its words are resolved later, and counted nowhere
    ranked = sorted((i for i in items if _one_phrase(i)), key=lambda i: held.counts[i])
    essential = [i for i in items if not _one_phrase(i)]
    rest = []
    found = 0
    for item in ranked:
        if found < limit:
            essential.append(item)
            found += held.counts[item]
        else:
            rest.append(item)
    if not rest or not essential:
        return None
    bound = sum(_most(held.counts[i], held.documents) for i in rest) * SLACK
    return Split(render(join(" OR ", essential)), bound)


def _most(count: int, documents: int) -> float:
    """The most one phrase held by ``count`` of ``documents`` adds to a bm25 score:
    ``idf * (k1 + 1)``, idf as FTS5 computes it (never below 1e-6)."""
    idf = math.log((documents - count + 0.5) / (count + 0.5))
    return max(idf, 1e-6) * (K1 + 1.0)


def _one_phrase(item: Expr) -> bool:
    """One FTS5 string (a word or a phrase), nothing else: bm25 counts it as a phrase."""
    text = render(item)
    return len(text) >= 2 and text[0] == text[-1] == '"' and '"' not in text[1:-1].replace('""', "")
