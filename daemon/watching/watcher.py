"""Supervising the roots' watches: one inotify observer per root, and what to do when it fails.

The observers (``inotify``) hand their events to ``router``, in their own threads; this
module starts and stops them, and decides how each root is watched.

A supervising task checks each root about once a second, which costs one ``stat``:

- the inotify watch or instance limit was hit (watchdog raises ENOSPC/EMFILE when it
  adds a watch, at start or later for a new directory): the root's observer is stopped
  and the root is polled instead, state ``degraded``, with the sysctl fix in the detail;
  going live is retried every ``RETRY_LIVE_SECONDS``;
- the observer died, or the root directory was deleted or replaced: the watch is
  restarted once the directory exists again, and the root is rescanned;
- the kernel's event queue overflowed (events were lost): the root is rescanned;
- the root directory cannot be read (permission denied): state ``error`` with the reason,
  no watch and no polling (the index keeps serving what it holds); once it can be read
  again the watch starts and the root is rescanned, within a second;
- a directory inotify could not watch because it was unreadable (watchdog skips it
  silently) became readable: the root's watch is restarted and the root rescanned, or
  new files in that directory would only be found by the periodic scan. A ``chmod`` of
  a directory (IN_ATTRIB) also queues it, so its files are indexed at once;
- roots set to ``watch = "poll"`` (network filesystems, where inotify sees no changes
  made on other machines) are rescanned every ``poll_interval_seconds``; roots set to
  ``watch = "off"`` wait for the periodic scan, and their state says so.

A rescan is the reconcile pass (list + stat, reading only what changed), so polling a
root costs what a no-change rescan costs; the interval grows with the root's size so
polling never takes more than about a tenth of a core.
"""

from __future__ import annotations

import errno
import logging
import os
import time
from dataclasses import dataclass, field
from functools import partial
from typing import Final

import anyio
import anyio.to_thread
from anyio.abc import TaskStatus
from kbindex.daemon.health import Health, Polled, Watched
from kbindex.daemon.indexing.ignore import IgnoreRules
from kbindex.daemon.watching.changes import Changes
from kbindex.daemon.watching.inotify import (
    LIMIT_ERRNOS,
    RootObserver,
    start_observer,
    stop_observer,
)
from kbindex.daemon.watching.router import EventRouter

log = logging.getLogger(__name__)

SUPERVISE_SECONDS: Final = 1.0
RETRY_LIVE_SECONDS: Final = 300.0
POLL_COST_FACTOR: Final = 10.0
"""A polled root waits at least this many times its last rescan's duration."""
DENIED_CAP: Final = 1000
"""Unwatchable directories remembered per root (each costs an ``access`` a second)."""
WATCHES_FIX: Final = (
    "Fix: sudo sysctl fs.inotify.max_user_watches=524288; to keep it after a reboot: "
    "echo fs.inotify.max_user_watches=524288 | sudo tee /etc/sysctl.d/90-kbindex.conf"
)
INSTANCES_FIX: Final = (
    "Fix: sudo sysctl fs.inotify.max_user_instances=1024; to keep it after a reboot: "
    "echo fs.inotify.max_user_instances=1024 | sudo tee /etc/sysctl.d/90-kbindex.conf"
)


@dataclass
class _Watch:
    root: str
    mode: str
    """``auto`` (inotify), ``poll`` or ``off``."""
    observer: RootObserver | None = None
    identity: tuple[int, int] | None = None
    limit: OSError | None = None
    """Set by an observer thread when inotify refused a watch."""
    next_poll: float = 0.0
    next_retry: float = 0.0
    missing: bool = False
    blocked: str | None = None
    """Why the root directory cannot be read, while it cannot."""
    denied: set[str] = field(default_factory=set)
    """Directories inotify could not watch (permission denied), set by observer threads."""
    denied_backoff: float = SUPERVISE_SECONDS
    next_denied_check: float = 0.0


