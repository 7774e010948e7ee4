"""Writing one document into the two full-text tables, and taking it out again.

``docs`` holds the text (stemmed index, stored content); ``docs_exact`` indexes the
same columns unstemmed for prefix queries and borrows its text from ``docs``
(external content). Every write goes through here so the two stay in step: an
external-content table must be told the exact old values to remove a row's tokens,
and a row changed in ``docs`` alone leaves ``docs_exact`` pointing at text that is no
longer there.

Columns, in the order ``bm25()`` weights them: ``name`` (path relative to its root),
``title``, ``body``, ``subwords`` and ``grams`` (see ``tokens``).
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import Final

from kbindex.daemon import tokens
from kbindex.daemon.textfile import Loaded

COLUMNS: Final = ("name", "title", "body", "subwords", "grams")
_NAMES: Final = ", ".join(COLUMNS)
_MARKS: Final = ", ".join("?" for _ in COLUMNS)

Row = tuple[str, str, str, str, str]
"""The values of ``COLUMNS`` for one document."""


@dataclass(frozen=True, slots=True)
class Document:
    """A file ready to be written: what was loaded, and its column values.

    Trigger: the derived columns cost about as much Python time as reading the files
    (6 s of a 205 MB full index). Why a type of its own: the indexer builds it in its
    read-ahead worker, so the single writer thread spends its time inside SQLite, which
    releases the GIL, instead of holding the GIL for tokens.* while the reader waits.
    """

    loaded: Loaded
    row: Row


def prepare(relpath: str, loaded: Loaded) -> Document:
    """``loaded`` (the file at ``relpath`` in its root) with its column values."""
    return Document(loaded, _row(relpath, loaded.title, loaded.text))


def _row(relpath: str, title: str, body: str) -> Row:
    # The title is part of the body (a heading or front matter), so only the path and
    # the body feed the derived columns.
    return (relpath, title, body, tokens.subwords(relpath, body), tokens.grams(relpath, body))


def insert_doc(conn: sqlite3.Connection, file_id: int, doc: Document) -> None:
    """Index ``doc`` as document ``file_id`` (which must not be indexed already)."""
    _insert(conn, file_id, doc.row)


def _insert(conn: sqlite3.Connection, file_id: int, row: Row) -> None:
    conn.execute(f"INSERT INTO docs(rowid, {_NAMES}) VALUES (?, {_MARKS})", (file_id, *row))
    conn.execute(f"INSERT INTO docs_exact(rowid, {_NAMES}) VALUES (?, {_MARKS})", (file_id, *row))


def delete_doc(conn: sqlite3.Connection, file_id: int) -> None:
    """Remove document ``file_id`` from both tables; nothing happens if it is absent."""
    old = conn.execute(f"SELECT {_NAMES} FROM docs WHERE rowid = ?", (file_id,)).fetchone()
    if old is None:
        return
    conn.execute(
        f"INSERT INTO docs_exact(docs_exact, rowid, {_NAMES}) VALUES ('delete', ?, {_MARKS})",
        (file_id, *old),
    )
    conn.execute("DELETE FROM docs WHERE rowid = ?", (file_id,))


def rename_doc(conn: sqlite3.Connection, file_id: int, relpath: str) -> None:
    """Give document ``file_id`` a new relative path without reading its file again
    (a rename): its text is re-indexed from the stored copy."""
    old = conn.execute("SELECT title, body FROM docs WHERE rowid = ?", (file_id,)).fetchone()
    if old is None:
        return
    delete_doc(conn, file_id)
    _insert(conn, file_id, _row(relpath, old[0], old[1]))
