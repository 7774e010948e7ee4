"""The index database: schema, migrations, the single writer and the reader pool.

One SQLite file in WAL mode. Exactly one writer connection exists, and the indexer
uses it from one thread at a time (behind a CapacityLimiter(1)); every batch is one
transaction, so a crash leaves either the whole batch or none of it. Searches use
their own read-only connections from a small pool, so they are never blocked by
indexing and see the index as of the last committed batch.

A database that cannot be opened or fails ``PRAGMA quick_check``, or that was written
by a newer schema version, is moved aside (kept for inspection) and rebuilt from the
files: the index is derived data, the files are the truth.
"""

from __future__ import annotations

import logging
import os
import queue
import sqlite3
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from kbindex.daemon import documents
from kbindex.daemon.scanner import Seen
from kbindex.daemon.textfile import Loaded, Skipped

log = logging.getLogger(__name__)

SCHEMA_VERSION: Final = 3
TOKENIZER: Final = "porter unicode61 remove_diacritics 2"
EXACT_TOKENIZER: Final = "unicode61 remove_diacritics 2"
KEPT_COPIES: Final = 3
WAL_LIMIT_BYTES: Final = 16 << 20
OPTIMIZE_MIN_REPLACED: Final = 1000

_SCHEMA_V1: Final = f"""
CREATE TABLE files(
    id INTEGER PRIMARY KEY,
    path TEXT NOT NULL UNIQUE,
    root TEXT NOT NULL,
    relpath TEXT NOT NULL,
    size INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL,
    indexed_at REAL NOT NULL,
    encoding TEXT,
    skip_reason TEXT,
    skip_detail TEXT
);
CREATE INDEX files_root_relpath ON files(root, relpath);
CREATE VIRTUAL TABLE docs USING fts5(name, title, body, tokenize='{TOKENIZER}');
CREATE VIRTUAL TABLE docs_exact USING fts5(
    name, title, body, content='docs', tokenize='{EXACT_TOKENIZER}'
);
"""
# docs_exact: the same text without stemming, for prefix queries (with porter, a
# prefix runs against stems: "deprecat*" misses "deprecation", stemmed "deprec").
# It borrows its text from docs (external content), so it adds only an inverted index.

_SCHEMA_V2: Final = f"""
DROP TABLE IF EXISTS docs_exact;
DROP TABLE docs;
DELETE FROM files;
CREATE VIRTUAL TABLE docs USING fts5(
    name, title, body, subwords, grams, tokenize='{TOKENIZER}'
);
CREATE VIRTUAL TABLE docs_exact USING fts5(
    name, title, body, subwords, grams, content='docs', tokenize='{EXACT_TOKENIZER}'
);
"""
# v2 adds two derived columns (daemon/tokens.py, written by daemon/documents.py):
# subwords (camelCase parts and joined snake_case forms of identifiers) and grams
# (character bigrams of Chinese, Japanese, Korean, Thai text; empty for other text).

FTS_HASH_BYTES: Final = 16 << 20
_SCHEMA_V3: Final = f"""
INSERT INTO docs(docs, rank) VALUES ('hashsize', {FTS_HASH_BYTES});
INSERT INTO docs_exact(docs_exact, rank) VALUES ('hashsize', {FTS_HASH_BYTES});
INSERT INTO docs(docs, rank) VALUES ('automerge', 16);
INSERT INTO docs_exact(docs_exact, rank) VALUES ('automerge', 16);
"""
# v3 changes only how FTS5 writes, not what it holds (no re-index). Trigger: with the
# default 1 MB, FTS5 flushed a new segment for every megabyte of pending index data,
# several per batch, and spent most of a full index merging them again (17.1 s of
# inserts for the 205 MB bench corpus, 8.4 s at 16 MB). Why 16 MB: bigger gained
# nothing more there, and the memory is held only while a batch is being written
# (one batch, BATCH_BYTES at most, rarely reaches it).

# Migration N takes a database at user_version N-1 to N. An FTS5 table cannot be
# altered in place, so migrations that change it drop it and forget the files'
# metadata: the next scan re-reads everything.
MIGRATIONS: Final[dict[int, str]] = {1: _SCHEMA_V1, 2: _SCHEMA_V2, 3: _SCHEMA_V3}


class IndexUnusable(Exception):
    """The database file is corrupt or from a newer version."""


_DAMAGE_CODES: Final = ("SQLITE_CORRUPT", "SQLITE_NOTADB")
"""Prefixes: damage inside an FTS5 table is SQLITE_CORRUPT_VTAB."""


