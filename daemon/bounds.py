"""Matches that cannot reach the top of an ``any`` query, left unranked (MaxScore).

Trigger: ranking is what a search costs. FTS5's bm25 takes about 1.2 µs a match, so
a bench question ("what vuto peelu dunable for kuner?") whose rarer words are held by
1,275, 1,587 and 3,965 documents spent 6.1 ms ranking 5,600 matches to return ten.
Counting them takes a tenth of that.

Why a bound: bm25 adds one share per phrase of the query, and a phrase's share is
``idf * f * (k1 + 1) / (f + k1 * (...))`` for its frequency ``f`` in the document,
always below ``idf * (k1 + 1)``. So a document holding only the most common item
scores below ``CEILING * idf`` of that item, whatever its length or counts. The
searcher first ranks only the documents that hold one of the other items (the
``candidates``), scoring each against the whole query exactly as before; when the
tenth of them scores at least the bound, no document left out could have taken its
place, and the list is the one the whole ranking gives. Otherwise it ranks every
match, as before. This is the MaxScore rule of Turtle and Flood (1995), used by
Lucene for disjunctions, with one item left out.

With three items or more it first tries a narrower set: the documents holding two
of them. One holding a single item scores below that item's ceiling, so the bound
is the highest ceiling, the rarest item's; if it fails, the wider set is tried.

A lone prefix (``deprecat*``) is an OR of the words it stands for, and is ranked
the same way, leaving out the documents that hold only its most common word.

A way whose candidates are fewer than the documents asked for cannot fill the list,
so its bound never holds: it is not tried. Trigger: 30 of the 80 bench prefixes
stand for one common word and a few variants held by a document or two each
(``nued*``: 1,614, 1, 1); leaving out the common word left two candidates, and the
first ranking was wasted every time. Not trying it: bench prefixes 3.60 -> 3.11 ms
(median, in-process, the same lists).

Two items are ranked in parts instead (``parts``): the documents holding both, then
those holding only the rarer, then only the more common, each part an expression of
its own that FTS5 ranks without going through the rest.

On the bench questions the shortcut held for 75 of 78 and ranking took 2.58 ms
instead of 3.76; on the bench prefixes, 63 of 72 and 1.23 ms instead of 2.79
(medians, fallbacks included; ``bench/README.md``), with the same ten documents for
all. For the 21 questions of three rarer words, the pairs held for 20: 3.9 -> 2.1 ms.
"""

from __future__ import annotations

import itertools
import math
import re
from dataclasses import dataclass
from typing import Final

from kbindex.daemon import prefixes
from kbindex.daemon.frequency import Census

K1: Final = 1.2
"""FTS5's bm25 constant ``k1`` (``fts5_aux.c``)."""
CEILING: Final = K1 + 1
"""A phrase's share of a document's bm25 score is below ``idf * CEILING``."""
MAX_PAIRED_ITEMS: Final = 5
"""Items at most for ranking the documents holding two of them first (10 pairs)."""
MAX_PREFIX_WORDS: Final = 16
"""A prefix standing for more words is ranked whole (``pruning_words``)."""
_PHRASE: Final = re.compile(r'"(?:[^"]|"")*"')
"""One FTS5 string: a word or phrase with no column filter and no ``*``."""


@dataclass(frozen=True, slots=True)
class Pruning:
    candidates: str
    """A MATCH expression: the documents to rank first."""
    bound: float
    """A match outside ``candidates`` scores less than this (as a positive bm25)."""


@dataclass(frozen=True, slots=True)
class Part:
    match: str
    """A MATCH expression for some of the matches, naming every phrase of the whole
    expression, so bm25 scores each of them as the whole expression does."""
    rest: float
    """A match in none of the parts up to this one scores less than this."""


