"""The unstemmed index: which documents hold which words exactly, in a file of its own.

``docs`` (in the main index file) is stemmed: porter turns "deprecation" into
"deprec", so a prefix query ``deprecat*`` run there misses it. This index answers the
two questions a prefix query needs, with every word as written (lower-cased, accents
folded, never stemmed): which words start with ``deprecat`` (its vocabulary,
``VOCABULARY``), and which documents hold one (``docs_exact``). The searcher then
ranks on ``docs`` by those whole words, which porter stems as it stemmed the text.

Trigger: it used to index the same five columns as ``docs`` with every position, a
second full-text index as costly to write as the first (a full index of the 205 MB
bench corpus ran at 57% of bare FTS5's speed with it, 72% with no unstemmed index at
all, same run). Why ``detail=none``: positions and counts come from ``docs``; this
index only says which document holds which word (143 MB -> 36 MB, a third less time
to write). It is written by its own thread while the main writer fills ``docs``.

It is contentless (``content=''``): the text is stored once, in ``docs``. Removing a
row takes its old text, which the store reads from ``docs`` before changing it.
Readers attach this file (``ATTACH_AS``).

Consistency: the two files commit one after the other, this one first, and each
holds a write counter (``meta.writes``) bumped in the same transaction. A crash
between the two commits, a main commit that failed after this one, this file missing
or damaged, or a file in an older layout, all show on open: the index is then rebuilt
from the text ``docs`` stores (never from the user's files), by the store before its
next write (``Store.repair_exact``; the indexer calls it first thing).

Trigger: the rebuild ran inside ``open``, before the daemon served anyone: 14.6 s
without a socket for the 205 MB bench corpus, where a normal start takes 0.8 s. Why
after: searches need only ``docs``; until this file is usable again readers do not
attach it and a prefix runs as FTS5's own prefix of stems (``prefixes``).
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import suppress
from pathlib import Path
from typing import Final

from kbindex.daemon import documents
from kbindex.daemon.documents import EXACT, ExactChange

log = logging.getLogger(__name__)

TOKENIZER: Final = "unicode61 remove_diacritics 2"
ATTACH_AS: Final = "x"
FTS_HASH_BYTES: Final = 16 << 20
"""See the main schema's v3 in ``store``: fewer, larger segments to merge."""
COPY_ROWS: Final = 500

META_SQL: Final = """
CREATE TABLE IF NOT EXISTS {schema}.meta(key TEXT PRIMARY KEY, value INTEGER NOT NULL);
INSERT OR IGNORE INTO {schema}.meta VALUES ('writes', 0);
"""
"""The write counter, in both files (the main file gets it from its migration)."""

COLUMNS: Final = ("words",)
VOCABULARY: Final = "docs_exact_words"
"""Every word of ``docs_exact`` with the number of documents holding it (fts5vocab)."""

_SCHEMA: Final = f"""
CREATE VIRTUAL TABLE {{schema}}.docs_exact USING fts5(
    words, content='', detail=none, tokenize='{TOKENIZER}'
);
CREATE VIRTUAL TABLE {{schema}}.{VOCABULARY} USING fts5vocab(docs_exact, 'row');
INSERT INTO {{schema}}.docs_exact(docs_exact, rank) VALUES ('hashsize', {FTS_HASH_BYTES});
INSERT INTO {{schema}}.docs_exact(docs_exact, rank) VALUES ('automerge', 16);
"""


def create(conn: sqlite3.Connection, schema: str = "main") -> None:
    """Create the exact index's tables in ``schema`` of ``conn`` (a new, empty file, or
    a database attached to one that has ``docs``, as tests do)."""
    conn.executescript(_SCHEMA.format(schema=schema) + META_SQL.format(schema=schema))


def path_for(db_path: Path) -> Path:
    """``index.sqlite3`` → ``index-exact.sqlite3``, beside it."""
    return db_path.with_name(f"{db_path.stem}-exact{db_path.suffix}")


def writes(conn: sqlite3.Connection, schema: str = "main") -> int:
    row = conn.execute(f"SELECT value FROM {schema}.meta WHERE key = 'writes'").fetchone()
    return -1 if row is None else int(row[0])


def layout(conn: sqlite3.Connection, schema: str = "main") -> tuple[str, ...]:
    """The columns of ``docs_exact`` in ``schema`` (empty when it has none)."""
    return tuple(r[1] for r in conn.execute(f"PRAGMA {schema}.table_info({EXACT})"))


def attached(conn: sqlite3.Connection) -> bool:
    """Whether ``conn`` has the exact index attached (``attach``)."""
    found = conn.execute("SELECT 1 FROM pragma_database_list WHERE name = ?", (ATTACH_AS,))
    return found.fetchone() is not None


def in_step(conn: sqlite3.Connection) -> bool:
    """Whether the attached exact index holds the documents the main file holds, as
    ``conn`` sees them: their write counters agree. (The exact file commits first, so
    a read can begin between the two commits and see it one batch ahead.)"""
    return writes(conn, ATTACH_AS) == writes(conn)


def attach(conn: sqlite3.Connection, db_path: Path, *, readonly: bool = True) -> None:
    """Attach the exact index of ``db_path`` to a connection to the main file
    (read-only: one opened with ``uri=True``): ``docs_exact`` then names its table."""
    path = path_for(db_path)
    conn.execute(
        f"ATTACH DATABASE ? AS {ATTACH_AS}", (f"file:{path}?mode=ro" if readonly else str(path),)
    )


