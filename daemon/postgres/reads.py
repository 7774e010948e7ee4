"""The read side of the shared index: search, listings, counts, grep's candidates.

Searches see every machine's documents; what is about files on this machine's disk
(a file's state, grep's candidates, which ``rg`` reads) is limited to its own rows.
Each function runs on a read-only connection whose statements the server cancels
past ``connections.STATEMENT_TIMEOUT_MS``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Final

import psycopg
from kbindex.daemon.postgres import tsquery
from kbindex.daemon.postgres.connections import Connection
from kbindex.daemon.searching import passages, trigrams
from kbindex.daemon.searching.grep import PENDING_PATHS, Candidates, TooSlow
from kbindex.daemon.searching.query import BadQuery, Compiled
from kbindex.daemon.storage.index import Counts, Embeddable, File, Hit, SearchResult, Stored

WEIGHTS: Final = "'{0.1667, 0.3333, 0.6667, 1.0}'"
"""``ts_rank_cd`` weights of D (derived words), C (body), B (path) and A (title): the
ratios of SQLite's bm25 column weights (``searcher.BM25_WEIGHTS``)."""
RANK: Final = f"ts_rank_cd({WEIGHTS}, d.words, q.r, 1)"
_GLOB_CHARS: Final = frozenset("*?[")
_FILE_COLUMNS: Final = "f.path, f.root, f.relpath, f.size, f.mtime_ns, f.machine"


def path_condition(path_filter: str | None) -> tuple[str, list[object]]:
    """As ``searcher.path_condition`` (globs, where ``*`` also crosses ``/``, or a
    prefix; relative to the roots, or absolute), as a POSIX regular expression."""
    if not path_filter:
        return "true", []
    raw = path_filter.strip()
    absolute = raw.startswith("/")
    column = "f.path" if absolute else "f.relpath"
    if not absolute:
        raw = raw.removeprefix("./")
    if _GLOB_CHARS & set(raw):
        glob = raw.replace("**/", "*").replace("/**", "/*")
        return f"{column} ~ %s", [_glob_regex(glob)]
    stem = raw.rstrip("/")
    if not stem:
        return "true", []
    return f"({column} = %s OR starts_with({column}, %s))", [stem, stem + "/"]


def _glob_regex(glob: str) -> str:
    """SQLite's GLOB as a regular expression: ``*``, ``?``, ``[...]`` and ``[^...]``."""
    out, i = ["^"], 0
    while i < len(glob):
        ch = glob[i]
        if ch == "*":
            out.append(".*")
        elif ch == "?":
            out.append(".")
        elif ch == "[" and (end := glob.find("]", i + 2)) != -1:
            inner = glob[i + 1 : end]
            negated = inner.startswith("^")
            inner = inner[1:] if negated else inner
            out.append("[" + ("^" if negated else "") + inner.replace("\\", "\\\\") + "]")
            i = end
        else:
            out.append(re.escape(ch))
        i += 1
    return "".join(out) + "$"


def search(
    conn: Connection, compiled: Compiled, limit: int, path_filter: str | None, ids_only: bool
) -> tuple[list[Any], int, str]:
    plan = tsquery.plan(compiled)
    if plan.main is None:
        return [], 0, plan.mode
    try:
        with conn.transaction():  # one snapshot for the ranking, the count and the text
            rows = _ranked(conn, plan.main, limit, path_filter, ids_only)
            mode = plan.mode
            if not rows and plan.fallback is not None:
                rows, mode = _ranked(conn, plan.fallback, limit, path_filter, ids_only), "any"
    except psycopg.errors.QueryCanceled:
        raise BadQuery("the query took too long; make it more specific") from None
    total = int(rows[0][-1]) if rows else 0
    return [row[:-1] for row in rows], total, mode


def _ranked(
    conn: Connection, expr: tsquery.Expr, limit: int, path_filter: str | None, ids_only: bool
) -> list[Any]:
    columns, params, where = tsquery.condition(expr)
    cond, path_params = path_condition(path_filter)
    best = f"""
        SELECT d.id, {RANK} AS score, count(*) OVER () AS total
        FROM q, kb_docs d JOIN kb_files f ON f.id = d.id
        WHERE {where} AND {cond}
        ORDER BY score DESC, d.id LIMIT %s
    """
    head = f"WITH q AS MATERIALIZED (SELECT {columns})"
    args = [*params, *path_params, limit]
    if ids_only:
        sql = f"{head} SELECT s.id, s.score, s.total FROM ({best}) s ORDER BY s.score DESC, s.id"
    else:
        sql = f"""{head}
            SELECT s.id, {_FILE_COLUMNS}, d.title, d.body, s.score, s.total
            FROM ({best}) s JOIN kb_docs d ON d.id = s.id JOIN kb_files f ON f.id = s.id
            ORDER BY s.score DESC, s.id
        """
    return conn.execute(sql, args).fetchall()


def hits(rows: list[Any], needles: tuple[str, ...]) -> list[Hit]:
    found = []
    for _id, path, root, relpath, size, mtime_ns, machine, title, body, score in rows:
        snippet, line = passages.best_passage(body, needles) or (passages.head(body), 1)
        found.append(
            Hit(path, root, relpath, size, mtime_ns, title, round(score, 4), snippet, line,
                machine=machine)
        )  # fmt: skip
    return found


def search_result(
    conn: Connection, compiled: Compiled, limit: int, path: str | None
) -> SearchResult:
    rows, total, mode = search(conn, compiled, limit, path, False)
    return SearchResult(hits(rows, compiled.terms), total, mode)