def is_damage(exc: BaseException) -> bool:
    """Whether an error from SQLite means the database file itself is damaged (as
    opposed to a bad query, a busy lock or a full disk)."""
    if not isinstance(exc, sqlite3.DatabaseError):
        return False
    if str(getattr(exc, "sqlite_errorname", "")).startswith(_DAMAGE_CODES):
        return True
    # Text whose bytes were damaged: raised by the sqlite3 module while decoding.
    return "Could not decode to UTF-8" in str(exc)


def is_unwritable(exc: BaseException) -> bool:
    """Whether an error from SQLite means the index cannot be written for now: a full
    disk (or quota), an I/O error."""
    name = str(getattr(exc, "sqlite_errorname", ""))
    return isinstance(exc, sqlite3.DatabaseError) and name.startswith(
        ("SQLITE_FULL", "SQLITE_IOERR")
    )


@dataclass(frozen=True, slots=True)
class Known:
    id: int
    size: int
    mtime_ns: int


Update = tuple[Seen, documents.Document | Loaded | Skipped]
"""A file seen by a scan and what reading it gave. The indexer passes a ``Document``
(prepared in its reader thread); a ``Loaded`` is prepared here, on the writer thread."""

_UNDER: Final = "(path = ? OR (path > ? AND path < ?))"
"""A path, or anything under it as a directory: '0' sorts right after '/'."""


def _under(prefix: str) -> tuple[str, str, str]:
    return (prefix, prefix + "/", prefix + "0")


def _connect(path: Path, *, readonly: bool) -> sqlite3.Connection:
    if readonly:
        conn = sqlite3.connect(
            f"file:{path}?mode=ro", uri=True, check_same_thread=False, timeout=30
        )
    else:
        conn = sqlite3.connect(path, check_same_thread=False, timeout=30, isolation_level=None)
    conn.execute("PRAGMA busy_timeout = 30000")
    return conn


