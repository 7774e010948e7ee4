"""Repeated log messages said once, then counted.

A server any local user can reach must not let them fill the disk through its log: a
flood of bad requests makes the same warning (``Invalid Host header``, a refused token,
a failed accept) once per request. The filter passes the first record of each log
statement and counts the rest; ``flush()``, called every ``window`` seconds, says how
many were left out, once per statement, and forgets the statements that went quiet, so
their next record passes again. A flood of any length costs two lines per window.

Records are grouped by the statement that made them (logger, level, file and line), not
by their text: much of the SDK logs with f-strings, whose text differs on every request.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

_Key = tuple[str, int, str, int]
_SUMMARY: Final = "_kbindex_repeat_summary"
_SHOWN_CHARS: Final = 300


@dataclass
class _Tally:
    name: str
    level: int
    first: str
    since: float
    left_out: int = 0


class RepeatFilter(logging.Filter):
    def __init__(self, window: float = 60.0, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self.window = window
        self._clock = clock
        self._tallies: dict[_Key, _Tally] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, _SUMMARY, False):
            return True
        key = (record.name, record.levelno, record.pathname, record.lineno)
        tally = self._tallies.get(key)
        if tally is None:
            first = record.getMessage()
            if len(first) > _SHOWN_CHARS:
                first = first[:_SHOWN_CHARS] + "..."
            self._tallies[key] = _Tally(record.name, record.levelno, first, self._clock())
            return True
        tally.left_out += 1
        return False

    def flush(self) -> None:
        """Log how often each statement repeated since it was last said or counted."""
        now = self._clock()
        for key, tally in list(self._tallies.items()):
            if not tally.left_out:
                del self._tallies[key]  # quiet for a window: its next record passes
                continue
            logging.getLogger(tally.name).log(
                tally.level,
                "%s [repeated %d more times in %.0f s]",
                tally.first,
                tally.left_out,
                now - tally.since,
                extra={_SUMMARY: True},
            )
            tally.left_out = 0
            tally.since = now


def install(window: float = 60.0) -> RepeatFilter:
    """Put a RepeatFilter on every handler of the root logger (where every logger's
    records end up, uvicorn's and asyncio's included); return it for ``flush``."""
    repeats = RepeatFilter(window)
    for handler in logging.getLogger().handlers:
        handler.addFilter(repeats)
    return repeats
