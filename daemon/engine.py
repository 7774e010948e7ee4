"""The SQLite library every connection of the daemon uses, and what every SQLite file
of it shares: the stemming tokenizer, a write transaction, the files on disk.

The library is the build that sqlean.py
ships (SQLite 3.50), not the one Python's ``sqlite3`` links (3.40 on Debian 12, and
whatever a distribution ships elsewhere).

Why it earns its place: a contentless FTS5 table removes a row by its rowid alone from
SQLite 3.43 on (``contentless_delete=1``). Before that it must be told the words the
row was indexed with, so the index kept a compressed copy of every file's text to
derive them again, the largest table after ``docs``.
sqlean.py is the standard module compiled against a current SQLite with FTS5: the same
DB-API classes, functions and exceptions (its own), so code and types are the stdlib's.
Its bundled extensions (file I/O among them) are off unless the environment turns them
on when a connection opens (``SQLEAN_ENABLE*``): those variables are removed here,
before any connection, so the daemon's SQL can never read or write a file.

Every module that opens an index or vector file takes the module from here: two SQLite
libraries in one process must not open the same file (POSIX locks belong to the
process, and one library closing a descriptor drops the other's locks). Why here and
not in ``backends.sqlite``: the vector file of search by meaning and the stemmer of
snippets (``searching.stems``) are SQLite files too, whichever backend holds the index.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    import sqlite3 as sqlite
else:
    import sqlean as sqlite

for _flag in [name for name in os.environ if name.startswith("SQLEAN_ENABLE")]:
    del os.environ[_flag]

__all__ = ["TOKENIZER", "delete_files", "disk_bytes", "roll_back", "sqlite", "transaction"]

TOKENIZER: Final = "porter unicode61 remove_diacritics 2"
"""The FTS5 tokenizer that stems: the SQLite index's, and the stemmer of snippets
(``searching.stems``), which must stem as the index did."""


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


def disk_bytes(db_path: Path) -> tuple[int, int]:
    """Bytes on disk of the SQLite file at ``db_path``: the database file and its
    write-ahead log (0 for one that is not there)."""
    sizes = [0, 0]
    for i, suffix in enumerate(("", "-wal")):
        with suppress(OSError):
            sizes[i] = os.stat(f"{db_path}{suffix}").st_size
    return sizes[0], sizes[1]


def delete_files(db_path: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db_path}{suffix}").unlink(missing_ok=True)
