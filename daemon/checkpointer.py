"""Copying the write-ahead logs into the database files, beside the writer.

Both index files run in WAL mode: a commit appends pages to the ``-wal`` file, and a
checkpoint later copies them into the database file, each step ended by an fsync.

Trigger: SQLite checkpoints inside the COMMIT that takes a log past 1000 pages, on the
committing thread. During a full index that was every batch, for both files, on the
writer thread, which is what a full index waits for. Over the 205 MB bench corpus
(``bench/write_path.py``, three rounds of each, alternating) the writer spent 5.0 to
8.3 s of its batches outside the ``docs`` inserts; with the checkpoints here, 2.7 to
4.0 s, plus 1.0 to 1.3 s for the checkpoint that ends the refresh (median scan 27.7
-> 24.7 s, the same CPU time). Most of it is waiting for the disk: checkpointing
every 10,000 pages instead of 1,000 saved nothing, so the cost follows the bytes
written and synced, not the number of checkpoints.

Why a thread with connections of its own: a PASSIVE checkpoint runs beside a write
transaction (SQLite lets one checkpointer and one writer work at once), so the writer
goes on with its next batch while the last one is copied.

The log starts again from its beginning only when a write transaction begins with
every page copied; a writer that never waited would grow it by every batch of a full
index, to the size of the index. So once a log has grown past ``LOG_LIMIT_BYTES``,
``before_write`` waits for the running checkpoint and copies what is left: the next
transaction then restarts the log (and ``journal_size_limit`` trims the file).
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from contextlib import closing
from pathlib import Path
from typing import Final

log = logging.getLogger(__name__)

LOG_LIMIT_BYTES: Final = 64 << 20
"""A log this large is restarted before the next write (about three batches of a
full index; each restart waits for the copy of the last batch only)."""


class Checkpointer:
    """Background checkpoints of a fixed set of database files (absent ones skipped).

    Use from the one writer thread: ``wrote`` after each commit, ``before_write``
    before each write transaction, ``settle`` before anything that checkpoints on
    its own, moves, deletes or closes the files.
    """

    def __init__(self, paths: Sequence[Path]) -> None:
        self.paths = tuple(paths)
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

    def before_write(self, writers: Sequence[sqlite3.Connection]) -> None:
        """Before a write transaction on ``writers`` (one per file, none in a
        transaction): when a log has outgrown LOG_LIMIT_BYTES, finish copying it so
        this transaction restarts it."""
        if self.log_bytes <= LOG_LIMIT_BYTES:
            return
        self.settle()
        for conn in writers:
            # What was committed after the background checkpoint began; usually
            # nothing is left, and then SQLite neither copies nor syncs.
            try:
                conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
            except sqlite3.Error as exc:
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
        largest = 0
        for path in self.paths:
            try:
                # mode=rw: a file that is gone (a rebuild deleted it) is not created.
                with closing(sqlite3.connect(f"file:{path}?mode=rw", uri=True)) as conn:
                    row = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
                    (page,) = conn.execute("PRAGMA page_size").fetchone()
            except sqlite3.Error as exc:
                # Never fatal: the writer's own checkpoints (the end of a refresh,
                # close) copy whatever is left.
                log.debug("background checkpoint of %s failed: %s", path, exc)
                continue
            largest = max(largest, int(row[1]) * int(page))  # (busy, log frames, copied)
        self.log_bytes = largest
