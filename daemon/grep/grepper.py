"""grep: ripgrep over the files the index cannot rule out (``candidates``).

1. ``Grepper.run`` hands the candidates, in ripgrep's path order, to ripgrep: a few
   MB of them to one process; more in chunks (small first, so that a pattern matching
   everywhere answers from the first few files), two processes at a time. Once
   ``limit`` lines are in hand, later chunks only count (``--count``), so totals stay
   exact without reading every line back. When every indexed file is a candidate,
   ripgrep mostly walks the roots instead (``sweep``).
2. A deadline and a cap on one chunk's output bound the work: past either, the reply
   says it is incomplete and its total a lower bound.

The ripgrep processes of a grep run in its task group: a grep cancelled (its deadline,
the daemon stopping) kills them and waits for them before it returns.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from functools import partial
from subprocess import DEVNULL, PIPE
from typing import Final

import anyio
from anyio.abc import Process, TaskGroup
from kbindex.daemon.grep import ripgrep
from kbindex.daemon.grep.extracted import Documents, Scratch
from kbindex.daemon.index.values import Candidates
from kbindex.daemon.indexing.textfile import real_path
from kbindex.daemon.roots import Roots
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


@dataclass(frozen=True, slots=True)
class Line:
    path: str
    line: int
    text: str
    match: bool
    column: int
    page: int = 0
    extracted: bool = False
    """A line of a document's extracted text (``extracted``), numbered within its
    ``page`` (0: a text of one page), not a line of the file's bytes."""


@dataclass(slots=True)
class Outcome:
    lines: list[Line] = field(default_factory=list)
    total: int = 0
    files: int = 0
    truncated: bool = False
    complete: bool = True
    candidates: int = 0
    scanned_all: bool = False


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
    """Already read (``Grepper._files_by_lines``); else ``out`` is read by ``_take``."""


@asynccontextmanager
async def task_group() -> AsyncIterator[TaskGroup]:
    """A task group that raises a lone error as itself (a ``BadPattern`` stays one),
    not inside an ``ExceptionGroup``."""
    try:
        async with anyio.create_task_group() as tg:
            yield tg
    except BaseExceptionGroup as group:
        if len(group.exceptions) == 1:
            raise group.exceptions[0] from None
        raise


class Ahead:
    """A ripgrep run started in a task group now, its result awaited later: ripgrep
    reads the next files while the last answer is read. An error reaches the group."""

    def __init__(self, tg: TaskGroup, run: Callable[[], Awaitable[_Run]]) -> None:
        self._done = anyio.Event()
        self._run: _Run | None = None
        tg.start_soon(self._go, run)

    async def _go(self, run: Callable[[], Awaitable[_Run]]) -> None:
        self._run = await run()
        self._done.set()

    async def result(self) -> _Run:
        await self._done.wait()
        assert self._run is not None
        return self._run


