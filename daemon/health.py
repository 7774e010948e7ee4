"""What the daemon knows about its own state, for ``status`` and search freshness.

One object owns it: the indexer, the watcher (also from its observer threads), the
reconciler, the recovery and the control tell it what happened with
``Health.record(event)``, one of the event types below, and it changes its own fields
under a lock; everyone else reads them (values, or snapshots that do not change). Status
is always computed from live facts on request, never from a file. The types here are
the daemon's own; ``replies`` turns them into protocol messages, so a change to the
protocol stops at the edge.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Final, assert_never

RECENT_ERRORS = 20
LAG_WINDOW_SECONDS: Final = 300.0
SEVERITY: Final = {
    "": 0,
    "ok": 0,
    "live": 0,
    "polling": 1,
    "off": 1,
    "degraded": 2,
    "error": 3,
    "missing": 3,
}
"""Watcher states from best to worst; the freshness of a search shows the worst."""
IGNORED_WARN_MIN: Final = 10
IGNORED_WARN_SHARE: Final = 0.95
"""A root warns when its last scan's ignore rules skipped at least IGNORED_WARN_MIN
files and directories and more than this share of what it met (skipped + files kept):
a rule meant for someone else (a packaging .gitignore, a stray ``*``) hides the tree."""


@dataclass(frozen=True, slots=True)
class Progress:
    """The refresh under way: ``phase`` is ``scanning`` or ``indexing``."""

    phase: str
    done: int
    total: int
    started_at: float


@dataclass(frozen=True, slots=True)
class Reconciled:
    """What the last whole-root refresh found."""

    at: float
    seconds: float
    files_seen: int
    changed: int
    removed: int


@dataclass(frozen=True, slots=True)
class Ignored:
    """What the ignore rules skipped in the last walk of a whole root."""

    skipped: int
    """Files and directories skipped (a skipped directory counts once, unwalked)."""
    kept: int
    """Files listed for indexing."""
    top_reason: str = ""
    top_count: int = 0

    @classmethod
    def tally(cls, by_reason: dict[str, int], kept: int) -> Ignored:
        top = max(by_reason.items(), key=lambda item: item[1], default=("", 0))
        return cls(sum(by_reason.values()), kept, top[0], top[1])

    @property
    def warning(self) -> str:
        """The warning status shows, or "" when the rules leave enough."""
        if self.skipped < IGNORED_WARN_MIN:
            return ""
        if self.skipped <= IGNORED_WARN_SHARE * (self.skipped + self.kept):
            return ""
        return (
            f"ignore rules skipped {self.skipped:,} files and directories and kept "
            f"{self.kept:,} files in the last scan; {self.top_count:,} by {self.top_reason}"
        )


@dataclass(frozen=True, slots=True)
class Problem:
    """A file or directory that could not be read or listed, and why."""

    path: str
    reason: str


@dataclass(frozen=True, slots=True)
class Lag:
    """Seconds from a file event to its change being searchable."""

    last_seconds: float | None
    max_seconds: float | None
    """The longest within LAG_WINDOW_SECONDS."""
    samples: int


@dataclass(frozen=True, slots=True)
class RootHealth:
    state: str = "ok"
    """From the last reconcile: ``ok`` or ``missing``."""
    detail: str = ""
    last_scan_at: float | None = None
    watch: str = ""
    """From the watcher: ``live``, ``polling``, ``degraded``, ``error`` or ``off``."""
    watch_detail: str = ""
    poll_seconds: float | None = None
    last_event_at: float | None = None
    last_reconcile: Reconciled | None = None
    ignored: Ignored | None = None
    """From the last walk of the whole root."""

    @property
    def shown_state(self) -> str:
        return self.state if self.state != "ok" else (self.watch or "ok")

    @property
    def shown_detail(self) -> str:
        return self.detail if self.state != "ok" else self.watch_detail


# ---------------------------------------------------------------- events


@dataclass(frozen=True, slots=True)
class Idle:
    """The refresh under way ended, whatever its scope (``Progress`` says one runs)."""


@dataclass(frozen=True, slots=True)
class Scanned:
    """A scan of every root ended."""

    seconds: float


@dataclass(frozen=True, slots=True)
class Walked:
    """A whole root was walked by a refresh."""

    root: str
    missing: bool
    ignored: Ignored


@dataclass(frozen=True, slots=True)
class RootReconciled:
    root: str
    reconciled: Reconciled


@dataclass(frozen=True, slots=True)
class Counted:
    """Files read from disk and index entries moved by a write."""

    read: int = 0
    moved: int = 0


@dataclass(frozen=True, slots=True)
class Writes:
    """Whether writes to the index work: ``error`` says why the last one failed ("":
    they work)."""

    error: str = ""


@dataclass(frozen=True, slots=True)
class Watched:
    """How the watcher watches a root now."""

    root: str
    state: str
    detail: str
    poll_seconds: float | None = None


@dataclass(frozen=True, slots=True)
class Polled:
    """A polled root was rescanned; the next poll comes after ``seconds``."""

    root: str
    seconds: float


@dataclass(frozen=True, slots=True)
class FileEvent:
    """A change under a root was queued (from an observer thread)."""

    root: str


@dataclass(frozen=True, slots=True)
class Applying:
    """Changes taken from the watcher's queue and not in the index yet (0: none)."""

    count: int


