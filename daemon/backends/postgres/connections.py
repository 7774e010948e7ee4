"""Connections to the shared index's server: one for the writer, a pool for readers.

A connection the server dropped (a restart, a network cut) is thrown away when it
is next given back, and the next use opens a new one: nothing here waits or loops.
The daemon's own retry (``app._retry_unwritable``, every few seconds while status
shows the error) is the backoff for writes; a search that meets a lost connection
fails with ``unavailable`` and the next one tries a new connection.

Every wait is bounded, whatever the network does:
- the server cancels a statement past its ``statement_timeout`` (reads READ_SECONDS,
  writes the daemon's ``pg_timeout``) and a lock wait past LOCK_SECONDS;
- TCP keepalives and ``tcp_user_timeout``, on both ends, drop a peer that vanished
  (the server's side then frees what that session held);
- and the client gives up on its own (``Guarded.wait``) GRACE_SECONDS after a
  statement's timeout: a path that stays up but passes nothing (a stalled proxy or
  NAT, a paused VM) acknowledges keepalives, and the server's cancellation never
  arrives. The connection is then closed, and the error says so.

Connections search the schema ``kbindex`` only (``schema.NAMESPACE``; PostgreSQL
searches ``pg_catalog`` before it): nothing another role puts in ``public`` is used.

A server reached over TCP other than on this host is asked for TLS (``sslmode=require``)
unless the connection string or ``PGSSLMODE`` says otherwise.
"""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Any, Final, Literal

import psycopg
from kbindex.daemon import sandbox
from kbindex.daemon.backends.postgres.schema import NAMESPACE
from kbindex.proto.dsn import over_tcp
from psycopg.conninfo import conninfo_to_dict, make_conninfo

CONNECT_TIMEOUT_SECONDS: Final = 5
READ_SECONDS: Final = 5.0
"""A read running longer is cancelled by the server (the searcher's deadline in SQLite)."""
WRITE_SECONDS: Final = 60.0
"""A write statement's timeout unless the settings give another (``pg_timeout``)."""
LOCK_SECONDS: Final = 10.0
GRACE_SECONDS: Final = 5.0
"""How long after a statement's own timeout the client stops waiting for the server."""
KEEPALIVES: Final = {
    "keepalives": "1",
    "keepalives_idle": "10",
    "keepalives_interval": "5",
    "keepalives_count": "3",
    "tcp_user_timeout": "20000",  # ms: data sent and not acknowledged
}
LOCAL_HOSTS: Final = frozenset({"localhost", "127.0.0.1", "::1"})
APPLICATION: Final = "kbindexd"

Role = Literal["read", "write", "owner"]


class NoAnswer(psycopg.OperationalError):
    """The server did not answer within the client's deadline: the connection is closed."""


class Guarded(psycopg.Connection[Any]):
    """A connection whose every wait for the server ends by ``deadline`` seconds."""

    deadline: float | None = None

    def wait(self, gen: Any, interval: float = 0.1, timeout: float | None = None) -> Any:
        limit = timeout if timeout is not None else self.deadline
        try:
            return super().wait(gen, interval, limit)
        except psycopg.errors._WaitTimeout:
            # The connection is in the middle of a message: it cannot be used again.
            with suppress(Exception):
                self.pgconn.finish()
            raise NoAnswer(
                f"the PostgreSQL server did not answer within {limit:g} s (the network"
                " or the server stalled); the connection was closed"
            ) from None


Connection = psycopg.Connection[Any]


def is_local(dsn: str) -> bool:
    """Whether every host the connection string names is this one: a Unix socket (no
    host, a directory or an abstract ``@`` name), ``localhost``, 127.0.0.1 or ::1."""
    params = conninfo_to_dict(dsn)
    hosts = str(
        params.get("hostaddr")
        or params.get("host")
        or os.environ.get("PGHOSTADDR")
        or os.environ.get("PGHOST")
        or ""
    )
    return all(not h or h.startswith(("/", "@")) or h in LOCAL_HOSTS for h in hosts.split(","))


def conninfo(dsn: str) -> str:
    """``dsn`` with the defaults the daemon adds where it says nothing: keepalives,
    ``tcp_user_timeout``, and ``sslmode=require`` for another host."""
    params = conninfo_to_dict(dsn)
    extra = {k: v for k, v in KEEPALIVES.items() if k not in params}
    if "sslmode" not in params and not os.environ.get("PGSSLMODE") and not is_local(dsn):
        extra["sslmode"] = "require"
    return make_conninfo(dsn, **extra)


def connect(dsn: str, *, role: Role, timeout: float = WRITE_SECONDS) -> Connection:
    """A connection for ``role``: ``read`` (read-only, READ_SECONDS a statement),
    ``write`` (``timeout`` seconds a statement) or ``owner`` (``kbindexd db``: no
    statement timeout, no search path: it names its schema)."""
    try:
        conn = Guarded.connect(
            conninfo(dsn),
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
    statement = {"read": READ_SECONDS, "write": timeout, "owner": 0.0}[role]
    values = {
        # JIT compiles a plan whose estimated cost is high, which a search's nested
        # loops over postings often is: 230 ms of compiling for a 2 ms search.
        "jit": "off",
        "statement_timeout": f"{int(statement * 1000)}",
        "lock_timeout": f"{int(LOCK_SECONDS * 1000)}",
        # The server's end of the connection: a vanished daemon's session (and what
        # it holds) is dropped within about 25 s, not the kernel's two hours.
        "tcp_keepalives_idle": "10",
        "tcp_keepalives_interval": "5",
        "tcp_keepalives_count": "3",
        "tcp_user_timeout": "20000",
    }
    if role != "owner":
        values["search_path"] = NAMESPACE
    if role == "read":
        values["default_transaction_read_only"] = "on"
    calls = ", ".join("set_config(%s, %s, false)" for _ in values)
    conn.execute(f"SELECT {calls}", [x for pair in values.items() for x in pair])
    if role != "owner":
        conn.deadline = statement + GRACE_SECONDS
    return conn


@contextmanager
def unbounded(conn: Connection, seconds: float) -> Iterator[None]:
    """Let ``conn`` run one long statement (a VACUUM): no statement timeout, and the
    client waits ``seconds``."""
    assert isinstance(conn, Guarded)
    deadline = conn.deadline
    conn.execute("SET statement_timeout = 0")
    conn.deadline = seconds
    try:
        yield
    finally:
        conn.deadline = deadline
        if not conn.closed:
            with suppress(psycopg.Error):
                conn.execute("RESET statement_timeout")


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
            conn = connect(self.dsn, role="read")
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
    """One connection that writes go through, opened again after it was lost."""

    def __init__(self, dsn: str, timeout: float = WRITE_SECONDS) -> None:
        self.dsn = dsn
        self.timeout = timeout
        self._conn: Connection | None = None
        self._lock = threading.Lock()

    def get(self) -> Connection:
        with self._lock:
            if self._conn is None or self._conn.closed or self._conn.broken:
                self._conn = connect(self.dsn, role="write", timeout=self.timeout)
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
