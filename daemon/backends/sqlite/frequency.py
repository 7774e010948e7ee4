"""Words too common to choose documents by: in an ``any`` query they are left out.

A question such as "how does rundkom zeels the feling?" runs in ``any`` mode
(``rundkom OR zeels OR feling``). Ranking is what a search costs (bm25 scores every
match), and a word held by half the documents carries almost nothing of bm25's score
(its IDF is near 0, a rare word's 5 to 7), so the documents holding only it rank last
anyway. This is the "common terms" rule of Lucene and Elasticsearch: an item of the
``any`` expression held by more than COMMON_FRACTION of the documents is left out when
a rarer item remains, so only documents holding a rarer one are ranked. When the rarer
items find fewer documents than the caller asked for, the whole expression runs as
well: leaving them out never shortens a result. It changes which documents a long
question lists, so it is a ranking rule, not a shortcut: ``tests/test_common_words.py``
pins it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from kbindex.daemon.backends.sqlite.documents import STEMMED
from kbindex.daemon.backends.sqlite.render import Alternatives, Expr, has_prefix, render
from kbindex.daemon.engine import sqlite

COMMON_FRACTION: Final = 0.3
"""An item held by more than this share of the documents is common."""


def documents(conn: sqlite.Connection) -> int:
    """How many documents the index holds (FTS5's own table of their sizes: one count
    of a small table)."""
    row = conn.execute(f"SELECT count(*) FROM {STEMMED}_docsize").fetchone()
    return int(row[0])


@dataclass(frozen=True, slots=True)
class Held:
    """How many documents hold each item of an ``any`` expression."""

    documents: int
    counts: dict[Expr, int]
    """By item, counted no further than ``cap`` (exact below it); no prefix terms."""
    cap: int


def held(conn: sqlite.Connection, alternatives: Alternatives) -> Held:
    """The counts ``selective`` and ``essential.split`` decide by."""
    total = documents(conn)
    cap = int(COMMON_FRACTION * total) + 1
    counts = {i: _held_by(conn, render(i), cap) for i in alternatives.items if not has_prefix(i)}
    return Held(total, counts, cap)


def selective(alternatives: Alternatives, counted: Held) -> tuple[Expr, ...] | None:
    """The items of ``alternatives`` that are not common, when some are common and some
    are not; None when leaving nothing out (all common, or none). Prefix terms stand for
    words resolved later: they are never common here."""
    items = alternatives.items
    if len(items) < 2:
        return None
    kept = tuple(i for i in items if counted.counts.get(i, 0) < counted.cap)
    return kept if kept and len(kept) < len(items) else None


def _held_by(conn: sqlite.Connection, item: str, cap: int) -> int:
    """How many documents match ``item``, counting no further than ``cap``: a common
    word stops the count early."""
    row = conn.execute(
        f"SELECT count(*) FROM (SELECT 1 FROM {STEMMED} WHERE {STEMMED} MATCH ? LIMIT ?)",
        (item, cap),
    ).fetchone()
    return int(row[0])
