"""The vector file: which passages of which indexed file were embedded, and the
vector of every passage text, in a SQLite file of its own beside the index.

Why a file of its own: embedding runs for hours on a large tree, and its writes must
never wait for, or hold up, the word index's single writer. The index stays the truth
about files; this file follows it (``embedder``), keyed by the index's file ids, which
survive edits and renames.

Tables:

- ``vectors``: one row per distinct passage text (``chunks.key_of``), its vector as
  float16. Content-addressed: a passage that reappears (an undo, a copy, a file
  deleted and recreated) is not embedded again.
- ``spans``: the passages of each file, in order, with their lines.
- ``embedded``: each file done, with the ``files.indexed_at`` it was done for; a file
  indexed again since then is embedded again (only its changed passages).
- ``meta``: the model the vectors come from. Another model's vectors mean nothing to
  this one, so a different model empties the file. And the rule that cut the passages
  (``chunks.VERSION``): under another rule every file is cut again, keeping the vectors
  of the passages that are unchanged.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import numpy as np
import numpy.typing as npt
from kbindex.daemon.engine import delete_files, disk_bytes, sqlite, transaction
from kbindex.daemon.semantic import chunks

SCHEMA_VERSION: Final = 1
_SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS vectors(key BLOB PRIMARY KEY, vector BLOB NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS spans(
    file_id INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    start INTEGER NOT NULL,
    end INTEGER NOT NULL,
    key BLOB NOT NULL,
    PRIMARY KEY(file_id, seq)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS spans_key ON spans(key);
CREATE TABLE IF NOT EXISTS embedded(file_id INTEGER PRIMARY KEY, stamp REAL NOT NULL);
"""

Vectors = npt.NDArray[np.float16]


@dataclass(frozen=True, slots=True)
class Span:
    file_id: int
    start: int
    end: int
    key: bytes


class VectorFile:
    """The one connection to the vector file; used from the embedder's thread only
    (and at start-up, before that thread runs)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._conn: sqlite.Connection | None = None
        self.chunks = chunks.VERSION
        """The rule the stored passages were cut by (``chunks.VERSION``; 1 before it was
        recorded)."""

    def open(self, model: str, dim: int) -> None:
        """Open (creating) the file for ``model``'s vectors of ``dim`` numbers. A file
        that cannot be read is replaced: it holds nothing the files cannot give again."""
        try:
            self._conn = self._connect(model, dim)
        except sqlite.DatabaseError:
            self.close()
            delete_files(self.path)
            self._conn = self._connect(model, dim)

    def _connect(self, model: str, dim: int) -> sqlite.Connection:
        conn = sqlite.connect(self.path, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.executescript(_SCHEMA)
        (check,) = conn.execute("PRAGMA quick_check").fetchone()
        if check != "ok":
            conn.close()
            raise sqlite.DatabaseError(f"quick_check failed: {check}")
        wanted = {"model": model, "dim": str(dim), "version": str(SCHEMA_VERSION)}
        found = dict(conn.execute("SELECT key, value FROM meta").fetchall())
        self.chunks = int(found.pop("chunks", "1"))
        if found != wanted:
            self.chunks = chunks.VERSION
            with transaction(conn):
                for table in ("vectors", "spans", "embedded", "meta"):
                    conn.execute(f"DELETE FROM {table}")
                conn.executemany("INSERT INTO meta VALUES (?, ?)", wanted.items())
                conn.execute("INSERT INTO meta VALUES ('chunks', ?)", (str(self.chunks),))
        return conn

    @property
    def conn(self) -> sqlite.Connection:
        if self._conn is None:
            raise RuntimeError("vector file is not open")
        return self._conn

    def close(self) -> None:
        if self._conn is not None:
            with suppress(sqlite.Error):
                self._conn.close()
            self._conn = None

    def stamps(self) -> dict[int, float]:
        """Every file done, with the ``indexed_at`` it was done for."""
        return dict(self.conn.execute("SELECT file_id, stamp FROM embedded").fetchall())

    def vectors_of(self, keys: Sequence[bytes]) -> dict[bytes, bytes]:
        found: dict[bytes, bytes] = {}
        for i in range(0, len(keys), 500):
            part = list(keys[i : i + 500])
            marks = ",".join("?" * len(part))
            sql = f"SELECT key, vector FROM vectors WHERE key IN ({marks})"
            found.update(self.conn.execute(sql, part).fetchall())
        return found

    def save(
        self,
        files: dict[int, tuple[float, list[Span]]],
        new: dict[bytes, Vectors],
    ) -> None:
        """In one transaction: the new vectors, and for each file its passages and
        the stamp it was done for (replacing what it had)."""
        conn = self.conn
        with transaction(conn):
            conn.executemany(
                "INSERT OR IGNORE INTO vectors VALUES (?, ?)",
                ((key, vector.tobytes()) for key, vector in new.items()),
            )
            conn.executemany("DELETE FROM spans WHERE file_id = ?", ((i,) for i in files))
            conn.executemany(
                "INSERT INTO spans VALUES (?, ?, ?, ?, ?)",
                (
                    (s.file_id, seq, s.start, s.end, s.key)
                    for _, spans in files.values()
                    for seq, s in enumerate(spans)
                ),
            )
            conn.executemany(
                "INSERT OR REPLACE INTO embedded VALUES (?, ?)",
                ((i, stamp) for i, (stamp, _) in files.items()),
            )

    def forget(self, file_ids: Sequence[int]) -> None:
        """Drop these files' passages, and the vectors no passage uses any more."""
        conn = self.conn
        with transaction(conn):
            conn.executemany("DELETE FROM spans WHERE file_id = ?", ((i,) for i in file_ids))
            conn.executemany("DELETE FROM embedded WHERE file_id = ?", ((i,) for i in file_ids))
            _drop_unused(conn)

    def cut_again(self) -> None:
        """Every file was cut again by the current rule: record it, and drop the vectors
        of the passages the rule no longer makes."""
        conn = self.conn
        with transaction(conn):
            _drop_unused(conn)
            conn.execute("INSERT OR REPLACE INTO meta VALUES ('chunks', ?)", (str(chunks.VERSION),))
        self.chunks = chunks.VERSION

    def spans(self) -> Iterator[tuple[Span, bytes]]:
        """Every passage with its vector, for loading the matrix."""
        rows = self.conn.execute(
            "SELECT s.file_id, s.start, s.end, s.key, v.vector"
            " FROM spans s JOIN vectors v ON v.key = s.key ORDER BY s.file_id, s.seq"
        )
        for file_id, start, end, key, vector in rows:
            yield Span(file_id, start, end, key), vector

    def size_bytes(self) -> int:
        return sum(disk_bytes(self.path))


def _drop_unused(conn: sqlite.Connection) -> None:
    conn.execute(
        "DELETE FROM vectors WHERE NOT EXISTS (SELECT 1 FROM spans WHERE spans.key = vectors.key)"
    )
