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

from kbindex.daemon import tokens
from kbindex.daemon.query import BadQuery, Compiled
from kbindex.proto.messages import FileInfo, Hit

OPEN: Final = "\x01"
CLOSE: Final = "\x02"
ELLIPSIS: Final = "…"
SNIPPET_TOKENS: Final = 24
SNIPPET_MAX_CHARS: Final = 400
QUERY_DEADLINE_SECONDS: Final = 5.0
BM25_WEIGHTS: Final = (2.0, 3.0, 1.0, 0.5, 1.0)
"""name (relative path), title, body, subwords, grams: see ``documents.COLUMNS``."""
MAX_PASSAGE_MATCHES: Final = 2000
"""How many needle occurrences a passage search looks at before it settles."""
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
    conn: sqlite3.Connection,
    compiled: Compiled,
    limit: int,
    path_filter: str | None,
    weights: tuple[float, ...] = BM25_WEIGHTS,
) -> SearchResult:
    if compiled.match is None:
        return SearchResult([], 0, compiled.mode)
    Deadline(conn, QUERY_DEADLINE_SECONDS)
    query = _Query(compiled.table, limit, path_filter, compiled.terms, weights)
    hits, total = query.run(conn, compiled.match)
    mode = compiled.mode
    if total == 0 and compiled.fallback is not None:
        hits, total = query.run(conn, compiled.fallback)
        mode = "any"
    return SearchResult(hits, total, mode)


@dataclass(frozen=True, slots=True)
class _Query:
    table: str
    limit: int
    path_filter: str | None
    needles: tuple[str, ...]
    weights: tuple[float, ...]

    @property
    def unsegmented(self) -> bool:
        return any(tokens.has_unsegmented(n) for n in self.needles)

    def run(self, conn: sqlite3.Connection, match: str) -> tuple[list[Hit], int]:
        table = self.table
        cond, params = path_condition(self.path_filter)
        ranking = f"bm25({', '.join(str(w) for w in self.weights)})"
        # Trigger: ORDER BY rank, not ORDER BY bm25(...). Why: FTS5 then sorts the
        # matches itself and the SELECT list (snippet(), the body) is computed only for
        # the rows returned; with ORDER BY an expression SQLite computes it for every
        # match before sorting, 2-3x slower on a question that matches thousands.
        sql = f"""
            SELECT f.path, f.root, f.relpath, f.size, f.mtime_ns, d.title, d.body, d.rank,
                   snippet({table}, 2, '{OPEN}', '{CLOSE}', '{ELLIPSIS}', {SNIPPET_TOKENS})
            FROM {table} d JOIN files f ON f.id = d.rowid
            WHERE {table} MATCH ? AND d.rank MATCH ? AND {cond}
            ORDER BY d.rank LIMIT ?
        """
        try:
            rows = conn.execute(sql, [match, ranking, *params, self.limit]).fetchall()
            if len(rows) < self.limit:
                total = len(rows)
            else:
                total = conn.execute(
                    f"SELECT count(*) FROM {table} d JOIN files f ON f.id = d.rowid"
                    f" WHERE {table} MATCH ? AND {cond}",
                    [match, *params],
                ).fetchone()[0]
        except sqlite3.OperationalError as exc:
            message = str(exc)
            if "interrupted" in message:
                raise BadQuery("the query took too long; make it more specific") from None
            raise BadQuery(f"query error: {message.removeprefix('fts5: ')}") from None
        hits = []
        for path, root, relpath, size, mtime_ns, title, body, score, fragment in rows:
            snippet, line = self._snippet(body, fragment)
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

    def _snippet(self, body: str, fragment: str) -> tuple[str, int]:
        """The passage to show and its line number (1-based).

        FTS5's snippet() picks the body fragment with the most matched phrases and knows
        stemming, so it is used when it highlights anything. It highlights nothing when
        the match was elsewhere: in a camelCase part or a CJK bigram (derived columns),
        or only in the name or title; and for CJK it would mark a whole run of text
        (one unicode61 token). Then the passage is the body line holding the most
        distinct query words, found by a case-insensitive search.
        """
        if OPEN in fragment and not self.unsegmented:
            return _clean(fragment), _fragment_line(body, fragment)
        passage = _passage(body, self.needles)
        if passage is not None:
            return passage
        if OPEN in fragment:
            return _clean(fragment), _fragment_line(body, fragment)
        return _clean(body[: SNIPPET_MAX_CHARS * 2].replace(OPEN, "").replace(CLOSE, "")), 1


