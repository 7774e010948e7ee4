"""Applying the change queue to the index, in the daemon's own task.

Each round takes what is due (daemon/watching/changes.py): moves first, in the order they
happened, as re-keys of what the index holds (no file is read); then one refresh over
the due root rescans and paths, which lists and stats them and reads only what
changed. A path that names a deleted file or directory removes it; a path whose
directory is also due is left to the directory's walk. Between rounds the task sleeps
until the next path is due or the watcher adds something.

Paths from events whose names are not valid UTF-8 are translated here, before they
reach the index: a move is re-keyed between display paths (the names the index holds,
see textfile.display_path), and a path to refresh becomes its nearest directory with a
valid name, whose walk lists the file under its display path.

The files are the truth: the event queue only makes the daemon look sooner. The full
reconcile (every ``scan_interval_seconds``, in app.py) catches whatever events miss.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Final

import anyio
from kbindex.daemon.health import Applied, Applying, Health
from kbindex.daemon.indexing.indexer import Indexer
from kbindex.daemon.indexing.textfile import display_path
from kbindex.daemon.roots import Located, Roots
from kbindex.daemon.watching.changes import Batch, Changes, Move, lineage

log = logging.getLogger(__name__)

RETRY_SECONDS: Final = 5.0
"""After a failed round (a full disk, a locked database), wait before rescanning."""


class Reconciler:
    def __init__(self, indexer: Indexer, roots: Roots, changes: Changes, health: Health) -> None:
        self.indexer = indexer
        self.roots = roots
        self.changes = changes
        self.health = health

    async def run(self) -> None:
        while True:
            batch = self.changes.take()
            if not batch:
                timeout = None if batch.next_due is None else batch.next_due - time.monotonic()
                await self.changes.wait(timeout)
                continue
            self.health.record(Applying(len(batch.moves) + len(batch.rescans) + len(batch.paths)))
            try:
                await self.apply(batch)
            except Exception:
                # The round's changes are not lost: their roots are rescanned after a pause.
                roots = _roots_of(batch)
                log.exception("applying changes failed; rescanning %s", ", ".join(roots))
                await anyio.sleep(RETRY_SECONDS)
                for root in roots:
                    self.changes.rescan(root, evented=True)
            finally:
                self.changes.applied()
                self.health.record(Applying(0))

    async def apply(self, batch: Batch) -> None:
        started = time.monotonic()
        moved = 0
        for move in batch.moves:
            moved += await self._move(move)
        scope: list[Located] = []
        firsts: list[float] = []
        rescanned = set()
        for root, first in batch.rescans:
            located = self.roots.locate(Path(root))
            if located is not None and located.path == located.root:
                scope.append(located)
                rescanned.add(root)
                if first is not None:
                    firsts.append(first)
        wanted = {path: (root, first) for root, path, first in batch.paths if root not in rescanned}
        scoped: set[str] = set()
        for path, (root, first) in wanted.items():
            firsts.append(first)
            if _covered(path, wanted):
                continue
            target = _storable_dir(path, root)
            located = None if target in scoped else self.roots.locate(Path(target))
            if located is not None:
                scoped.add(target)
                scope.append(located)
        if scope:
            await self.indexer.refresh(scope)
        if firsts:
            self.health.record(Applied(time.monotonic() - min(firsts)))
        log.debug(
            "applied %d move(s) (%d file(s) re-keyed), %d rescan(s), %d path(s) in %.3f s",
            len(batch.moves),
            moved,
            len(rescanned),
            len(scope) - len(rescanned),
            time.monotonic() - started,
        )

    async def _move(self, move: Move) -> int:
        src = self.roots.locate(Path(display_path(move.src)))
        dest = self.roots.locate(Path(display_path(move.dest)))
        if src is None or dest is None:
            return 0  # a root was removed meanwhile; both ends are refreshed anyway
        return await self.indexer.move(src, dest)


def _covered(path: str, wanted: dict[str, tuple[str, float]]) -> bool:
    """Whether a directory above ``path`` (within its root) is due in the same round."""
    parents = lineage(path, wanted[path][0])
    next(parents)  # the path itself
    return any(probe in wanted for probe in parents)


def _storable_dir(path: str, root: str) -> str:
    """``path`` itself when its name is valid UTF-8, else its nearest such directory
    (down to ``root``): the index can only be asked about valid names."""
    for probe in lineage(path, root):
        if display_path(probe) is probe:
            return probe
    return root


def _roots_of(batch: Batch) -> list[str]:
    roots: Iterable[str | None] = (
        *(r for r, _ in batch.rescans),
        *(r for r, _, _ in batch.paths),
        *(m.src_root for m in batch.moves),
        *(m.dest_root for m in batch.moves),
    )
    return sorted({r for r in roots if r is not None})
