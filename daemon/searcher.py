"""The read side of the index: search, file listing, reading a file, counts.

Everything here runs on a read-only connection from the store's pool, in a worker
thread, under a deadline: a progress handler interrupts any statement that runs past
it, so a pathological query costs its caller a clear error, not the daemon its time.
"""

from __future__ import annotations

import re
import sqlite3
import time
from dataclasses import dataclass
from typing import Final

from kbindex.daemon.query import BadQuery, Compiled
from kbindex.proto.messages import FileInfo, Hit

OPEN: Final = "\x01"
CLOSE: Final = "\x02"
ELLIPSIS: Final = "…"
SNIPPET_TOKENS: Final = 24
SNIPPET_MAX_CHARS: Final = 400
QUERY_DEADLINE_SECONDS: Final = 5.0
BM25_WEIGHTS: Final = (2.0, 3.0, 1.0)
"""name (relative path), title, body."""
_SPACE = re.compile(r"\s+")
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
    conn: sqlite3.Connection, compiled: Compiled, limit: int, path_filter: str | None
) -> SearchResult:
    if compiled.match is None:
        return SearchResult([], 0, compiled.mode)
    Deadline(conn, QUERY_DEADLINE_SECONDS)
    hits, total = _run(conn, compiled.match, limit, path_filter, compiled.terms)
    mode = compiled.mode
    if total == 0 and compiled.fallback is not None:
        hits, total = _run(conn, compiled.fallback, limit, path_filter, compiled.terms)
        mode = "any"
    return SearchResult(hits, total, mode)


def _run(
    conn: sqlite3.Connection,
    match: str,
    limit: int,
    path_filter: str | None,
    terms: tuple[str, ...],
) -> tuple[list[Hit], int]:
    cond, params = path_condition(path_filter)
    w_name, w_title, w_body = BM25_WEIGHTS
    sql = f"""
        SELECT f.path, f.root, f.relpath, f.size, f.mtime_ns, d.title, d.body,
               bm25(docs, {w_name}, {w_title}, {w_body}) AS score,
               snippet(docs, 2, '{OPEN}', '{CLOSE}', '{ELLIPSIS}', {SNIPPET_TOKENS})
        FROM docs d JOIN files f ON f.id = d.rowid
        WHERE docs MATCH ? AND {cond}
        ORDER BY score LIMIT ?
    """
    try:
        rows = conn.execute(sql, [match, *params, limit]).fetchall()
        if len(rows) < limit:
            total = len(rows)
        else:
            total = conn.execute(
                f"SELECT count(*) FROM docs d JOIN files f ON f.id = d.rowid"
                f" WHERE docs MATCH ? AND {cond}",
                [match, *params],
            ).fetchone()[0]
    except sqlite3.OperationalError as exc:
        message = str(exc)
        if "interrupted" in message:
            raise BadQuery("the query took too long; make it more specific") from None
        raise BadQuery(f"query error: {message.removeprefix('fts5: ')}") from None
    hits = [
        Hit(
            path=path,
            root=root,
            relpath=relpath,
            score=round(-score, 4),
            snippet=_clean(snippet) if OPEN in snippet else _lead(body),
            line=_best_line(body, snippet, terms),
            size=size,
            last_modified=mtime_ns / 1e9,
            title=title,
        )
        for path, root, relpath, size, mtime_ns, title, body, score, snippet in rows
    ]
    return hits, total


def _best_line(body: str, snippet: str, terms: tuple[str, ...]) -> int:
    """Line number of the first highlighted term of the snippet within ``body``."""
    mark = snippet.find(OPEN)
    if mark != -1:
        plain = snippet.replace(OPEN, "").replace(CLOSE, "")
        lead = len(ELLIPSIS) if plain.startswith(ELLIPSIS) else 0
        core = plain[lead:].removesuffix(ELLIPSIS)
        at = body.find(core)
        if at != -1:
            return body.count("\n", 0, at + mark - lead) + 1
    lowered = body.lower()
    positions = [p for t in terms if (p := lowered.find(t.lower())) != -1]
    return body.count("\n", 0, min(positions)) + 1 if positions else 1


def _clean(snippet: str) -> str:
    text = _SPACE.sub(" ", snippet).strip()
    if len(text) > SNIPPET_MAX_CHARS:
        text = text[:SNIPPET_MAX_CHARS].rstrip() + ELLIPSIS
    return text.replace(OPEN, "**").replace(CLOSE, "**")


def _lead(body: str) -> str:
    return _clean(body[: SNIPPET_MAX_CHARS * 2].replace(OPEN, "").replace(CLOSE, ""))


def find_files(conn: sqlite3.Connection, glob: str, limit: int) -> tuple[list[FileInfo], int]:
    cond, params = path_condition(glob or "*")
    Deadline(conn, QUERY_DEADLINE_SECONDS)
    base = f"FROM files f WHERE f.skip_reason IS NULL AND {cond}"
    rows = conn.execute(
        f"SELECT f.path, f.root, f.relpath, f.size, f.mtime_ns {base}"
        " ORDER BY f.root, f.relpath LIMIT ?",
        [*params, limit],
    ).fetchall()
    total = conn.execute(f"SELECT count(*) {base}", params).fetchone()[0]
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
