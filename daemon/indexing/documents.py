"""Writing one document into the index's tables, and taking it out again.

``docs`` holds the stemmed index of each document, ``docs_exact`` which unstemmed words
it holds, for prefix queries, and ``docs_grams`` its trigrams, for grep; none of the
three stores text (see ``schema``). ``texts`` keeps the path, title and body they were
given, the body compressed (``pack``). Every write goes through here so the four stay
in step: a contentless table must be told a row's old words to remove them, and
``row_and_words`` and ``grams.of_text`` derive them again from ``texts`` (and the
encoding ``files`` records).

Columns, in the order ``bm25()`` weights them: ``name`` (path relative to its root),
``title``, ``body``, ``subwords`` and ``grams`` (see ``tokens``).

A batch of documents goes to SQLite as one JSON array in one statement (``json_each``),
not one statement per document: the writer thread works while the indexer's reader
thread holds the GIL for long stretches, and every statement must take it back
(``bench/README.md`` has the figures). Why JSON: one C encode (msgspec) and one parse
inside SQLite, with the GIL released for the whole batch. The compressed bodies are
the exception (JSON has no bytes): ``executemany``, a short step per row.
"""

from __future__ import annotations

import sqlite3
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Final, NamedTuple, TypeVar

import msgspec
from kbindex.daemon.indexing import grams, tokens
from kbindex.daemon.indexing.textfile import Loaded

COLUMNS: Final = ("name", "title", "body", "subwords", "grams")
STEMMED: Final = "docs"
EXACT: Final = "docs_exact"
GRAMS: Final = "docs_grams"
TEXTS: Final = "texts"
TABLES: Final = (STEMMED, EXACT, GRAMS)
"""The full-text tables (``optimize`` merges each)."""
_NAMES: Final = ", ".join(COLUMNS)
_encode = msgspec.json.Encoder().encode
IN_JSON: Final = "(SELECT value FROM json_each(?))"
"""The values of a JSON array (``as_json``), for ``IN``."""
STATEMENT_CHARS: Final = 1 << 20
"""Text per JSON statement, at most about: bounds the copies a batch makes (JSON text,
SQLite's parse, about three times the text) whatever the batch size."""
LARGE_ROW_CHARS: Final = 256 << 10
"""A document with this much text or more is written on its own, with plain parameters:
SQLite's JSON functions took about fifteen times a long row's text to take it apart
(180 MB for one 8.7 MB header, 56 MB as parameters). Such files are few (264 of a
kernel's 78,567), so statements of their own add few GIL waits."""

PACK_LEVEL: Final = 1
"""zlib's fastest level: the default level packs source code about a sixth smaller for
two and a half times the CPU (``bench/README.md``, issue 17, session 13)."""

T = TypeVar("T")
Row = tuple[str, str, str, str, str]
"""The values of ``COLUMNS`` for one document."""


class Entry(NamedTuple):
    """One document as the tables take it."""

    rowid: int
    row: Row
    exact: str
    """``exact_text`` of ``row``."""
    grams: str | None
    """Its trigram tokens; None leaves ``docs_grams`` as it is (a rename)."""
    packed: bytes
    """``pack`` of the body, ``row[2]``."""


def pack(body: str) -> bytes:
    """The body as ``texts`` keeps it."""
    return zlib.compress(body.encode("utf-8"), PACK_LEVEL)


class DamagedText(sqlite3.DatabaseError):
    """A body in ``texts`` that does not unpack: its bytes were damaged on disk."""


def unpack(packed: bytes) -> str:
    try:
        return zlib.decompress(packed).decode("utf-8")
    except (zlib.error, UnicodeDecodeError, TypeError) as exc:
        raise DamagedText(f"stored text does not unpack: {exc}") from None


@dataclass(frozen=True, slots=True)
class Document:
    """A file ready to be written: what was loaded, its column values, and the text of
    its words for the exact index (``exact_text`` of ``row``).

    Why a type of its own: the derived columns cost about as much Python time as
    reading the files, so the indexer builds them in its read-ahead worker and the
    writer thread spends its time inside SQLite, which releases the GIL.
    """

    loaded: Loaded
    row: Row
    exact: str
    grams: str


def entry(rowid: int, doc: Document) -> Entry:
    """``doc`` as the document ``rowid``, its body packed (on the writer's thread:
    zlib lets go of the GIL, and the PostgreSQL writer keeps text as it is)."""
    return Entry(rowid, doc.row, doc.exact, doc.grams, pack(doc.row[2]))


def prepare(relpath: str, loaded: Loaded) -> Document:
    """``loaded`` (the file at ``relpath`` in its root) with its column values."""
    row, exact = row_and_words(relpath, loaded.title, loaded.text)
    return Document(loaded, row, exact, grams.of_text(row[2], loaded.encoding))


def row_and_words(relpath: str, title: str, body: str) -> tuple[Row, str]:
    """The column values of a document and its ``exact_text``, which shares their work."""
    # NUL (possible past the 8 KiB that text detection samples) separates words for
    # FTS5 anyway, and SQLite's JSON functions would cut the text at it: a space.
    if "\x00" in body:
        body, title = body.replace("\x00", " "), title.replace("\x00", " ")
    # The title is part of the body (a heading or front matter), so only the path and
    # the body feed the derived columns.
    found = tokens.chunks(relpath, body)
    subwords, grams = tokens.subwords_of(found, relpath, body), tokens.grams(relpath, body)
    return (relpath, title, body, subwords, grams), _exact(found, subwords, grams)


