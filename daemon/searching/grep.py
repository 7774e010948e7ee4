"""grep: ripgrep over the files the index cannot rule out (``candidates``).

1. ``Grepper.run`` hands the candidates, in ripgrep's path order, to ripgrep: a few
   MB of them to one process; more in chunks (small first, so that a pattern matching
   everywhere answers from the first few files), two processes at a time. Once
   ``limit`` lines are in hand, later chunks only count (``--count``), so totals stay
   exact without reading every line back (unless ``--count`` would count otherwise:
   ``Flags.countable``). When every indexed file is a candidate, ripgrep mostly walks
   the roots instead (``sweep``).
2. A deadline and a cap on one chunk's output bound the work: past either, the reply
   says it is incomplete and its total a lower bound.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from subprocess import DEVNULL, PIPE
from typing import Final

from kbindex.daemon.indexing.textfile import real_path
from kbindex.daemon.roots import Roots
from kbindex.daemon.searching import ripgrep
from kbindex.daemon.searching.candidates import Candidates
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
    """Already read (``Grepper._word_lines``); else ``out`` is read by ``_take``."""


class Grepper:
    """Runs greps; bounds the ripgrep processes of all of them together. ripgrep reads
    only the candidates ``roots`` admits (``Roots.readable``): the index suggests them,
    and a shared one holds whatever rows its writers put there (``_chunk``)."""

    def __init__(self, roots: Roots, rg: str | None = None) -> None:
        self.roots = roots
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
        unsure = frozenset(found.uncounted or ())
        ahead: asyncio.Task[_Run] | None = None
        try:
            ahead = self._start(rg, flags, next(chunks), counts=False, unsure=unsure)
            while ahead is not None:
                following = next(chunks, None)
                current = ahead
                # One run ahead: ripgrep reads the next files while this answer is read.
                ahead = (
                    None
                    if following is None
                    else self._start(
                        rg,
                        flags,
                        following,
                        counts=kept >= limit and flags.countable,
                        unsure=unsure,
                    )
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
        self,
        rg: str,
        flags: ripgrep.Flags,
        paths: list[str],
        *,
        counts: bool,
        unsure: frozenset[str] = frozenset(),
    ) -> asyncio.Task[_Run]:
        return asyncio.ensure_future(self._chunk(rg, flags, paths, counts=counts, unsure=unsure))

    async def _chunk(
        self,
        rg: str,
        flags: ripgrep.Flags,
        paths: list[str],
        *,
        counts: bool,
        unsure: frozenset[str],
    ) -> _Run:
        """ripgrep over the files of ``paths`` that ``roots`` admits: the one place files
        are named to it. (Checked chunk by chunk, in a thread: while ripgrep reads one
        chunk, the next is checked.)"""
        paths = await asyncio.to_thread(self.roots.readable, paths)
        if not paths:
            # Named no file, ripgrep would search its working directory: /dev/null
            # still has it check the pattern.
            return await self.spawn([*flags.argv(rg), os.devnull], counts=False)
        names = [os.fsencode(real_path(p)) for p in paths]
        if not unsure.isdisjoint(paths):
            # Named, a file with a NUL is searched whole by --count and -l, where rg -uu
            # stops at the NUL: such a run reads lines (``Candidates.uncounted``).
            counts = False
            if flags.files_only:
                return await self._files_by_lines(rg, flags, names)
        if flags.word_literal and not counts and not flags.files_only:
            return await self._word_lines(rg, flags, names)
        return await self.spawn([*flags.argv(rg, count=counts), *names], counts)

    async def _files_by_lines(self, rg: str, flags: ripgrep.Flags, names: list[bytes]) -> _Run:
        """``-l`` told by the lines ripgrep prints: the files with a match line."""
        lines = dataclasses.replace(flags, files_only=False, before=0, after=0)
        run = await self.spawn([*lines.argv(rg), *names], counts=False)
        files = {r.path: ripgrep.Record(r.path) for r in ripgrep.parse(run.out) if r.column}
        return _Run(b"", run.err, run.code, run.cut, False, list(files.values()))

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
