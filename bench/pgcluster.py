"""A PostgreSQL database for the benchmarks that run kbindexd on its PostgreSQL backend.

Either the caller's (``--dsn``: a database the benchmark may empty, since the daemon's
tables are dropped between runs so that every run indexes from nothing) or a throwaway
cluster from tests/pgserver.py (imported from tests/ as the tests do; it runs the server
as the ``postgres`` account when we are root), one fresh database per run.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import common
import psycopg

TABLES = ("kb_segments", "kb_postings", "kb_docs", "kb_files", "kb_meta")


class Databases:
    """``fresh()`` gives the connection string of an empty database for one daemon run."""

    def __init__(self, dsn: str | None, server: Any) -> None:
        self._dsn = dsn
        self.server = server
        """The throwaway ``pgserver.PgServer``, or None with ``--dsn``."""

    def fresh(self, *, migrate: bool = True) -> str:
        """An empty database with this kbindexd's schema made, as its owner would (``kbindexd
        db migrate``): daemons create nothing. A kbindexd of before schema 4 ignores it and
        makes its own tables in ``public``."""
        if self.server is not None:
            dsn = str(self.server.dsn(self.server.create_database()))
        else:
            assert self._dsn is not None
            dsn = self._empty(self._dsn)
        if migrate:
            from kbindex.daemon.backends.postgres import schema

            with psycopg.connect(dsn, autocommit=True) as conn:
                schema.migrate(conn)
        return dsn

    def _empty(self, dsn: str) -> str:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("DROP SCHEMA IF EXISTS kbindex CASCADE")
            conn.execute(f"DROP TABLE IF EXISTS {', '.join(TABLES)} CASCADE")
            for drop in (
                "FUNCTION IF EXISTS kb_stemmable(text), kb_plain(text), kb_tf(text[]),"
                " kb_limited(tsvector), kb_segments(regconfig, text), kb_either(tsquery)",
                "TEXT SEARCH CONFIGURATION IF EXISTS kb_words, kb_exact",
                "TEXT SEARCH DICTIONARY IF EXISTS kb_porter",
            ):
                conn.execute(f"DROP {drop}")
        return dsn

    def postmaster_pid(self) -> int | None:
        """The server's main process (its CPU time is the backend's share), if ours."""
        if self.server is None:
            return None
        return int((Path(self.server.data) / "postmaster.pid").read_text().split()[0])


@contextmanager
def databases(dsn: str | None) -> Iterator[Databases]:
    """The caller's database, or a throwaway cluster closed on the way out."""
    if dsn:
        yield Databases(dsn, None)
        return
    sys.path.insert(0, str(common.REPO / "tests"))
    import pgserver

    bindir = pgserver.find_bindir()
    if bindir is None:
        raise SystemExit("PostgreSQL's initdb and pg_ctl not found; give --dsn")
    server = pgserver.started(bindir)
    try:
        # Full pages in the WAL after each checkpoint, as a real server writes them: the
        # WAL counted is a real server's. fsync stays off (time only, not volume).
        with psycopg.connect(server.dsn("postgres"), autocommit=True) as conn:
            conn.execute("ALTER SYSTEM SET full_page_writes = on")
            conn.execute("SELECT pg_reload_conf()")
        yield Databases(None, server)
    finally:
        server.close()


@contextmanager
def kept(folder: Path) -> Iterator[tuple[str, bool]]:
    """A cluster whose data stays in ``folder`` (a short path: the server's socket is made
    there), started again from it when it holds one: the connection string of its one
    database, and whether it was there already. Stopped, not removed, on the way out."""
    sys.path.insert(0, str(common.REPO / "tests"))
    import pgserver

    bindir = pgserver.find_bindir()
    if bindir is None:
        raise SystemExit("PostgreSQL's initdb and pg_ctl not found")
    server = pgserver.PgServer(bindir)
    shutil.rmtree(server.base)  # the temporary folder it made: ``folder`` instead
    folder.mkdir(parents=True, exist_ok=True)
    server.base = server.sockdir = folder
    server.data, server.log_path = folder / "data", folder / "server.log"
    if server._account is not None:
        os.chown(folder, server._account.pw_uid, server._account.pw_gid)
    reused = (server.data / "PG_VERSION").exists()
    if not reused:
        server.init()
    else:
        # A copy of another folder's cluster: its socket here, not in the original's
        # folder (the last setting in the file wins).
        conf = server.data / "postgresql.conf"
        line = f"unix_socket_directories = '{folder}'"
        if conf.read_text().rstrip().splitlines()[-1] != line:
            with conf.open("a", encoding="utf-8") as out:
                out.write(line + "\n")
    server.start()
    try:
        dsn = server.dsn("kbbench")
        if not reused:
            with psycopg.connect(server.dsn("postgres"), autocommit=True) as conn:
                conn.execute("CREATE DATABASE kbbench")
        yield dsn, reused
    finally:
        server.stop()


def relation_mb(dsn: str) -> float:
    """pg_total_relation_size of kb_files + kb_docs + kb_postings + kb_segments (heap, TOAST,
    indexes), in MB."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            # In the schema kbindex (schema 4 on), or in public (a kbindexd of before).
            "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c"
            " JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE c.relkind = 'r' AND n.nspname IN ('kbindex', 'public')"
            " AND c.relname IN ('kb_files', 'kb_docs', 'kb_postings', 'kb_segments')"
        ).fetchone()
    return int(row[0]) / 1e6 if row else float("nan")


def server_cpu_seconds(postmaster: int) -> float:
    """CPU time of the whole server so far: the postmaster, its live children and the
    children it has reaped (the daemon's connections do the backend's work there)."""
    total = 0.0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # exited meanwhile
        pid = int(stat.parent.name)
        if pid == postmaster or int(fields[1]) == postmaster:
            total += sum(int(f) for f in fields[11:15])
    return total / os.sysconf("SC_CLK_TCK")


def wal_lsn(dsn: str) -> str:
    """The server's current WAL position."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute("SELECT pg_current_wal_lsn()::text").fetchone()
    return str(row[0]) if row else "0/0"


def wal_since(dsn: str, lsn: str | None) -> int:
    """Bytes of WAL the whole server wrote since ``lsn``."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), %s)", (lsn,)).fetchone()
    return int(row[0]) if row else 0


def table_mb(dsn: str) -> dict[str, float]:
    """Each table's size (heap, TOAST and indexes, in MB) and each index's, largest first."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT c.relname, c.relkind, CASE WHEN c.relkind = 'r'"
            " THEN pg_total_relation_size(c.oid) ELSE pg_relation_size(c.oid) END"
            " FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname = 'kbindex' AND c.relkind IN ('r', 'i')"
            " ORDER BY 3 DESC"
        ).fetchall()
    return {
        f"{name}{' (index)' if kind == 'i' else ''}": round(size / 1e6, 1)
        for name, kind, size in rows
        if size > 100_000
    }
