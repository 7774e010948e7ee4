"""Words too common to choose documents by: in an ``any`` query they are left out.

Trigger: a question such as "how does rundkom zeels the feling?" runs in ``any`` mode
(``rundkom OR zeels OR feling``). On the bench corpus "rundkom" is in 47% of the
documents, so bm25 scored 11,000 matches to return ten: 18.6 ms of FTS5 ranking where
counting the same matches took 0.4 ms. Ranking is what costs (about 1.5 µs a match),
and a word that common carries almost nothing of bm25's score (its IDF is about 0.1,
a rare word's 5 to 7), so the documents that hold only it rank last anyway.

Why leave it out: it is the "common terms" rule of Lucene and Elasticsearch. An item
of the ``any`` expression held by more than COMMON_FRACTION of the documents is left
out when a rarer item remains, so only documents holding a rarer one match and are
ranked. On the bench questions the top ten kept 9.4 of their 10 documents and the
query took 6.5 ms instead of 18.6 (see ``bench/README.md``). When the rarer items
find fewer documents than the caller asked for, the whole expression runs as well,
so the common words still fill the list: leaving them out never shortens a result.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import Final

from kbindex.daemon import prefixes
from kbindex.daemon.documents import STEMMED
from kbindex.daemon.query import Alternatives

COMMON_FRACTION: Final = 0.3
"""An item held by more than this share of the documents is common."""


def documents(conn: sqlite3.Connection) -> int:
    """How many documents the index holds (FTS5's own table of their sizes: one count
    of a small table, about 0.05 ms for 20,000 documents)."""
    row = conn.execute(f"SELECT count(*) FROM {STEMMED}_docsize").fetchone()
    return int(row[0])


@dataclass(frozen=True, slots=True)
class Census:
    """How many documents hold each item of an ``any`` expression, counted up to
    ``cap`` (the first count past COMMON_FRACTION of the ``documents``)."""

    documents: int
    cap: int
    held: dict[str, int]
    """Each item but the prefix terms (which stand for words only resolved later)."""

    def exact(self, item: str) -> int | None:
        """How many documents hold ``item``, when it was counted to the end."""
        n = self.held.get(item)
        return n if n is not None and n < self.cap else None


def census(conn: sqlite3.Connection, alternatives: Alternatives) -> Census:
    total = documents(conn)
    cap = int(COMMON_FRACTION * total) + 1
    items = dict.fromkeys(i for i in alternatives.items if not prefixes.holds_prefix(i))
    return Census(total, cap, {i: _held_by(conn, i, cap) for i in items})


def selective(
    conn: sqlite3.Connection, alternatives: Alternatives, counted: Census | None = None
) -> tuple[str, ...] | None:
    """The items of ``alternatives`` that are not common, when some are common and some
    are not; None when leaving nothing out (all common, or none)."""
    items = alternatives.items
    if len(items) < 2:
        return None
    counted = counted or census(conn, alternatives)
    kept = tuple(i for i in items if counted.held.get(i, 0) < counted.cap)
    return kept if kept and len(kept) < len(items) else None


def _held_by(conn: sqlite3.Connection, item: str, cap: int) -> int:
    """How many documents match ``item``, counting no further than ``cap``: a common
    word stops the count early (about 0.25 ms for 6,000 documents)."""
    row = conn.execute(
        f"SELECT count(*) FROM (SELECT 1 FROM {STEMMED} WHERE {STEMMED} MATCH ? LIMIT ?)",
        (item, cap),
    ).fetchone()
    return int(row[0])