def parts(items: tuple[str, ...], counted: Census) -> tuple[Part, ...]:
    """The matches of two items (an ``any`` expression's plain phrases, each counted
    exactly) in three parts that leave out nothing, the likeliest to hold the best
    first: the documents holding both, then only the rarer, then only the other.

    Trigger: of the 78 bench questions that rank, 57 have two words left once the
    common ones are out; ranking the documents holding the rarer (``pruning``) also
    stepped through those holding only the other, 2.05 ms (median) to rank. Why parts:
    each is ranked by FTS5 alone, ``a AND b`` and ``a NOT b`` stepping from one
    document holding ``a`` to the next, and a document holding one item scores less
    than that item's ceiling: 1.33 ms, the same lists. bm25 adds a share for each
    phrase present, in the order the expression names them; a phrase absent (under
    NOT) adds nothing, and two shares add up the same in either order, so a part's
    scores are the whole expression's to the last bit.

    Empty for anything else (three items and more: ``pruning`` ranks as well there)."""
    if len(items) != 2 or len(set(items)) != 2 or not all(map(_PHRASE.fullmatch, items)):
        return ()
    exact = [counted.exact(i) for i in items]
    held = [n for n in exact if n is not None]
    if len(held) != 2:
        return ()
    rarer, other = sorted(range(2), key=lambda i: held[i])
    ceiling = [_ceiling(counted.documents, n, 1) for n in held]
    a, b = items[rarer], items[other]
    return (
        Part(f"{items[0]} AND {items[1]}", max(ceiling)),
        Part(f"{a} NOT {b}", ceiling[other]),
        Part(f"{b} NOT {a}", 0.0),
    )


def pruning(items: tuple[str, ...], counted: Census, limit: int) -> tuple[Pruning, ...]:
    """Ways to rank ``items`` (an ``any`` expression's, each one phrase or a prefix
    term) past the matches that cannot reach the list, the narrowest first:

    - with three to MAX_PAIRED_ITEMS items, all plain phrases counted exactly, the
      documents holding two of them: one holding a single item scores below that
      item's ceiling, so the bound is the highest ceiling;
    - the documents holding an item other than the most common one.

    Each only when its candidates can be ``limit`` documents. Empty when no item can
    be left out so (one item, or no plain phrase counted exactly)."""
    if not all(_PHRASE.fullmatch(i) or prefixes.holds_prefix(i) for i in items):
        return ()  # an item with a column filter or a NEAR: its shares are not bounded here
    exact = {i: n for i in items if _PHRASE.fullmatch(i) and (n := counted.exact(i)) is not None}
    tiers = []
    distinct = tuple(dict.fromkeys(items))
    if 3 <= len(distinct) <= MAX_PAIRED_ITEMS and len(exact) == len(distinct):
        # Trigger: the bench questions of three rarer words ranked half their matches
        # when only the most common word was left out (3.9 ms); the documents holding
        # two of the words took 2.1 ms, and the bound held for 20 of 21.
        pairs = tuple(itertools.combinations(distinct, 2))
        if sum(min(exact[a], exact[b]) for a, b in pairs) >= limit:  # at most, held by two
            ceilings = (_ceiling(counted.documents, exact[i], items.count(i)) for i in distinct)
            tiers.append(Pruning(" OR ".join(f"({a} AND {b})" for a, b in pairs), max(ceilings)))
    weakest = _leaving_out(items, exact, counted.documents, limit)
    return (*tiers, weakest) if weakest is not None else tuple(tiers)


def pruning_words(held: dict[str, int], documents: int, limit: int) -> tuple[Pruning, ...]:
    """The same for a lone prefix (``prefixes.Resolved.held``), an OR of whole words.

    Each word's count is of the documents holding it as written, which its phrase
    (stemmed) may exceed: the idf drawn from it is then too high, and the bound too,
    never too low; and the candidates may be more than their counts add up to, so a
    way left out for too few candidates costs time, never a result. Trigger: with
    more words the first ranking cost as much as ranking everything (56 words: 13.4
    ms against 10.2), hence MAX_PREFIX_WORDS."""
    weakest = _leaving_out(tuple(held), held, documents, limit)
    return (weakest,) if weakest is not None and len(held) <= MAX_PREFIX_WORDS else ()


def _leaving_out(
    items: tuple[str, ...], held: dict[str, int], documents: int, limit: int
) -> Pruning | None:
    """Leaving out the most common of the ``held`` items (the lowest idf), unless the
    others, all counted, are held by fewer than ``limit`` documents together."""
    if not held:
        return None
    weakest = max(held, key=lambda i: held[i])
    others = tuple(i for i in items if i != weakest)
    if not others or (all(i in held for i in others) and sum(held[i] for i in others) < limit):
        return None
    return Pruning(" OR ".join(others), _ceiling(documents, held[weakest], items.count(weakest)))


def _ceiling(documents: int, holding: int, copies: int) -> float:
    """What a phrase held by ``holding`` documents, typed ``copies`` times (each copy
    is a phrase with its share), adds to a score at most."""
    return CEILING * idf(documents, holding) * copies


def idf(documents: int, holding: int) -> float:
    """bm25's inverse document frequency as FTS5 computes it (never below 1e-6)."""
    value = math.log((documents - holding + 0.5) / (holding + 0.5))
    return value if value > 0 else 1e-6
