"""The read side of the index: search, file listing, reading a file, counts.

Everything here runs on a read-only connection from the store's pool, in a worker
thread, under a deadline: a progress handler interrupts any statement that runs past
it, so a pathological query costs its caller a clear error, not the daemon its time.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Final

from kbindex.daemon.backends.sqlite import essential, frequency, prefixes
from kbindex.daemon.backends.sqlite.database import is_damage
from kbindex.daemon.backends.sqlite.documents import EXACT, IN_JSON, STEMMED, TITLES, as_json
from kbindex.daemon.backends.sqlite.filters import (
    SPAN,
    Admitted,
    condition,
    listings,
    lookups,
)
from kbindex.daemon.backends.sqlite.render import Alternatives, Expr, Match, has_prefix, match
from kbindex.daemon.engine import sqlite
from kbindex.daemon.index.interface import BadQuery
from kbindex.daemon.index.plan import Filters, PathFilter, Plan
from kbindex.daemon.index.values import (
    Boosts,
    Counts,
    FileState,
    Hit,
    Indexed,
    Listing,
    SearchResult,
)

QUERY_DEADLINE_SECONDS: Final = 5.0
BM25_WEIGHTS: Final = (2.0, 3.0, 1.0, 0.5, 1.0)
"""name (relative path), title, body, subwords, grams: see ``documents.COLUMNS``."""


def path_condition(raw_filter: str | None, prefix: str = "f") -> tuple[str, list[object]]:
    """SQL condition for a path filter as typed, on the files table ``prefix``."""
    return path_sql(PathFilter.parse(raw_filter), prefix)


def path_sql(parsed: PathFilter | None, prefix: str = "f") -> tuple[str, list[object]]:
    """SQL condition for a path filter (``PathFilter``) on the files table ``prefix``."""
    if parsed is None:
        return "1", []
    column = f"{prefix}.path" if parsed.absolute else f"{prefix}.relpath"
    if parsed.glob:
        return f"{column} GLOB ?", [parsed.glob]
    stem = parsed.stem
    return f"({column} = ? OR substr({column}, 1, ?) = ?)", [stem, len(stem) + 1, stem + "/"]


def files_sql(
    filters: Filters, prefix: str = "f", admitted: Admitted | None = None, few: bool = False
) -> tuple[str, list[object]]:
    """SQL condition for ``filters`` (its path filter and the rest) on the files table
    ``prefix``; ``admitted``: what a search looked its filters up to (``filters``)."""
    cond, params = path_sql(filters.path, prefix)
    if not filters.structured and admitted is None:
        return cond, params
    more, more_params = condition(filters, prefix, admitted, few=few)
    return (cond, params) if more == "1" else (f"{cond} AND {more}", [*params, *more_params])


class Deadline:
    """Interrupts SQLite statements on ``conn`` once ``seconds`` have passed."""

    def __init__(self, conn: sqlite.Connection, seconds: float) -> None:
        self.expires = time.monotonic() + seconds
        conn.set_progress_handler(self._check, 10_000)

    def _check(self) -> int:
        return 1 if time.monotonic() > self.expires else 0


def search(
    conn: sqlite.Connection, plan: Plan, weights: tuple[float, ...] = BM25_WEIGHTS
) -> SearchResult:
    """The best ``plan.limit`` hits of ``plan`` with their files' rows and no snippet
    (the daemon's searches rank, then show: ``searching.hits``): for the tests and
    the benchmarks that measure the ranking alone, with ``weights`` of their own."""
    rows, total, mode = _in_transaction(conn, match(plan), _Query.of(plan, weights))
    hits = [
        Hit(path, root, relpath, size, mtime_ns, title, round(-score, 4), "", 1)
        for _id, path, root, relpath, size, mtime_ns, title, score in rows
    ]
    return SearchResult(hits, total, mode)


def rank(conn: sqlite.Connection, plan: Plan) -> tuple[list[tuple[int, float]], int, str]:
    """The best ``plan.limit`` documents' ids with their bm25 score (higher is better),
    how many match, and the mode that found them: ``search`` without the hits' text,
    for fusing with another ranking (``hybrid``)."""
    query = _Query.of(plan, BM25_WEIGHTS, ids_only=True)
    rows, total, mode = _in_transaction(conn, match(plan), query)
    return [(int(i), -float(score)) for i, score in rows], total, mode


def _in_transaction(
    conn: sqlite.Connection, matched: Match, query: _Query
) -> tuple[list[Any], int, str]:
    if matched.expr is None:
        return [], 0, matched.mode
    # One read transaction: the counts and the ranking see the same documents, however
    # the writer moves on meanwhile.
    conn.execute("BEGIN")
    try:
        Deadline(conn, QUERY_DEADLINE_SECONDS)
        return _search(conn, matched, _looked_up(conn, query))
    finally:
        conn.set_progress_handler(None, 0)  # the deadline is the search's, not the ROLLBACK's
        conn.execute("ROLLBACK")


def _looked_up(conn: sqlite.Connection, query: _Query, *, listing: bool = False) -> _Query:
    """``query`` with what its filters admit (``filters.lookups``), looked up once for
    all the statements of its search; ``listing``: narrowed to the stretches of ids a
    filter's few files hold (``filters.listings``)."""
    filters = query.filters
    try:
        if not listing:
            bounds = [conn.execute(sql, params).fetchone() for sql, params in lookups(filters)]
            return replace(query, admitted=Admitted.of(bounds))
        listed: list[list[int] | None] = []
        for sql, params, most in listings(filters):
            ids = json.loads(conn.execute(sql, params).fetchone()[0])
            listed.append(ids if len(ids) <= most else None)
        # The index's span weighs the stretches of a complete list: none, none needed.
        complete = any(ids is not None for ids in listed)
        span = conn.execute(SPAN).fetchone() if complete else (None, None)
    except sqlite.OperationalError as exc:
        if is_damage(exc) or "interrupted" not in str(exc):
            raise
        raise BadQuery("the query took too long; make it more specific") from None
    assert query.admitted is not None
    return replace(query, admitted=query.admitted.narrowed(listed, span))


def _search(conn: sqlite.Connection, matched: Match, query: _Query) -> tuple[list[Any], int, str]:
    """Only an ``any`` expression is searched within the stretches of ids its filters'
    few files hold: it ranks every document that holds one of its items, where a
    conjunction's matches are few, and checking each costs less than listing them."""
    assert matched.expr is not None
    excluded = matched.excluded_prefixes
    alternatives = matched.alternatives
    if matched.mode == "any" and alternatives is not None:
        listed = _looked_up(conn, query, listing=True)
        rows, total = listed.run_any(conn, alternatives, excluded)
        return rows, total, "any"
    rows, total = query.run(conn, matched.expr, matched.required_prefixes, excluded)
    if total == 0 and alternatives is not None:  # the fallback of ``all`` mode
        listed = _looked_up(conn, query, listing=True)
        rows, total = listed.run_any(conn, alternatives, excluded)
        return rows, total, "any"
    return rows, total, matched.mode


@dataclass(frozen=True, slots=True)
class _Query:
    limit: int
    filters: Filters
    weights: tuple[float, ...]
    ids_only: bool = False
    """Rows of (rowid, bm25) only: no files row, no text."""
    boosts: Boosts = ()
    admitted: Admitted | None = None
    """What the filters admit, looked up once for all the statements of a search."""
    recency: float = 0.0
    """``Plan.recency``."""

    @staticmethod
    def of(plan: Plan, weights: tuple[float, ...], *, ids_only: bool = False) -> _Query:
        return _Query(
            plan.limit, plan.filters, weights, ids_only, plan.boosts, recency=plan.recency
        )

    def ranking(self) -> str:
        """The score of a document of ``d`` (its files row ``f``): bm25, times
        ``factor`` where there is one."""
        factor = self.factor()
        return self.bm25() if factor is None else f"({self.bm25()} * {factor})"

    def bm25(self) -> str:
        return f"bm25({STEMMED}, {', '.join(str(w) for w in self.weights)})"

    def factor(self) -> str | None:
        """What a document's bm25 is multiplied by (of its files row ``f``), None for
        none: its kind's factor where ``boosts`` has one, and the decay of its age
        (``Plan.recency``). Each is at most 1, so a bound on bm25 is one on the score
        (``essential``, ``_Query._bounded``)."""
        parts = []
        if self.boosts:
            # Kinds are KINDS' names and the factors numbers: nothing a client typed.
            cases = " ".join(f"WHEN '{kind}' THEN {factor!r}" for kind, factor in self.boosts)
            parts.append(f"CASE f.kind {cases} ELSE 1.0 END")
        if self.recency > 0:
            # A number the daemon computed, not text a client typed.
            dated = (
                "coalesce((SELECT max(number) FROM fields WHERE file = f.id AND source = 'date'),"
                " f.mtime_ns / 1e9)"
            )
            parts.append(f"pow(0.5, max(0.0, unixepoch() - {dated}) / {self.recency!r})")
        return " * ".join(parts) or None

    def run_any(
        self, conn: sqlite.Connection, alternatives: Alternatives, excluded: tuple[str, ...]
    ) -> tuple[list[Any], int]:
        """An ``any`` expression, its common items left out where the rest still fill
        the list (see ``frequency``)."""
        if len(alternatives.items) < 2:
            return self.run(conn, alternatives.expression(), (), excluded)
        held = frequency.held(conn, alternatives)
        selective = frequency.selective(alternatives, held)
        if selective is not None:
            rows, total = self.run(
                conn,
                alternatives.expression(selective),
                (),
                excluded,
                essential.split(selective, held, self.limit),
            )
            if len(rows) >= self.limit:
                return rows, total
        items = alternatives.items
        return self.run(
            conn, alternatives.expression(), (), excluded, essential.split(items, held, self.limit)
        )

    def run(
        self,
        conn: sqlite.Connection,
        match: Expr,
        required: tuple[str, ...],
        excluded: tuple[str, ...],
        split: essential.Split | None = None,
    ) -> tuple[list[Any], int]:
        """The best ``limit`` rows for ``match`` and how many documents it finds, the
        exactness of its prefix terms checked on ``docs_exact`` (see ``prefixes``);
        ``split``: the documents of its essential items ranked first (``essential``).

        With several stretches of admitted ids (``filters.Admitted``), each is searched
        on its own and their lists merged: the stretches do not overlap, so the best
        rows of all are the best of each's, and the counts add up. bm25 counts a
        word's documents over the whole index whatever stretch is read, so the scores
        are the same as one search's."""
        try:
            resolved = prefixes.resolve(conn, match, required, excluded)
            # Whether few documents match, for a field's or date's check: the same for
            # every stretch, so asked once.
            few = bool(self.filters.fields or self.filters.dated) and _few(conn, resolved.match)
            prefixed = has_prefix(match)
            admitted = self.admitted
            if admitted is None or len(admitted.stretches) < 2:
                return self._run(conn, resolved, prefixed, few, split)
            rows: list[Any] = []
            total = 0
            for stretch in admitted.stretches:
                part = replace(self, admitted=replace(admitted, stretches=(stretch,)))
                found, count = part._run(conn, resolved, prefixed, few, split)
                rows += found
                total += count
        except sqlite.OperationalError as exc:
            if is_damage(exc):
                raise  # the service rebuilds the index; not the query's fault
            message = str(exc)
            if "interrupted" in message:
                raise BadQuery("the query took too long; make it more specific") from None
            raise BadQuery(f"query error: {message.removeprefix('fts5: ')}") from None
        rows.sort(key=lambda row: (row[-1], row[0]))  # by score, then id: as ranked
        return rows[: self.limit], total

    def _run(
        self,
        conn: sqlite.Connection,
        resolved: prefixes.Resolved,
        prefixed: bool,
        few: bool,
        split: essential.Split | None,
    ) -> tuple[list[Any], int]:
        """``run``'s statements for ``resolved`` within ``admitted``'s one stretch (or
        none); ``prefixed``: the match has a prefix term."""
        filters = self.filters
        checked = filters.fields or filters.dated
        cond, params = files_sql(filters, admitted=self.admitted, few=few)
        # The files row is joined only for a condition on it or a factor (a kind's
        # boost, recency): every document has one, written in the same transaction,
        # and counting through the join would look up each match's row.
        on_files = bool(filters.path or filters.roots or filters.kinds or filters.modified)
        checks, exact = _checks(resolved)
        where = f"WHERE {STEMMED} MATCH ? AND {cond}{checks}"
        joined = f"{STEMMED} d JOIN files f ON f.id = d.rowid {where}"
        plain = joined if on_files else f"{STEMMED} d {where}"
        args: list[object] = [resolved.match, *params, *exact]
        if prefixed or (checked and not few):
            # Counted while ranked: a prefix term's phrases (with FTS5's own prefix,
            # a merge of every word it starts) cost as much to find again as to
            # rank; and a statement that checks a field or date against the list of
            # ids it admits builds that list (thousands of ids) again.
            source = joined if on_files or self.factor() else plain
            return self._ranked_counted(conn, source, args)
        rows = self._ranked_first(conn, plain, joined, args, split)
        return rows, len(rows) if len(rows) < self.limit else _count(conn, plain, args)

    def _ranked_first(
        self,
        conn: sqlite.Connection,
        plain: str,
        joined: str,
        args: list[object],
        split: essential.Split | None,
    ) -> list[Any]:
        """``_ranked``, the documents of ``split``'s essential items first: their list
        when it decides the ranking, else the whole one. (The unary ``+``: see
        ``_checks``.)"""
        # The bound needs weights of 0 or more; and a listing's few documents cost
        # less to rank at once than to rank twice.
        listed = self.admitted is not None and self.admitted.listed
        if split is not None and min(self.weights) >= 0 and not listed:
            essential_only = (
                f" AND +d.rowid IN (SELECT rowid FROM {STEMMED} WHERE {STEMMED} MATCH ?)"
            )
            narrowed = [*args, split.essential]
            rows = self._ranked(conn, plain + essential_only, joined + essential_only, narrowed)
            if len(rows) == self.limit and split.decides(rows[-1][-1]):
                return rows
        return self._ranked(conn, plain, joined, args)

    def _ranked(
        self, conn: sqlite.Connection, plain: str, joined: str, args: list[object]
    ) -> list[Any]:
        """The best ``limit`` documents of ``SELECT ... FROM joined`` (``plain``: the
        same documents, without the files row unless a filter needs it), with their
        rowid and what a hit shows of each, best first (by score, ties by rowid).

        Why a subquery rather than ``ORDER BY rank``: SQLite keeps only the best LIMIT
        rows as it scores them, where FTS5 would sort every match; the conditions in
        the source run before bm25, so only the rows they keep are scored; and the
        files are read for the rows returned only. No snippet() here: see ``passages``."""
        ranked = self._bounded(conn, plain, args) if self.factor() else None
        if ranked is None:
            sql = (
                f"SELECT d.rowid, {self.ranking()} AS score FROM {joined} ORDER BY score, 1 LIMIT ?"
            )
            ranked = conn.execute(sql, [*args, self.limit]).fetchall()
        if self.ids_only or not ranked:
            return ranked
        sql = f"""
            SELECT f.id, f.path, f.root, f.relpath, f.size, f.mtime_ns, t.title
            FROM files f JOIN {TITLES} t ON t.id = f.id WHERE f.id IN {IN_JSON}
        """
        shown = {row[0]: row for row in conn.execute(sql, [as_json([i for i, _ in ranked])])}
        return [(*shown[i], score) for i, score in ranked]

    def _bounded(self, conn: sqlite.Connection, plain: str, args: list[object]) -> list[Any] | None:
        """The best ``limit`` (rowid, score) of a ranking with a ``factor``, found among
        the best ``window`` documents by bm25 alone, or None when those cannot decide.

        A factor is at most 1 and bm25 at most 0, so no document outside the window
        scores better than the window's worst bm25: when the ``limit``-th best score
        inside is better than that, the list is the whole ranking's, without looking
        up the files row of every match (a common word's thousands)."""
        if min(self.weights) < 0:
            return None
        window = 4 * self.limit + 16
        sql = f"""
            WITH w AS MATERIALIZED (
                SELECT d.rowid AS id, {self.bm25()} AS raw FROM {plain}
                ORDER BY raw, id LIMIT ?)
            SELECT w.id, w.raw * {self.factor()} AS score,
                (SELECT max(raw) FROM w), (SELECT count(*) FROM w)
            FROM w JOIN files f ON f.id = w.id ORDER BY score, w.id LIMIT ?
        """
        rows = conn.execute(sql, [*args, window, self.limit]).fetchall()
        if not rows:
            return []
        worst, inside = rows[0][2], rows[0][3]
        if inside < window or (len(rows) == self.limit and rows[-1][1] < worst):
            return [(i, score) for i, score, _, _ in rows]
        return None

    def _ranked_counted(
        self, conn: sqlite.Connection, source: str, args: list[object]
    ) -> tuple[list[Any], int]:
        """``_ranked``'s rows and how many documents ``source`` finds, in one pass over
        its matches: every (rowid, score) is kept in a temporary table, then counted
        and its best ``limit`` rows taken. Keeping every match costs more than counting
        a plain word's matches again, so only prefix terms are ranked this way."""
        ranking = self.ranking()
        scored = f"WITH m AS MATERIALIZED (SELECT d.rowid AS id, {ranking} AS score FROM {source})"
        best = (
            "SELECT id, score, (SELECT count(*) FROM m) AS total FROM m ORDER BY score, id LIMIT ?"
        )
        if self.ids_only:
            rows = conn.execute(f"{scored} {best}", [*args, self.limit]).fetchall()
            return [row[:2] for row in rows], rows[0][2] if rows else 0
        sql = f"""
            {scored}
            SELECT s.id, f.path, f.root, f.relpath, f.size, f.mtime_ns, t.title, s.score,
                s.total
            FROM ({best}) s
            JOIN {TITLES} t ON t.id = s.id JOIN files f ON f.id = s.id
            ORDER BY s.score, s.id
        """
        rows = conn.execute(sql, [*args, self.limit]).fetchall()
        return [row[:8] for row in rows], rows[0][8] if rows else 0


def _checks(resolved: prefixes.Resolved) -> tuple[str, list[str]]:
    """The conditions on ``docs_exact`` a prefix term needs (a document holds one of its
    words as written, or none for an excluded one), and their MATCH arguments.

    Why the unary ``+``: it keeps the check out of FTS5's plan; a ``rowid IN`` that
    SQLite hands to FTS5 becomes one MATCH per listed row."""
    holding = f"(SELECT rowid FROM {EXACT} WHERE {EXACT} MATCH ?)"
    sql, exact = "", []
    for kind, expr in (("IN", resolved.require), ("NOT IN", resolved.exclude)):
        if expr is not None:
            sql += f" AND +d.rowid {kind} {holding}"
            exact.append(expr)
    return sql, exact


FEW_MATCHES: Final = 300
"""A statement whose expression finds at most this many documents checks its field and
date filters on each one (a lookup of the file's ``fields`` rows), not against a list
of every id they admit, which may cost more to build than that many lookups."""


def _few(conn: sqlite.Connection, match: str) -> bool:
    sql = f"SELECT count(*) FROM (SELECT 1 FROM {STEMMED} WHERE {STEMMED} MATCH ? LIMIT ?)"
    return int(conn.execute(sql, (match, FEW_MATCHES + 1)).fetchone()[0]) <= FEW_MATCHES


def _count(conn: sqlite.Connection, source: str, args: Sequence[object]) -> int:
    """How many rows ``SELECT ... FROM source`` finds."""
    return int(conn.execute(f"SELECT count(*) FROM {source}", args).fetchone()[0])


def files(
    conn: sqlite.Connection,
    path_filter: str | None,
    limit: int | None,
    filters: Filters,
    newest: bool = False,
) -> Listing:
    """See ``Index.files``. A listing with a limit (a client's) runs under the deadline,
    by root and path (``newest``: the most recently modified first); without one
    (search by meaning's), in no particular order."""
    cond, params = files_sql(replace(filters, path=PathFilter.parse(path_filter)))
    base = f"FROM files f WHERE f.skip_reason IS NULL AND {cond}"
    columns = "f.path, f.root, f.relpath, f.size, f.mtime_ns, f.id, f.indexed_at"
    if limit is None:
        rows = conn.execute(f"SELECT {columns} {base}", params).fetchall()
        return Listing([Indexed(*row) for row in rows], len(rows))
    Deadline(conn, QUERY_DEADLINE_SECONDS)
    try:
        rows = conn.execute(
            f"SELECT {columns} {base}"
            f" ORDER BY {'f.mtime_ns DESC, ' if newest else ''}f.root, f.relpath LIMIT ?",
            [*params, limit],
        ).fetchall()
        total = conn.execute(f"SELECT count(*) {base}", params).fetchone()[0]
    except sqlite.OperationalError as exc:
        if is_damage(exc):
            raise
        if "interrupted" in str(exc):
            raise BadQuery("listing the files took too long; narrow the glob") from None
        raise BadQuery(f"bad glob: {exc}") from None
    return Listing([Indexed(*row) for row in rows], total)


def state(conn: sqlite.Connection, path: str, *, under: bool = False) -> FileState | None:
    """(skip_reason, skip_detail) of a known file, or None when the index has no row;
    ``under``: of the first file at or under ``path`` as a directory ('0' sorts right
    after '/')."""
    if under:
        sql = "SELECT skip_reason, skip_detail FROM files WHERE path = ? OR (path > ? AND path < ?)"
        row = conn.execute(sql + " LIMIT 1", (path, path + "/", path + "0")).fetchone()
    else:
        sql = "SELECT skip_reason, skip_detail FROM files WHERE path = ?"
        row = conn.execute(sql, (path,)).fetchone()
    return None if row is None else (row[0], row[1])


def counts(conn: sqlite.Connection) -> Counts:
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
    return Counts(indexed, skipped, per_root)
