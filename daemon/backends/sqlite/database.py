"""The index's database file: opening it checked, telling damage from other errors,
moving a damaged file aside, giving a rebuilt file the index's name, and transactions.

A file that cannot be opened or fails ``PRAGMA quick_check`` (table by table) is
unusable (``IndexUnusable``): ``Store`` moves it aside, kept for inspection, and builds
the index again; it is derived data, the files are the truth. A file written by a newer
schema is refused (``SchemaTooNew``): a newer kbindexd's index is not this one's to
replace.
"""

from __future__ import annotations

import os
import time
from contextlib import closing, suppress
from pathlib import Path
from typing import Final

from kbindex.daemon.backends.sqlite import schema
from kbindex.daemon.backends.sqlite.readers import connect
from kbindex.daemon.engine import sqlite
from kbindex.daemon.index.interface import IndexRefused

KEPT_COPIES: Final = 3
WAL_LIMIT_BYTES: Final = 16 << 20


class IndexUnusable(Exception):
    """The database file is damaged."""


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


class SchemaTooNew(IndexRefused):
    """The index file was written by a newer kbindexd: this one neither reads nor
    replaces it."""


def file_version(db_path: Path) -> int | None:
    """The schema version of the index file at ``db_path`` (None: there is none);
    raises IndexUnusable when it cannot be read as a database."""
    if not db_path.exists():
        return None
    try:
        with closing(connect(db_path, readonly=True)) as conn:
            return int(conn.execute("PRAGMA user_version").fetchone()[0])
    except sqlite.DatabaseError as exc:
        raise IndexUnusable(str(exc)) from None


def too_new(db_path: Path, version: int) -> SchemaTooNew:
    return SchemaTooNew(
        f"the index {db_path} was written by a newer kbindexd (schema version {version};"
        f" this one writes {schema.SCHEMA_VERSION}): run that kbindexd, or delete the file"
        " (and its -wal and -shm) to rebuild the index with this one"
    )


def writer_connection(db_path: Path) -> sqlite.Connection:
    """A writer's connection to ``db_path``, set up, unchecked."""
    return _set_up(connect(db_path, readonly=False))


def _set_up(conn: sqlite.Connection) -> sqlite.Connection:
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    # SQLite reuses a WAL file but never shrinks it, so a full index would leave
    # a log the size of its largest stretch behind; each checkpoint that
    # restarts the log truncates the file back to this bound.
    conn.execute(f"PRAGMA journal_size_limit = {WAL_LIMIT_BYTES}")
    conn.execute("PRAGMA wal_autocheckpoint = 0")  # see ``checkpointer``
    return conn


def open_checked(db_path: Path) -> sqlite.Connection:
    """The writer's connection to ``db_path``, checked, the schema made in a file that
    has none; raises IndexUnusable (the connection closed) if the file cannot be used.
    The caller has checked that a file there is of this schema version."""
    conn = None
    try:
        conn = connect(db_path, readonly=False)
        new = conn.execute("SELECT 1 FROM sqlite_schema LIMIT 1").fetchone() is None
        if new:
            # Free pages can then be given back (``Store._release_free_pages``). Set
            # before anything is written: it takes effect in a file with no table yet.
            conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
        _set_up(conn)
        _quick_check(conn)
        if new:
            schema.create(conn)
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version != schema.SCHEMA_VERSION:
            raise IndexUnusable(f"schema version {version}, not {schema.SCHEMA_VERSION}")
        _decoded(conn)
    except (sqlite.DatabaseError, IndexUnusable) as exc:
        if conn is not None:
            with suppress(sqlite.Error):
                conn.close()
        if isinstance(exc, IndexUnusable):
            raise
        raise IndexUnusable(str(exc)) from None
    return conn


def check_readable(db_path: Path) -> None:
    """Check the index file at ``db_path`` as ``open_checked`` does, read-only: an older
    file is read, never written. Raises IndexUnusable."""
    try:
        with closing(connect(db_path, readonly=True)) as conn:
            _quick_check(conn)
            _decoded(conn)
    except sqlite.DatabaseError as exc:
        raise IndexUnusable(str(exc)) from None


def _decoded(conn: sqlite.Connection) -> None:
    """quick_check checks structure, not text: a damaged byte inside a path would fail
    every status request later. Decoding them all now is cheap (about 50 ms per
    100,000 files)."""
    for _ in conn.execute("SELECT path, root, relpath, skip_detail FROM files"):
        pass


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


def delete_log(db_path: Path) -> None:
    """Delete the write-ahead log and its index of the file at ``db_path`` (no
    connection to it open): they must never meet another file of that name."""
    for suffix in ("-wal", "-shm"):
        Path(f"{db_path}{suffix}").unlink(missing_ok=True)


def replace(beside: Path, db_path: Path) -> None:
    """Give the file ``beside`` (closed, its log copied in) the name ``db_path``, in
    place of the file there; durable once this returns."""
    delete_log(db_path)
    delete_log(beside)
    os.replace(beside, db_path)
    fd = os.open(db_path.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def legacy_exact_path(db_path: Path) -> Path:
    """Where schema v3 and v4 kept the unstemmed index: ``index-exact.sqlite3``."""
    return db_path.with_name(f"{db_path.stem}-exact{db_path.suffix}")
