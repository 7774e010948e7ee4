"""The default index: one SQLite file, its single writer (``store``) and its readers.

``Store`` writes; this class adds the read side of ``index.Index``, each read on a
connection of the reader pool (``readers``), with the SQL in ``searching`` (searcher,
grep) where the queries are built.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

from kbindex.daemon.backends.sqlite import candidates, links, searcher
from kbindex.daemon.backends.sqlite.database import disk_bytes, is_damage, is_unwritable
from kbindex.daemon.backends.sqlite.engine import sqlite
from kbindex.daemon.backends.sqlite.store import Store
from kbindex.daemon.index.interface import (
    Checked,
    Counts,
    Described,
    Embeddable,
    Failure,
    File,
    Linked,
    SearchResult,
    Stored,
)
from kbindex.daemon.index.plan import NO_FILTERS, Filters
from kbindex.daemon.indexing.documents import IN_JSON, TITLES, as_json
from kbindex.daemon.indexing.textfile import current_text

if TYPE_CHECKING:
    from kbindex.daemon.grep import phrases, trigrams
    from kbindex.daemon.searching.query import Compiled


class SqliteIndex(Store):
    backend = "sqlite"

    def failure(self, exc: BaseException) -> Failure | None:
        if is_damage(exc):
            return "damaged"
        if is_unwritable(exc):
            return "unwritable"
        return None

    def claim(self, roots: Sequence[str]) -> None:
        """Nothing to take: the index file is this daemon's alone (``Instance``)."""

    def describe(self) -> Described:
        return Described("sqlite", f"SQLite {sqlite.sqlite_version} at {self.db_path}")

    def search(
        self,
        compiled: Compiled,
        limit: int,
        path_filter: str | None,
        filters: Filters = NO_FILTERS,
    ) -> SearchResult:
        with self.reader() as conn:
            found = searcher.find(
                conn, compiled, limit, path_filter, filters=filters, boosts=self.kinds.boosts
            )
        return searcher.shown(found, compiled, self.roots.inside)

    def rank(
        self,
        compiled: Compiled,
        limit: int,
        path_filter: str | None,
        filters: Filters = NO_FILTERS,
    ) -> tuple[list[tuple[int, float]], int, str]:
        with self.reader() as conn:
            return searcher.rank(conn, compiled, limit, path_filter, filters, self.kinds.boosts)

    def find_files(
        self, glob: str, limit: int, filters: Filters = NO_FILTERS, newest: bool = False
    ) -> tuple[list[File], int]:
        with self.reader() as conn:
            return searcher.find_files(conn, glob, limit, filters, newest)

    def file_state(self, path: str) -> tuple[str | None, str | None] | None:
        with self.reader() as conn:
            return searcher.file_state(conn, path)

    def holds(self, path: str) -> bool:
        with self.reader() as conn:
            return searcher.holds(conn, path)

    def counts(self) -> Counts:
        with self.reader() as conn:
            return searcher.counts(conn)

    def check(self) -> Checked:
        # The whole file at once, the full-text indexes' own checks included (seconds on
        # a kernel tree): asked for by a person running ``kbctl doctor``, unlike the
        # table-by-table check that every start runs (``database``). On a connection of
        # its own: a pooled one can hold a stale view of the full-text indexes
        # (``Readers.fresh``).
        with self.readers.fresh() as conn:
            rows = conn.execute("PRAGMA quick_check").fetchall()
        integrity = "ok" if rows == [("ok",)] else "; ".join(str(r[0]) for r in rows[:5])
        return Checked(integrity, *disk_bytes(self.db_path))

    def grep_candidates(
        self,
        query: trigrams.Query,
        path_filter: str | None,
        pending: Sequence[str],
        new: Sequence[tuple[str, str]],
        words: phrases.Words | None,
        filters: Filters = NO_FILTERS,
    ) -> candidates.Candidates:
        with self.reader() as conn:
            return candidates.find(conn, query, path_filter, pending, new, words, filters)

    def stored(self, ids: Sequence[int]) -> list[Stored]:
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
        within = self.roots.inside
        return [Stored(r[0], File(*r[1:6]), r[6], current_text(r[1], within, r[4])) for r in rows]

    def allowed(self, path_filter: str | None, filters: Filters = NO_FILTERS) -> list[int]:
        cond, params = searcher.files_condition(path_filter, filters)
        with self.reader() as conn:
            rows = conn.execute(
                f"SELECT f.id FROM files f WHERE f.skip_reason IS NULL AND {cond} ORDER BY 1",
                params,
            ).fetchall()
        return [i for (i,) in rows]

    def links(self, path: str, direction: Literal["out", "in"]) -> list[Linked]:
        with self.reader() as conn:
            return links.links(conn, path, direction)

    def embeddable(self) -> list[Embeddable]:
        with self.reader() as conn:
            rows = conn.execute(
                "SELECT id, indexed_at, root, size FROM files WHERE skip_reason IS NULL"
            ).fetchall()
        return [Embeddable(*row) for row in rows]
