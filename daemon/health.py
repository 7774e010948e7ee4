"""What the daemon knows about its own state, for ``status`` and search freshness.

One mutable object owned by the composition root and updated by the indexer and the
watcher: status is always computed from live facts on request, never from a file. The
types here are the daemon's own; ``replies`` turns them into protocol messages, so a
change to the protocol stops at the edge.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

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


@dataclass
class RootHealth:
    state: str = "ok"
    """From the last reconcile: ``ok`` or ``missing``."""
    detail: str = ""
    last_scan_at: float | None = None
    watch: str = ""
    """Set by the watcher: ``live``, ``polling``, ``degraded``, ``error`` or ``off``."""
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


def _nothing_pending() -> int:
    return 0


def _not_rebuilding() -> str:
    return ""


@dataclass
class Health:
    started_at: float = field(default_factory=time.time)
    last_scan_at: float | None = None
    last_scan_seconds: float | None = None
    progress: Progress | None = None
    errors_encountered: int = 0
    recent_errors: deque[Problem] = field(default_factory=lambda: deque(maxlen=RECENT_ERRORS))
    roots: dict[str, RootHealth] = field(default_factory=dict)
    files_read: int = 0
    files_moved: int = 0
    last_event_at: float | None = None
    last_lag: float | None = None
    lags: deque[tuple[float, float]] = field(default_factory=lambda: deque(maxlen=4096))
    """(monotonic time indexed, seconds since the event), newest last."""
    depth: Callable[[], int] = _nothing_pending
    """How many changes wait in the watcher's queue (set by the composition root)."""
    applying: int = 0
    """Changes taken from the queue and not yet in the index."""
    index_error: str = ""
    """Why the last write to the index failed (disk full, I/O error); "" once one works."""
    rebuilding: Callable[[], str] = _not_rebuilding
    """Why the index is being rebuilt, "" when it is not (``Index.rebuilding``, set by
    the composition root)."""

    @property
    def scanning(self) -> bool:
        return self.progress is not None

    @property
    def pending(self) -> int:
        return self.depth() + self.applying

    def error(self, path: str, reason: str) -> None:
        self.errors_encountered += 1
        self.recent_errors.appendleft(Problem(path, reason))

    def root(self, path: str) -> RootHealth:
        return self.roots.setdefault(path, RootHealth())

    def record_lag(self, seconds: float) -> None:
        self.last_lag = seconds
        self.lags.append((time.monotonic(), seconds))

    def lag(self) -> Lag:
        horizon = time.monotonic() - LAG_WINDOW_SECONDS
        recent = [lag for at, lag in self.lags if at >= horizon]
        return Lag(_round(self.last_lag), _round(max(recent)) if recent else None, len(recent))

    def watch_state(self) -> str:
        states = [rh.shown_state for rh in self.roots.values()]
        return max(states, key=lambda s: SEVERITY.get(s, 3), default="")


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 4)