def exact_text(values: Row) -> str:
    """What ``docs_exact`` indexes of a document: the distinct words of its path and
    body, and its derived words (the title is part of the body). A function of the
    stored row alone, so a removal gives the index the words its insertion did.

    Why distinct words: the table keeps no positions or counts (``detail=none``), so
    each word once is enough, and a text has about half as many distinct words as
    words."""
    name, _title, body, subwords, grams = values
    return _exact(tokens.chunks(name, body), subwords, grams)


def _exact(found: dict[bytes, None], subwords: str, grams: str) -> str:
    return "\n".join((tokens.exact_words(found), subwords, grams))


def as_json(items: Iterable[object]) -> str:
    """A JSON array for ``json_each`` (text: SQLite 3.40 takes no JSON blobs)."""
    return _encode(list(items)).decode()


def statements(items: Iterable[T], chars: Callable[[T], int]) -> Iterator[list[T]]:
    """``items`` in lists of about STATEMENT_CHARS of text each (``chars``: an item's),
    a statement each: for every backend's writer."""
    chunk: list[T] = []
    size = 0
    for item in items:
        chunk.append(item)
        size += chars(item)
        if size >= STATEMENT_CHARS:
            yield chunk
            chunk, size = [], 0
    if chunk:
        yield chunk


def _text_chars(row: tuple[int, tuple[str, ...]]) -> int:
    return sum(len(v) for v in row[1])


def _write(
    conn: sqlite3.Connection,
    into: str,
    rows: Sequence[tuple[int, tuple[str, ...]]],
    first: str = "",
) -> None:
    """``into`` (``INSERT INTO table(columns)``) the ``(rowid, values)`` of ``rows``,
    each after the SQL value ``first`` if given (``'delete', ``): a statement per
    STATEMENT_CHARS of text, each taking a JSON array of ``[rowid, *values]`` items;
    a row of LARGE_ROW_CHARS or more alone, with plain parameters (see
    LARGE_ROW_CHARS), its pending terms written out after it (``flush``)."""
    if not rows:
        return
    width = len(rows[0][1])
    fields = ", ".join(f"value->>{i}" for i in range(width + 1))
    sql = f"{into} SELECT {first}{fields} FROM json_each(?)"
    large = f"{into} VALUES ({first}?{', ?' * width})"
    small = []
    for rowid, values in rows:
        if sum(len(v) for v in values) >= LARGE_ROW_CHARS:
            conn.execute(large, (rowid, *values))
            flush(conn)
        else:
            small.append((rowid, values))
    for chunk in statements(small, _text_chars):
        conn.execute(sql, (as_json((rowid, *values) for rowid, values in chunk),))


def flush(conn: sqlite3.Connection) -> None:
    """Have every FTS5 table written in this transaction write out its pending terms,
    without committing. FTS5 holds a row's terms in memory until its next row or the
    commit, at least 128 bytes per distinct term: for one identifier-dense header as
    much in each table, all alive at once when they come one after another. A savepoint
    flushes them (SQLite 3.40 has no 'flush' command)."""
    conn.execute("SAVEPOINT flush")
    conn.execute("RELEASE flush")


def insert(conn: sqlite3.Connection, docs: Sequence[Entry]) -> None:
    """Add documents to the tables, a statement per STATEMENT_CHARS of text; none of the
    rowids may be there yet."""
    for table, names, values in (
        (STEMMED, _NAMES, [(d.rowid, d.row) for d in docs]),
        (EXACT, "words", [(d.rowid, (d.exact,)) for d in docs]),
        (GRAMS, "grams", [(d.rowid, (d.grams,)) for d in docs if d.grams]),
    ):
        _write(conn, f"INSERT INTO {table}(rowid, {names})", values)
    conn.executemany(
        f"INSERT INTO {TEXTS}(id, name, title, body) VALUES (?, ?, ?, ?)",
        [(d.rowid, d.row[0], d.row[1], d.packed) for d in docs],
    )


class Removed(NamedTuple):
    """A document taken out: its values, and its body as ``texts`` kept it."""

    rowid: int
    row: Row
    packed: bytes


def remove(
    conn: sqlite3.Connection, rowids: Sequence[int], *, keep_grams: bool = False
) -> list[Removed]:
    """Delete these documents from the tables (absent ones are skipped); returns their
    old values. The contentless tables are told the words to remove, derived again from
    what ``texts`` kept (the same function of the same values as when they were
    written). ``keep_grams`` leaves ``docs_grams`` as it is (a rename, re-inserted
    with grams None)."""
    if not rowids:
        return []
    ids = as_json(rowids)
    old = conn.execute(
        f"SELECT t.id, t.name, t.title, t.body, f.encoding FROM {TEXTS} t"
        f" LEFT JOIN files f ON f.id = t.id WHERE t.id IN {IN_JSON}",
        (ids,),
    ).fetchall()
    removed: list[Removed] = []
    words: list[tuple[int, tuple[str]]] = []
    old_grams: list[tuple[int, tuple[str]]] = []
    for rowid, name, title, packed, encoding in old:
        body = unpack(packed)
        row, exact = row_and_words(name, title, body)
        removed.append(Removed(rowid, row, packed))
        words.append((rowid, (exact,)))
        if not keep_grams and (g := grams.of_text(body, encoding)):
            old_grams.append((rowid, (g,)))
    for table, names, values in (
        (STEMMED, _NAMES, [(r.rowid, r.row) for r in removed]),
        (EXACT, "words", words),
        (GRAMS, "grams", old_grams),
    ):
        _write(conn, f"INSERT INTO {table}({table}, rowid, {names})", values, "'delete', ")
    conn.execute(f"DELETE FROM {TEXTS} WHERE id IN {IN_JSON}", (ids,))
    return removed