def _fragment_line(body: str, fragment: str) -> int:
    """Line number of the first highlighted term of an FTS5 fragment within ``body``."""
    mark = fragment.find(OPEN)
    plain = fragment.replace(OPEN, "").replace(CLOSE, "")
    lead = len(ELLIPSIS) if plain.startswith(ELLIPSIS) else 0
    core = plain[lead:].removesuffix(ELLIPSIS)
    at = body.find(core)
    return body.count("\n", 0, at + mark - lead) + 1 if at != -1 else 1


def _needle_pattern(needles: tuple[str, ...]) -> re.Pattern[str] | None:
    if not needles:
        return None
    ordered = sorted(needles, key=len, reverse=True)  # the longest spelling wins
    return re.compile("|".join(re.escape(n) for n in ordered), re.IGNORECASE)


def _passage(body: str, needles: tuple[str, ...]) -> tuple[str, int] | None:
    """(snippet, line) of the line with the most distinct needles, the first such line;
    None when no needle occurs in ``body``."""
    pattern = _needle_pattern(needles)
    if pattern is None:
        return None
    per_line: dict[int, set[str]] = {}
    for n, found in enumerate(pattern.finditer(body)):
        if n >= MAX_PASSAGE_MATCHES:
            break
        start = body.rfind("\n", 0, found.start()) + 1
        per_line.setdefault(start, set()).add(found.group().lower())
    if not per_line:
        return None
    start = min(per_line, key=lambda s: (-len(per_line[s]), s))
    end = body.find("\n", start)
    line_text = body[start : end if end != -1 else len(body)]
    first = pattern.search(line_text)
    centre = first.start() if first else 0
    window = _window(line_text, centre).replace(OPEN, "").replace(CLOSE, "")
    marked = pattern.sub(lambda m: OPEN + m.group() + CLOSE, window)
    return _clean(marked), body.count("\n", 0, start) + 1


def _window(text: str, centre: int) -> str:
    """At most SNIPPET_MAX_CHARS of ``text`` around ``centre``, cut at spaces when it can."""
    if len(text) <= SNIPPET_MAX_CHARS:
        return text
    begin = max(0, min(centre - SNIPPET_MAX_CHARS // 3, len(text) - SNIPPET_MAX_CHARS))
    end = begin + SNIPPET_MAX_CHARS
    if begin > 0:
        space = text.find(" ", begin, begin + 40)
        begin = space + 1 if space != -1 and space < centre else begin
    if end < len(text):
        space = text.rfind(" ", end - 40, end)
        end = space if space > centre else end
    return (ELLIPSIS if begin > 0 else "") + text[begin:end] + (ELLIPSIS if end < len(text) else "")


def _clean(snippet: str) -> str:
    """One line, at most about SNIPPET_MAX_CHARS, keeping the first highlight in view."""
    text = _SPACE.sub(" ", snippet).strip()
    if len(text) > SNIPPET_MAX_CHARS:
        mark = text.find(OPEN)
        text = _balance(_window(text, max(mark, 0)))
    # Adjacent highlights (parse|Http|Request) read better as one.
    return text.replace(CLOSE + OPEN, "").replace(OPEN, "**").replace(CLOSE, "**")


def _balance(text: str) -> str:
    """Mend the markers a cut split: drop a leading stray close, close a trailing open."""
    first_close, first_open = text.find(CLOSE), text.find(OPEN)
    if first_close != -1 and (first_open == -1 or first_close < first_open):
        text = text[:first_close] + text[first_close + 1 :]
    return text + CLOSE if text.rfind(OPEN) > text.rfind(CLOSE) else text


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
