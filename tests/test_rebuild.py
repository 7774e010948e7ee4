"""The index is derived data: one made by an older kbindexd is built again beside the
old one, which answers searches (saying so) until the new one's first scan of every
root has committed and it takes the old one's place; one made by a newer kbindexd is
refused. Real daemons, real index files, a real lock and a real full disk.

An older index is made from a real one as schema 9 had it: without each file's kind
and the ``fields`` and ``links`` tables (issue 41), which every read of today queries,
so it cannot answer (``schema.READABLE_SINCE`` is 10): searches answer from the new
index as it fills. To see the daemon while the new one is built, the test holds a write
lock on the new file (a real SQLite lock, from another process), as a slow disk would:
the daemon's first batch waits for it.

No older schema is readable today, so the old file answering while its successor is
built (``beside``) is tested on the store alone, with ``READABLE_SINCE`` lowered to
pretend that a file of the previous version has today's tables (the ``older`` fixture).
"""

from __future__ import annotations

import re
import signal
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Final

import pytest
from conftest import Daemon, MakeDaemon, note, reading, wait_exit, wait_for, write
from kbindex.daemon.backends.sqlite import schema, searcher
from kbindex.daemon.backends.sqlite.database import open_checked
from kbindex.daemon.backends.sqlite.store import Store
from kbindex.daemon.engine import sqlite
from kbindex.daemon.index.values import Batch
from kbindex.daemon.searching.query import to_plan
from kbindex.proto.client import Client, ClientError
from kbindex.proto.messages import StatusReply
from test_systemd_daemon import _activated

pytestmark = pytest.mark.anyio


def _version(db: Path) -> int:
    conn = sqlite.connect(db)
    try:
        return int(conn.execute("PRAGMA user_version").fetchone()[0])
    finally:
        conn.close()


def _set_version(db: Path, version: int) -> None:
    conn = sqlite.connect(db)
    conn.execute(f"PRAGMA user_version = {version}")
    conn.commit()
    conn.close()


OLD: Final = 9
"""The schema before issue 41's: no kind, fields or links."""


def _to_v9(db: Path) -> None:
    """Today's index file as schema 9 had it (``OLD``)."""
    conn = sqlite.connect(db)
    conn.executescript(
        "DROP TABLE fields; DROP TABLE links; ALTER TABLE files DROP COLUMN kind;"
        f" PRAGMA user_version = {OLD};"
    )
    conn.close()


async def _older_index(d: Daemon) -> None:
    """An index of schema 9 that holds "walrus" in a.md; on disk a.md now says
    "otter", and c.md is new: only a rebuilt index knows."""
    write(d.root / "a.md", "# A\n\nthe walrus of the harbour\n")
    write(d.root / "b.md", "# B\n\na lantern\n")
    await d.start()
    assert d.stop() == 0
    _to_v9(d.db_path)
    write(d.root / "a.md", "# A\n\nthe otter of the harbour\n")
    write(d.root / "c.md", "# C\n\nanother otter\n")


@contextmanager
def _held(beside: Path) -> Iterator[None]:
    """The file the daemon builds beside the old one, with a write lock held on it
    (as a daemon killed mid-rebuild leaves the file: in the current schema)."""
    holder = open_checked(beside)
    holder.execute("BEGIN IMMEDIATE")
    try:
        yield
    finally:
        holder.execute("ROLLBACK")
        holder.close()


async def _status(d: Daemon) -> StatusReply:
    async with d.client() as c:
        return await c.status()


async def _rebuilt(d: Daemon) -> bool:
    status = await _status(d)
    return status.last_scan_at is not None and not status.index_rebuilding


@pytest.mark.slow
async def test_an_older_index_today_cannot_read_is_built_again_beside_it(
    make_daemon: MakeDaemon,
) -> None:
    d = make_daemon()
    await _older_index(d)
    beside = schema.beside(d.db_path)
    with _held(beside):
        await d.start(wait_scan=False)
        status = await _status(d)
        assert f"older kbindexd (schema version {OLD}" in status.index_rebuilding, status
        async with d.client() as c:
            # Not served from the old file (its tables lack what today's reads ask
            # for): answers come from the new one, empty until its first batch.
            old = await c.search("walrus")
            assert not old.hits
            assert old.freshness is not None and old.freshness.rebuilding
            assert not (await c.search("otter")).hits
            assert status.indexed_files == 0  # the new index's count
        shown = d.kbctl("status")
        assert "index being rebuilt from the files" in shown.stdout, shown.stdout
        assert d.proc is not None and d.proc.poll() is None
        assert beside.exists() and _version(d.db_path) == OLD
    await wait_for(lambda: _rebuilt(d), timeout=60)
    async with d.client() as c:
        new = await c.search("otter")
        assert sorted(h.relpath for h in new.hits) == ["a.md", "c.md"]
        assert new.freshness is not None and not new.freshness.rebuilding
        assert not (await c.search("walrus")).hits
    # The new file took the old one's name: the old one is gone, nothing kept aside.
    assert not beside.exists() and not Path(f"{beside}-wal").exists()
    assert _version(d.db_path) == schema.SCHEMA_VERSION
    assert not list(d.state_dir.glob("*.corrupt-*"))
    assert "Traceback" not in d.log()
    assert d.stop() == 0


