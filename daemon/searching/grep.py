"""grep: the files the trigram index cannot rule out, read by ripgrep.

1. ``trigrams.required`` turns the pattern into a trigram query, and for a literal
   ``phrases.required`` into phrases of its whole words; ``candidates`` asks
   ``docs_grams`` and ``docs`` for the indexed files that satisfy both (only the
   phrases when they admit a few files), within the path filter (in the query, never
   after a limit), plus every file with a change still pending, so an answer is never
   staler than the files. A pattern with neither reads every indexed file
   (``scanned_all``), mostly by a walk of the roots (``sweep``).
2. ``Grepper.run`` hands the candidates, in ripgrep's path order, to ripgrep: a few
   MB of them to one process; more in chunks (small first, so that a pattern matching
   everywhere answers from the first few files), two processes at a time. Once
   ``limit`` lines are in hand, later chunks only count (``--count``), so totals stay
   exact without reading every line back (unless ``--count`` would count otherwise:
   ``Flags.countable``).
3. A deadline and a cap on one chunk's output bound the work: past either, the reply
   says it is incomplete and its total a lower bound.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from subprocess import DEVNULL, PIPE
from typing import Final

from kbindex.daemon.indexing.documents import GRAMS, STEMMED, as_json
from kbindex.daemon.indexing.grams import NUL_MARK
from kbindex.daemon.indexing.ignore import IgnoreRules
from kbindex.daemon.indexing.textfile import RETRY_MTIME_NS, display_path, real_path
from kbindex.daemon.searching import phrases, ripgrep, trigrams
from kbindex.daemon.searching.searcher import QUERY_DEADLINE_SECONDS, Deadline, path_condition
from kbindex.daemon.storage.database import is_damage
from kbindex.daemon.storage.engine import sqlite
from kbindex.daemon.watching.changes import Changes
from kbindex.proto.messages import GREP_LINE_CHARS

DEADLINE_SECONDS: Final = 10.0
CHUNK_FILES: Final = (16, 64, 256, 1024, 4096)
"""Files per ripgrep run, growing; the last size repeats."""
ONE_RUN_BYTES: Final = 16 << 20
"""Candidates of at most this many bytes are read by one ripgrep process."""
CHUNK_ARGV_BYTES: Final = 512 << 10
"""Bytes of file names per run, at most (Linux allows 2 MB of arguments in all)."""
CHUNK_OUTPUT_BYTES: Final = 16 << 20
"""Output of one run read, at most: a pattern like ``.`` prints the whole corpus."""
PROCESSES: Final = 4
"""ripgrep processes running at once, over all greps (each uses one thread)."""
_CUT: Final = "\u2026"


class BadPattern(Exception):
    """ripgrep refused the pattern; the message says why and where."""


class TooSlow(Exception):
    """The candidate query ran past its deadline."""


@dataclass(frozen=True, slots=True)
class Line:
    path: str
    line: int
    text: str
    match: bool
    column: int


@dataclass(slots=True)
class Outcome:
    lines: list[Line] = field(default_factory=list)
    total: int = 0
    files: int = 0
    truncated: bool = False
    complete: bool = True
    candidates: int = 0
    scanned_all: bool = False


@dataclass(frozen=True, slots=True)
class Candidates:
    paths: list[str]
    """Display paths (``textfile.display_path``), sorted folder by folder."""
    scanned_all: bool
    size: int = 0
    """Their bytes, as last indexed (new files count nothing)."""
    uncounted: list[str] | None = None
    """Of ``scanned_all`` candidates, those a walk's counts may leave out (``sweep``):
    a NUL in the text, a change not indexed yet, a new file. None: not known."""

    @classmethod
    def of(
        cls, sizes: dict[str, int], *, scanned_all: bool, uncounted: list[str] | None = None
    ) -> Candidates:
        """The files of ``sizes`` (path: bytes) in ripgrep's order."""
        ordered = sorted(sizes, key=order)
        return cls(ordered, scanned_all, sum(sizes.values()), uncounted)


def order(path: str) -> str:
    """A display path's sort key in ripgrep's order."""
    # Folder by folder, as ripgrep sorts paths: dma/ before dma-buf/ (whole strings
    # would put '-' before '/'). '/' as NUL, which sorts below any character a name
    # holds, gives that order by plain string comparison (lists of parts are slower).
    return path.replace("/", "\0")


TRIGRAMS_BESIDE_WORDS: Final = 6
"""Trigrams asked of a literal whose words are asked too (``trigrams.spread``)."""