class Store:
    def __init__(self, db_path: Path) -> None:
        self.db_path = db_path
        self.recovered = ""
        self._writer: sqlite3.Connection | None = None
        self._readers: queue.SimpleQueue[tuple[int, sqlite3.Connection]] = queue.SimpleQueue()
        self.generation = 0
        """Bumped by ``rebuild``: a reader of an older file is closed, never pooled."""
        self.writes = 0
        self.replaced = 0
        """Documents deleted or rewritten since the last ``optimize``: each leaves a
        tombstone in the full-text index until its segments are merged."""
        """Committed write transactions (and rebuilds): what was counted from the index
        stays true until this changes."""

    # ------------------------------------------------------------ lifecycle

    def open(self) -> None:
        """Open (creating or migrating) the database; rebuild it if it is unusable."""
        self.db_path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        try:
            self._writer = self._open_checked()
        except IndexUnusable as exc:
            kept = self._move_aside()
            self.recovered = f"{exc}; the old file was kept as {kept}"
            log.warning("index database unusable (%s): moved to %s, rebuilding", exc, kept)
            self._writer = self._open_checked()

    def _open_checked(self) -> sqlite3.Connection:
        try:
            conn = _connect(self.db_path, readonly=False)
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")
            # Trigger: a full index left a 117 MB -wal file behind until shutdown
            # (SQLite reuses a WAL file but never shrinks it). Why this bound: each
            # checkpoint that restarts the log truncates the file back to it.
            conn.execute(f"PRAGMA journal_size_limit = {WAL_LIMIT_BYTES}")
            check = conn.execute("PRAGMA quick_check").fetchone()
            if check is None or check[0] != "ok":
                raise IndexUnusable(f"quick_check failed: {check[0] if check else 'no answer'}")
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version > SCHEMA_VERSION:
                raise IndexUnusable(
                    f"schema version {version} is newer than this kbindexd ({SCHEMA_VERSION})"
                )
            self._migrate(conn, version)
            # quick_check checks structure, not text: a damaged byte inside a path
            # would fail every status request later. Decoding them all now is cheap
            # (about 50 ms per 100,000 files).
            for _ in conn.execute("SELECT path, root, relpath, skip_detail FROM files"):
                pass
        except sqlite3.DatabaseError as exc:
            raise IndexUnusable(str(exc)) from None
        return conn

    def _migrate(self, conn: sqlite3.Connection, version: int) -> None:
        for target in range(version + 1, SCHEMA_VERSION + 1):
            log.info("migrating index schema to version %d", target)
            try:
                script = MIGRATIONS[target]
                conn.executescript(
                    f"BEGIN IMMEDIATE; {script}; PRAGMA user_version = {target}; COMMIT;"
                )
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise

    def _move_aside(self) -> Path:
        stamp = time.strftime("%Y%m%d-%H%M%S")
        kept = self.db_path.with_name(f"{self.db_path.name}.corrupt-{stamp}-{os.getpid()}")
        for suffix in ("", "-wal", "-shm"):
            src = Path(f"{self.db_path}{suffix}")
            if src.exists():
                os.replace(src, Path(f"{kept}{suffix}"))
        self._prune_kept()
        return kept

    def _prune_kept(self) -> None:
        """Keep the newest KEPT_COPIES damaged files: a disk that keeps corrupting the
        index must not also fill up with copies of it."""
        copies: dict[str, list[Path]] = {}
        for path in self.db_path.parent.glob(f"{self.db_path.name}.corrupt-*"):
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
    def _transaction(self) -> Iterator[None]:
        """One write transaction. Trigger: SQLite ends a transaction itself on some
        errors (a full disk); Why: a ROLLBACK then fails and would hide the real error."""
        conn = self.writer
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                with suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
            raise
        self.writes += 1

    def rebuild(self, reason: str) -> Path:
        """Replace a database found damaged while running with an empty one; the old
        file is kept aside. Call with no write in progress (the indexer's lock)."""
        self.generation += 1
        self._close_readers()
        if self._writer is not None:
            with suppress(sqlite3.Error):
                self._writer.close()
            self._writer = None
        kept = self._move_aside()
        self.writes += 1
        self.recovered = f"{reason}; the old file was kept as {kept}"
        log.error("index database damaged (%s): moved to %s, rebuilding", reason, kept)
        self._writer = self._open_checked()
        return kept

    def checkpoint(self) -> None:
        """Copy the WAL into the database and empty it (after a large refresh): the
        disk space comes back and ``size_bytes`` counts the index once. Readers in
        the middle of a search can delay it; then it does what it can."""
        with suppress(sqlite3.Error):
            self.writer.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def _drop(self, conn: sqlite3.Connection, file_id: int) -> None:
        documents.delete_doc(conn, file_id)
        self.replaced += 1

    @property
    def merge_possible(self) -> bool:
        """Cheap, no database access: whether ``optimize_due`` could say yes."""
        return self.replaced >= OPTIMIZE_MIN_REPLACED

    def optimize_due(self) -> bool:
        """Whether enough documents were replaced to merge the index into one segment.

        Trigger: FTS5 keeps a deleted or rewritten document's entries, plus a delete
        marker, until the segments holding them merge. Under steady edits (a load
        test rewriting 20 files a second) the file grew 3.4x in 18,000 rewrites of
        2,000 files, and searches slowed by a quarter. Why this threshold: merging
        costs time in proportion to the index, so it runs once the tombstones reach a
        quarter of the index (at least OPTIMIZE_MIN_REPLACED): a bounded overhead
        for a bounded amortized cost.
        """
        if not self.merge_possible:
            return False
        (files,) = self.writer.execute("SELECT count(*) FROM files").fetchone()
        return self.replaced >= int(files) // 4

    def optimize(self) -> None:
        """Merge each full-text table into one segment, dropping what deletes left."""
        with self._transaction():
            conn = self.writer
            for table in ("docs", "docs_exact"):
                conn.execute(f"INSERT INTO {table}({table}) VALUES ('optimize')")
        self.replaced = 0

    def _close_readers(self) -> None:
        while True:
            try:
                self._readers.get_nowait()[1].close()
            except queue.Empty:
                break

    def close(self) -> None:
        # Readers first: only the last connection to close may checkpoint, and a
        # read-only one cannot, which would leave the WAL holding the data.
        self._close_readers()
        if self._writer is not None:
            with suppress(sqlite3.Error):
                self._writer.execute("PRAGMA optimize")
                self._writer.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            self._writer.close()
            self._writer = None

    @property
    def writer(self) -> sqlite3.Connection:
        if self._writer is None:
            raise RuntimeError("store is not open")
        return self._writer

    @contextmanager
    def reader(self) -> Iterator[sqlite3.Connection]:
        """A read-only connection from the pool, returned to it afterwards."""
        # Each connection carries the generation of the file it opened: one that a
        # rebuild made stale is closed whether it is taken or given back.
        while True:
            try:
                generation, conn = self._readers.get_nowait()
            except queue.Empty:
                generation = self.generation
                conn = _connect(self.db_path, readonly=True)
                break
            if generation == self.generation:
                break
            conn.close()
        try:
            yield conn
        finally:
            conn.set_progress_handler(None, 0)
            if generation == self.generation:
                self._readers.put((generation, conn))
            else:
                conn.close()

    # ------------------------------------------------------------ writer side

    def known(self, prefixes: Sequence[str] | None) -> dict[str, Known]:
        """Metadata of every known file, or of those under the given absolute prefixes."""
        conn = self.writer
        sql = "SELECT path, id, size, mtime_ns FROM files"
        rows: list[tuple[str, int, int, int]] = []
        if prefixes is None:
            rows = conn.execute(sql).fetchall()
        else:
            for prefix in prefixes:
                rows += conn.execute(f"{sql} WHERE {_UNDER}", _under(prefix)).fetchall()
        return {p: Known(i, s, m) for p, i, s, m in rows}

    def move(self, old: str, new: str, new_root: str) -> int:
        """Re-key the file ``old``, or every file under the directory ``old``, to ``new``
        (in ``new_root``), in one transaction, without touching their text; rows already
        at the destination are replaced. Returns how many files moved.

        Trigger: a rename event. Why: a renamed directory of 10,000 notes should cost
        10,000 row updates, not 10,000 file reads; the refresh of ``new`` that follows
        finds size and mtime unchanged and reads nothing.
        """
        if old == new:
            return 0
        conn = self.writer
        with self._transaction():
            rows = conn.execute(
                f"SELECT id, path FROM files WHERE {_UNDER}", _under(old)
            ).fetchall()
            if rows:
                moving = {file_id for file_id, _ in rows}
                replaced = conn.execute(f"SELECT id FROM files WHERE {_UNDER}", _under(new))
                for (file_id,) in replaced.fetchall():
                    if file_id not in moving:
                        self._drop(conn, file_id)
                        conn.execute("DELETE FROM files WHERE id = ?", (file_id,))
                cut = len(new_root) + 1
                for file_id, path in rows:
                    moved = new + path[len(old) :]
                    conn.execute(
                        "UPDATE files SET path = ?, root = ?, relpath = ? WHERE id = ?",
                        (moved, new_root, moved[cut:], file_id),
                    )
                    # The FTS name column holds the relative path (ranked, and matched by
                    # searches for a file's name): re-indexed from the stored text, never
                    # from the file. Skipped files have no document.
                    documents.rename_doc(conn, file_id, moved[cut:])
                    self.replaced += 1
        return len(rows)

    def remove_root(self, root: str) -> int:
        """Forget every file of ``root`` (a root removed at runtime), in one transaction."""
        conn = self.writer
        with self._transaction():
            ids = conn.execute("SELECT id FROM files WHERE root = ?", (root,)).fetchall()
            for (file_id,) in ids:
                self._drop(conn, file_id)
            removed = conn.execute("DELETE FROM files WHERE root = ?", (root,)).rowcount
        return int(removed)

    def apply(self, updates: Sequence[Update], deletes: Sequence[str]) -> None:
        """Write one batch in one transaction."""
        conn = self.writer
        now = time.time()
        with self._transaction():
            for path in deletes:
                row = conn.execute("SELECT id FROM files WHERE path = ?", (path,)).fetchone()
                if row is not None:
                    self._drop(conn, row[0])
                    conn.execute("DELETE FROM files WHERE id = ?", (row[0],))
            for seen, given in updates:
                outcome = (
                    documents.prepare(seen.relpath, given) if isinstance(given, Loaded) else given
                )
                row = conn.execute("SELECT id FROM files WHERE path = ?", (seen.path,)).fetchone()
                if row is not None:
                    self._drop(conn, row[0])
                values: tuple[int, int, float, str | None, str | None, str | None]
                if isinstance(outcome, documents.Document):
                    loaded = outcome.loaded
                    values = (loaded.size, loaded.mtime_ns, now, loaded.encoding, None, None)
                else:
                    values = (
                        outcome.size or seen.size,
                        outcome.mtime_ns or seen.mtime_ns,
                        now,
                        None,
                        outcome.reason,
                        outcome.detail,
                    )
                if row is None:
                    cur = conn.execute(
                        "INSERT INTO files(path, root, relpath, size, mtime_ns, indexed_at,"
                        " encoding, skip_reason, skip_detail) VALUES (?,?,?,?,?,?,?,?,?)",
                        (seen.path, seen.root, seen.relpath, *values),
                    )
                    file_id = cur.lastrowid
                else:
                    file_id = row[0]
                    conn.execute(
                        "UPDATE files SET size=?, mtime_ns=?, indexed_at=?, encoding=?,"
                        " skip_reason=?, skip_detail=? WHERE id=?",
                        (*values, file_id),
                    )
                if isinstance(outcome, documents.Document):
                    assert file_id is not None  # set by the INSERT (lastrowid) or the row
                    documents.insert_doc(conn, file_id, outcome)

    def indexed_count(self) -> int:
        with self.reader() as conn:
            row = conn.execute("SELECT count(*) FROM files WHERE skip_reason IS NULL").fetchone()
        return int(row[0])

    def size_bytes(self) -> int:
        total = 0
        for suffix in ("", "-wal"):
            with suppress(OSError):
                total += os.stat(f"{self.db_path}{suffix}").st_size
        return total