@pytest.mark.slow
async def test_a_daemon_killed_mid_rebuild_finishes_it_at_its_next_start(
    make_daemon: MakeDaemon,
) -> None:
    d = make_daemon()
    await _older_index(d)
    beside = schema.beside(d.db_path)
    with _held(beside):
        await d.start(wait_scan=False)
        assert (await _status(d)).index_rebuilding
        assert d.proc is not None
        d.proc.send_signal(signal.SIGKILL)
        d.proc.wait()
        d.proc = None
    assert beside.exists() and _version(d.db_path) == OLD
    await d.start(wait_scan=False)
    await wait_for(lambda: _rebuilt(d), timeout=60)
    assert sorted(await d.search_paths("otter")) == ["a.md", "c.md"]
    assert not beside.exists() and _version(d.db_path) == schema.SCHEMA_VERSION
    assert d.stop() == 0


@pytest.mark.slow
async def test_a_daemon_killed_after_some_batches_goes_on_from_there(
    make_daemon: MakeDaemon,
) -> None:
    """Killed with part of the new index committed: the next start reads only the
    files the new index does not hold yet, then it takes over."""
    d = make_daemon()
    await _older_index(d)
    for i in range(1200):
        write(d.root / "bulk" / f"n{i:04d}.md", f"# n{i}\n\n" + f"word{i} filler text " * 60)
    await d.start(wait_scan=False)

    async def partly() -> bool:
        status = await _status(d)
        assert status.index_rebuilding, "the rebuild ended before the kill"
        return status.progress is not None and status.progress.done > 0

    await wait_for(partly, timeout=60)
    assert d.proc is not None
    d.proc.send_signal(signal.SIGKILL)
    d.proc.wait()
    d.proc = None
    held = sqlite.connect(schema.beside(d.db_path))
    (committed,) = held.execute("SELECT count(*) FROM files").fetchone()
    held.close()
    assert 0 < committed < 1203
    log_before = len(d.log_path.read_bytes())
    await d.start(wait_scan=False)
    await wait_for(lambda: _rebuilt(d), timeout=120)
    assert sorted(await d.search_paths("otter")) == ["a.md", "c.md"]
    assert (await _status(d)).indexed_files == 1203
    resumed = d.log_path.read_bytes()[log_before:].decode(errors="replace")
    changed = re.search(r"refresh of every root: 1203 files seen, (\d+) changed", resumed)
    assert changed is not None and int(changed[1]) == 1203 - committed, resumed[-2000:]
    assert not schema.beside(d.db_path).exists()
    assert d.stop() == 0


@pytest.mark.slow
async def test_a_full_disk_during_the_rebuild_is_retried_and_the_old_index_kept(
    make_daemon: MakeDaemon, small_disk: Path
) -> None:
    d = make_daemon()
    d.state_dir = small_disk / "state"
    d.extra_args = ["--watch", "off"]
    await _older_index(d)
    # About 2 MB of text: the new index cannot fit beside the old one in 1 MB.
    for i in range(600):
        write(d.root / "bulk" / f"n{i:03d}.md", f"# n{i}\n\n" + f"word{i} filler text " * 180)
    await d.start(wait_scan=False)

    async def full() -> StatusReply | None:
        status = await _status(d)
        return status if status.index_error else None

    status = await wait_for(full, timeout=60)
    assert "full" in status.index_error and status.index_rebuilding, status
    async with d.client() as c:
        old = await c.search("walrus")
        assert not old.hits  # the old file cannot answer; it waits to be replaced
        assert old.freshness is not None and old.freshness.rebuilding
    assert _version(d.db_path) == OLD
    subprocess.run(["mount", "-o", "remount,size=64m", str(small_disk)], check=True)
    await wait_for(lambda: _rebuilt(d), timeout=60)  # the daemon retries by itself
    assert sorted(await d.search_paths("otter")) == ["a.md", "c.md"]
    assert not schema.beside(d.db_path).exists()
    assert _version(d.db_path) == schema.SCHEMA_VERSION
    assert d.stop() == 0


@pytest.mark.slow
async def test_an_index_of_a_newer_kbindexd_is_refused_and_kept(make_daemon: MakeDaemon) -> None:
    d = make_daemon()
    write(d.root / "a.md", "survivor text\n")
    await d.start()
    assert d.stop() == 0
    _set_version(d.db_path, schema.SCHEMA_VERSION + 1)
    before = d.db_path.read_bytes()
    proc = d.spawn()
    assert wait_exit(proc) == 2  # not retried by the unit: a restart would not help
    log = d.log()
    assert "written by a newer kbindexd" in log and "Traceback" not in log, log
    assert d.db_path.read_bytes() == before
    assert not schema.beside(d.db_path).exists()

    # Under socket activation it stays up and says why, as for a refused configuration.
    proc, listening = _activated(d)
    try:

        async def refused() -> StatusReply | None:
            try:
                async with Client.connect(d.socket) as c:
                    return await c.status()
            except ClientError:
                return None

        status = await wait_for(refused, timeout=20)
        assert status.unconfigured and "newer kbindexd" in status.config_error, status
        assert proc.poll() is None
        proc.send_signal(signal.SIGTERM)
        assert wait_exit(proc) == 0
    finally:
        listening.close()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert d.db_path.read_bytes() == before


