"""Which indexed files a grep reads: those the trigram index and the word index cannot
rule out.

``grep.narrowing`` turns the pattern into a trigram query, and a literal into phrases
of its whole words; ``find`` asks ``docs_grams`` and
``docs`` for the indexed files that satisfy both (only the phrases when they admit a
few files), within the path filter (in the query, never after a limit), plus every
file with a change still pending, so an answer is never staler than the files. A
pattern with neither reads every indexed file (``scanned_all``), mostly by a walk of
the roots (``sweep``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Final

from kbindex.daemon.backends.sqlite.database import is_damage
from kbindex.daemon.backends.sqlite.documents import GRAMS, STEMMED, as_json
from kbindex.daemon.backends.sqlite.searcher import (
    QUERY_DEADLINE_SECONDS,
    Deadline,
    files_sql,
    path_condition,
)
from kbindex.daemon.engine import sqlite
from kbindex.daemon.index.interface import TooSlow
from kbindex.daemon.index.plan import NO_FILTERS, Filters, PathFilter
from kbindex.daemon.index.values import (
    NUL_MARK,
    PENDING_PATHS,
    RETRY_MTIME_NS,
    And,
    Candidates,
    Query,
    Words,
    order,
)

FEW_FILES: Final = 256
"""A phrase that admits at most this many files is not narrowed by the trigrams."""


def find(
    conn: sqlite.Connection,
    query: Query,
    path_filter: str | None,
    pending: Sequence[str],
    new: Sequence[tuple[str, str]],
    words: Words | None = None,
    filters: Filters = NO_FILTERS,
) -> Candidates:
    """The indexed files that may hold a match (in the reader thread): those the
    trigram index and the phrases of ``words`` admit, those under a ``pending`` path (a
    changed file, directory or root whose text may differ from the index), and ``new``
    files (path, relpath) not indexed yet; all within ``path_filter``. When every
    indexed file is one, also those a walk's counts may leave out (``uncounted``).
    ``filters`` keep the indexed files they admit as the index holds them; files not
    indexed yet are left out, since what they hold besides their text is not known."""
    cond, path_params = files_sql(replace(filters, path=PathFilter.parse(path_filter)))
    narrowed = len(pending) <= PENDING_PATHS
    match = match_expression(query) if narrowed else None
    words = words if narrowed else None
    indexed = f"f.skip_reason IS NULL AND {cond}"
    uncounted: list[str] | None = None
    under = (
        "SELECT f.path, f.size FROM files f"
        f" WHERE (f.path = ? OR (f.path > ? AND f.path < ?)) AND {indexed}"
    )
    Deadline(conn, QUERY_DEADLINE_SECONDS)
    try:
        if words is not None:
            rows = _by_words(conn, words, match, indexed, path_params)
        elif match is None:
            sql = f"SELECT f.path, f.size FROM files f WHERE {indexed}"
            rows = conn.execute(sql, path_params).fetchall()
        else:
            # Driven from the trigram table: a selective pattern admits a few rowids.
            sql = (
                f"SELECT f.path, f.size FROM {GRAMS} g CROSS JOIN files f ON f.id = g.rowid"
                f" WHERE {GRAMS} MATCH ? AND {indexed}"
            )
            rows = conn.execute(sql, [match, *path_params]).fetchall()
        if narrowed:
            # Files under a pending path are candidates whatever the index says (when
            # nothing narrows, they are among the rows already), and uncounted.
            changed = [
                row
                for p in pending
                for row in conn.execute(under, [p, p + "/", p + "0", *path_params])
            ]
            rows += changed
            uncounted = [p for (p,) in conn.execute(_MARKED + indexed, path_params)]
            if match is None and words is None:
                uncounted += [p for (p,) in conn.execute(_WAITING + indexed, path_params)]
            uncounted += [p for p, _ in changed]
        new_cond, new_params = path_condition(path_filter)
        fresh = conn.execute(
            "SELECT f.path, 0 FROM (SELECT value->>0 AS path, value->>1 AS relpath"
            f" FROM json_each(?)) f WHERE {new_cond}",
            [as_json([] if filters.structured else new), *new_params],
        ).fetchall()
        rows += fresh
    except sqlite.OperationalError as exc:
        if is_damage(exc) or "interrupted" not in str(exc):
            raise
        raise TooSlow("finding the candidate files took too long; narrow the path") from None
    finally:
        conn.set_progress_handler(None, 0)
    if uncounted is not None:
        uncounted = sorted({*uncounted, *(p for p, _ in fresh)}, key=order)
    return Candidates.of(
        dict(rows), scanned_all=match is None and words is None, uncounted=uncounted
    )


_MARKED: Final = (
    f"SELECT f.path FROM {GRAMS} g CROSS JOIN files f ON f.id = g.rowid"
    f" WHERE {GRAMS} MATCH '{NUL_MARK}' AND "
)
"""Indexed files whose text holds a NUL (a lookup of one token, driven from it)."""
_WAITING: Final = f"SELECT f.path FROM files f WHERE f.mtime_ns = {RETRY_MTIME_NS} AND "
"""Indexed files waiting to be read again (after the upgrade to v9, not marked yet:
``schema``); a scan of the files table, so asked only when every file is read."""


def _by_words(
    conn: sqlite.Connection,
    words: Words,
    match: str | None,
    indexed: str,
    params: list[object],
) -> list[tuple[str, int]]:
    """The indexed files holding the phrases of ``words``, narrowed by the trigrams
    ``match`` unless the phrases alone admit FEW_FILES or fewer (then the trigram query
    costs more than ripgrep takes to read the few files it would rule out), plus the files
    ``words.unless`` admits that ``match`` does too."""
    admitted = _rowids(conn, STEMMED, words.phrases)
    if match is not None and len(admitted) > FEW_FILES:
        admitted &= _rowids(conn, GRAMS, match)
    if words.unless is not None:
        unless = words.unless if match is None else f"({words.unless}) AND ({match})"
        admitted |= _rowids(conn, GRAMS, unless)
    sql = (
        "SELECT f.path, f.size FROM files f"
        f" WHERE f.id IN (SELECT value FROM json_each(?)) AND {indexed}"
    )
    return conn.execute(sql, [as_json(sorted(admitted)), *params]).fetchall()


def _rowids(conn: sqlite.Connection, table: str, match: str) -> set[int]:
    return {r for (r,) in conn.execute(f"SELECT rowid FROM {table} WHERE {table} MATCH ?", [match])}


def match_expression(query: Query) -> str | None:
    """The query as an FTS5 MATCH expression (None for ANY)."""
    if query is None:
        return None
    if isinstance(query, str):
        return f'"{query}"'
    glue = " AND " if isinstance(query, And) else " OR "
    parts = sorted(match_expression(p) or "" for p in query.parts)
    return "(" + glue.join(parts) + ")"
