"""The index's tables, and what an index file of another schema version means.

One SQLite file holds everything:

- ``files``: every file a scan found, indexed or skipped, with what ``stat`` said of it
  when it was read (``scanner.Seen.signature``) and why it was skipped, if it was.
- ``docs``: the stemmed full-text index of each indexed file, one row per ``files``
  row (same rowid); columns as in ``documents.COLUMNS``. Contentless: it keeps no text
  (snippets are made from the file itself), and removes a row by its rowid
  (``contentless_delete``, SQLite 3.43: see ``engine``).
- ``titles``: each indexed file's title as ``docs`` indexed it, shown with its hits.
- ``docs_exact``: the same words unstemmed, for prefix queries (porter indexes
  "deprecation" as "deprec", so ``deprecat*`` on ``docs`` would miss it). It is
  contentless and keeps no positions (``detail=none``): it only says which document
  holds which word as written; ``VOCABULARY`` lists its words with their counts.
- ``docs_grams``: the distinct byte trigrams of each document's text (``grams``), for
  grep to rule files out; contentless, no positions.
- ``fields`` and ``links``: each file's front matter fields, tags and dates, and its
  links (issue 41), for filters and link answers; ``files.kind`` is its kind.

The index is derived data: the files are the truth. A file of another schema version
is never changed in place. One of an older version is rebuilt beside itself (``store``):
a new file, ``index-v{SCHEMA_VERSION}.sqlite3``, is filled by a scan of every root while
the old one, read-only, answers searches (if today's reads understand its tables: from
``READABLE_SINCE`` on); then the new file takes the old one's name. One of a newer
version (a newer kbindexd wrote it) is refused. A change to the tables bumps
``SCHEMA_VERSION``; one that today's reads would fail on in an older file also raises
``READABLE_SINCE``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

from kbindex.daemon.engine import TOKENIZER, sqlite

SCHEMA_VERSION: Final = 10
READABLE_SINCE: Final = 10
"""The oldest schema whose tables today's reads understand: an index file of that
version or later (and older than SCHEMA_VERSION) answers searches while its
successor is built. Version 10 added each file's kind and the ``fields`` and ``links``
tables, which every read's filters and boosts query: an older file cannot answer."""
EXACT_TOKENIZER: Final = "unicode61 remove_diacritics 2"
VOCABULARY: Final = "docs_exact_words"
"""Every word of ``docs_exact`` with the number of documents holding it (fts5vocab)."""
FTS_HASH_BYTES: Final = 16 << 20
"""Pending index data an FTS5 table holds in memory before it writes a segment."""

CURRENT: Final = f"""
CREATE TABLE files(
    id INTEGER PRIMARY KEY,
    path TEXT NOT NULL UNIQUE,
    root TEXT NOT NULL,
    relpath TEXT NOT NULL,
    size INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL,
    indexed_at REAL NOT NULL,
    encoding TEXT,
    skip_reason TEXT,
    skip_detail TEXT,
    ctime_ns INTEGER NOT NULL DEFAULT 0,
    ino INTEGER NOT NULL DEFAULT 0,
    dev INTEGER NOT NULL DEFAULT 0,
    kind TEXT NOT NULL DEFAULT ''
);
CREATE INDEX files_root_relpath ON files(root, relpath);
CREATE TABLE fields(
    file INTEGER NOT NULL,
    source TEXT NOT NULL,
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    number REAL
);
CREATE INDEX fields_value ON fields(source, key, value, file);
CREATE INDEX fields_number ON fields(source, key, number, file);
CREATE INDEX fields_file ON fields(file);
CREATE TABLE links(
    file INTEGER NOT NULL,
    target TEXT NOT NULL,
    wiki INTEGER NOT NULL,
    text TEXT NOT NULL,
    line INTEGER NOT NULL
);
CREATE INDEX links_file ON links(file);
CREATE INDEX links_target ON links(target);
CREATE VIRTUAL TABLE docs USING fts5(
    name, title, body, subwords, grams,
    content='', contentless_delete=1, tokenize='{TOKENIZER}'
);
INSERT INTO docs(docs, rank) VALUES ('hashsize', {FTS_HASH_BYTES});
INSERT INTO docs(docs, rank) VALUES ('automerge', 16);
CREATE TABLE titles(id INTEGER PRIMARY KEY, title TEXT NOT NULL);
CREATE VIRTUAL TABLE docs_exact USING fts5(
    words, content='', contentless_delete=1, detail=none, tokenize='{EXACT_TOKENIZER}'
);
CREATE VIRTUAL TABLE {VOCABULARY} USING fts5vocab(docs_exact, 'row');
INSERT INTO docs_exact(docs_exact, rank) VALUES ('hashsize', {FTS_HASH_BYTES});
INSERT INTO docs_exact(docs_exact, rank) VALUES ('automerge', 16);
CREATE VIRTUAL TABLE docs_grams USING fts5(
    grams, content='', contentless_delete=1, detail=none, tokenize='ascii'
);
INSERT INTO docs_grams(docs_grams, rank) VALUES ('hashsize', {FTS_HASH_BYTES});
INSERT INTO docs_grams(docs_grams, rank) VALUES ('automerge', 16);
"""
# ``files`` records what ``stat`` said of each file (``Seen.signature``): size, mtime,
# and what git's index compares besides (ctime, inode, device). The full-text tables
# are contentless and remove a row by its rowid (``engine``): the index keeps no text,
# snippets come from the files. ``docs`` holds two derived columns
# (``index/tokens.py``): subwords (camelCase parts and joined snake_case forms of
# identifiers, the tokens of symbol terms: C++ -> cplusplus) and grams (character
# bigrams of Chinese, Japanese, Korean, Thai text). A larger hashsize than FTS5's means
# fewer segments flushed and merged again during a full index; automerge 16 makes
# merges larger and rarer (``Store.optimize`` merges what is left). ``docs_grams``
# keeps its column sizes, which ``contentless_delete`` needs; a text holding a NUL
# marks its trigrams (``index.values.NUL_MARK``).
# ``files.kind`` is each file's kind (from its path, ``indexing.kinds``); ``fields``
# holds what a file has besides its words (issue 41): ``source`` 'meta', a front matter
# key and value; 'tag', a tag, key ''; 'date', a front matter date, ``number`` its POSIX
# seconds; ``links``, its links (``target`` relative to the root, or a wikilink's name
# with ``wiki``). Their rows are keyed by the files row's id and written with its
# document.


def create(conn: sqlite.Connection) -> None:
    """Make the current schema in an empty database (no transaction open)."""
    conn.executescript(
        f"BEGIN IMMEDIATE; {CURRENT}; PRAGMA user_version = {SCHEMA_VERSION}; COMMIT;"
    )


def beside(db_path: Path) -> Path:
    """Where the index of this schema is built beside an older (or damaged) one at
    ``db_path``: ``index-v10.sqlite3`` beside ``index.sqlite3``."""
    return db_path.with_name(f"{db_path.stem}-v{SCHEMA_VERSION}{db_path.suffix}")


def others_beside(db_path: Path) -> list[Path]:
    """Files built beside ``db_path`` by a kbindexd of another schema version, and
    left unfinished: partial, so of no use to this one."""
    ours = beside(db_path).name
    found = db_path.parent.glob(f"{db_path.stem}-v*{db_path.suffix}")
    return [p for p in found if p.name != ours]
