"""Committed writes, announced: what the index holds changed, and readers of it learn so.

The indexer is the index's only writer; after each write it commits (a batch, a move, a
root forgotten, a rebuild) it calls ``Commits.committed``, and once more when a refresh
that committed ends (a reader that waits for the writer to be done hears it). Whatever
keeps something counted from the index (status's counts, the systemd status line,
search by meaning's backlog) compares ``count`` with the count it was computed at, or
awaits ``changed(since)`` instead of polling the index.

Why a counter and an event swapped per commit rather than a stream: a waiter wants to
know that something changed since it last looked, not each commit (a scan commits
hundreds of batches), and a counter read from any thread answers that at no cost.
``committed`` may be called from any thread: a worker thread hands the wake-up to the
event loop the waiters run in (``anyio.from_thread``).
"""

from __future__ import annotations

import threading
from contextlib import suppress

import anyio
import anyio.from_thread
import anyio.lowlevel


class Commits:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._count = 0
        self._waiting: tuple[anyio.Event, anyio.lowlevel.EventLoopToken, int] | None = None
        """The event the waiters await, its loop and that loop's thread."""

    @property
    def count(self) -> int:
        """Commits so far: what was computed from the index stays true while it stays."""
        return self._count

    def committed(self) -> None:
        """A write was committed (from any thread): wake every waiter."""
        with self._lock:
            self._count += 1
            waiting, self._waiting = self._waiting, None
        if waiting is None:
            return
        event, token, thread = waiting
        if thread == threading.get_ident():
            event.set()
            return
        # The loop has ended (a commit in a thread that outlived it): nobody waits.
        with suppress(RuntimeError):
            anyio.from_thread.run_sync(event.set, token=token)

    async def changed(self, since: int) -> int:
        """Wait until ``count`` differs from ``since``; returns the new count."""
        with self._lock:
            if self._count != since:
                return self._count
            if self._waiting is None:
                token = anyio.lowlevel.current_token()
                self._waiting = (anyio.Event(), token, threading.get_ident())
            event = self._waiting[0]
        await event.wait()
        return self._count
