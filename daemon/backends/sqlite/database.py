"""The index's database file: opening it checked and up to date, telling damage from
other errors, moving a damaged file aside, and its transactions.

A file that cannot be opened, fails ``PRAGMA quick_check`` (table by table) or was
written by a newer schema is unusable (``IndexUnusable``): ``Store`` moves it aside,
kept for inspection, and starts an empty one; the index is derived data, the files are
the truth.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Final

from kbindex.daemon.backends.sqlite import schema
from kbindex.daemon.backends.sqlite.engine import sqlite
from kbindex.daemon.backends.sqlite.readers import connect

KEPT_COPIES: Final = 3
WAL_LIMIT_BYTES: Final = 16 << 20


class IndexUnusable(Exception):
    """The database file is corrupt or from a newer version."""


_DAMAGE_CODES: Final = ("SQLITE_CORRUPT", "SQLITE_NOTADB")
"""Prefixes: damage inside an FTS5 table is SQLITE_CORRUPT_VTAB."""


def is_damage(exc: BaseException) -> bool:
    """Whether an error from SQLite means the database file itself is damaged (as
    opposed to a bad query, a busy lock or a full disk)."""
    if not isinstance(exc, sqlite.DatabaseError):
        return False
    if str(getattr(exc, "sqlite_errorname", "")).startswith(_DAMAGE_CODES):
        return True
    # Text whose bytes were damaged: raised by the sqlite3 module while decoding.
    return "Could not decode to UTF-8" in str(exc)


def is_unwritable(exc: BaseException) -> bool:
    """Whether an error from SQLite means the index cannot be written for now: a full
    disk (or quota), an I/O error."""
    name = str(getattr(exc, "sqlite_errorname", ""))
    return isinstance(exc, sqlite.DatabaseError) and name.startswith(
        ("SQLITE_FULL", "SQLITE_IOERR")
    )


def open_checked(db_path: Path) -> sqlite.Connection:
    """The writer's connection to ``db_path``, checked and migrated; raises
    IndexUnusable (the connection closed) if the file cannot be used."""
    conn = None
    try:
        conn = connect(db_path, readonly=False)
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
        # SQLite reuses a WAL file but never shrinks it, so a full index would leave
        # a log the size of its largest stretch behind; each checkpoint that
        # restarts the log truncates the file back to this bound.
        conn.execute(f"PRAGMA journal_size_limit = {WAL_LIMIT_BYTES}")
        conn.execute("PRAGMA wal_autocheckpoint = 0")  # see ``checkpointer``
        _quick_check(conn)
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version > schema.SCHEMA_VERSION:
            raise IndexUnusable(
                f"schema version {version} is newer than this kbindexd ({schema.SCHEMA_VERSION})"
            )
        schema.migrate(conn)
        _reclaimable(conn)
        # quick_check checks structure, not text: a damaged byte inside a path would
        # fail every status request later. Decoding them all now is cheap: one pass
        # over a table of short rows.
        for _ in conn.execute("SELECT path, root, relpath, skip_detail FROM files"):
            pass
    except (sqlite.DatabaseError, IndexUnusable) as exc:
        if conn is not None:
            with suppress(sqlite.Error):
                conn.close()
        if isinstance(exc, IndexUnusable):
            raise
        raise IndexUnusable(str(exc)) from None
    return conn


def _quick_check(conn: sqlite.Connection) -> None:
    """``PRAGMA quick_check`` of every table that has pages of its own, one by one.
    Why not of the whole file at once: from SQLite 3.44 on that also runs each FTS5
    table's own integrity check, which reads its whole index (seconds on a kernel
    tree, at every start before the daemon serves). What this gives up: a page that
    two tables share, or one no table uses, passes (each table's check is whole by
    itself). Damage inside a full-text index is found by the first read that meets it,
    and ``recovery`` rebuilds then; ``kbctl doctor`` runs the whole check."""
    for _schema, name, kind, *_ in conn.execute("PRAGMA main.table_list").fetchall():
        if kind in ("table", "shadow"):
            quoted = '"' + name.replace('"', '""') + '"'
            check = conn.execute(f"PRAGMA quick_check({quoted})").fetchone()
            if check is None or check[0] != "ok":
                found = check[0] if check else "no answer"
                raise IndexUnusable(f"quick_check of {name} failed: {found}")


def move_aside(db_path: Path) -> Path:
    """Rename the file at ``db_path`` (and its log) to a kept copy; returns its name."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    kept = db_path.with_name(f"{db_path.name}.corrupt-{stamp}-{os.getpid()}")
    for suffix in ("", "-wal", "-shm"):
        src = Path(f"{db_path}{suffix}")
        if src.exists():
            os.replace(src, Path(f"{kept}{suffix}"))
    _prune_kept(db_path)
    return kept


def _prune_kept(db_path: Path) -> None:
    """Keep the newest KEPT_COPIES damaged files: a disk that keeps corrupting the
    index must not also fill up with copies of it."""
    copies: dict[str, list[Path]] = {}
    for path in db_path.parent.glob(f"{db_path.name}.corrupt-*"):
        base = path.name.removesuffix("-wal").removesuffix("-shm")
        copies.setdefault(base, []).append(path)
    newest_first = sorted(
        copies.values(), key=lambda ps: max(p.stat().st_mtime_ns for p in ps), reverse=True
    )
    for paths in newest_first[KEPT_COPIES:]:
        for path in paths:
            with suppress(OSError):
                path.unlink()


@contextmanager
def transaction(conn: sqlite.Connection) -> Iterator[None]:
    """One write transaction on ``conn``. SQLite ends a transaction itself on some
    errors (a full disk): then a ROLLBACK fails and would hide the real error, hence
    the ``in_transaction`` check."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
        conn.execute("COMMIT")
    except BaseException:
        roll_back(conn)
        raise


def roll_back(conn: sqlite.Connection) -> None:
    """End the transaction a failed write left open, if SQLite has not ended it."""
    if conn.in_transaction:
        with suppress(sqlite.Error):
            conn.execute("ROLLBACK")


def _reclaimable(conn: sqlite.Connection) -> None:
    """Make an empty index one whose free pages can be released (``auto_vacuum =
    INCREMENTAL``, see ``_release_free_pages``): the mode can change only by rewriting
    the file, which costs nothing while it holds no file (a new index, or one a
    migration has just emptied: the rewrite also drops what the migration freed)."""
    if conn.execute("PRAGMA auto_vacuum").fetchone()[0] == 2:
        return
    if conn.execute("SELECT 1 FROM files LIMIT 1").fetchone() is None:
        conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
        conn.execute("VACUUM")


def disk_bytes(db_path: Path) -> tuple[int, int]:
    """Bytes on disk of the index at ``db_path``: the database file and its write-ahead
    log (0 for one that is not there)."""
    sizes = [0, 0]
    for i, suffix in enumerate(("", "-wal")):
        with suppress(OSError):
            sizes[i] = os.stat(f"{db_path}{suffix}").st_size
    return sizes[0], sizes[1]


def legacy_exact_path(db_path: Path) -> Path:
    """Where schema v3 and v4 kept the unstemmed index: ``index-exact.sqlite3``."""
    return db_path.with_name(f"{db_path.stem}-exact{db_path.suffix}")


def delete_files(db_path: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db_path}{suffix}").unlink(missing_ok=True)