def required(
    pattern: str, *, fixed: bool, ignore_case: bool, word: bool
) -> tuple[trigrams.Query, phrases.Words | None]:
    """What every file with a match holds: trigrams, and a literal's words in a row
    (``phrases``). The words narrow the files as much as the trigrams within them, so
    beside them a few trigrams are asked (the literal's edges, and files ``unless``
    admits whatever their words)."""
    query = trigrams.required(pattern, fixed=fixed, ignore_case=ignore_case)
    words = phrases.required(pattern, fixed=fixed, word=word, ignore_case=ignore_case)
    if words is not None:
        query = trigrams.spread(query, pattern, TRIGRAMS_BESIDE_WORDS)
    return query, words


PENDING_PATHS: Final = 1000
"""Pending changes looked up one by one, at most; past it (a checkout in progress)
grep reads every file."""
FEW_FILES: Final = 256
"""A phrase that admits at most this many files is not narrowed by the trigrams."""


def candidates(
    conn: sqlite.Connection,
    query: trigrams.Query,
    path_filter: str | None,
    pending: Sequence[str],
    new: Sequence[tuple[str, str]],
    words: phrases.Words | None = None,
) -> Candidates:
    """The indexed files that may hold a match (in the reader thread): those the
    trigram index and the phrases of ``words`` admit, those under a ``pending`` path (a
    changed file, directory or root whose text may differ from the index), and ``new``
    files (path, relpath) not indexed yet; all within ``path_filter``. When every
    indexed file is one, also those a walk's counts may leave out (``uncounted``)."""
    cond, path_params = path_condition(path_filter)
    narrowed = len(pending) <= PENDING_PATHS
    match = trigrams.match_expression(query) if narrowed else None
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
            if narrowed:
                uncounted = [p for (p,) in conn.execute(_UNCOUNTED + indexed, path_params)]
                for p in pending:
                    uncounted += [
                        r[0] for r in conn.execute(under, [p, p + "/", p + "0", *path_params])
                    ]
        else:
            # Driven from the trigram table: a selective pattern admits a few rowids.
            sql = (
                f"SELECT f.path, f.size FROM {GRAMS} g CROSS JOIN files f ON f.id = g.rowid"
                f" WHERE {GRAMS} MATCH ? AND {indexed}"
            )
            rows = conn.execute(sql, [match, *path_params]).fetchall()
        if match is not None or words is not None:
            for p in pending:
                rows += conn.execute(under, [p, p + "/", p + "0", *path_params]).fetchall()
        fresh = conn.execute(
            "SELECT f.path, 0 FROM (SELECT value->>0 AS path, value->>1 AS relpath"
            f" FROM json_each(?)) f WHERE {cond}",
            [as_json(new), *path_params],
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


_UNCOUNTED: Final = (
    f"SELECT f.path FROM files f WHERE (f.mtime_ns = {RETRY_MTIME_NS} OR f.id IN"
    f" (SELECT rowid FROM {GRAMS} WHERE {GRAMS} MATCH '{NUL_MARK}')) AND "
)
"""Indexed files whose text holds a NUL, or that wait to be read again (after an
upgrade, files not marked yet: ``schema``, v9)."""


def _by_words(
    conn: sqlite.Connection,
    words: phrases.Words,
    match: str | None,
    indexed: str,
    params: list[object],
) -> list[tuple[str, int]]:
    """The indexed files holding the phrases of ``words``, narrowed by the trigrams
    ``match`` unless the phrases alone admit FEW_FILES or fewer (then the trigram query
    costs more than ripgrep takes to read the few files it would rule out:
    ``bench/README.md``, session 17), plus the files ``words.unless`` admits that
    ``match`` does too."""
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


def pending(changes: Changes | None, rules: IgnoreRules) -> tuple[list[str], list[tuple[str, str]]]:
    """Paths with changes not indexed yet, and of them the files that exist and the
    rules admit (path, relpath), at most PENDING_PATHS checked: grep reads them whatever
    the index says (past the bound, ``candidates`` reads every file anyway)."""
    found = changes.pending() if changes else []
    new: list[tuple[str, str]] = []
    for root, path in found[:PENDING_PATHS]:
        ruled_out = path == root or not os.path.isfile(path)
        if not ruled_out and rules.explain(root, path) is None:
            new.append((path, path[len(root) + 1 :]))
    return [p for _, p in found], new


def _chunks(paths: list[str], first: int) -> Iterator[list[str]]:
    sizes = iter(CHUNK_FILES[1:])
    size = first
    chunk: list[str] = []
    argv_bytes = 0
    for path in paths:
        chunk.append(path)
        argv_bytes += len(path) + 1
        if len(chunk) >= size or argv_bytes >= CHUNK_ARGV_BYTES:
            yield chunk
            chunk, argv_bytes = [], 0
            size = max(next(sizes, size), size)  # growing, never below ``first``
    if chunk:
        yield chunk


@dataclass(frozen=True, slots=True)
class _Run:
    out: bytes
    err: bytes
    code: int
    cut: bool
    counts: bool
    records: list[ripgrep.Record] | None = None
    """Already read (``Grepper._word_lines``); else ``out`` is read by ``_take``."""


class Grepper:
    """Runs greps; bounds the ripgrep processes of all of them together."""

    def __init__(self, rg: str | None = None) -> None:
        self._rg = rg
        self._slots = asyncio.Semaphore(PROCESSES)

    @property
    def rg(self) -> str:
        if self._rg is None:
            self._rg = ripgrep.find()
        return self._rg

    async def run(
        self,
        flags: ripgrep.Flags,
        found: Candidates,
        limit: int,
        deadline: float = DEADLINE_SECONDS,
    ) -> Outcome:
        check_pattern(flags.pattern)
        rg = self.rg
        outcome = Outcome(candidates=len(found.paths), scanned_all=found.scanned_all)
        if not found.paths:
            await self._validate(rg, flags)
            return outcome
        kept = 0
        loop = asyncio.get_running_loop()
        give_up = loop.time() + deadline
        # A selective pattern's few candidates go to one process: each costs ~4 ms to
        # start, and there is no early answer to gain from a small chunk first.
        one = not found.scanned_all and found.size <= ONE_RUN_BYTES
        chunks = _chunks(found.paths, first=len(found.paths) if one else CHUNK_FILES[0])
        ahead: asyncio.Task[_Run] | None = None
        try:
            ahead = self._start(rg, flags, next(chunks), counts=False)
            while ahead is not None:
                following = next(chunks, None)
                current = ahead
                # One run ahead: ripgrep reads the next files while this answer is read.
                ahead = (
                    None
                    if following is None
                    else self._start(rg, flags, following, counts=kept >= limit and flags.countable)
                )
                timeout = give_up - loop.time()
                run = await asyncio.wait_for(current, timeout=max(timeout, 0.001))
                if run.code == 2 and run.err:
                    raise BadPattern(ripgrep.error_message(run.err, flags.pattern))
                kept = self._take(outcome, flags, run, limit, kept)
                if run.cut:
                    outcome.complete = False
                    break
        except TimeoutError:
            outcome.complete = False
        finally:
            if ahead is not None:
                ahead.cancel()
        if flags.before or flags.after:
            outcome.lines = _with_context(outcome.lines, flags.before, flags.after)
        return outcome

    def _start(
        self, rg: str, flags: ripgrep.Flags, paths: list[str], *, counts: bool
    ) -> asyncio.Task[_Run]:
        names = [os.fsencode(real_path(p)) for p in paths]
        if flags.word_literal and not counts and not flags.files_only:
            return asyncio.ensure_future(self._word_lines(rg, flags, names))
        argv: list[str | bytes] = [*flags.argv(rg, count=counts), *names]
        return asyncio.ensure_future(self.spawn(argv, counts))

    async def _word_lines(self, rg: str, flags: ripgrep.Flags, names: list[bytes]) -> _Run:
        """The lines of a ``word_literal`` pattern: found between ``\\b``, and the files
        where that may differ from ``-w`` searched again with it (see ``ripgrep``)."""
        run = await self.spawn([*flags.argv(rg, word_literal=True), *names], counts=False)
        records = ripgrep.parse(run.out)
        unsure = ripgrep.unsure(records)
        if not unsure:
            return _Run(b"", run.err, run.code, run.cut, False, records)
        ordered = sorted(unsure, key=_parts)
        again = await self.spawn([*flags.argv(rg), *ordered], counts=False)
        redone = ripgrep.parse(again.out)
        records = [r for r in records if r.path not in unsure]
        if again.cut:
            # The answer stays a prefix in path order: nothing past the file it stopped in.
            edge = _parts(redone[-1].path if redone else ordered[0])
            records = [r for r in records if _parts(r.path) < edge]
        return _Run(b"", again.err, again.code, run.cut or again.cut, False, records + redone)

    async def spawn(
        self,
        argv: list[str | bytes],
        counts: bool,
        until: float | None = None,
        take: Callable[[bytes], None] | None = None,
    ) -> _Run:
        """Runs ripgrep and reads its output, at most CHUNK_OUTPUT_BYTES (none when
        ``take`` reads each block as it comes) and, given ``until`` (a time of the
        running loop), until then: past either it is stopped, and what it printed is
        kept (``cut``)."""
        loop = asyncio.get_running_loop()
        async with self._slots:
            proc = await asyncio.create_subprocess_exec(
                *argv, stdin=DEVNULL, stdout=PIPE, stderr=PIPE
            )
            assert proc.stdout is not None
            assert proc.stderr is not None
            out = bytearray()
            cut = False
            try:
                while not cut:
                    read = proc.stdout.read(1 << 16)
                    try:
                        block = await (
                            read if until is None else asyncio.wait_for(read, until - loop.time())
                        )
                    except TimeoutError:
                        cut = True
                        break
                    if not block:
                        break
                    if take is not None:
                        take(block)
                        continue
                    out += block
                    cut = len(out) > CHUNK_OUTPUT_BYTES
                if cut:
                    proc.kill()
                err = await proc.stderr.read()
                code = await proc.wait()
            except BaseException:
                if proc.returncode is None:
                    proc.kill()
                    await proc.wait()
                raise
        return _Run(bytes(out), err, code, cut, counts)

    async def _validate(self, rg: str, flags: ripgrep.Flags) -> None:
        """Run the pattern over nothing: its syntax errors are reported even when no
        file could match it."""
        run = await self.spawn([*flags.argv(rg), os.devnull], counts=False)
        if run.code == 2 and run.err:
            raise BadPattern(ripgrep.error_message(run.err, flags.pattern))

    @staticmethod
    def _take(outcome: Outcome, flags: ripgrep.Flags, run: _Run, limit: int, kept: int) -> int:
        """Adds one run's records to ``outcome`` in path order; returns the lines kept."""
        if run.counts and not flags.files_only:
            # Runs that only count start once ``limit`` lines are kept: their totals
            # alone, without a record per file (a no-trigram grep has one per file).
            lines, files = ripgrep.counted(run.out)
            outcome.total += lines
            outcome.files += files
            outcome.truncated = outcome.truncated or lines > 0
            return kept
        records = run.records
        if records is None:
            records = ripgrep.parse(run.out, files_only=flags.files_only)
        records.sort(key=lambda r: (_parts(r.path), r.line))
        seen: bytes | None = None
        for record in records:
            path = display_path(os.fsdecode(record.path))
            if flags.files_only:
                outcome.total += 1
                outcome.files += 1
                if kept < limit:
                    outcome.lines.append(Line(path, 0, "", True, 0))
                    kept += 1
                else:
                    outcome.truncated = True
                continue
            is_match = record.column > 0
            if is_match:
                outcome.total += 1
                if record.path != seen:
                    outcome.files += 1
                    seen = record.path
                if kept >= limit:
                    outcome.truncated = True
                    continue
                kept += 1
            elif kept >= limit and not _after_last(outcome.lines, path, record.line, flags):
                continue
            text, column = _clip(record.text, record.column)
            outcome.lines.append(Line(path, record.line, text, is_match, column))
        return kept


def check_pattern(pattern: str) -> None:
    """Raises BadPattern for what cannot reach ripgrep at all."""
    if "\0" in pattern:
        # The protocol carries any string; a process's arguments cannot hold a NUL.
        at = pattern.index("\0") + 1
        raise BadPattern(
            f"a NUL character cannot be given to ripgrep (at character {at} of the"
            " pattern); a regex can say \\x00"
        )


def _parts(path: bytes) -> list[bytes]:
    """A path's sort key in ripgrep's order (folder by folder)."""
    return path.split(b"/")


def _after_last(lines: list[Line], path: str, number: int, flags: ripgrep.Flags) -> bool:
    """Whether a context line belongs after the last match kept."""
    last = next((ln for ln in reversed(lines) if ln.match), None)
    return last is not None and last.path == path and number <= last.line + flags.after


def _with_context(lines: list[Line], before: int, after: int) -> list[Line]:
    """Drops context lines that belong to no kept match (before-context of a match
    past the limit)."""
    matches: dict[str, list[int]] = {}
    for ln in lines:
        if ln.match:
            matches.setdefault(ln.path, []).append(ln.line)
    return [
        ln
        for ln in lines
        if ln.match or any(m - before <= ln.line <= m + after for m in matches.get(ln.path, ()))
    ]


def _clip(raw: bytes, column: int) -> tuple[str, int]:
    """The line as text, cut to GREP_LINE_CHARS around its first match, and that
    match's column in characters."""
    try:
        text = raw.decode("utf-8")
        at = len(raw[: column - 1].decode("utf-8", "replace")) + 1 if column else 0
    except UnicodeDecodeError:
        # Not UTF-8: a file the index read as cp1252 (ripgrep prints its bytes as they
        # are), shown as read_file and search show it; one byte is one character.
        text, at = raw.decode("cp1252", "replace"), column
    if len(text) <= GREP_LINE_CHARS:
        return text, at
    start = max(0, min(at - 1 - GREP_LINE_CHARS // 3, len(text) - GREP_LINE_CHARS))
    clipped = text[start : start + GREP_LINE_CHARS]
    if start:
        clipped = _CUT + clipped
    if start + GREP_LINE_CHARS < len(text):
        clipped += _CUT
    return clipped, at
