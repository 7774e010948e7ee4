"""The default index: one SQLite file, its single writer (``store``) and its readers.

``Store`` writes; this class adds the read side of ``index.Index``, each read on a
connection of the reader pool (``readers``), with the SQL in ``searcher`` and
``candidates`` (grep's). The index keeps no text: what is shown of a file is read by
the ``Texts`` it was given.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

from kbindex.daemon.backends.sqlite import candidates, links, searcher
from kbindex.daemon.backends.sqlite.database import is_damage, is_unwritable
from kbindex.daemon.backends.sqlite.documents import IN_JSON, TITLES, as_json
from kbindex.daemon.backends.sqlite.store import Store
from kbindex.daemon.engine import disk_bytes, sqlite
from kbindex.daemon.index.interface import Failure, IndexRefused, Texts
from kbindex.daemon.index.plan import NO_FILTERS, Filters
from kbindex.daemon.index.values import (
    Candidates,
    Checked,
    Described,
    File,
    FileState,
    Links,
    Listing,
    Query,
    Record,
    Stats,
    Words,
)

if TYPE_CHECKING:
    from kbindex.daemon.backends import Settings
    from kbindex.daemon.index.plan import Plan


class SqliteIndex(Store):
    backend = "sqlite"

    @classmethod
    def configured(cls, settings: Settings, texts: Texts) -> SqliteIndex:
        return cls(settings.db_path, texts)

    def failure(self, exc: BaseException) -> Failure | None:
        if is_damage(exc):
            return "damaged"
        if is_unwritable(exc):
            return "unwritable"
        return None

    def claim(self, roots: Sequence[str]) -> None:
        """Nothing to take: the index file is this daemon's alone (``Instance``)."""

    def describe(self) -> Described:
        where = f"SQLite {sqlite.sqlite_version} at {self.db_path}"
        return Described("sqlite", where, "", self.recovered, self.rebuilding, self.generation)

    def rank(self, plan: Plan) -> tuple[list[tuple[int, float]], int, str]:
        with self.reader() as conn:
            return searcher.rank(conn, plan)

    def files(
        self,
        path_filter: str | None,
        limit: int | None = None,
        filters: Filters = NO_FILTERS,
        *,
        newest: bool = False,
    ) -> Listing:
        with self.reader() as conn:
            return searcher.files(conn, path_filter, limit, filters, newest)

    def state(self, path: str, *, under: bool = False) -> FileState | None:
        with self.reader() as conn:
            return searcher.state(conn, path, under=under)

    def stats(self) -> Stats:
        with self.reader() as conn:
            counted = searcher.counts(conn)
        return Stats(counted, self.size_bytes())

    def check(self) -> Checked:
        # The whole file at once, the full-text indexes' own checks included (seconds on
        # a kernel tree): asked for by a person running ``kbctl doctor``, unlike the
        # table-by-table check that every start runs (``database``). On a connection of
        # its own: a pooled one can hold a stale view of the full-text indexes
        # (``Readers.fresh``).
        with self.readers.fresh() as conn:
            rows = conn.execute("PRAGMA quick_check").fetchall()
        integrity = "ok" if rows == [("ok",)] else "; ".join(str(r[0]) for r in rows[:5])
        db_bytes, wal_bytes = disk_bytes(self.db_path)
        details = {"db_bytes": db_bytes, "wal_bytes": wal_bytes}
        return Checked(integrity, db_bytes + wal_bytes, details)

    def candidates(
        self,
        query: Query,
        path_filter: str | None,
        pending: Sequence[str],
        new: Sequence[tuple[str, str]],
        words: Words | None,
        filters: Filters = NO_FILTERS,
    ) -> Candidates:
        with self.reader() as conn:
            return candidates.find(conn, query, path_filter, pending, new, words, filters)

    def records(self, ids: Sequence[int]) -> list[Record]:
        if not ids:
            return []
        with self.reader() as conn:
            rows = conn.execute(
                "SELECT f.id, f.path, f.root, f.relpath, f.size, f.mtime_ns, t.title"
                f" FROM files f JOIN {TITLES} t ON t.id = f.id WHERE f.id IN {IN_JSON}",
                (as_json(ids),),
            ).fetchall()
        # The files are read after the read transaction: the pool's connection is not
        # held through file I/O.
        return [Record(r[0], File(*r[1:6]), r[6], self.texts(r[1], r[4])) for r in rows]

    def retire_machine(self, name: str) -> int:
        raise IndexRefused("machines are retired from a shared index (backend postgres) only")

    def links(self, path: str, direction: Literal["out", "in"], limit: int | None = None) -> Links:
        with self.reader() as conn:
            return links.links(conn, path, direction, limit)
