"""Writing documents into the index's tables, and taking them out again.

``docs`` holds the stemmed index of each document, ``docs_exact`` which unstemmed words
it holds, for prefix queries, and ``docs_grams`` its trigrams, for grep; none of the
three stores text, and each removes a row by its rowid (see ``schema``). ``titles``
keeps the title shown with a hit. Every write goes through here so the four stay in
step.

Columns, in the order ``bm25()`` weights them: ``name`` (path relative to its root),
``title``, ``body``, ``subwords`` and ``grams`` (see ``index.tokens``); the indexer
prepares their values (``indexing.documents``).

A batch of documents goes to SQLite as one JSON array in one statement (``json_each``),
not one statement per document: the writer thread works while the indexer's reader
thread holds the GIL for long stretches, and every statement must take it back. Why JSON: one C
encode (msgspec) and one parse inside SQLite, with the GIL released for the whole batch.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Final, NamedTuple

import msgspec
from kbindex.daemon.engine import sqlite
from kbindex.daemon.index.values import Document, Row, statements

COLUMNS: Final = ("name", "title", "body", "subwords", "grams")
STEMMED: Final = "docs"
EXACT: Final = "docs_exact"
GRAMS: Final = "docs_grams"
TITLES: Final = "titles"
TABLES: Final = (STEMMED, EXACT, GRAMS)
"""The full-text tables (``optimize`` merges each)."""
_NAMES: Final = ", ".join(COLUMNS)
_encode = msgspec.json.Encoder().encode
IN_JSON: Final = "(SELECT value FROM json_each(?))"
"""The values of a JSON array (``as_json``), for ``IN``."""
LARGE_ROW_CHARS: Final = 256 << 10
"""A document with this much text or more is written on its own, with plain parameters:
SQLite's JSON functions took about fifteen times a long row's text to take it apart
(180 MB for one 8.7 MB header, 56 MB as parameters). Such files are few (264 of a
kernel's 78,567), so statements of their own add few GIL waits."""


class Entry(NamedTuple):
    """One document as the tables take it."""

    rowid: int
    row: Row
    exact: str
    """What ``docs_exact`` indexes of it (``row_and_words``)."""
    grams: str | None
    """Its trigram tokens; None leaves ``docs_grams`` as it is (a rename)."""


def entry(rowid: int, doc: Document) -> Entry:
    """``doc`` as the document ``rowid``."""
    return Entry(rowid, doc.row, doc.exact, doc.grams)


def as_json(items: Iterable[object]) -> str:
    """A JSON array for ``json_each``, as text."""
    return _encode(list(items)).decode()


def _text_chars(row: tuple[int, tuple[str, ...]]) -> int:
    return sum(len(v) for v in row[1])


def _write(conn: sqlite.Connection, into: str, rows: Sequence[tuple[int, tuple[str, ...]]]) -> None:
    """``into`` (``INSERT INTO table(columns)``) the ``(rowid, values)`` of ``rows``: a
    statement per STATEMENT_CHARS of text, each taking a JSON array of ``[rowid,
    *values]`` items; a row of LARGE_ROW_CHARS or more alone, with plain parameters (see
    LARGE_ROW_CHARS), its pending terms written out after it (``flush``)."""
    if not rows:
        return
    width = len(rows[0][1])
    fields = ", ".join(f"value->>{i}" for i in range(width + 1))
    sql = f"{into} SELECT {fields} FROM json_each(?)"
    large = f"{into} VALUES (?{', ?' * width})"
    small = []
    for rowid, values in rows:
        if sum(len(v) for v in values) >= LARGE_ROW_CHARS:
            conn.execute(large, (rowid, *values))
            flush(conn)
        else:
            small.append((rowid, values))
    for chunk in statements(small, _text_chars):
        conn.execute(sql, (as_json((rowid, *values) for rowid, values in chunk),))


def flush(conn: sqlite.Connection) -> None:
    """Have every FTS5 table written in this transaction write out its pending terms,
    without committing. FTS5 holds a row's terms in memory until its next row or the
    commit, at least 128 bytes per distinct term: for one identifier-dense header as
    much in each table, all alive at once when they come one after another. Opening a
    savepoint writes them out (documented, unlike FTS5's 'flush' command)."""
    conn.execute("SAVEPOINT flush")
    conn.execute("RELEASE flush")


def insert(conn: sqlite.Connection, docs: Sequence[Entry]) -> None:
    """Add documents to the tables, a statement per STATEMENT_CHARS of text; none of the
    rowids may be there yet."""
    for table, names, values in (
        (STEMMED, _NAMES, [(d.rowid, d.row) for d in docs]),
        (EXACT, "words", [(d.rowid, (d.exact,)) for d in docs]),
        (GRAMS, "grams", [(d.rowid, (d.grams,)) for d in docs if d.grams]),
        (TITLES, "title", [(d.rowid, (d.row[1],)) for d in docs]),
    ):
        _write(conn, f"INSERT INTO {table}(rowid, {names})", values)


def remove(conn: sqlite.Connection, rowids: Sequence[int], *, keep_grams: bool = False) -> None:
    """Delete these documents from the tables (absent ones are skipped). ``keep_grams``
    leaves ``docs_grams`` as it is (a rename: the text, and so its trigrams, is the
    same)."""
    if not rowids:
        return
    ids = as_json(rowids)
    for table in (STEMMED, EXACT, TITLES) if keep_grams else (*TABLES, TITLES):
        conn.execute(f"DELETE FROM {table} WHERE rowid IN {IN_JSON}", (ids,))