class Grepper:
    """Runs greps; bounds the ripgrep processes of all of them together. ripgrep reads
    only the candidates ``roots`` admits (``Roots.readable``): the index suggests them,
    and a shared one holds whatever rows its writers put there (``_chunk``)."""

    def __init__(
        self, roots: Roots, rg: str | None = None, documents: Documents | None = None
    ) -> None:
        self.roots = roots
        self._rg = rg
        self.documents = documents
        self._slots = anyio.Semaphore(PROCESSES)

    async def binary(self) -> str:
        """The ripgrep greps run (``ripgrep.find``, in a thread: it runs ``rg
        --version``), found once."""
        if self._rg is None:
            self._rg = await anyio.to_thread.run_sync(ripgrep.find)
        return self._rg

    async def run(
        self,
        flags: ripgrep.Flags,
        found: Candidates,
        limit: int,
        deadline: float = DEADLINE_SECONDS,
    ) -> Outcome:
        check_pattern(flags.pattern)
        rg = await self.binary()
        outcome = Outcome(candidates=len(found.paths), scanned_all=found.scanned_all)
        if not found.paths:
            await self._validate(rg, flags)
            return outcome
        # A selective pattern's few candidates go to one process: each process costs
        # its start, and there is no early answer to gain from a small chunk first.
        one = not found.scanned_all and found.size <= ONE_RUN_BYTES
        chunks = _chunks(found.paths, first=len(found.paths) if one else CHUNK_FILES[0])
        uncounted = frozenset(found.uncounted or ())
        kept = 0
        scratch = None if self.documents is None else self.documents.scratch()
        try:
            with anyio.move_on_after(deadline) as timer:
                async with task_group() as tg:
                    start = partial(self._chunk, rg, flags, uncounted=uncounted, scratch=scratch)
                    current: Ahead | None = Ahead(tg, partial(start, next(chunks), counts=False))
                    while current is not None:
                        following = next(chunks, None)
                        # One run ahead: ripgrep reads the next files while this answer is read.
                        ahead = (
                            None
                            if following is None
                            else Ahead(tg, partial(start, following, counts=kept >= limit))
                        )
                        run = await current.result()
                        if (
                            refused := ripgrep.refusal(run.code, run.err, flags.pattern)
                        ) is not None:
                            raise BadPattern(refused)
                        kept = self._take(outcome, flags, run, limit, kept, scratch)
                        if run.cut:
                            outcome.complete = False
                            break
                        current = ahead
                    tg.cancel_scope.cancel()  # the run ahead, when the answer stops before it
            if timer.cancelled_caught:
                outcome.complete = False
        finally:
            if scratch is not None:
                with anyio.CancelScope(shield=True):
                    await anyio.to_thread.run_sync(scratch.close)
        if flags.before or flags.after:
            outcome.lines = _with_context(outcome.lines, flags.before, flags.after)
        if scratch is not None and scratch.page_starts:
            outcome.lines = [_in_page(ln, scratch) for ln in outcome.lines]
        return outcome

    async def _chunk(
        self,
        rg: str,
        flags: ripgrep.Flags,
        paths: list[str],
        *,
        counts: bool,
        uncounted: frozenset[str],
        scratch: Scratch | None = None,
    ) -> _Run:
        """ripgrep over the files of ``paths`` that ``roots`` admits: the one place files
        are named to it; a document is named by its extracted text (``extracted``).
        (Checked chunk by chunk, in a thread: while ripgrep reads one chunk, the next
        is checked.)"""
        names = await anyio.to_thread.run_sync(self._names, paths, scratch)
        if not names:
            # Named no file, ripgrep would search its working directory: /dev/null
            # still has it check the pattern.
            return await self.spawn([*flags.argv(rg), os.devnull], counts=False)
        if not uncounted.isdisjoint(paths):
            # Named, a file with a NUL is searched whole by --count and -l, where rg -uu
            # stops at the NUL: such a run reads lines (``Candidates.uncounted``).
            counts = False
            if flags.files_only:
                return await self._files_by_lines(rg, flags, names)
        return await self.spawn([*flags.argv(rg, count=counts), *names], counts)

    def _names(self, paths: list[str], scratch: Scratch | None) -> list[bytes]:
        """The names ripgrep reads for ``paths``: those ``roots`` admits, a document's
        its scratch file (none when its text is not cached)."""
        names = []
        for path in self.roots.readable(paths):
            if scratch is not None and scratch.documents.holds(path):
                name = scratch.name(path)
                if name is not None:
                    names.append(name)
            else:
                names.append(os.fsencode(real_path(path)))
        return names

    async def _files_by_lines(self, rg: str, flags: ripgrep.Flags, names: list[bytes]) -> _Run:
        """``-l`` told by the lines ripgrep prints: the files with a match line."""
        lines = dataclasses.replace(flags, files_only=False, before=0, after=0)
        run = await self.spawn([*lines.argv(rg), *names], counts=False)
        files = {r.path: ripgrep.Record(r.path) for r in ripgrep.parse(run.out) if r.column}
        return _Run(b"", run.err, run.code, run.cut, False, list(files.values()))

    async def spawn(
        self,
        argv: list[str | bytes],
        counts: bool,
        until: float = math.inf,
        take: Callable[[bytes], None] | None = None,
    ) -> _Run:
        """Runs ripgrep and reads its output, at most CHUNK_OUTPUT_BYTES (none when
        ``take`` reads each block as it comes) and until ``until`` (``anyio.current_time``):
        past either it is stopped, and what it printed is kept (``cut``). Cancelled, it
        kills ripgrep and waits for it."""
        async with self._slots:
            # Shielded: a process started but not yet handed back would be left running
            # by a cancellation; once it is, leaving ``async with`` kills it and waits.
            with anyio.CancelScope(shield=True):
                started = await anyio.open_process(argv, stdin=DEVNULL, stdout=PIPE, stderr=PIPE)
            async with started as proc:
                return await self._read(proc, counts, until, take)

    @staticmethod
    async def _read(
        proc: Process, counts: bool, until: float, take: Callable[[bytes], None] | None
    ) -> _Run:
        assert proc.stdout is not None
        assert proc.stderr is not None
        out = bytearray()
        cut = False
        with anyio.move_on_at(until) as reading:
            async for block in proc.stdout:
                if take is not None:
                    take(block)
                    continue
                out += block
                if len(out) > CHUNK_OUTPUT_BYTES:
                    cut = True
                    break
        if cut or reading.cancelled_caught:
            cut = True
            proc.kill()
        err = b"".join([block async for block in proc.stderr])
        return _Run(bytes(out), err, await proc.wait(), cut, counts)

    async def _validate(self, rg: str, flags: ripgrep.Flags) -> None:
        """Run the pattern over nothing: its syntax errors are reported even when no
        file could match it."""
        run = await self.spawn([*flags.argv(rg), os.devnull], counts=False)
        if (refused := ripgrep.refusal(run.code, run.err, flags.pattern)) is not None:
            raise BadPattern(refused)

    @staticmethod
    def _take(
        outcome: Outcome,
        flags: ripgrep.Flags,
        run: _Run,
        limit: int,
        kept: int,
        scratch: Scratch | None = None,
    ) -> int:
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
        if scratch is not None and scratch.originals:
            records = [dataclasses.replace(r, path=scratch.original(r.path)) for r in records]
        records.sort(key=lambda r: (_parts(r.path), r.line))
        seen: bytes | None = None
        for record in records:
            path = ripgrep.shown(record.path)
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


def _in_page(line: Line, scratch: Scratch) -> Line:
    """``line`` as a line of its document's page, marked extracted; other lines as
    they are."""
    found = scratch.locate(line.path, line.line)
    if found is None:
        return line
    page, number = found
    return dataclasses.replace(line, line=number, page=page, extracted=True)


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
