"""The queue between the watcher's threads and the indexer: coalesced, debounced, bounded.

Observer threads call ``add``, ``add_move`` and ``rescan``: each takes a lock, updates a
dict and, only when the event loop is waiting, wakes it. The reconciler takes what is
due, in batches, and does the work in the daemon's own tasks.

- Debounce: a path is due ``QUIET_SECONDS`` after its last event, or at the latest
  ``MAX_DELAY_SECONDS`` after its first, so a file written 50 times in half a second is
  read once and a file that never stops changing is still indexed within a second.
- Backoff: a path taken again and again (a log being appended to) waits 1, 2, 4 ... up
  to ``BACKOFF_MAX_SECONDS`` between reads instead of being re-read continuously; a
  path left alone for a little while is back to normal.
- Coalescing: an event under a directory that is already pending (a new directory
  being filled, a root due for a rescan) only pushes that directory's due time back.
- Bounds: past ``ROOT_CAP`` pending paths in one root (a git checkout, an unpacked
  tarball) they collapse into one rescan of the root: memory stays bounded and a
  list+stat pass finds every change anyway. Moves past ``MOVES_CAP`` collapse the same way.
- Moves are due at once, and are taken before any refresh, in the order they happened.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Final

import anyio
import anyio.from_thread
import anyio.lowlevel

log = logging.getLogger(__name__)

QUIET_SECONDS: Final = 0.1
MAX_DELAY_SECONDS: Final = 1.0
BACKOFF_BASE_SECONDS: Final = 1.0
BACKOFF_MAX_SECONDS: Final = 30.0
HOT_WINDOW_SECONDS: Final = 1.5
"""A path taken again within this (plus twice its current backoff) counts as hot."""
HOT_STREAK: Final = 2
"""Backoff starts at the third quick read in a row: two saves in a second are normal
editing and must not wait."""
ROOT_CAP: Final = 4096
MOVES_CAP: Final = 1024
RECENT_CAP: Final = 8192
TAKE_LIMIT: Final = 1000
"""Paths per batch: one refresh, a few transactions."""


@dataclass(slots=True)
class _Entry:
    root: str
    first: float
    """Monotonic time of the first event not yet indexed (lag is measured from it)."""
    last: float
    urgent: bool = False
    """Due now (a poll, an overflow, a root that came back), not after a quiet period."""
    evented: bool = True
    """False for a rescan that no file event asked for (polling): it has no lag."""


@dataclass(frozen=True, slots=True)
class Move:
    src: str
    src_root: str | None
    """None when the source lies outside every root (a move in)."""
    dest: str
    dest_root: str | None
    """None when the destination lies outside every root, or is ignored (a move out)."""
    is_dir: bool
    at: float


@dataclass(slots=True)
class Batch:
    moves: list[Move] = field(default_factory=list)
    rescans: list[tuple[str, float | None]] = field(default_factory=list)
    """(root, monotonic time of its first event, or None for a poll)."""
    paths: list[tuple[str, str, float]] = field(default_factory=list)
    """(root, path, monotonic time of its first event)."""
    next_due: float | None = None

    def __bool__(self) -> bool:
        return bool(self.moves or self.rescans or self.paths)


def lineage(path: str, root: str) -> Iterator[str]:
    """``path``, then each directory above it up to and including ``root``."""
    while True:
        yield path
        if len(path) <= len(root):
            return
        path = os.path.dirname(path)


def _ends(moves: list[Move]) -> list[tuple[str, str]]:
    """(root, path) of both ends of each move that lie in a root."""
    pairs = [((m.src_root, m.src), (m.dest_root, m.dest)) for m in moves]
    return [(r, p) for pair in pairs for r, p in pair if r]


def backoff(streak: int) -> float:
    if streak < HOT_STREAK:
        return 0.0
    return min(BACKOFF_MAX_SECONDS, BACKOFF_BASE_SECONDS * 2.0 ** (streak - HOT_STREAK))


class Changes:
    def __init__(
        self, *, root_cap: int = ROOT_CAP, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.root_cap = root_cap
        self.clock = clock
        self._lock = threading.Lock()
        self._paths: dict[str, _Entry] = {}
        self._counts: Counter[str] = Counter()
        self._rescans: dict[str, _Entry] = {}
        self._moves: list[Move] = []
        self._applying: list[tuple[str, str]] = []
        """(root, path) of the last batch taken, until ``applied``: grep reads them."""
        self._recent: dict[str, tuple[float, int]] = {}
        self._dirty = False
        self._event: anyio.Event | None = None
        self._token: anyio.lowlevel.EventLoopToken | None = None
        self._loop_thread: int | None = None
        self._closed = False

    # ------------------------------------------------------------ producers (any thread)

    def add(self, root: str, path: str) -> None:
        """A file or directory changed, appeared or disappeared."""
        with self._lock:
            waiter = self._add_locked(root, path, self.clock())
        self._wake(waiter)

    def add_move(
        self, src_root: str | None, src: str, dest_root: str | None, dest: str, *, is_dir: bool
    ) -> None:
        """``src`` was renamed to ``dest``; either side may lie outside the roots."""
        now = self.clock()
        with self._lock:
            if src_root is not None and dest_root is not None:
                if len(self._moves) < MOVES_CAP:
                    self._moves.append(Move(src, src_root, dest, dest_root, is_dir, now))
                else:
                    for root in (src_root, dest_root):
                        self._rescan_locked(root, now, urgent=False, first=now)
            waiter: anyio.Event | None = None
            # Both ends are refreshed after the move: the source to drop what the move
            # did not cover, the destination to pick up content that changed with it.
            for end_root, path in ((src_root, src), (dest_root, dest)):
                if end_root is not None:
                    waiter = self._add_locked(end_root, path, now) or waiter
            waiter = waiter or self._take_waiter()
        self._wake(waiter)

    def rescan(self, root: str, *, urgent: bool = True, evented: bool = False) -> None:
        """List and stat all of ``root`` (an overflow, a poll, a watcher restart)."""
        now = self.clock()
        with self._lock:
            self._rescan_locked(root, now, urgent=urgent, first=now if evented else None)
            waiter = self._take_waiter()
        self._wake(waiter)

    def _add_locked(self, root: str, path: str, now: float) -> anyio.Event | None:
        self._dirty = True
        pending_rescan = self._rescans.get(root)
        if pending_rescan is not None:
            pending_rescan.last = now
            return None
        for probe in lineage(path, root):
            entry = self._paths.get(probe)
            if entry is not None:
                entry.last = now
                return None
        self._paths[path] = _Entry(root, now, now)
        self._counts[root] += 1
        if self._counts[root] > self.root_cap:
            log.info(
                "more than %d changes pending in %s: rescanning it instead", self.root_cap, root
            )
            self._rescan_locked(root, now, urgent=False, first=now)
        return self._take_waiter()

    def _rescan_locked(self, root: str, now: float, *, urgent: bool, first: float | None) -> None:
        self._dirty = True
        # Pending paths of the root are covered by the rescan; the earliest of their
        # events is where the lag of the rescan starts.
        firsts = [e.first for p, e in self._paths.items() if e.root == root]
        if firsts:
            for path in [p for p, e in self._paths.items() if e.root == root]:
                del self._paths[path]
            self._counts.pop(root, None)
            first = min([*firsts, first] if first is not None else firsts)
        entry = self._rescans.get(root)
        if entry is None:
            self._rescans[root] = _Entry(
                root, first if first is not None else now, now, urgent, first is not None
            )
        else:
            entry.last = now
            entry.urgent = entry.urgent or urgent
            if first is not None:
                entry.first = min(entry.first, first) if entry.evented else first
                entry.evented = True

    # ------------------------------------------------------------ the event loop's side

    def bind(self) -> None:
        """Called from the event loop: lets threads wake it."""
        self._token = anyio.lowlevel.current_token()
        self._loop_thread = threading.get_ident()

    def close(self) -> None:
        with self._lock:
            self._closed = True

    async def wait(self, seconds: float | None) -> None:
        """Return when something new was added, or after ``seconds``."""
        with self._lock:
            if self._dirty:
                self._dirty = False
                return
            event = self._event = anyio.Event()
        try:
            with anyio.move_on_after(math.inf if seconds is None else max(0.0, seconds)):
                await event.wait()
        finally:
            with self._lock:
                if self._event is event:
                    self._event = None

    def take(self, limit: int = TAKE_LIMIT) -> Batch:
        """What is due now: every move, due rescans, and up to ``limit`` due paths."""
        now = self.clock()
        batch = Batch()
        with self._lock:
            self._dirty = False
            batch.moves, self._moves = self._moves, []
            next_due = math.inf
            for root, entry in list(self._rescans.items()):
                due = self._due(root, entry)
                if due <= now:
                    del self._rescans[root]
                    self._mark_taken(root, now)
                    batch.rescans.append((root, entry.first if entry.evented else None))
                else:
                    next_due = min(next_due, due)
            due_paths: list[tuple[float, str]] = []
            for path, entry in self._paths.items():
                due = self._due(path, entry)
                if due <= now:
                    due_paths.append((due, path))
                else:
                    next_due = min(next_due, due)
            due_paths.sort()
            for due, _ in due_paths[limit:]:
                next_due = min(next_due, due)
            for _, path in due_paths[:limit]:
                entry = self._paths.pop(path)
                self._counts[entry.root] -= 1
                if self._counts[entry.root] <= 0:
                    del self._counts[entry.root]
                self._mark_taken(path, now)
                batch.paths.append((entry.root, path, entry.first))
            if len(self._recent) > RECENT_CAP:
                self._forget_cold(now)
            self._applying = [(root, path) for root, path, _ in batch.paths]
            self._applying += [(root, root) for root, _ in batch.rescans]
            self._applying += _ends(batch.moves)
        batch.next_due = None if next_due == math.inf else next_due
        return batch

    def applied(self) -> None:
        """The batch taken last is in the index (or failed and was rescheduled)."""
        with self._lock:
            self._applying = []

    def _due(self, key: str, entry: _Entry) -> float:
        if entry.urgent:
            return entry.last
        due = min(entry.last + QUIET_SECONDS, entry.first + MAX_DELAY_SECONDS)
        recent = self._recent.get(key)
        if recent is not None:
            due = max(due, recent[0] + backoff(recent[1]))
        return due

    def _forget_cold(self, now: float) -> None:
        """Keep the backoff memory bounded: drop paths no longer hot, and if a long
        trickle of distinct paths still overfills it, the older half."""
        horizon = now - 2 * BACKOFF_MAX_SECONDS - HOT_WINDOW_SECONDS
        recent = {k: v for k, v in self._recent.items() if v[0] >= horizon}
        if len(recent) > RECENT_CAP // 2:
            newest = sorted(recent.items(), key=lambda kv: kv[1][0])[-(RECENT_CAP // 2) :]
            recent = dict(newest)
        self._recent = recent

    def _mark_taken(self, key: str, now: float) -> None:
        previous = self._recent.get(key)
        streak = 0
        if previous is not None:
            hot = now - previous[0] < 2 * backoff(previous[1]) + HOT_WINDOW_SECONDS
            streak = previous[1] + 1 if hot else 0
        self._recent[key] = (now, streak)

    def _take_waiter(self) -> anyio.Event | None:
        event, self._event = self._event, None
        return None if self._closed else event

    def _wake(self, event: anyio.Event | None) -> None:
        if event is None:
            return
        if threading.get_ident() == self._loop_thread:
            event.set()
            return
        if self._token is None:
            return
        # RuntimeError: the event loop has finished (shutdown); nobody is left to wake.
        with contextlib.suppress(RuntimeError):
            anyio.from_thread.run_sync(event.set, token=self._token)

    # ------------------------------------------------------------ questions

    def depth(self) -> int:
        with self._lock:
            return len(self._paths) + len(self._rescans) + len(self._moves)

    def depth_of(self, root: str) -> int:
        with self._lock:
            return self._counts.get(root, 0) + (1 if root in self._rescans else 0)

    def is_pending(self, root: str, path: str) -> bool:
        with self._lock:
            if root in self._rescans:
                return True
            return any(probe in self._paths for probe in lineage(path, root))

    def pending(self) -> list[tuple[str, str]]:
        """(root, path) of every change not indexed yet: files, directories, whole
        roots (a rescan) and both ends of moves, queued or in the batch being applied."""
        with self._lock:
            found = [(e.root, p) for p, e in self._paths.items()]
            found += [(root, root) for root in self._rescans]
            return found + _ends(self._moves) + self._applying

    def forget_root(self, root: str) -> None:
        with self._lock:
            self._rescans.pop(root, None)
            for path in [p for p, e in self._paths.items() if e.root == root]:
                del self._paths[path]
            self._counts.pop(root, None)
            self._moves = [m for m in self._moves if root not in (m.src_root, m.dest_root)]
