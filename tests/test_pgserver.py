"""The throwaway PostgreSQL cluster the PostgreSQL backend's tests run against
(``tests/pgserver.py``): it starts (as the ``postgres`` account when the tests run as root),
gives each test its own database, has pg_trgm, and a restart cuts open connections."""

from __future__ import annotations

import os
import pwd
from pathlib import Path

import pytest

psycopg = pytest.importorskip(
    "psycopg", reason="psycopg is not installed: pip install -e '.[postgres]'"
)

pytestmark = pytest.mark.slow  # a cluster's initdb and start take seconds


def test_a_fresh_database_per_test(pg_dsn: str) -> None:
    with psycopg.connect(pg_dsn) as conn:
        tables = conn.execute(
            "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'"
        ).fetchone()
        conn.execute("CREATE TABLE left_behind (x int)")
    assert tables == (0,)


def test_another_test_does_not_see_the_last_ones_tables(pg_dsn: str) -> None:
    with psycopg.connect(pg_dsn) as conn:
        found = conn.execute("SELECT to_regclass('left_behind') IS NULL").fetchone()
    assert found == (True,)


def test_pg_trgm_and_english_text_search(pg_dsn: str) -> None:
    with psycopg.connect(pg_dsn) as conn:
        conn.execute("CREATE EXTENSION pg_trgm")
        similarity = conn.execute("SELECT similarity('scheduler', 'schedular')").fetchone()
        matched = conn.execute(
            "SELECT to_tsvector('english', 'The scheduler runs tasks')"
            " @@ websearch_to_tsquery('english', 'task run')"
        ).fetchone()
    assert similarity is not None and similarity[0] > 0.3
    assert matched == (True,)


def test_the_server_runs_unprivileged_on_a_socket_only(pg_dsn: str) -> None:
    with psycopg.connect(pg_dsn) as conn:
        row = conn.execute("SELECT pg_backend_pid()").fetchone()
        assert row is not None
        server_uid = Path(f"/proc/{row[0]}").stat().st_uid
        settings = dict(
            conn.execute(
                "SELECT name, setting FROM pg_settings"
                " WHERE name IN ('listen_addresses', 'fsync', 'server_encoding')"
            ).fetchall()
        )
    assert settings == {"listen_addresses": "", "fsync": "off", "server_encoding": "UTF8"}
    if os.geteuid() == 0:
        assert server_uid == pwd.getpwnam("postgres").pw_uid
    else:
        assert server_uid == os.geteuid()


def test_a_restart_drops_open_connections_and_new_ones_work(pg_server, pg_dsn: str) -> None:
    conn = psycopg.connect(pg_dsn, autocommit=True)
    try:
        conn.execute("CREATE TABLE kept (x int)")
        conn.execute("INSERT INTO kept VALUES (1)")
        pg_server.restart()
        with pytest.raises(psycopg.OperationalError):
            conn.execute("SELECT 1")
        assert conn.closed
    finally:
        conn.close()
    with psycopg.connect(pg_dsn) as again:
        assert again.execute("SELECT x FROM kept").fetchall() == [(1,)]
