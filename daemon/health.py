"""What the daemon knows about its own state, for ``status`` and search freshness.

One mutable object owned by the composition root and updated by the indexer (and the
watcher): status is always computed from live facts on request, never from a file.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field

from kbindex.proto.messages import FileIssue, Freshness, ScanProgress

RECENT_ERRORS = 20


@dataclass
class RootHealth:
    state: str = "ok"
    detail: str = ""
    last_scan_at: float | None = None


@dataclass
class Health:
    started_at: float = field(default_factory=time.time)
    last_scan_at: float | None = None
    last_scan_seconds: float | None = None
    progress: ScanProgress | None = None
    pending: int = 0
    errors_encountered: int = 0
    recent_errors: deque[FileIssue] = field(default_factory=lambda: deque(maxlen=RECENT_ERRORS))
    roots: dict[str, RootHealth] = field(default_factory=dict)

    @property
    def scanning(self) -> bool:
        return self.progress is not None

    def error(self, path: str, reason: str) -> None:
        self.errors_encountered += 1
        self.recent_errors.appendleft(FileIssue(path=path, reason=reason))

    def root(self, path: str) -> RootHealth:
        return self.roots.setdefault(path, RootHealth())

    def freshness(self) -> Freshness:
        return Freshness(
            last_scan_at=self.last_scan_at, scanning=self.scanning, pending=self.pending
        )
