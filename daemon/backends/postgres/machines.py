"""The machines that write the shared index, and the lease each daemon holds on its name.

``kb_machines`` has a row per machine name: its owner (the role that registered it: with
row-level security on, only that role may write the machine's rows), the daemon writing
it now (``holder``) and until when (``expires``). A daemon takes the lease before its
first write, for its ``pg_lease`` seconds (LEASE_SECONDS unless the settings say), renews
it every sixth of that from a thread of its own (its own connection: a long batch does
not starve it), and gives it back when it stops. Every write batch renews it first, in
the batch's own transaction, and reads the schema's version in the same statement: a
batch of a daemon that lost its lease (it was paused past its lease and another took
over) or that meets another schema writes nothing.

A second daemon with the same name is refused while the lease runs; a host that
vanished holds it one lease at most. A machine is behind once its heartbeat is late by
half its lease (three heartbeats): each row says its own lease (``expires`` less
``heartbeat``), so every daemon judges each machine by that machine's setting.
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
import threading
from contextlib import suppress
from typing import TYPE_CHECKING, Final, NamedTuple

import psycopg
from kbindex.daemon.backends.postgres import schema
from kbindex.daemon.backends.postgres.connections import Writer, is_lost

if TYPE_CHECKING:
    from kbindex.daemon.backends.postgres.connections import Connection

log = logging.getLogger(__name__)

LEASE_SECONDS: Final = 30.0
"""The lease unless the settings give another (``pg_lease_seconds``)."""
BEATS: Final = 6
"""Heartbeats per lease: a machine is behind after three missed (half its lease)."""

_TAKE: Final = """
    INSERT INTO kb_machines AS m (name, holder, heartbeat, expires)
    VALUES (%(name)s, %(holder)s, now(), now() + make_interval(secs => %(lease)s))
    ON CONFLICT (name) DO UPDATE
        SET holder = excluded.holder, heartbeat = excluded.heartbeat, expires = excluded.expires
        WHERE m.holder = excluded.holder OR m.holder IS NULL OR m.expires < now()
    RETURNING (SELECT value FROM kb_meta WHERE key = 'schema')
"""


class MachineTaken(Exception):
    """Another daemon holds this machine name's lease, or another role owns the name."""


class Machine(NamedTuple):
    name: str
    owner: str
    state: str
    """``live``, ``behind`` (its heartbeat is late) or ``gone`` (no daemon holds it)."""
    heartbeat: float | None
    """Seconds since its last heartbeat."""


def listed(conn: Connection) -> list[Machine]:
    """Every registered machine, and every machine name that has rows."""
    rows = conn.execute(
        """SELECT coalesce(m.name, f.machine), coalesce(m.owner::text, ''),
               CASE WHEN m.holder IS NULL OR m.expires < now() THEN 'gone'
                    WHEN m.heartbeat < now() - (m.expires - m.heartbeat) / 2 THEN 'behind'
                    ELSE 'live' END,
               extract(epoch FROM now() - m.heartbeat)::float8
        FROM kb_machines m FULL JOIN (SELECT DISTINCT machine FROM kb_files) f
             ON f.machine = m.name
        ORDER BY 1"""
    ).fetchall()
    return [Machine(str(n), str(o), str(s), None if h is None else float(h)) for n, o, s, h in rows]


class Lease:
    """This daemon's lease on its machine name."""

    def __init__(
        self, dsn: str, machine: str, timeout: float, seconds: float = LEASE_SECONDS
    ) -> None:
        self.machine = machine
        self.holder = f"{socket.gethostname()} pid {os.getpid()} {secrets.token_hex(3)}"
        self.seconds = seconds
        self.heartbeat = seconds / BEATS
        self._beats = Writer(dsn, min(timeout, self.heartbeat * 2))
        self._held = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def take(self, conn: Connection) -> None:
        """Take (or keep) the lease; MachineTaken while another daemon holds it."""
        with conn.transaction():
            self.renew(conn)
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._beat, name="kbindex-heartbeat", daemon=True
            )
            self._thread.start()

    def renew(self, conn: Connection) -> None:
        """Renew the lease in ``conn``'s transaction and check the schema's version:
        raise MachineTaken or SchemaRefused (the transaction is then to roll back)."""
        try:
            with conn.transaction():  # a savepoint: the reason is read after a refusal
                taken = conn.execute(
                    _TAKE, {"name": self.machine, "holder": self.holder, "lease": self.seconds}
                )
                row = taken.fetchone()
        except psycopg.errors.InsufficientPrivilege as exc:
            if "row-level security" not in str(exc):
                raise
            raise MachineTaken(self._owned(conn)) from None
        if row is None:
            self._held = False
            raise MachineTaken(self._taken(conn))
        self._held = True
        if row[0] != str(schema.SCHEMA_VERSION):
            raise schema.SchemaRefused(
                f"the shared index's schema is now version {row[0]}, this kbindexd writes"
                f" {schema.SCHEMA_VERSION}: upgrade kbindex on this machine, or its owner"
                f" runs `{schema.COMMAND}`"
            )

    def _taken(self, conn: Connection) -> str:
        with conn.transaction(force_rollback=True):
            row = conn.execute(
                "SELECT holder, extract(epoch FROM expires - now())::float8 FROM kb_machines"
                " WHERE name = %s",
                (self.machine,),
            ).fetchone()
        holder, left = row if row else ("?", 0.0)
        return (
            f"machine {self.machine!r} is written by another kbindexd ({holder}; its lease"
            f" runs {max(float(left or 0), 0):.0f} s more unless renewed): give each daemon"
            " its own --machine name"
        )

    def _owned(self, conn: Connection) -> str:
        row = conn.execute(
            "SELECT owner::text, current_user::text FROM kb_machines WHERE name = %s",
            (self.machine,),
        ).fetchone()
        owner, me = row if row else ("another role", "this role")
        return (
            f"machine {self.machine!r} belongs to PostgreSQL role {owner}, not {me}: the"
            " shared index's row-level security lets only its role write it; choose"
            " another --machine name"
        )

    def _beat(self) -> None:
        while not self._stop.wait(self.heartbeat):
            if not self._held:
                continue
            try:
                conn = self._beats.get()
                with conn.transaction():
                    self.renew(conn)
            except (MachineTaken, schema.SchemaRefused) as exc:
                log.warning("heartbeat: %s", exc)
            except psycopg.Error as exc:
                # The writer meets the same fault and says so in status.
                log.debug("heartbeat failed: %s", exc)
                if is_lost(exc):
                    self._beats.close()

    def release(self) -> None:
        """Give the lease back (the daemon stops): another daemon may take the name now."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.heartbeat * 3)
        if self._held:
            with suppress(psycopg.Error):
                conn = self._beats.get()
                conn.execute(
                    "UPDATE kb_machines SET holder = NULL, expires = now()"
                    " WHERE name = %s AND holder = %s",
                    (self.machine, self.holder),
                )
        self._beats.close()