def _found(conn: sqlite.Connection, word: str) -> list[str]:
    return [h.relpath for h in searcher.search(conn, to_plan(word, "all", limit=10)).hits]


def test_an_older_index_today_cannot_read_answers_nothing_of_its_own(tmp_path: Path) -> None:
    """A file of schema 9 (no kind, fields or links) is not read: searches answer from
    the new file as it fills, and it replaces the old one once built."""
    db = tmp_path / "index.sqlite3"
    first = Store(db, reading(tmp_path))
    first.open()
    first.apply(Batch([note("a.md", "walrus")]))
    first.close()
    _to_v9(db)
    s = Store(db, reading(tmp_path))
    try:
        opened = s.open()
        assert opened.state == "afresh" and f"schema version {OLD}" in opened.reason
        with s.reader() as conn:
            assert _found(conn, "walrus") == []
        s.apply(Batch([note("a.md", "otter")]))
        with s.reader() as conn:
            assert _found(conn, "otter") == ["a.md"] and _found(conn, "walrus") == []
        s.built()
        assert not s.beside.exists() and _version(db) == schema.SCHEMA_VERSION
    finally:
        s.close()


@pytest.fixture
def older(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Store]:
    """A store opened on an index of the previous schema holding "walrus", building
    beside it while it answers. No older schema is readable today (issue 41 added
    tables every read queries), so ``READABLE_SINCE`` is lowered to pretend the
    previous one had today's tables: the machinery is kept for the next change that
    today's reads understand."""
    db = tmp_path / "index.sqlite3"
    first = Store(db, reading(tmp_path))
    first.open()
    first.apply(Batch([note("a.md", "walrus")]))
    first.close()
    previous = schema.SCHEMA_VERSION - 1
    monkeypatch.setattr(schema, "READABLE_SINCE", previous)
    _set_version(db, previous)
    s = Store(db, reading(tmp_path))
    assert s.open().state == "beside"
    try:
        yield s
    finally:
        s.close()


def test_a_search_on_the_old_file_ends_there_before_the_new_one_takes_over(
    older: Store,
) -> None:
    """The takeover deletes the old file's log and renames the new file over it: it
    waits for a search still reading the old one, which answers from it whole."""
    older.apply(Batch([note("a.md", "otter")]))
    taken: list[BaseException | None] = []

    def take_over() -> None:
        try:
            older.built()
            taken.append(None)
        except BaseException as exc:
            taken.append(exc)

    with older.reader() as conn:
        assert _found(conn, "walrus") == ["a.md"]
        taking = threading.Thread(target=take_over)
        taking.start()
        taking.join(0.2)  # what it guards against (the log deleted under it) is at once
        assert taking.is_alive() and older.rebuilding
        assert _found(conn, "walrus") == ["a.md"] and _found(conn, "otter") == []
    taking.join(10)
    assert taken == [None] and not older.rebuilding
    with older.reader() as conn:
        assert _found(conn, "otter") == ["a.md"] and _found(conn, "walrus") == []
    assert not older.beside.exists() and _version(older.db_path) == schema.SCHEMA_VERSION


def test_damage_found_while_rebuilding_starts_the_rebuild_afresh(older: Store) -> None:
    """Damage met while the old file answers and the new one fills: both are moved
    aside (which one is damaged is not known), and the new one answers as it fills."""
    older.apply(Batch([note("b.md", "otter")]))
    generation = older.generation
    older.rebuild("database disk image is malformed")
    assert older.generation > generation
    kept = {p.name.split(".corrupt-")[0] for p in older.db_path.parent.glob("*.corrupt-*")}
    assert kept == {older.beside.name, older.db_path.name}
    assert "malformed" in older.recovered and older.rebuilding
    with older.reader() as conn:
        assert _found(conn, "walrus") == [] and _found(conn, "otter") == []
    older.apply(Batch([note("b.md", "otter")]))
    older.built()
    with older.reader() as conn:
        assert _found(conn, "otter") == ["b.md"]
    assert not older.beside.exists() and _version(older.db_path) == schema.SCHEMA_VERSION


def test_a_file_left_before_its_tables_were_made_is_a_first_start(tmp_path: Path) -> None:
    """A first start killed between creating the file and making its tables leaves a
    file of version 0: the next start makes the index there, nothing to rebuild."""
    db = tmp_path / "index.sqlite3"
    conn = sqlite.connect(db)
    conn.execute("PRAGMA journal_mode = WAL")  # what the first start had written
    conn.close()
    s = Store(db, reading(tmp_path))
    assert s.open().state == "ready"
    try:
        assert not s.rebuilding and not s.beside.exists()
        assert _version(db) == schema.SCHEMA_VERSION
    finally:
        s.close()