class ExactIndex:
    """The exact index file: its one writer connection, and the thread that uses it
    while the main writer works."""

    def __init__(self, db_path: Path) -> None:
        self.path = path_for(db_path)
        self._conn: sqlite3.Connection | None = None
        self._executor: ThreadPoolExecutor | None = None
        self.stale = False
        """It does not hold what the main file holds (a commit failed between the two,
        or ``open`` found it unusable): rebuilt before the next write."""
        self.usable = False
        """Readers can attach it: it exists in the current layout (it may be stale)."""

    @property
    def _thread(self) -> ThreadPoolExecutor:
        """The one thread that writes this file during a batch (started on first use,
        so a store closed and opened again gets a new one)."""
        if self._executor is None:
            self._executor = ThreadPoolExecutor(1, thread_name_prefix="kbindex-exact")
        return self._executor

    @property
    def conn(self) -> sqlite3.Connection:
        if self._conn is None:
            raise RuntimeError("exact index is not open")
        return self._conn

    def open(self, main: sqlite3.Connection) -> None:
        """Open the file; when it does not match ``main``, mark it stale (and unusable
        when readers cannot attach it) for ``rebuild``."""
        if not self.path.exists():
            self.usable, self.stale = False, True
            return
        expected = writes(main)
        conn: sqlite3.Connection | None = None
        usable = False
        try:
            conn = self._connect()
            check = conn.execute("PRAGMA quick_check").fetchone()
            if check is None or check[0] != "ok":
                problem = "it failed quick_check"
            elif layout(conn) != COLUMNS:
                problem = "an older layout"
            else:
                usable = True
                found = writes(conn)
                problem = "" if found == expected else f"write {found}, main index {expected}"
        except sqlite3.DatabaseError as exc:
            problem = str(exc)
        if conn is not None and not problem:
            self._conn, self.usable, self.stale = conn, True, False
            return
        if conn is not None:
            with suppress(sqlite3.Error):
                conn.close()
        self.usable, self.stale = usable, True
        log.warning("unstemmed index %s not usable (%s): rebuilding it", self.path, problem)

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, check_same_thread=False, timeout=30, isolation_level=None)
        conn.execute("PRAGMA busy_timeout = 30000")
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute("PRAGMA wal_autocheckpoint = 0")  # see ``checkpointer``
        return conn

    def rebuild(self, main: sqlite3.Connection) -> None:
        """A new file holding every document of ``main``'s ``docs``, at its counter.
        Call with no transaction open on either (the store's writer lock)."""
        self.usable = False
        self.close()
        self.delete_files()
        conn = self._connect()
        create(conn)
        conn.execute("BEGIN IMMEDIATE")
        try:
            rows = main.execute(f"SELECT rowid, {', '.join(documents.COLUMNS)} FROM docs")
            while batch := rows.fetchmany(COPY_ROWS):
                changes = [
                    ExactChange(r[0], new=documents.exact_text((r[1], r[2], r[3], r[4], r[5])))
                    for r in batch
                ]
                documents.apply_exact(conn, changes)
            conn.execute("UPDATE meta SET value = ? WHERE key = 'writes'", (writes(main),))
            conn.execute("COMMIT")
        except BaseException:
            with suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            conn.close()
            raise
        self._conn = conn
        self.stale = False
        self.usable = True

    def delete_files(self) -> None:
        """Remove the file (derived data: the main file can always rebuild it)."""
        for suffix in ("", "-wal", "-shm"):
            Path(f"{self.path}{suffix}").unlink(missing_ok=True)

    # ------------------------------------------------------------ transactions

    def begin(self) -> None:
        self.conn.execute("BEGIN IMMEDIATE")

    def submit(self, changes: Sequence[ExactChange]) -> Future[None]:
        """Apply ``changes`` in this index's thread (inside the open transaction)."""
        return self._thread.submit(documents.apply_exact, self.conn, changes)

    def apply(self, changes: Sequence[ExactChange]) -> None:
        """Apply ``changes`` in the calling thread (small writes: renames, removals)."""
        documents.apply_exact(self.conn, changes)

    def commit(self, counter: int) -> None:
        """Record the main file's counter as it will be after its commit, and commit."""
        self.conn.execute("UPDATE meta SET value = ? WHERE key = 'writes'", (counter,))
        self.conn.execute("COMMIT")

    def rollback(self) -> None:
        # After a failed rebuild there is no connection: nothing to roll back, and an
        # error here would hide the one being handled.
        conn = self._conn
        if conn is not None and conn.in_transaction:
            with suppress(sqlite3.Error):
                conn.execute("ROLLBACK")

    def optimize(self) -> Future[None]:
        """Merge into one segment, in this index's thread (inside the transaction)."""
        return self._thread.submit(self._optimize)

    def _optimize(self) -> None:
        self.conn.execute(f"INSERT INTO {EXACT}({EXACT}) VALUES ('optimize')")

    def checkpoint(self) -> None:
        with suppress(sqlite3.Error):
            self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def close(self) -> None:
        if self._conn is not None:
            with suppress(sqlite3.Error):
                self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            self._conn.close()
            self._conn = None

    def shutdown(self) -> None:
        self.close()
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None
