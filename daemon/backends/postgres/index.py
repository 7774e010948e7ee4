"""The shared index: ``index.Index`` on a PostgreSQL database many daemons use at once.

Each daemon writes its own machine's rows (``Settings.machine``) and reads everyone's.
Writes are one transaction per batch, as in SQLite. A machine name is written by one
daemon at a time: the daemon holds a lease on its name in ``kb_machines``, renewed by a
heartbeat (``machines``) and checked, with the schema's version, at the start of every
write batch. A second daemon with the same name gets a clear error in its status
instead of a tug of war over the rows, and takes over once the first one stopped or its
lease ran out (a host that vanished holds nothing for long).

A lost connection fails the write or the read that met it; the indexer's retry and the
next search open a new one (``connections``). Nothing is lost: a batch that did not
commit leaves its files' old metadata, so the next scan reads them again.

The server must be reachable for the daemon to index, not for it to start: ``open``
that cannot connect logs it, and the first read or write that can checks the schema.
The daemon creates nothing: the schema is its owner's (``kbindexd db migrate``), and a
daemon facing none, or another version, refuses with the command to run.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Final, Literal, TypeVar

import psycopg
from kbindex.daemon.backends.postgres import links, machines, reads, schema, writes
from kbindex.daemon.backends.postgres.connections import (
    WRITE_SECONDS,
    Connection,
    Readers,
    Writer,
    connect,
    is_lost,
    unbounded,
)
from kbindex.daemon.index.interface import (
    Failure,
    IndexRefused,
    Maintenance,
    Opened,
    Renamer,
    Texts,
)
from kbindex.daemon.index.plan import NO_FILTERS, Filters
from kbindex.daemon.index.values import (
    Batch,
    Candidates,
    Checked,
    Counts,
    Described,
    Document,
    FileState,
    Links,
    Listing,
    Move,
    Query,
    Record,
    SizeCaps,
    SkipReason,
    Stamp,
    Stats,
    Update,
    Words,
    recorded,
    statements,
)
from psycopg.conninfo import conninfo_to_dict

if TYPE_CHECKING:
    from kbindex.daemon.backends import Settings
    from kbindex.daemon.index.plan import Plan

log = logging.getLogger(__name__)
T = TypeVar("T")

_U64: Final = 1 << 64
OTHERS_SECONDS: Final = 5.0
VACUUM_SECONDS: Final = 600.0
PROBE_SECONDS: Final = 1.0


class Unreachable(psycopg.OperationalError):
    """A read refused at once: the server was lost, and no probe reached it since."""


_UNWRITABLE: Final = (
    psycopg.errors.DiskFull,
    psycopg.errors.ReadOnlySqlTransaction,  # a replica, or a server in recovery
    psycopg.errors.InsufficientPrivilege,  # a user who may read but not write
)


class PgIndex:
    backend = "postgres"

    @classmethod
    def configured(cls, settings: Settings, texts: Texts) -> PgIndex:
        """Each machine's roots are its own; the index keeps the text and reads no
        file (``texts`` unused)."""
        return cls(
            settings.dsn, settings.machine, settings.pg_timeout_seconds, settings.pg_lease_seconds
        )

    def __init__(
        self,
        dsn: str,
        machine: str,
        timeout: float = WRITE_SECONDS,
        lease: float = machines.LEASE_SECONDS,
    ) -> None:
        self.machine = machine
        self.recovered = ""
        self.rebuilding = ""
        """Never: a shared index changes schema by its owner's ``migrate``."""
        self._writes = 0
        """This daemon's commits: what it counted of the index is stale once they move."""
        self.generation = 0
        self.server = ""
        """The server's version, once connected."""
        self._where = _where(dsn)
        self._writer = Writer(dsn, timeout)
        self._readers = Readers(dsn)
        self._checked = False
        self._checking = threading.Lock()
        self._down = ""
        """Why reads fail at once: the server was lost, and no probe reached it since."""
        self._probing = threading.Lock()
        self._lease = machines.Lease(dsn, machine, timeout, lease)
        self._claimed: set[str] = set()
        self._counted: tuple[int, float, reads.Stats] | None = None
        """(``_writes``, monotonic time) of the last count of the corpus, and the count."""

    def failure(self, exc: BaseException) -> Failure | None:
        if is_lost(exc):
            return "unavailable"
        if isinstance(exc, (machines.MachineTaken, IndexRefused, *_UNWRITABLE)):
            return "unwritable"
        return None

    def describe(self) -> Described:
        version = f"PostgreSQL {self.server}" if self.server else "PostgreSQL (not reached yet)"
        where = f"{version} at {self._where}"
        return Described("postgres", where, self.machine, self.recovered)

    # ---------------------------------------------------------------- lifecycle

    def open(self) -> Opened:
        try:
            self._check()
        except psycopg.OperationalError as exc:
            log.warning("the shared index cannot be reached yet (%s); retrying", exc)
        return Opened("ready")

    def close(self) -> None:
        self._lease.release()
        self._readers.close()
        self._writer.close()

    def _check(self) -> None:
        """The schema is the one this kbindexd reads and writes (once; every write
        batch checks it again)."""
        if self._checked:
            return
        with self._checking:
            if not self._checked:
                with self._readers.connection() as conn:
                    schema.check(conn)
                    (version,) = conn.execute("SHOW server_version").fetchone() or ("?",)
                self.server = str(version)
                self._checked = True

    def built(self) -> None:
        """Nothing is built beside: the rows are rewritten where they are."""

    def rebuild(self, reason: str) -> None:
        """Forget the rows of the roots this daemon writes (the next scan writes them
        again); other daemons' rows stay, whatever their machine name."""
        conn = self._conn()
        with conn.transaction():
            self._lease.renew(conn)
            for root in sorted(self._claimed):
                conn.execute(
                    "DELETE FROM kb_files WHERE machine = %s AND root = %s", (self.machine, root)
                )
        self._writes += 1
        self.recovered = reason

    def _conn(self) -> Connection:
        """The writer's connection, once the schema was checked."""
        self._check()
        return self._writer.get()

    def claim(self, roots: Sequence[str]) -> None:
        """Take this machine's lease (refused while another daemon holds it) for the
        roots this daemon writes; with none, nothing is opened."""
        if roots or self._claimed:
            self._lease.take(self._conn())
            self._claimed |= set(roots)

    # ---------------------------------------------------------------- writes

    def known(self, prefixes: Sequence[str] | None, caps: SizeCaps) -> set[Stamp]:
        # As SQLite's (``sqlite.store._STALE_SIZE``): a file's size cap is looked up by
        # its name only between the two caps.
        sql = (
            "SELECT path, CASE"
            " WHEN size <= %(low)s THEN CASE WHEN skip_reason = %(too_large)s THEN -1 ELSE size END"
            " WHEN size > %(high)s THEN CASE WHEN skip_reason IS NULL THEN -1 ELSE size END"
            " WHEN EXISTS (SELECT 1 FROM unnest(%(suffixes)s::text[]) s"
            " WHERE lower(right(kb_files.path, length(s))) = s"
            " AND right(rtrim(left(kb_files.path, -length(s)), '.'), 1) NOT IN ('/', ''))"
            " = %(documents_higher)s"
            " THEN CASE WHEN skip_reason = %(too_large)s THEN -1 ELSE size END"
            " ELSE CASE WHEN skip_reason IS NULL THEN -1 ELSE size END END,"
            " mtime_ns, ctime_ns, ino, dev FROM kb_files WHERE machine = %(machine)s"
        )
        low, high = sorted((caps.text, caps.document))
        params = {
            "low": low,
            "high": high,
            "suffixes": sorted(caps.suffixes),
            "documents_higher": caps.document > caps.text,
            "too_large": SkipReason.TOO_LARGE,
            "machine": self.machine,
        }
        if prefixes is None and not self._claimed:
            return set()
        conn = self._conn()
        # "Every file this daemon indexed" is every file under the roots it writes, not
        # every row of its machine name: another daemon may share the name (a second
        # daemon on the host, a --no-roots reader), and a row this scan does not find
        # is deleted. Rows of a root no daemon writes any more stay until removed.
        rows = []
        for prefix in sorted(self._claimed) if prefixes is None else prefixes:
            rows += conn.execute(
                f"{sql} AND (path = %(p)s OR starts_with(path, %(under)s))",
                {**params, "p": prefix, "under": prefix + "/"},
            ).fetchall()
        # Inode and device numbers are stored signed (bigint), the scan's are not.
        return {
            (path, size, mtime, ctime, ino % _U64, dev % _U64)
            for path, size, mtime, ctime, ino, dev in rows
        }

    def apply(self, batch: Batch) -> int:
        moves = [move for move in batch.moves if move.old != move.new]
        if not batch.updates and not batch.deletes and not moves:
            return 0
        conn = self._conn()
        with conn.transaction():
            self._lease.renew(conn)  # and the schema's version: else nothing is written
            moved = sum(self._move(conn, move, batch.renamer) for move in moves)
            if batch.updates or batch.deletes:
                self._write(conn, batch.updates, batch.deletes)
        self._writes += 1
        return moved

    def _write(self, conn: Connection, updates: Sequence[Update], deletes: Sequence[str]) -> None:
        latest = {update.seen.path: update for update in updates}
        self._claimed |= {update.seen.root for update in latest.values()}
        now = time.time()
        known = dict(
            conn.execute(
                "SELECT path, id FROM kb_files WHERE machine = %s AND path = ANY(%s)",
                (self.machine, [*deletes, *latest]),
            ).fetchall()
        )
        gone = [known.pop(p) for p in dict.fromkeys(deletes) if p in known]
        conn.execute("DELETE FROM kb_files WHERE id = ANY(%s)", (gone,))
        conn.execute("DELETE FROM kb_docs WHERE id = ANY(%s)", (list(known.values()),))
        files: list[tuple[object, ...]] = []
        texts: dict[str, Document] = {}
        for path, update in latest.items():
            doc, values = recorded(update)
            if doc is not None:
                texts[path] = doc
            seen = update.seen
            signed = [v - _U64 if v >= _U64 // 2 else v for v in (seen.ino, seen.dev)]
            row = (path, seen.root, seen.relpath, *values, seen.ctime_ns, *signed, update.kind)
            files.append(row)
        ids = self._upsert_files(conn, files, now)
        self._insert_docs(conn, [(ids[p], doc) for p, doc in texts.items()])

    def _upsert_files(
        self, conn: Connection, files: list[tuple[object, ...]], now: float
    ) -> dict[str, int]:
        if not files:
            return {}
        columns = list(zip(*files, strict=True))
        rows = conn.execute(
            "INSERT INTO kb_files AS f(machine, path, root, relpath, size, mtime_ns,"
            " indexed_at, encoding, skip_reason, skip_detail, ctime_ns, ino, dev, kind)"
            " SELECT %s, u.path, u.root, u.relpath, u.size, u.mtime_ns, %s, u.encoding,"
            " u.skip_reason, u.skip_detail, u.ctime_ns, u.ino, u.dev, u.kind"
            " FROM unnest(%s::text[], %s::text[], %s::text[], %s::bigint[], %s::bigint[],"
            " %s::text[], %s::text[], %s::text[], %s::bigint[], %s::bigint[], %s::bigint[],"
            " %s::text[])"
            " AS u(path, root, relpath, size, mtime_ns, encoding, skip_reason, skip_detail,"
            " ctime_ns, ino, dev, kind)"
            " ON CONFLICT (machine, path) DO UPDATE SET root = excluded.root,"
            " relpath = excluded.relpath, size = excluded.size, mtime_ns = excluded.mtime_ns,"
            " indexed_at = excluded.indexed_at, encoding = excluded.encoding,"
            " skip_reason = excluded.skip_reason, skip_detail = excluded.skip_detail,"
            " ctime_ns = excluded.ctime_ns, ino = excluded.ino, dev = excluded.dev,"
            " kind = excluded.kind"
            " RETURNING f.id, f.path",
            (self.machine, now, *(list(c) for c in columns)),
        ).fetchall()
        return {path: file_id for file_id, path in rows}

    def _insert_docs(self, conn: Connection, docs: list[tuple[int, Document]]) -> None:
        # Statements of about STATEMENT_CHARS of text each, as in SQLite: a batch's
        # copies (parameters, the server's parse) stay bounded whatever its size.
        for chunk in statements(docs, lambda item: len(item[1].row[2])):
            writes.insert(conn, chunk)

    def _move(self, conn: Connection, move: Move, renamer: Renamer | None) -> int:
        old, new, new_root = move
        assert renamer is not None, "a batch with moves has a renamer"
        self._claimed.add(new_root)
        under = "machine = %s AND (path = %s OR starts_with(path, %s))"
        rows = conn.execute(
            f"SELECT id, path FROM kb_files WHERE {under}", (self.machine, old, old + "/")
        ).fetchall()
        if not rows:
            return 0
        moving = [file_id for file_id, _ in rows]
        conn.execute(
            f"DELETE FROM kb_files WHERE {under} AND NOT id = ANY(%s)",
            (self.machine, new, new + "/", moving),
        )
        start = len(new_root) + 1
        paths = [new + path[len(old) :] for _, path in rows]
        conn.execute(
            "UPDATE kb_files f SET path = u.path, root = %s, relpath = u.relpath,"
            " kind = u.kind FROM unnest(%s::bigint[], %s::text[], %s::text[], %s::text[])"
            " AS u(id, path, relpath, kind) WHERE f.id = u.id",
            (
                new_root,
                moving,
                paths,
                [p[start:] for p in paths],
                [renamer.kind(new_root, p[start:]) for p in paths],
            ),
        )
        # The path is part of a document's words (ranked, and derived words): they
        # are made again from the stored text, never from the file.
        docs = conn.execute(
            "SELECT d.id, f.relpath, d.title, d.body, f.encoding FROM kb_docs d"
            " JOIN kb_files f ON f.id = d.id WHERE d.id = ANY(%s)",
            (moving,),
        ).fetchall()
        conn.execute("DELETE FROM kb_docs WHERE id = ANY(%s)", (moving,))
        self._insert_docs(conn, [(i, renamer.restored(r, t, b, e)) for i, r, t, b, e in docs])
        return len(rows)

    def forget(self, root: str) -> int:
        conn = self._conn()
        with conn.transaction():
            self._lease.renew(conn)
            removed = conn.execute(
                "DELETE FROM kb_files WHERE machine = %s AND root = %s", (self.machine, root)
            ).rowcount
        self._claimed.discard(root)
        self._writes += 1
        return removed

    def reclassify(self, root: str, kind_of: Callable[[str, str], str]) -> int:
        conn = self._conn()
        with conn.transaction():
            self._lease.renew(conn)
            rows = conn.execute(
                "SELECT id, relpath, kind FROM kb_files WHERE machine = %s AND root = %s",
                (self.machine, root),
            ).fetchall()
            changed = [
                (i, kind) for i, relpath, was in rows if (kind := kind_of(root, relpath)) != was
            ]
            conn.execute(
                "UPDATE kb_files f SET kind = u.kind FROM unnest(%s::bigint[], %s::text[])"
                " AS u(id, kind) WHERE f.id = u.id",
                ([i for i, _ in changed], [k for _, k in changed]),
            )
        self._writes += 1
        return len(changed)

    def maintain(self, after: Maintenance) -> None:
        """After a large refresh: vacuum and analyse the tables it wrote. Until then the
        GIN indexes keep new entries in their pending lists and the postings have no
        visibility map (their index-only scans read the table), and searches right after
        a full index would pay for both. Otherwise nothing: autovacuum keeps the GIN
        indexes, nothing is merged."""
        if after != "bulk":
            return
        conn = self._conn()
        with unbounded(conn, VACUUM_SECONDS):
            # Only the tables' owner may vacuum them: for a writer role the server
            # skips them with a warning, and autovacuum does it.
            conn.execute("VACUUM (ANALYZE) kb_files, kb_docs, kb_postings, kb_segments")

    # ---------------------------------------------------------------- reads

    def _read(self, fn: Callable[..., T], *args: object) -> T:
        if self._down:
            raise Unreachable(self._down)
        try:
            self._check()
            with self._readers.connection() as conn:
                return fn(conn, *args)
        except psycopg.OperationalError as exc:
            if is_lost(exc):
                self._lost(exc)
            raise

    def _lost(self, exc: BaseException) -> None:
        """The server was lost to a read: reads fail at once (status answers from what it
        counted, searches say ``unavailable``) until a probe reaches it again, rather than
        each waiting out the deadline on a path that passes nothing."""
        with self._probing:
            if self._down:
                return
            self._down = str(exc).strip()
        self._readers.close()  # idle connections went the same way
        threading.Thread(target=self._probe, name="kbindex-probe", daemon=True).start()

    def _probe(self) -> None:
        while True:
            time.sleep(PROBE_SECONDS)
            try:
                with connect(self._readers.dsn, role="read") as conn:
                    conn.execute("SELECT 1")
            except psycopg.Error as exc:
                log.debug("the shared index is still unreachable: %s", exc)
                continue
            self._down = ""
            log.info("the shared index can be reached again")
            return

    def rank(self, plan: Plan) -> tuple[list[tuple[int, float]], int, str]:
        corpus = self._stats()
        rows, total, mode = self._read(reads.search, plan, corpus)
        return [(int(i), float(score)) for i, score in rows], total, mode

    def _stats(self) -> reads.Stats:
        """The index's document count and mean length (bm25 needs them; counting reads
        every document row, too slow for each search), counted again after this
        daemon's writes, and OTHERS_SECONDS after the last count at the latest: other
        machines' commits are not announced to this daemon, so their rows count with
        that delay."""
        writes, now, counted = self._writes, time.monotonic(), self._counted
        if counted is None or counted[0] != writes or now - counted[1] >= OTHERS_SECONDS:
            counted = self._counted = (writes, now, self._read(reads.stats))
        return counted[2]

    def files(
        self,
        path_filter: str | None,
        limit: int | None = None,
        filters: Filters = NO_FILTERS,
        *,
        newest: bool = False,
    ) -> Listing:
        return self._read(reads.files, path_filter, limit, filters, newest)

    def state(self, path: str, *, under: bool = False) -> FileState | None:
        return self._read(reads.state, self.machine, path, under)

    def stats(self) -> Stats:
        return Stats(self._read(_counts, self.machine), self._read(_size_bytes))

    def retire_machine(self, name: str) -> int:
        """Remove machine ``name``'s rows and its registration, unless a daemon holds its
        lease. On a connection of its own: the indexer's writer may be mid-batch."""
        conn = connect(self._writer.dsn, role="write", timeout=self._writer.timeout)
        with conn, conn.transaction():
            row = conn.execute(
                "SELECT holder IS NOT NULL AND expires > now(),"
                " extract(epoch FROM now() - heartbeat)::float8"
                " FROM kb_machines WHERE name = %s FOR UPDATE",
                (name,),
            ).fetchone()
            if row and row[0]:
                raise IndexRefused(
                    f"machine {name!r} is live (its daemon's heartbeat came {row[1]:.0f} s"
                    " ago): stop that daemon first"
                )
            (rows,) = conn.execute(
                "SELECT count(*) FROM kb_files WHERE machine = %s", (name,)
            ).fetchone() or (0,)
            removed = conn.execute("DELETE FROM kb_files WHERE machine = %s", (name,)).rowcount
            if removed < rows:  # row-level security left another role's rows
                raise IndexRefused(
                    f"machine {name!r} belongs to another PostgreSQL role: that role, or"
                    " the schema's owner, retires it"
                )
            conn.execute("DELETE FROM kb_machines WHERE name = %s", (name,))
        if row is None and not removed:
            raise IndexRefused(f"the shared index has no machine {name!r}")
        self._writes += 1
        return removed

    def check(self) -> Checked:
        """The connection, the schema's version and its extensions."""
        with self._readers.connection() as conn:
            return _check(conn)

    def candidates(
        self,
        query: Query,
        path_filter: str | None,
        pending: Sequence[str],
        new: Sequence[tuple[str, str]],
        words: Words | None,
        filters: Filters = NO_FILTERS,
    ) -> Candidates:
        return self._read(reads.candidates, self.machine, query, path_filter, pending, new, filters)

    def records(self, ids: Sequence[int]) -> list[Record]:
        return self._read(reads.records, ids) if ids else []

    def links(self, path: str, direction: Literal["out", "in"], limit: int | None = None) -> Links:
        return self._read(links.links, self.machine, path, direction, limit)


def _where(dsn: str) -> str:
    """The server and database a connection string names, without its credentials."""
    try:
        info = conninfo_to_dict(dsn)
    except psycopg.ProgrammingError:
        return "(a connection string that does not parse)"
    host = str(info.get("host") or "localhost")
    port = f":{info['port']}" if info.get("port") else ""
    return f"{host}{port}/{info.get('dbname') or info.get('user') or ''}"


def _counts(conn: Connection, machine: str) -> Counts:
    states = {m.name: (m.state, m.heartbeat) for m in machines.listed(conn)}
    return dataclasses.replace(reads.counts(conn, machine), machines=states)


def _check(conn: Connection) -> Checked:
    try:
        schema.check(conn)  # the version in the database, as a fresh reader sees it
    except schema.SchemaRefused as exc:
        return Checked(str(exc), 0)
    found = {str(name) for (name,) in conn.execute("SELECT extname FROM pg_extension")}
    missing = [name for name in schema.EXTENSIONS if name not in found]
    if not missing:
        return Checked("ok", _size_bytes(conn))
    version = f"schema {schema.SCHEMA_VERSION}"
    return Checked(f"{version}; missing extension(s): {', '.join(missing)}", _size_bytes(conn))


def _size_bytes(conn: Connection) -> int:
    row = conn.execute(
        "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c"
        " WHERE c.relname IN ('kb_files', 'kb_docs', 'kb_postings', 'kb_segments')"
        " AND c.relkind = 'r' AND c.relnamespace = %s::regnamespace",
        (schema.NAMESPACE,),
    ).fetchone()
    return int(row[0]) if row else 0