class Watcher:
    def __init__(
        self,
        roots: list[tuple[str, str]],
        rules: IgnoreRules,
        changes: Changes,
        health: Health,
        *,
        poll_seconds: float,
    ) -> None:
        """``roots``: (root, watch mode) pairs."""
        self.changes = changes
        self.health = health
        self.poll_seconds = poll_seconds
        self.router = EventRouter(rules, changes, health)
        self._watches = {root: _Watch(root, mode) for root, mode in roots}
        self.router.set_roots(self._watches)
        # watchdog logs every inotify event at DEBUG: at --log-level debug, a line per
        # file of a checkout would drown the daemon's own messages.
        logging.getLogger("watchdog").setLevel(max(logging.INFO, log.getEffectiveLevel()))

    # ------------------------------------------------------------ lifecycle

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        self.changes.bind()
        try:
            for watch in list(self._watches.values()):
                await self._start(watch)
            task_status.started()
            while True:
                await anyio.sleep(SUPERVISE_SECONDS)
                for watch in list(self._watches.values()):
                    await self._supervise(watch)
        finally:
            self.changes.close()
            with anyio.CancelScope(shield=True):
                for watch in list(self._watches.values()):
                    await self._stop(watch)

    async def add_root(self, root: str, mode: str) -> None:
        watch = self._watches[root] = _Watch(root, mode)
        self.router.set_roots(self._watches)
        await self._start(watch)

    async def remove_root(self, root: str) -> None:
        watch = self._watches.pop(root, None)
        self.router.set_roots(self._watches)
        if watch is not None:
            await self._stop(watch)

    # ------------------------------------------------------------ supervision

    async def _start(self, watch: _Watch) -> None:
        now = time.monotonic()
        watch.limit = None
        watch.identity = _identity(watch.root)
        watch.missing = watch.identity is None
        watch.denied = set()
        watch.blocked = None if watch.missing else _unreadable(watch.root)
        if watch.blocked is not None:
            self._set_blocked(watch)
            return
        root = watch.root
        if watch.mode == "poll":
            self._set(root, "polling", "set to poll in the config", self._interval(root))
            watch.next_poll = now + self._interval(root)
            return
        if watch.mode == "off":
            self._set(root, "off", "not watched (watch = off): changes wait for the next scan")
            return
        if watch.missing:
            self._set(root, "error", "the root directory is missing; waiting for it to come back")
            return
        try:
            observer = await anyio.to_thread.run_sync(self._observe, watch)
        except Exception as exc:
            self._fall_back(watch, exc)
            return
        if self._watches.get(watch.root) is not watch:
            await anyio.to_thread.run_sync(stop_observer, observer)  # removed meanwhile
            return
        watch.observer = observer
        self._set(root, "live", "")
        log.info("watching %s", watch.root)

    def _observe(self, watch: _Watch) -> RootObserver:
        return start_observer(
            watch.root,
            partial(self.router.route, watch.root),
            partial(self._on_limit, watch),
            partial(self.changes.rescan, watch.root, evented=True),
            partial(self._on_denied, watch),
        )

    async def _stop(self, watch: _Watch) -> None:
        observer, watch.observer = watch.observer, None
        if observer is not None:
            await anyio.to_thread.run_sync(stop_observer, observer)

    def _fall_back(self, watch: _Watch, exc: Exception) -> None:
        now = time.monotonic()
        interval = self._interval(watch.root)
        if isinstance(exc, OSError) and exc.errno in LIMIT_ERRNOS:
            which = "instance" if exc.errno == errno.EMFILE else "watch"
            limit = _read_limit(f"max_user_{which}es")
            fix = INSTANCES_FIX if which == "instance" else WATCHES_FIX
            detail = (
                f"inotify {which} limit reached (fs.inotify.max_user_{which}es = {limit}); "
                f"polling every {interval:g} s instead. {fix}"
            )
            self._set(watch.root, "degraded", detail, interval)
            log.warning("%s: %s", watch.root, detail)
        else:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            detail = f"cannot watch: {reason}; polling instead"
            self._set(watch.root, "error", detail, interval)
            log.warning("%s: %s", watch.root, detail)
        watch.next_poll = now
        watch.next_retry = now + RETRY_LIVE_SECONDS

    async def _supervise(self, watch: _Watch) -> None:
        if self._watches.get(watch.root) is not watch:
            return  # removed while the others were supervised
        now = time.monotonic()
        if await self._check_readable(watch):
            return
        if watch.mode == "auto":
            await self._check_live(watch, now)
        if watch.mode == "off":
            return
        polled = watch.mode == "poll" or not watch.missing
        if watch.observer is None and polled and now >= watch.next_poll:
            interval = self._interval(watch.root)
            self.health.record(Polled(watch.root, interval))
            watch.next_poll = now + interval
            self.changes.rescan(watch.root, evented=False)

    async def _check_readable(self, watch: _Watch) -> bool:
        """Whether the root cannot be read (then nothing else is done for it now). A
        root or a skipped directory that became readable again restarts the watch and
        rescans the root."""
        blocked = None if watch.missing else _unreadable(watch.root)
        if blocked is not None:
            if watch.blocked is None:
                await self._stop(watch)
                watch.blocked = blocked
                self._set_blocked(watch)
            return True
        if watch.blocked is not None:
            log.info("%s can be read again: watching and rescanning it", watch.root)
        elif watch.observer is not None and self._denied_back(watch):
            log.info("%s: an unreadable directory can be read again: re-watching", watch.root)
            # Back off: a directory that passes the access check but that inotify still
            # refuses (an LSM rule) would otherwise cost a rescan of the root every second.
            watch.next_denied_check = time.monotonic() + watch.denied_backoff
            watch.denied_backoff = min(watch.denied_backoff * 2, RETRY_LIVE_SECONDS)
        else:
            return False
        await self._stop(watch)
        await self._start(watch)
        self.changes.rescan(watch.root)
        return True

    def _denied_back(self, watch: _Watch) -> bool:
        if not watch.denied:
            watch.denied_backoff = SUPERVISE_SECONDS
            return False
        if time.monotonic() < watch.next_denied_check:
            return False
        for directory in list(watch.denied):
            if not os.path.lexists(directory):
                watch.denied.discard(directory)
            elif _unreadable(directory) is None:
                return True
        return False

    def _set_blocked(self, watch: _Watch) -> None:
        detail = (
            f"cannot read the root directory: {watch.blocked}; serving what was indexed "
            "before, and checking again every second"
        )
        self._set(watch.root, "error", detail)
        log.warning("%s: %s", watch.root, detail)

    async def _check_live(self, watch: _Watch, now: float) -> None:
        if watch.observer is not None:
            if watch.limit is not None:
                # Some directories went unwatched: stop trusting events for this root.
                exc = watch.limit
                await self._stop(watch)
                self._fall_back(watch, exc)
                return
            identity = _identity(watch.root)
            if identity is not None and identity == watch.identity and watch.observer.healthy:
                return
            log.info("%s was deleted, replaced or lost its watch: re-watching", watch.root)
            await self._stop(watch)
        elif watch.missing:
            if _identity(watch.root) is None:
                return
            log.info("%s is back: watching it again", watch.root)
        elif now < watch.next_retry:
            return
        await self._start(watch)
        self.changes.rescan(watch.root)

    def _interval(self, root: str) -> float:
        reconciled = self.health.root(root).last_reconcile
        last = reconciled.seconds if reconciled is not None else 0.0
        return max(self.poll_seconds, POLL_COST_FACTOR * last)

    def _set(self, root: str, state: str, detail: str, poll: float | None = None) -> None:
        self.health.record(Watched(root, state, detail, poll))

    # ------------------------------------------------------------ observer threads

    def _on_limit(self, watch: _Watch, exc: OSError) -> None:
        watch.limit = exc

    def _on_denied(self, watch: _Watch, path: bytes) -> None:
        if len(watch.denied) < DENIED_CAP:
            watch.denied.add(os.fsdecode(path))


def _identity(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


def _unreadable(path: str) -> str | None:
    """Why directory ``path`` cannot be listed, or None (also when it does not exist)."""
    if os.access(path, os.R_OK | os.X_OK, effective_ids=os.access in os.supports_effective_ids):
        return None
    try:
        os.stat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return exc.strerror or str(exc)
    return os.strerror(errno.EACCES)


def _read_limit(name: str) -> str:
    try:
        with open(f"/proc/sys/fs/inotify/{name}", encoding="ascii") as fh:
            return fh.read().strip()
    except OSError:
        return "?"
