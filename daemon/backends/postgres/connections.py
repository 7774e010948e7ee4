"""Connections to the shared index's server: one for the writer, a pool for readers.

A connection the server dropped (a restart, a network cut) is thrown away when it
is next given back, and the next use opens a new one: nothing here waits or loops.
The daemon's own retry (``app._retry_unwritable``, every few seconds while status
shows the error) is the backoff for writes; a search that meets a lost connection
fails with ``unavailable`` and the next one tries a new connection.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Any, Final

import psycopg
from kbindex.daemon import sandbox
from kbindex.proto.dsn import over_tcp

CONNECT_TIMEOUT_SECONDS: Final = 5
STATEMENT_TIMEOUT_MS: Final = 5000
"""A read running longer is cancelled by the server (the searcher's deadline in SQLite)."""
APPLICATION: Final = "kbindexd"

Connection = psycopg.Connection[Any]


def connect(dsn: str, *, read_only: bool) -> Connection:
    try:
        conn = psycopg.connect(
            dsn,
            autocommit=True,
            connect_timeout=CONNECT_TIMEOUT_SECONDS,
            application_name=APPLICATION,
        )
    except psycopg.OperationalError as exc:
        # libpq's own words for a socket() the sandbox refused are often none at all
        # ("connection is bad: no error details available").
        denied = sandbox.tcp_denied() if over_tcp(dsn) else ""
        if denied:
            raise psycopg.OperationalError(denied) from exc
        raise
    # JIT compiles a plan whose estimated cost is high, which a search's nested loops
    # over postings often is: compiling would take far longer than the search.
    conn.execute("SET jit = off")
    if read_only:
        conn.execute(f"SET statement_timeout = {STATEMENT_TIMEOUT_MS}")
        conn.execute("SET default_transaction_read_only = on")
    return conn


def is_lost(exc: BaseException) -> bool:
    """Whether ``exc`` means the server cannot be reached or dropped the connection."""
    return isinstance(exc, psycopg.OperationalError) and not isinstance(
        exc, psycopg.errors.QueryCanceled
    )


class Readers:
    """Read-only connections, taken for one read and given back."""

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self._idle: queue.LifoQueue[Connection] = queue.LifoQueue()

    @contextmanager
    def connection(self) -> Iterator[Connection]:
        try:
            conn = self._idle.get_nowait()
        except queue.Empty:
            conn = connect(self.dsn, read_only=True)
        try:
            yield conn
        finally:
            if (
                conn.closed
                or conn.broken
                or conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE
            ):
                with suppress(psycopg.Error):
                    conn.close()
            else:
                self._idle.put(conn)

    def close(self) -> None:
        while True:
            try:
                self._idle.get_nowait().close()
            except queue.Empty:
                break


class Writer:
    """The one connection writes go through, opened again after it was lost."""

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self._conn: Connection | None = None
        self._lock = threading.Lock()

    def get(self) -> Connection:
        with self._lock:
            if self._conn is None or self._conn.closed or self._conn.broken:
                self._conn = connect(self.dsn, read_only=False)
            return self._conn

    @property
    def fresh(self) -> bool:
        """Whether the next ``get`` opens a new connection (session state is gone)."""
        return self._conn is None or self._conn.closed or self._conn.broken

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                with suppress(psycopg.Error):
                    self._conn.close()
                self._conn = None
