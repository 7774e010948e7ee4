"""The index database's single writer, its life (open, rebuild, close) and its merges.

One SQLite file in WAL mode (tables in ``schema``, the file itself in ``database``).
Exactly one writer connection exists, and the indexer uses it from one thread at a time
(behind a CapacityLimiter(1)); every batch is one transaction, so a crash leaves either
the whole batch or none of it.
Searches use read-only connections from ``readers``, so they are never blocked by
indexing and see the index as of the last committed batch.

The index is derived data, the files are the truth: it is never migrated, it is built
again. A file of an older schema version stays where it is (``index.sqlite3``) and,
read-only, answers searches while the new one is built beside it
(``index-v{SCHEMA_VERSION}.sqlite3``) by the next scan of every root; then the new file
takes the old one's name (``built``). A file that cannot be opened or fails ``PRAGMA
quick_check`` cannot answer: it is moved aside (kept for inspection) and the new one
answers as it fills. A daemon stopped or killed meanwhile finds the file beside at its
next start and goes on filling it. A file of a newer schema version is refused.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, suppress
from pathlib import Path
from typing import Final

from kbindex.daemon.backends.sqlite import documents, fields, schema
from kbindex.daemon.backends.sqlite.checkpointer import Checkpointer
from kbindex.daemon.backends.sqlite.database import (
    IndexUnusable,
    check_readable,
    file_version,
    legacy_exact_path,
    move_aside,
    open_checked,
    replace,
    too_new,
    writer_connection,
)
from kbindex.daemon.backends.sqlite.documents import IN_JSON, as_json
from kbindex.daemon.backends.sqlite.readers import Readers
from kbindex.daemon.engine import delete_files, disk_bytes, roll_back, sqlite, transaction
from kbindex.daemon.index.interface import Maintenance, Opened, Renamer, Texts
from kbindex.daemon.index.values import (
    RETRY_MTIME_NS,
    Batch,
    Document,
    Move,
    SizeCaps,
    SkipReason,
    Stamp,
    Structure,
    Update,
    recorded,
)

log = logging.getLogger(__name__)

OPTIMIZE_MIN_WRITTEN: Final = 1000
MOVED_PER_STATEMENT: Final = 500
"""Moved documents read and written again together: a renamed directory of any size
holds this many texts at a time."""


_UNDER: Final = "(path = ? OR (path > ? AND path < ?))"
"""A path, or anything under it as a directory: '0' sorts right after '/'."""


def _under(prefix: str) -> tuple[str, str, str]:
    return (prefix, prefix + "/", prefix + "0")


_STALE_SIZE: Final = (
    "CASE WHEN size <= ?1 THEN CASE WHEN skip_reason = ?3 THEN -1 ELSE size END"
    " WHEN size > ?2 THEN CASE WHEN skip_reason IS NULL THEN -1 ELSE size END"
    # (json_each has a column "path" of its own)
    " WHEN EXISTS (SELECT 1 FROM json_each(?4) s"
    " WHERE lower(substr(files.path, -length(s.value))) = s.value"
    " AND substr(rtrim(substr(files.path, 1, length(files.path) - length(s.value)), '.'), -1)"
    " NOT IN ('/', '')) = ?5 THEN CASE WHEN skip_reason = ?3 THEN -1 ELSE size END"
    " ELSE CASE WHEN skip_reason IS NULL THEN -1 ELSE size END END"
)
"""A file's recorded size, or -1 where its size cap reverses the recorded decision
(``Index.known``). Under both caps (?1) only a file skipped as too large (?3) is read
again, over both (?2) only an indexed one; between them, the file is under its cap when
it is a document (a suffix of ?4, not the whole name: ``os.path.splitext``) exactly
when the documents' cap is the higher one (?5)."""


def _caps(caps: SizeCaps) -> tuple[int, int, str, str, int]:
    """``_STALE_SIZE``'s parameters ?1 to ?5."""
    low, high = sorted((caps.text, caps.document))
    suffixes = as_json(sorted(caps.suffixes))
    return (low, high, SkipReason.TOO_LARGE, suffixes, int(caps.document > caps.text))


