"""grep over every file: ripgrep walks the directories itself, and counts.

A pattern with no trigram to narrow it (``ab``, ``\\w+\\(``, ``.``) reads every indexed
file. Named on ripgrep's command line, each file costs ripgrep two ``statx`` of its
whole path, and the names go to processes of one thread each (their output must come
in path order); walking a directory, ripgrep finds its files with one ``getdents`` and
searches them on all its threads, as ``rg -uu`` does. So:

1. one ripgrep walks the roots (or the directory a path filter names) with ``rg -uu``'s
   settings and counts each file's matching lines. It reads a superset of the
   candidates: the files the index left out are read too, and their counts dropped,
   so the answer is the named files' one. Directories with a built-in ignored name
   are left out by glob: nothing under them is ever indexed (``ignore``);
2. ``rg -uu --count`` prints nothing for a file it finds binary after a match (a NUL
   past its first 64 KiB), where ``rg -uu`` prints the lines before the NUL. So the
   files whose text holds a NUL (``index.values.NUL_MARK``), and those changed or new since
   they were indexed, are read by name beside the walk (``Candidates.uncounted``);
3. the first files with a match in path order, enough for ``limit`` lines, are read
   again by name for their lines (``Grepper.run``). Totals are the counts'.

Documents (``extracted``) are read by name beside the walk too, as their extracted
text: the walk reads their bytes, whose counts are dropped.

Where a walk cannot be sure to reach every candidate (a glob for a path filter, a path
through a symlink), or the uncounted files are many, the files are named as for any
other grep.
"""

from __future__ import annotations

import dataclasses
import heapq
import os
from collections.abc import Sequence
from functools import partial
from typing import Final

import anyio
from kbindex.daemon.grep import ripgrep
from kbindex.daemon.grep.grepper import (
    DEADLINE_SECONDS,
    Ahead,
    BadPattern,
    Grepper,
    Outcome,
    check_pattern,
    task_group,
)
from kbindex.daemon.index.plan import PathFilter
from kbindex.daemon.index.values import Candidates, order
from kbindex.daemon.indexing.ignore import IGNORED_DIR_NAMES
from kbindex.daemon.indexing.textfile import real_path

_SKIPPED = (*IGNORED_DIR_NAMES, "*.egg-info")
NAMED_FILES: Final = 1000
"""Files a walk's counts may leave out (``Candidates.uncounted``), read by name beside
it, at most; past that (files waiting to be read again after an upgrade) the walk
gains little, and every file is named."""


class _Tally:
    """A walk's ``--count`` output read as it comes (a tree of a million files prints
    tens of MB): the counts of the ``wanted`` files only."""

    def __init__(self, wanted: set[str]) -> None:
        self.wanted = wanted
        self.counts: list[tuple[str, int]] = []
        self._rest = b""

    def __call__(self, block: bytes) -> None:
        data = self._rest + block
        rows, used = ripgrep.counts(data)
        self._rest = data[used:]
        self.counts += [(path, n) for path, n in rows if path in self.wanted]


def walks(roots: Sequence[str], raw_filter: str | None) -> list[str]:
    """The directories a walk covering every candidate of a grep within ``raw_filter``
    starts from: the roots, or the directory the filter names in them; none (name the
    files) for a glob, or for a path that is a file or goes through a symlink."""
    parsed = PathFilter.parse(raw_filter)
    if parsed is None:
        return list(roots)
    if parsed.glob:
        return []
    stem = real_path(parsed.stem)
    if parsed.absolute:
        inside = any(stem == r or stem.startswith(r + "/") for r in roots)
        places = [stem] if inside else []
    else:
        places = [os.path.join(r, stem) for r in roots]
    found = [p for p in places if os.path.lexists(p)]
    if any(not os.path.isdir(p) or os.path.realpath(p) != p for p in found):
        return []
    return found


async def run(
    grepper: Grepper,
    flags: ripgrep.Flags,
    found: Candidates,
    walk: Sequence[str],
    limit: int,
    deadline: float = DEADLINE_SECONDS,
) -> Outcome:
    """``found`` (every indexed file within the path filter) read as ``Grepper.run``
    would, by ripgrep walking ``walk`` (``walks``); ``Candidates.uncounted`` read by
    name beside it."""
    uncounted = found.uncounted
    if not walk or not found.scanned_all or uncounted is None or len(uncounted) > NAMED_FILES:
        return await grepper.run(flags, found, limit, deadline)
    documents = grepper.documents
    if documents is not None:
        # Read by name beside the walk, as their extracted text, like the uncounted.
        named_too = set(uncounted).union(p for p in found.paths if documents.holds(p))
        uncounted = sorted(named_too, key=order)
    check_pattern(flags.pattern)
    give_up = anyio.current_time() + deadline
    counting = dataclasses.replace(flags, files_only=False)
    argv: list[str | bytes] = [
        *counting.argv(await grepper.binary(), count=True, walk_skipping=_SKIPPED),
        *walk,
    ]
    named = Candidates(uncounted, scanned_all=False, uncounted=uncounted)
    tally = _Tally(set(found.paths).difference(uncounted))
    async with task_group() as tg:
        walking = Ahead(tg, partial(grepper.spawn, argv, True, give_up, tally))
        extra = await grepper.run(flags, named, 0, deadline) if uncounted else Outcome()
        counted = await walking.result()
    if (refused := ripgrep.refusal(counted.code, counted.err, flags.pattern)) is not None:
        raise BadPattern(refused)
    counts = tally.counts
    outcome = Outcome(
        candidates=len(found.paths),
        scanned_all=True,
        complete=not counted.cut and extra.complete,
        files=len(counts) + extra.files,
        total=(len(counts) if flags.files_only else sum(n for _, n in counts)) + extra.total,
    )
    # Enough files with a match, in path order, for ``limit`` lines (``limit`` files
    # always are); the uncounted ones up to there (or all) are read again with them.
    first: list[str] = []
    enough = 0
    for path, n in heapq.nsmallest(limit, counts, key=lambda c: order(c[0])):
        if enough >= limit:
            break
        first.append(path)
        enough += 1 if flags.files_only else n
    if enough >= limit and first:
        last = order(first[-1])
        first += [p for p in uncounted if order(p) < last]
    else:
        first += uncounted
    if first:
        left = max(give_up - anyio.current_time(), 0.001)
        paths = sorted(first, key=order)
        again = Candidates(paths, scanned_all=False, uncounted=uncounted)
        read = await grepper.run(flags, again, limit, left)
        outcome.lines = read.lines
        outcome.complete = outcome.complete and read.complete
    outcome.truncated = outcome.total > sum(1 for ln in outcome.lines if ln.match)
    return outcome