def find_files(conn: Connection, glob: str, limit: int) -> tuple[list[File], int]:
    cond, params = path_condition(glob or "*")
    base = f"FROM kb_files f WHERE f.skip_reason IS NULL AND {cond}"
    try:
        with conn.transaction():
            rows = conn.execute(
                f"SELECT {_FILE_COLUMNS} {base} ORDER BY f.root, f.relpath, f.machine LIMIT %s",
                [*params, limit],
            ).fetchall()
            total = conn.execute(f"SELECT count(*) {base}", params).fetchone()
    except psycopg.errors.QueryCanceled:
        raise BadQuery("listing the files took too long; narrow the glob") from None
    except psycopg.errors.InvalidRegularExpression as exc:
        raise BadQuery(f"bad glob: {exc}") from None
    files = [File(*row[:5], machine=row[5]) for row in rows]
    return files, int(total[0]) if total else 0


def file_state(conn: Connection, machine: str, path: str) -> tuple[str | None, str | None] | None:
    row = conn.execute(
        "SELECT skip_reason, skip_detail FROM kb_files WHERE machine = %s AND path = %s",
        (machine, path),
    ).fetchone()
    return None if row is None else (_text(row[0]), _text(row[1]))


def holds(conn: Connection, machine: str, path: str) -> bool:
    row = conn.execute(
        "SELECT 1 FROM kb_files WHERE machine = %s AND (path = %s OR starts_with(path, %s))"
        " LIMIT 1",
        (machine, path, path + "/"),
    ).fetchone()
    return row is not None


def counts(conn: Connection, machine: str) -> Counts:
    indexed = 0
    skipped: dict[str, int] = {}
    per_root: dict[str, int] = {}
    per_machine: dict[str, int] = {}
    rows = conn.execute(
        "SELECT machine, root, skip_reason, count(*) FROM kb_files GROUP BY 1, 2, 3"
    ).fetchall()
    for host, root, reason, n in rows:
        if reason is not None:
            if host == machine:
                skipped[str(reason)] = skipped.get(str(reason), 0) + int(n)
            continue
        indexed += int(n)
        per_machine[str(host)] = per_machine.get(str(host), 0) + int(n)
        if host == machine:
            per_root[str(root)] = int(n)
    return Counts(indexed, skipped, per_root, per_machine)


def grep_candidates(
    conn: Connection,
    machine: str,
    query: trigrams.Query,
    path_filter: str | None,
    pending: Sequence[str],
    new: Sequence[tuple[str, str]],
) -> Candidates:
    """As ``grep.candidates``, from this machine's rows (``rg`` reads the local files).
    The phrase prefilter of SQLite (``phrases``) is left out: it only narrows."""
    cond, params = path_condition(path_filter)
    narrowed = len(pending) <= PENDING_PATHS
    match = _trigram_query(query) if narrowed else None
    indexed = f"f.machine = %s AND f.skip_reason IS NULL AND {cond}"
    try:
        with conn.transaction():
            if match is None:
                sql = f"SELECT f.path, f.size FROM kb_files f WHERE {indexed}"
                rows = conn.execute(sql, [machine, *params]).fetchall()
            else:
                sql = (
                    "SELECT f.path, f.size FROM kb_docs d JOIN kb_files f ON f.id = d.id"
                    f" WHERE d.grams @@ %s::tsquery AND {indexed}"
                )
                rows = conn.execute(sql, [match, machine, *params]).fetchall()
                for p in pending:
                    rows += conn.execute(
                        "SELECT f.path, f.size FROM kb_files f WHERE (f.path = %s OR"
                        f" starts_with(f.path, %s)) AND {indexed}",
                        [p, p + "/", machine, *params],
                    ).fetchall()
            if new:
                rows += conn.execute(
                    "SELECT f.path, 0 FROM unnest(%s::text[], %s::text[]) AS f(path, relpath)"
                    f" WHERE {cond}",
                    [[p for p, _ in new], [r for _, r in new], *params],
                ).fetchall()
    except psycopg.errors.QueryCanceled:
        raise TooSlow("finding the candidate files took too long; narrow the path") from None
    sizes = {str(path): int(size) for path, size in rows}
    return Candidates.of(sizes, scanned_all=match is None)


def _trigram_query(query: trigrams.Query) -> str | None:
    """A trigram query as ``tsquery`` text (the trigrams are hex words: nothing to quote)."""
    if query is None:
        return None
    if isinstance(query, str):
        return f"'{query}'"
    glue = " & " if isinstance(query, trigrams.And) else " | "
    return "(" + glue.join(sorted(_trigram_query(p) or "" for p in query.parts)) + ")"


def stored(conn: Connection, ids: Sequence[int]) -> list[Stored]:
    rows = conn.execute(
        f"SELECT f.id, {_FILE_COLUMNS}, d.title, d.body"
        " FROM kb_files f JOIN kb_docs d ON d.id = f.id WHERE f.id = ANY(%s)",
        (list(ids),),
    ).fetchall()
    return [Stored(int(r[0]), File(*r[1:6], machine=r[6]), str(r[7]), str(r[8])) for r in rows]


def allowed(conn: Connection, path_filter: str) -> list[int]:
    cond, params = path_condition(path_filter)
    rows = conn.execute(
        f"SELECT f.id FROM kb_files f WHERE f.skip_reason IS NULL AND {cond} ORDER BY 1",
        params,
    ).fetchall()
    return [int(i) for (i,) in rows]


def embeddable(conn: Connection) -> list[Embeddable]:
    rows = conn.execute(
        "SELECT id, indexed_at, root, size FROM kb_files WHERE skip_reason IS NULL"
    ).fetchall()
    return [Embeddable(*row) for row in rows]


def _text(value: object) -> str | None:
    return None if value is None else str(value)