@dataclass(frozen=True, slots=True)
class Applied:
    """Changes became searchable ``lag`` seconds after the first of them happened."""

    lag: float


@dataclass(frozen=True, slots=True)
class RootRemoved:
    root: str


Event = (
    Progress
    | Idle
    | Scanned
    | Problem
    | Walked
    | RootReconciled
    | Counted
    | Writes
    | Watched
    | Polled
    | FileEvent
    | Applying
    | Applied
    | RootRemoved
)


def _nothing_pending() -> int:
    return 0


def _not_rebuilding() -> str:
    return ""


class Health:
    def __init__(
        self,
        depth: Callable[[], int] = _nothing_pending,
        rebuilding: Callable[[], str] = _not_rebuilding,
    ) -> None:
        """``depth``: how many changes wait in the watcher's queue; ``rebuilding``: why
        the index is being rebuilt, "" when it is not (``Index.describe``)."""
        self._lock = threading.Lock()
        self._depth = depth
        self.rebuilding = rebuilding
        self._started_at = time.time()
        self._last_scan_at: float | None = None
        self._last_scan_seconds: float | None = None
        self._progress: Progress | None = None
        self._errors = 0
        self._recent_errors: deque[Problem] = deque(maxlen=RECENT_ERRORS)
        self._roots: dict[str, RootHealth] = {}
        self._files_read = 0
        self._files_moved = 0
        self._last_event_at: float | None = None
        self._last_lag: float | None = None
        self._lags: deque[tuple[float, float]] = deque(maxlen=4096)
        """(monotonic time indexed, seconds since the event), newest last."""
        self._applying = 0
        self._index_error = ""

    def record(self, event: Event) -> None:
        """What happened, from any thread."""
        with self._lock:
            self._record(event)

    def _record(self, event: Event) -> None:
        match event:
            case Progress():
                self._progress = event
            case Idle():
                self._progress = None
            case Scanned(seconds):
                self._last_scan_at, self._last_scan_seconds = time.time(), seconds
            case Problem():
                self._errors += 1
                self._recent_errors.appendleft(event)
            case Walked(root, missing, ignored):
                self._change(
                    root,
                    state="missing" if missing else "ok",
                    detail="root directory does not exist" if missing else "",
                    last_scan_at=time.time(),
                    ignored=ignored,
                )
            case RootReconciled(root, reconciled):
                self._change(root, last_reconcile=reconciled)
            case Counted(read, moved):
                self._files_read += read
                self._files_moved += moved
            case Writes(error):
                self._index_error = error
            case Watched(root, state, detail, poll):
                self._change(root, watch=state, watch_detail=detail, poll_seconds=poll)
            case Polled(root, seconds):
                self._change(root, poll_seconds=seconds)
            case FileEvent(root):
                # Not for a root removed meanwhile (the event was on its way).
                if root in self._roots:
                    self._last_event_at = now = time.time()
                    self._change(root, last_event_at=now)
            case Applying(count):
                self._applying = count
            case Applied(lag):
                self._last_lag = lag
                self._lags.append((time.monotonic(), lag))
            case RootRemoved(root):
                self._roots.pop(root, None)
            case _:
                assert_never(event)

    def _change(self, root: str, **fields: Any) -> None:
        self._roots[root] = replace(self._roots.get(root, RootHealth()), **fields)

    # ---------------------------------------------------------------- reads

    @property
    def started_at(self) -> float:
        return self._started_at

    @property
    def last_scan_at(self) -> float | None:
        """When the last scan of every root ended (None before the first one did)."""
        return self._last_scan_at

    @property
    def last_scan_seconds(self) -> float | None:
        return self._last_scan_seconds

    @property
    def progress(self) -> Progress | None:
        return self._progress

    @property
    def scanning(self) -> bool:
        return self._progress is not None

    @property
    def errors_encountered(self) -> int:
        return self._errors

    @property
    def recent_errors(self) -> tuple[Problem, ...]:
        with self._lock:
            return tuple(self._recent_errors)

    @property
    def files_read(self) -> int:
        return self._files_read

    @property
    def files_moved(self) -> int:
        return self._files_moved

    @property
    def last_event_at(self) -> float | None:
        return self._last_event_at

    @property
    def pending(self) -> int:
        return self._depth() + self._applying

    @property
    def index_error(self) -> str:
        """Why the last write to the index failed (disk full, I/O error); "" once one works."""
        return self._index_error

    def root(self, path: str) -> RootHealth:
        return self._roots.get(path) or RootHealth()

    def lag(self) -> Lag:
        horizon = time.monotonic() - LAG_WINDOW_SECONDS
        with self._lock:
            recent = [lag for at, lag in self._lags if at >= horizon]
            last = self._last_lag
        return Lag(_round(last), _round(max(recent)) if recent else None, len(recent))

    def watch_state(self) -> str:
        with self._lock:
            states = [rh.shown_state for rh in self._roots.values()]
        return max(states, key=lambda s: SEVERITY.get(s, 3), default="")


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 4)
