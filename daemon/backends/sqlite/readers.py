"""The read-only connections searches use, and the swap of the file beneath them.

Searches never wait for the writer (WAL mode): each runs on a connection of its own,
taken from this pool and given back. A rebuild replaces the file while the daemon
serves (a damaged one moved aside, an index rebuilt beside the old one taking its
name), so every connection carries the generation of the file it opened: one of an
older file is closed whether it is taken or given back, the swap waits until none is
in use, and no connection opens while the new file is being put in place (it would
find no file, or one without tables, where the client must only ever see the rebuild).
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Final

from kbindex.daemon.engine import sqlite

log = logging.getLogger(__name__)

IN_USE_WAIT_SECONDS: Final = 30.0
"""How long a swap waits for the connections in use to come back: each search ends
within its deadline, well before."""


def connect(path: Path, *, readonly: bool) -> sqlite.Connection:
    if readonly:
        conn = sqlite.connect(f"file:{path}?mode=ro", uri=True, check_same_thread=False, timeout=30)
    else:
        conn = sqlite.connect(path, check_same_thread=False, timeout=30, isolation_level=None)
    conn.execute("PRAGMA busy_timeout = 30000")
    return conn


class Readers:
    def __init__(self, db_path: Path) -> None:
        self.db_path = db_path
        self.generation = 0
        """Bumped by ``replacing``: a connection of an older file is never pooled."""
        self._idle: queue.LifoQueue[tuple[int, sqlite.Connection]] = queue.LifoQueue()
        """The one used last on top: its page cache is the warmest (a FIFO pool would
        hand sequential searches to colder and colder connections)."""
        self._replacing = threading.Lock()
        self._lending = threading.Condition()
        self._lent = 0
        """Connections in use (taken and not given back)."""

    @contextmanager
    def replacing(self, path: Path | None = None) -> Iterator[None]:
        """Hold while the file is replaced, or while the readers move to ``path``:
        connections to the old file are closed (those in use once given back, which
        this waits for), and none opens until the new one is complete."""
        with self._replacing:
            with self._lending:
                self.generation += 1
                self.close()
                if not self._lending.wait_for(lambda: self._lent == 0, IN_USE_WAIT_SECONDS):
                    log.warning("%d search(es) still read the old index file", self._lent)
            if path is not None:
                self.db_path = path
            yield

    @contextmanager
    def connection(self) -> Iterator[sqlite.Connection]:
        """A read-only connection from the pool, returned to it afterwards."""
        while True:
            try:
                generation, conn = self._idle.get_nowait()
            except queue.Empty:
                with self._replacing:
                    generation = self.generation
                    conn = connect(self.db_path, readonly=True)
            with self._lending:
                if generation == self.generation:
                    self._lent += 1
                    break
            conn.close()
        try:
            yield conn
        finally:
            conn.set_progress_handler(None, 0)
            with self._lending:
                self._lent -= 1
                current = generation == self.generation
                if current:
                    self._idle.put((generation, conn))
                self._lending.notify_all()
            if not current:
                conn.close()

    @contextmanager
    def fresh(self) -> Iterator[sqlite.Connection]:
        """A read-only connection opened for one use and closed after it, never pooled.

        For ``PRAGMA quick_check``: FTS5 checks its tables with the segment structure
        the connection cached at its last read of them, without first asking whether
        another connection has written since (a search does ask). On a pooled reader
        that had read a table before the writer changed it (any batch; a ``reindex
        --full`` and its merge rewrite every segment), the check compares the new
        index with the old structure and reports "malformed inverted index" for a
        file every fresh connection finds whole. A new connection has nothing cached.
        """
        with self._replacing:
            conn = connect(self.db_path, readonly=True)
        try:
            yield conn
        finally:
            conn.close()

    def close(self) -> None:
        """Close the idle connections (those in use close when given back, if stale)."""
        while True:
            try:
                self._idle.get_nowait()[1].close()
            except queue.Empty:
                break
