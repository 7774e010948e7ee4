"""Copying the write-ahead log into the database file, beside the writer.

The index runs in WAL mode: a commit appends pages to the ``-wal`` file, and a
checkpoint later copies them into the database file, each step ended by an fsync.
SQLite would checkpoint inside the COMMIT that takes the log past 1000 pages, on the
writer thread, which is what a full index waits for. Why a thread with a connection of
its own: a PASSIVE checkpoint runs beside a write transaction (SQLite lets one
checkpointer and one writer work at once), so the writer goes on with its next batch
while the last one is copied.

The log starts again from its beginning only when a write transaction begins with
every page copied; a writer that never waited would grow it by every batch of a full
index, to the size of the index. So once a log has grown past ``LOG_LIMIT_BYTES``,
``before_write`` waits for the running checkpoint and copies what is left: the next
transaction then restarts the log (and ``journal_size_limit`` trims the file).
"""

from __future__ import annotations

import logging
from concurrent.futures import Future, ThreadPoolExecutor, wait
from contextlib import closing
from pathlib import Path
from typing import Final

from kbindex.daemon.engine import sqlite

log = logging.getLogger(__name__)

LOG_LIMIT_BYTES: Final = 64 << 20
"""A log this large is restarted before the next write (about three batches of a
full index; each restart waits for the copy of the last batch only)."""


class Checkpointer:
    """Background checkpoints of one database file (skipped while it is absent).

    Use from the one writer thread: ``wrote`` after each commit, ``before_write``
    before each write transaction, ``settle`` before anything that checkpoints on
    its own, moves, deletes or closes the files.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._executor: ThreadPoolExecutor | None = None
        self._queued: Future[None] | None = None
        self.log_bytes = 0
        """The largest log the last checkpoint found (0: none yet, or restarted)."""

    def wrote(self) -> None:
        """A commit added to a log: copy it in the background. A checkpoint already
        waiting to start will copy this commit too, so none is added then."""
        queued = self._queued
        if queued is not None and not queued.running() and not queued.done():
            return
        if self._executor is None:
            self._executor = ThreadPoolExecutor(1, thread_name_prefix="kbindex-checkpoint")
        self._queued = self._executor.submit(self._checkpoint)

    def before_write(self, writer: sqlite.Connection) -> None:
        """Before a write transaction on ``writer`` (not in a transaction): when the log
        has outgrown LOG_LIMIT_BYTES, finish copying it so this transaction restarts it."""
        if self.log_bytes <= LOG_LIMIT_BYTES:
            return
        self.settle()
        # What was committed after the background checkpoint began; usually nothing is
        # left, and then SQLite neither copies nor syncs.
        try:
            writer.execute("PRAGMA wal_checkpoint(PASSIVE)")
        except sqlite.Error as exc:
            log.debug("checkpoint before a write failed: %s", exc)
        self.log_bytes = 0

    def settle(self) -> None:
        """Wait until no checkpoint runs or waits to run."""
        if self._queued is not None:
            wait([self._queued])

    def close(self) -> None:
        """Finish the running checkpoint and stop the thread (a later ``wrote``
        starts a new one)."""
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None
        self._queued = None

    def _checkpoint(self) -> None:
        try:
            # mode=rw: a file that is gone (a rebuild moved it aside) is not created.
            with closing(sqlite.connect(f"file:{self.path}?mode=rw", uri=True)) as conn:
                row = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
                (page,) = conn.execute("PRAGMA page_size").fetchone()
        except sqlite.Error as exc:
            # Never fatal: the writer's own checkpoints (the end of a refresh, close)
            # copy whatever is left.
            log.debug("background checkpoint of %s failed: %s", self.path, exc)
            return
        self.log_bytes = int(row[1]) * int(page)  # (busy, log frames, copied)
