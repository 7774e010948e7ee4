"""The read side of the index: search, file listing, reading a file, counts.

Everything here runs on a read-only connection from the store's pool, in a worker
thread, under a deadline: a progress handler interrupts any statement that runs past
it, so a pathological query costs its caller a clear error, not the daemon its time.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from kbindex.daemon import bounds, frequency, passages, prefixes
from kbindex.daemon.documents import EXACT, STEMMED
from kbindex.daemon.query import Alternatives, BadQuery, Compiled
from kbindex.daemon.store import is_damage
from kbindex.proto.messages import FileInfo, Hit

QUERY_DEADLINE_SECONDS: Final = 5.0
BM25_WEIGHTS: Final = (2.0, 3.0, 1.0, 0.5, 1.0)
"""name (relative path), title, body, subwords, grams: see ``documents.COLUMNS``."""
_GLOB_CHARS = frozenset("*?[")


class NotIndexed(Exception):
    """The path is inside a root but is not an indexed file."""


@dataclass(frozen=True, slots=True)
class SearchResult:
    hits: list[Hit]
    total: int
    mode: str


def path_condition(path_filter: str | None, prefix: str = "f") -> tuple[str, list[object]]:
    """SQL condition for a path filter: a glob (``docs/*.md``, ``**/*.py``) or a prefix
    (``docs/``), relative to the roots, or absolute. In globs ``*`` also crosses ``/``."""
    if not path_filter:
        return "1", []
    raw = path_filter.strip()
    absolute = raw.startswith("/")
    column = f"{prefix}.path" if absolute else f"{prefix}.relpath"
    if not absolute:
        raw = raw.removeprefix("./")
    if _GLOB_CHARS & set(raw):
        glob = raw.replace("**/", "*").replace("/**", "/*")
        return f"{column} GLOB ?", [glob]
    stem = raw.rstrip("/")
    if not stem:
        return "1", []
    return f"({column} = ? OR substr({column}, 1, ?) = ?)", [stem, len(stem) + 1, stem + "/"]


class Deadline:
    """Interrupts SQLite statements on ``conn`` once ``seconds`` have passed."""

    def __init__(self, conn: sqlite3.Connection, seconds: float) -> None:
        self.expires = time.monotonic() + seconds
        conn.set_progress_handler(self._check, 10_000)

    def _check(self) -> int:
        return 1 if time.monotonic() > self.expires else 0


def search(
    conn: sqlite3.Connection,
    compiled: Compiled,
    limit: int,
    path_filter: str | None,
    weights: tuple[float, ...] = BM25_WEIGHTS,
) -> SearchResult:
    if compiled.match is None:
        return SearchResult([], 0, compiled.mode)
    # One read transaction: the counts, the bound drawn from them (``bounds``) and
    # the ranking all see the same documents, however the writer moves on meanwhile.
    conn.execute("BEGIN")
    try:
        Deadline(conn, QUERY_DEADLINE_SECONDS)
        return _search(conn, compiled, _Query(limit, path_filter, compiled.terms, weights))
    finally:
        conn.set_progress_handler(None, 0)  # the deadline is the search's, not the ROLLBACK's
        conn.execute("ROLLBACK")


def _search(conn: sqlite3.Connection, compiled: Compiled, query: _Query) -> SearchResult:
    assert compiled.match is not None
    excluded = compiled.excluded_prefixes
    alternatives = compiled.alternatives
    if compiled.mode == "any" and alternatives is not None:
        hits, total = query.run_any(conn, alternatives, excluded)
        return SearchResult(hits, total, "any")
    hits, total = query.run(conn, compiled.match, compiled.required_prefixes, excluded)
    if total == 0 and alternatives is not None:  # the fallback of ``all`` mode
        hits, total = query.run_any(conn, alternatives, excluded)
        return SearchResult(hits, total, "any")
    return SearchResult(hits, total, compiled.mode)


@dataclass(frozen=True, slots=True)
class _Query:
    limit: int
    path_filter: str | None
    needles: tuple[str, ...]
    weights: tuple[float, ...]

    def run_any(
        self, conn: sqlite3.Connection, alternatives: Alternatives, excluded: tuple[str, ...]
    ) -> tuple[list[Hit], int]:
        """An ``any`` expression, its common items left out where that still fills the
        list (see ``frequency``), ranked past the matches that cannot reach the list
        (see ``bounds``)."""
        items = alternatives.items
        if len(set(items)) < 2:
            return self.run(conn, alternatives.expression(), (), excluded)
        counted = frequency.census(conn, alternatives)
        selective = frequency.selective(conn, alternatives, counted)
        if selective is not None:
            hits, total = self.run(
                conn,
                alternatives.expression(selective),
                (),
                excluded,
                *self._ways(selective, counted),
            )
            if len(hits) >= self.limit:
                return hits, total
        return self.run(conn, alternatives.expression(), (), excluded, *self._ways(items, counted))

    def _ways(
        self, items: tuple[str, ...], counted: frequency.Census
    ) -> tuple[tuple[bounds.Pruning, ...], tuple[bounds.Part, ...]]:
        """(prunings, parts) for ranking ``items``: the parts when they split so,
        otherwise the prunings (``bounds``)."""
        parts = bounds.parts(items, counted)
        return ((), parts) if parts else (bounds.pruning(items, counted, self.limit), ())

    def run(
        self,
        conn: sqlite3.Connection,
        match: str,
        required: tuple[str, ...],
        excluded: tuple[str, ...],
        prunings: tuple[bounds.Pruning, ...] = (),
        parts: tuple[bounds.Part, ...] = (),
    ) -> tuple[list[Hit], int]:
        """The hits for ``match``, ranked in ``parts`` when given (``_in_parts``),
        else past the matches a pruning leaves out when its bound holds."""
        cond, params = path_condition(self.path_filter)
        try:
            resolved = prefixes.resolve(conn, match, required, excluded)
            # The files row is joined only with a path filter: every document has
            # one, written in the same transaction. (Trigger: counting through the
            # join found each match's files row, 10,000 lookups for a common word:
            # 3.5 ms of a 4 ms count.)
            joined_files = " JOIN files f ON f.id = d.rowid" if params else ""
            matches = f"{STEMMED} d{joined_files} WHERE {STEMMED} MATCH ? AND {cond}"
            args: list[object] = [resolved.match, *params]
            checks, total = _checks(conn, resolved, matches, args)
            if resolved.held:  # a lone prefix: an OR of whole words
                prunings = bounds.pruning_words(
                    resolved.held, frequency.documents(conn), self.limit
                )
            if parts:
                rows = self._in_parts(conn, matches + checks.sql, [*params, *checks.args], parts)
            else:
                rows = self._pruned(conn, matches + checks.sql, [*args, *checks.args], prunings)
            if total is None:
                total = len(rows) if len(rows) < self.limit else _count(conn, matches, args)
        except sqlite3.OperationalError as exc:
            if is_damage(exc):
                raise  # the service rebuilds the index; not the query's fault
            message = str(exc)
            if "interrupted" in message:
                raise BadQuery("the query took too long; make it more specific") from None
            raise BadQuery(f"query error: {message.removeprefix('fts5: ')}") from None
        hits = []
        for _id, path, root, relpath, size, mtime_ns, title, body, score in rows:
            snippet, line = passages.best_passage(body, self.needles) or (passages.head(body), 1)
            hits.append(
                Hit(
                    path=path,
                    root=root,
                    relpath=relpath,
                    score=round(-score, 4),
                    snippet=snippet,
                    line=line,
                    size=size,
                    last_modified=mtime_ns / 1e9,
                    title=title,
                )
            )
        return hits, total

    def _pruned(
        self,
        conn: sqlite3.Connection,
        source: str,
        args: list[object],
        prunings: tuple[bounds.Pruning, ...],
    ) -> list[Any]:
        """The best ``limit`` documents of ``SELECT ... FROM source``: those of the
        first pruning whose bound holds, else of every match."""
        listed = f" AND +d.rowid IN (SELECT rowid FROM {STEMMED} WHERE {STEMMED} MATCH ?)"
        for pruning in prunings:
            candidates = prefixes.resolve(conn, pruning.candidates, (), ()).match
            rows = self._ranked(conn, source + listed, [*args, candidates])
            if len(rows) == self.limit and -rows[-1][-1] >= pruning.bound:
                return rows
            # a match left out could have made the list: widen
        return self._ranked(conn, source, args)

    def _in_parts(
        self,
        conn: sqlite3.Connection,
        source: str,
        args: list[object],
        parts: tuple[bounds.Part, ...],
    ) -> list[Any]:
        """The best ``limit`` documents of ``SELECT ... FROM source``, its MATCH being
        each of ``parts`` in turn (``args`` after the MATCH's), until no document left
        could take a place in the list (see ``bounds.parts``)."""
        rows: list[Any] = []
        for part in parts:
            found = self._ranked(conn, source, [part.match, *args])
            rows = sorted([*rows, *found], key=_best_first)[: self.limit]
            if len(rows) == self.limit and -rows[-1][-1] >= part.rest:
                break
        return rows

    def _ranked(self, conn: sqlite3.Connection, source: str, args: list[object]) -> list[Any]:
        """The best ``limit`` documents of ``SELECT ... FROM source``, with their rowid
        and what a hit shows of each, best first (``_best_first``).

        Trigger: ``ORDER BY rank`` (FTS5 sorts the matches itself) took 23 ms for a
        question with 14,000 matches, this 16 ms, the same ten rows. Why: SQLite keeps
        only the best LIMIT rows as it goes, where FTS5 sorts every match; and the
        conditions in ``source`` run before bm25, so only the rows they keep are
        scored. The inner SELECT names no column: the body is read for the rows
        returned only. No snippet() here: see ``passages``."""
        ranking = f"bm25({STEMMED}, {', '.join(str(w) for w in self.weights)})"
        sql = f"""
            SELECT s.id, f.path, f.root, f.relpath, f.size, f.mtime_ns, d.title, d.body, s.score
            FROM (SELECT d.rowid AS id, {ranking} AS score FROM {source}
                  ORDER BY score, id LIMIT ?) s
            JOIN {STEMMED} d ON d.rowid = s.id JOIN files f ON f.id = s.id
            ORDER BY s.score, s.id
        """
        return conn.execute(sql, [*args, self.limit]).fetchall()


def _best_first(row: Any) -> tuple[float, int]:
    """The order of ``_ranked``'s rows: by bm25 (lowest first: FTS5's scores are
    negative), ties by rowid."""
    return row[-1], row[0]


@dataclass(frozen=True, slots=True)
class _Checks:
    """Conditions on ``docs_exact`` (the exactness of prefix terms) for a WHERE."""

    sql: str = ""
    args: tuple[str, ...] = ()


def _checks(
    conn: sqlite3.Connection, resolved: prefixes.Resolved, matches: str, args: list[object]
) -> tuple[_Checks, int | None]:
    """The exactness checks ``matches`` needs, and how many documents it finds with
    them when that had to be counted to decide (None when there are none).

    Trigger: the checks cost a third of ranking a prefix, and mostly remove nothing (a
    stem-mate of a word such as "universe" for ``universi*`` is rare). Why counts: when
    the checks keep every match, the matches are the answer; two counts cost less than
    checking every match while ranking it."""
    # Trigger: a ``rowid IN`` that SQLite could hand to FTS5 became one MATCH per
    # listed row, sorted again afterwards. Why the unary ``+``: it keeps the check out
    # of FTS5's plan, so the list is built once.
    holding = f"(SELECT rowid FROM {EXACT} WHERE {EXACT} MATCH ?)"
    sql, exact = "", []
    for kind, expr in (("IN", resolved.require), ("NOT IN", resolved.exclude)):
        if expr is not None:
            sql += f" AND +d.rowid {kind} {holding}"
            exact.append(expr)
    if not exact:
        return _Checks(), None
    if resolved.counted_by_require and len(args) == 1:  # no path filter
        total = _count(conn, f"{EXACT} WHERE {EXACT} MATCH ?", exact)
    else:
        total = _count(conn, matches + sql, [*args, *exact])
    if total == _count(conn, matches, args):
        return _Checks(), total
    return _Checks(sql, tuple(exact)), total


def _count(conn: sqlite3.Connection, source: str, args: Sequence[object]) -> int:
    """How many rows ``SELECT ... FROM source`` finds."""
    return int(conn.execute(f"SELECT count(*) FROM {source}", args).fetchone()[0])


def find_files(conn: sqlite3.Connection, glob: str, limit: int) -> tuple[list[FileInfo], int]:
    cond, params = path_condition(glob or "*")
    Deadline(conn, QUERY_DEADLINE_SECONDS)
    base = f"FROM files f WHERE f.skip_reason IS NULL AND {cond}"
    try:
        rows = conn.execute(
            f"SELECT f.path, f.root, f.relpath, f.size, f.mtime_ns {base}"
            " ORDER BY f.root, f.relpath LIMIT ?",
            [*params, limit],
        ).fetchall()
        total = conn.execute(f"SELECT count(*) {base}", params).fetchone()[0]
    except sqlite3.OperationalError as exc:
        if is_damage(exc):
            raise
        if "interrupted" in str(exc):
            raise BadQuery("listing the files took too long; narrow the glob") from None
        raise BadQuery(f"bad glob: {exc}") from None
    files = [
        FileInfo(path=p, root=r, relpath=rel, size=s, last_modified=m / 1e9)
        for p, r, rel, s, m in rows
    ]
    return files, total


def file_state(conn: sqlite3.Connection, path: str) -> tuple[str | None, str | None] | None:
    """(skip_reason, skip_detail) of a known file, or None when the index has no row."""
    row = conn.execute(
        "SELECT skip_reason, skip_detail FROM files WHERE path = ?", (path,)
    ).fetchone()
    return None if row is None else (row[0], row[1])


def holds(conn: sqlite3.Connection, path: str) -> bool:
    """Whether the index has a row for ``path``, or for anything under it as a directory
    ('0' sorts right after '/')."""
    row = conn.execute(
        "SELECT 1 FROM files WHERE path = ? OR (path > ? AND path < ?) LIMIT 1",
        (path, path + "/", path + "0"),
    ).fetchone()
    return row is not None


@dataclass(frozen=True, slots=True)
class Counts:
    indexed: int
    skipped: dict[str, int]
    per_root: dict[str, int]
    recent_errors: list[tuple[str, str]]


def counts(conn: sqlite3.Connection) -> Counts:
    indexed = 0
    skipped: dict[str, int] = {}
    for reason, n in conn.execute("SELECT skip_reason, count(*) FROM files GROUP BY 1"):
        if reason is None:
            indexed = n
        else:
            skipped[reason] = n
    per_root = dict(
        conn.execute("SELECT root, count(*) FROM files WHERE skip_reason IS NULL GROUP BY 1")
    )
    recent = conn.execute(
        "SELECT path, skip_reason || ': ' || coalesce(skip_detail, '') FROM files"
        " WHERE skip_reason IN ('unreadable', 'undecodable') ORDER BY indexed_at DESC LIMIT 20"
    ).fetchall()
    return Counts(indexed, skipped, per_root, [(p, r) for p, r in recent])