class Store:
    def __init__(self, db_path: Path, texts: Texts | None = None) -> None:
        self.db_path = db_path
        self.texts = texts or _unread
        """How an indexed file's text is read (the index keeps no copy): by the layer
        that reads files for clients, which checks the roots."""
        self.checkpoints = Checkpointer(db_path)
        """Copies the write-ahead log into the file, beside the writer."""
        self._writing_to = db_path
        """The file the writer writes: ``db_path``, or the one beside it while the
        index is rebuilt."""
        self.recovered = ""
        self.rebuilding = ""
        """Why the index is being rebuilt, until the file beside takes over ("")."""
        self._writer: sqlite.Connection | None = None
        self.readers = Readers(db_path)
        self.unmerged = 0
        """Documents written, rewritten or deleted since the last ``optimize``: each
        left entries (or a tombstone) in segments that a merge folds together."""

    # ------------------------------------------------------------ lifecycle

    def open(self) -> Opened:
        """Open the index, or start (or go on) building it again; see the module."""
        self.db_path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        delete_files(legacy_exact_path(self.db_path))
        for other in schema.others_beside(self.db_path):
            delete_files(other)  # left unfinished by a kbindexd of another version
        try:
            version = file_version(self.db_path)
        except IndexUnusable as exc:
            return self._afresh(f"the index could not be read ({exc})", damaged=True)
        if version == 0:
            # Made by a first start stopped before it made the tables: nothing to keep.
            delete_files(self.db_path)
            version = None
        if version is not None and version > schema.SCHEMA_VERSION:
            raise too_new(self.db_path, version)
        if version == schema.SCHEMA_VERSION or (version is None and not self.beside.exists()):
            delete_files(self.beside)
            try:
                self._open_writer(self.db_path)
            except IndexUnusable as exc:
                return self._afresh(f"the index is damaged ({exc})", damaged=True)
            return Opened("ready")
        if version is None:
            return self._afresh("an unfinished rebuild of the index goes on", damaged=False)
        reason = (
            f"the index was made by an older kbindexd (schema version {version},"
            f" now {schema.SCHEMA_VERSION})"
        )
        if version < schema.READABLE_SINCE:
            return self._afresh(reason, damaged=False)  # replaced once the new one is built
        try:
            check_readable(self.db_path)
        except IndexUnusable as exc:
            return self._afresh(f"{reason} and damaged ({exc})", damaged=True)
        self._open_beside(reason)
        log.warning("%s: building it again beside; the old one answers meanwhile", reason)
        return Opened("beside", reason)

    @property
    def beside(self) -> Path:
        """Where the index is built again, beside the old one."""
        return schema.beside(self.db_path)

    def _afresh(self, reason: str, *, damaged: bool) -> Opened:
        """Build the index beside a file that cannot answer; searches read the new one."""
        if damaged and self.db_path.exists():
            kept = move_aside(self.db_path)
            self.recovered = f"{reason}; the old file was kept as {kept}"
            log.warning("%s: moved to %s, rebuilding", reason, kept)
        else:
            log.warning("%s: rebuilding", reason)
        self.readers.db_path = self.beside
        self._open_beside(reason)
        return Opened("afresh", reason)

    def _open_beside(self, reason: str) -> None:
        try:
            self._open_writer(self.beside)
        except IndexUnusable as exc:
            log.warning("the unfinished rebuild is damaged too (%s): starting it again", exc)
            delete_files(self.beside)
            self._open_writer(self.beside)
        self.rebuilding = reason

    def _open_writer(self, path: Path) -> None:
        self._writer = open_checked(path)
        self._writing_to = path
        self.checkpoints = Checkpointer(path)

    def _close_writer(self) -> None:
        if self._writer is not None:
            with suppress(sqlite.Error):
                self._writer.close()
            self._writer = None

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        with self._writing() as conn, transaction(conn):
            yield

    @contextmanager
    def _writing(self) -> Iterator[sqlite.Connection]:
        """A write on the writer, and what one asks of the checkpoints around it (the
        write makes its own transaction)."""
        conn = self.writer
        self.checkpoints.before_write(conn)
        yield conn
        self.checkpoints.wrote()

    def rebuild(self, reason: str) -> None:
        """Start afresh after damage found while serving: the files read and written
        (the index; or the old one and the one built beside it) are moved aside, and a
        new one is built beside, answering as it fills. Call with no write in progress
        (the indexer's lock)."""
        damaged = sorted({self.readers.db_path, self._writing_to})
        with self.readers.replacing(self.beside):
            self._stop_writer()
            kept = [move_aside(path) for path in damaged if path.exists()]
            where = f"; the old file was kept as {kept[0]}" if kept else ""
            self.recovered = f"{reason}{where}"
            log.error("index database damaged (%s): kept as %s, rebuilding", reason, kept)
            self._open_writer(self.beside)
            self.rebuilding = reason

    def built(self) -> None:
        """A scan of every root has committed: a rebuilt index takes the index's name
        and answers from now on; the old file is gone. Nothing to do when ready."""
        if not self.rebuilding:
            return
        with self.readers.replacing():
            self.checkpoints.close()
            # Everything in the file before it is closed and renamed: the log's name
            # does not follow the file.
            busy = self.writer.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
            if busy:
                log.warning("the rebuilt index is still being read; it takes over later")
                self.checkpoints = Checkpointer(self._writing_to)
                return
            self._stop_writer()
            try:
                replace(self.beside, self.db_path)
            finally:
                # Renamed or not (a failure is retried after the next scan), the writer
                # goes on with the file.
                done = not self.beside.exists()
                self._writing_to = self.db_path if done else self.beside
                self._writer = writer_connection(self._writing_to)
                self.checkpoints = Checkpointer(self._writing_to)
                if done:
                    self.readers.db_path = self.db_path
                    self.rebuilding = ""
        log.info("the rebuilt index is complete and answers from now on")

    def _stop_writer(self) -> None:
        self.checkpoints.settle()
        self.checkpoints.close()
        self._close_writer()

    def checkpoint(self) -> None:
        """Copy the WAL into the database and empty it (after a large refresh): the
        disk space comes back and ``size_bytes`` counts the index once. Readers in
        the middle of a search can delay it; then it does what it can."""
        self.checkpoints.settle()  # a checkpoint running elsewhere would make this one fail
        with suppress(sqlite.Error):
            self.writer.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def settle(self) -> None:
        """Wait until what was committed is in the database file (no background
        checkpoint running or queued)."""
        self.checkpoints.settle()

    def maintain(self, after: Maintenance) -> None:
        """After a refresh: a large one's log copied back and emptied (``checkpoint``),
        another's settled, so that it is in the file when the refresh returns (a
        no-change refresh right after then sees a still file); then the segments merged
        when enough was rewritten (``optimize_due``)."""
        if after == "bulk":
            self.checkpoint()
        else:
            self.settle()
        if self.merge_possible and self.optimize_due():
            began = time.monotonic()
            self.optimize()
            log.info("merged the full-text index in %.2f s", time.monotonic() - began)

    def _drop(self, conn: sqlite.Connection, ids: Sequence[int]) -> None:
        """Remove these documents from the index's tables."""
        documents.remove(conn, ids)
        fields.remove(conn, ids)
        self.unmerged += len(ids)

    @property
    def merge_possible(self) -> bool:
        """Cheap, no database access: whether ``optimize_due`` could say yes."""
        return self.unmerged >= OPTIMIZE_MIN_WRITTEN

    def optimize_due(self) -> bool:
        """Whether enough documents were written to merge the index into one segment.

        FTS5 keeps a deleted or rewritten document's entries, plus a delete marker,
        until the segments holding them merge: under steady edits the file grows and
        searches slow, as every match is read in each segment. New documents
        count too: a first full index leaves segments automerge has not folded yet.
        Merging costs time in proportion to the index, so it runs once the writes reach a
        quarter of the index (at least OPTIMIZE_MIN_WRITTEN): a bounded overhead for a
        bounded amortized cost.
        """
        if not self.merge_possible:
            return False
        (files,) = self.writer.execute("SELECT count(*) FROM files").fetchone()
        return self.unmerged >= int(files) // 4

    def optimize(self) -> None:
        """Merge each full-text table into one segment, dropping what deletes left. A
        merge that fails (a full disk) is tried again once as many documents have been
        written once more."""
        try:
            with self._transaction():
                for table in documents.TABLES:
                    self.writer.execute(f"INSERT INTO {table}({table}) VALUES ('optimize')")
            self._release_free_pages()
        finally:
            self.unmerged = 0
        self.checkpoint()  # the merged segments would otherwise stay in the WAL

    def _release_free_pages(self) -> None:
        """Give the file's free pages back to the file system. A merge leaves the old
        segments' pages free (a large share of a first index); later writes
        would reuse them, but until then the file counts them as index."""
        with self._writing() as conn:
            try:
                # executescript steps the pragma to its end; execute() frees one page.
                conn.executescript("BEGIN IMMEDIATE; PRAGMA incremental_vacuum; COMMIT;")
            except BaseException:
                roll_back(conn)
                raise

    def close(self) -> None:
        # The background checkpoint and the readers first: only the last connection
        # to close may checkpoint, and a read-only one cannot, which would leave the
        # WAL holding the data.
        self.checkpoints.close()
        self.readers.close()
        if self._writer is not None:
            with suppress(sqlite.Error):
                self._writer.execute("PRAGMA optimize")
                self._writer.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            self._writer.close()
            self._writer = None

    @property
    def writer(self) -> sqlite.Connection:
        if self._writer is None:
            raise RuntimeError("store is not open")
        return self._writer

    @property
    def generation(self) -> int:
        """Bumped by ``rebuild``: what a read of an older file found says nothing of
        the new one."""
        return self.readers.generation

    def reader(self) -> AbstractContextManager[sqlite.Connection]:
        """A read-only connection from the pool, returned to it afterwards."""
        return self.readers.connection()

    # ------------------------------------------------------------ writer side

    def known(self, prefixes: Sequence[str] | None, caps: SizeCaps) -> set[Stamp]:
        """See ``Index.known``. The rows become the set straight from the cursor, and
        the size caps are applied by SQLite: no Python code runs per file."""
        conn = self.writer
        sql = f"SELECT path, {_STALE_SIZE}, mtime_ns, ctime_ns, ino, dev FROM files"
        params = _caps(caps)
        if prefixes is None:
            return set(conn.execute(sql, params))
        stamps: set[Stamp] = set()
        for prefix in prefixes:
            # _UNDER's parameters come after ?1 to ?5: SQLite numbers them 6 to 8.
            stamps.update(conn.execute(f"{sql} WHERE {_UNDER}", (*params, *_under(prefix))))
        return stamps

    def _move(self, conn: sqlite.Connection, move: Move, renamer: Renamer | None) -> int:
        """Re-key the file ``old``, or every file under the directory ``old``, to ``new``
        (in ``new_root``); rows already at the destination are replaced. Returns how
        many files moved.

        Each file keeps its id and ``indexed_at``, so what search by meaning computed of
        it stays, and searches never see it missing. Its words are indexed again under
        the new name, read from the file at its new path: the index keeps no text.
        (A file edited along the way no longer matches its recorded stamp, so the next
        scan reads it again: a move never loses an edit made with it.)
        """
        old, new, new_root = move
        if old == new:
            return 0
        assert renamer is not None, "a batch with moves has a renamer"
        rows = conn.execute(f"SELECT id, path FROM files WHERE {_UNDER}", _under(old)).fetchall()
        if rows:
            moving = {file_id for file_id, _ in rows}
            there = conn.execute(f"SELECT id FROM files WHERE {_UNDER}", _under(new))
            replaced = [i for (i,) in there.fetchall() if i not in moving]
            self._drop(conn, replaced)
            conn.execute(f"DELETE FROM files WHERE id IN {IN_JSON}", (as_json(replaced),))
            start = len(new_root) + 1
            moved = {file_id: new + path[len(old) :] for file_id, path in rows}
            kind = renamer.kind
            conn.execute(
                "UPDATE files SET path = j.value->>1, root = ?, relpath = j.value->>2,"
                " kind = j.value->>3 FROM json_each(?) AS j WHERE files.id = j.value->>0",
                (
                    new_root,
                    as_json((i, p, p[start:], kind(new_root, p[start:])) for i, p in moved.items()),
                ),
            )
            indexed = conn.execute(
                f"SELECT id, size FROM files WHERE skip_reason IS NULL AND id IN {IN_JSON}",
                (as_json(moved),),
            ).fetchall()
            for begin in range(0, len(indexed), MOVED_PER_STATEMENT):
                chunk = indexed[begin : begin + MOVED_PER_STATEMENT]
                self._rename(conn, chunk, moved, new_root, renamer)
            self.unmerged += len(rows)
        return len(rows)

    def _rename(
        self,
        conn: sqlite.Connection,
        indexed: list[tuple[int, int]],
        moved: dict[int, str],
        new_root: str,
        renamer: Renamer,
    ) -> None:
        """Index the moved documents ``indexed`` (id, size) again under their new paths
        (``moved``, in ``new_root``). The FTS name column holds the path relative to the
        root (ranked, and matched by searches for a file's name), and the index keeps
        no text: each is read from its new path. A file changed since it was indexed no
        longer matches its stamp, so the scan after the move reads it again; one that
        cannot be read now loses its document, and its recorded mtime becomes one no
        file has, so that the next scan reads it whatever else it finds."""
        start = len(new_root) + 1
        renamed, unread = [], []
        found: list[tuple[int, Structure]] = []
        for rowid, size in indexed:
            again = renamer.read(moved[rowid], moved[rowid][start:], size)
            if again is None:
                unread.append(rowid)
                continue
            renamed.append(documents.Entry(rowid, again.row, again.exact, None))
            # Relative links mean other files from the new folder: read again too.
            found.append((rowid, again.structure))
        documents.remove(conn, [e.rowid for e in renamed], keep_grams=True)
        documents.insert(conn, renamed)
        fields.remove(conn, [e.rowid for e in renamed])
        fields.write(conn, found)
        if unread:
            documents.remove(conn, unread)
            fields.remove(conn, unread)
            conn.execute(
                f"UPDATE files SET mtime_ns = ? WHERE id IN {IN_JSON}",
                (RETRY_MTIME_NS, as_json(unread)),
            )

    def forget(self, root: str) -> int:
        """Forget every file of ``root`` (a root removed at runtime), in one transaction."""
        conn = self.writer
        with self._transaction():
            ids = conn.execute("SELECT id FROM files WHERE root = ?", (root,)).fetchall()
            self._drop(conn, [i for (i,) in ids])
            removed = conn.execute("DELETE FROM files WHERE root = ?", (root,)).rowcount
        return int(removed)

    def reclassify(self, root: str, kind_of: Callable[[str, str], str]) -> int:
        conn = self.writer
        with self._transaction():
            rows = conn.execute("SELECT id, relpath, kind FROM files WHERE root = ?", (root,))
            changed = [
                (i, kind)
                for i, relpath, was in rows.fetchall()
                if (kind := kind_of(root, relpath)) != was
            ]
            conn.execute(
                "UPDATE files SET kind = j.value->>1 FROM json_each(?) AS j"
                " WHERE files.id = j.value->>0",
                (as_json(changed),),
            )
        return len(changed)

    def apply(self, batch: Batch) -> int:
        """Write one batch in one transaction: its moves, then the files rows and the
        removal of old documents, then the new documents. Each step is one statement for
        the whole batch (see ``documents``: per-row statements wait on the GIL)."""
        conn = self.writer
        with self._transaction():
            moved = sum(self._move(conn, move, batch.renamer) for move in batch.moves)
            if batch.updates or batch.deletes:
                self._write(conn, batch.updates, batch.deletes)
        return moved

    def _write(
        self, conn: sqlite.Connection, updates: Sequence[Update], deletes: Sequence[str]
    ) -> None:
        now = time.time()
        latest = {update.seen.path: update for update in updates}  # a path once
        known: dict[str, int] = dict(
            conn.execute(
                f"SELECT path, id FROM files WHERE path IN {IN_JSON}",
                (as_json([*deletes, *latest]),),
            )
        )
        gone = [known.pop(p) for p in dict.fromkeys(deletes) if p in known]
        self._drop(conn, [*gone, *(known[p] for p in latest if p in known)])
        conn.execute(f"DELETE FROM files WHERE id IN {IN_JSON}", (as_json(gone),))
        fresh: list[tuple[object, ...]] = []
        rewritten: list[tuple[object, ...]] = []
        docs: dict[str, Document] = {}
        for path, update in latest.items():
            doc, recorded_values = recorded(update)
            if doc is not None:
                docs[path] = doc
            # ctime, inode and device as the scan saw them: a change after the scan
            # leaves them behind the file, so the next scan reads it again.
            seen = update.seen
            values = (*recorded_values, seen.ctime_ns, seen.ino, seen.dev, update.kind)
            if path in known:
                rewritten.append((known[path], *values))
            else:
                fresh.append((path, seen.root, seen.relpath, *values))
        if rewritten:
            conn.execute(
                "UPDATE files SET size = j.value->>1, mtime_ns = j.value->>2, indexed_at = ?,"
                " encoding = j.value->>3, skip_reason = j.value->>4, skip_detail = j.value->>5,"
                " ctime_ns = j.value->>6, ino = j.value->>7, dev = j.value->>8,"
                " kind = j.value->>9 FROM json_each(?) AS j WHERE files.id = j.value->>0",
                (now, as_json(rewritten)),
            )
        ids = dict(known)
        if fresh:
            ids.update(
                (path, file_id)
                for file_id, path in conn.execute(
                    "INSERT INTO files(path, root, relpath, size, mtime_ns, indexed_at,"
                    " encoding, skip_reason, skip_detail, ctime_ns, ino, dev, kind)"
                    " SELECT value->>0, value->>1, value->>2, value->>3, value->>4, ?,"
                    " value->>5, value->>6, value->>7, value->>8, value->>9, value->>10,"
                    " value->>11"
                    " FROM json_each(?) RETURNING id, path",
                    (now, as_json(fresh)),
                ).fetchall()
            )
        documents.insert(conn, [documents.entry(ids[p], doc) for p, doc in docs.items()])
        fields.write(conn, [(ids[p], doc.structure) for p, doc in docs.items()])
        self.unmerged += len(docs)

    def size_bytes(self) -> int:
        return sum(disk_bytes(self.db_path))


def _unread(path: str, indexed_size: int) -> None:
    """No file is read (an index with no ``Texts``: its hits show no text)."""
