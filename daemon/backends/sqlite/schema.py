"""The index's tables, and the migrations that bring an older file up to date.

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

Migration N takes a database at ``user_version`` N-1 to N. An FTS5 table cannot be
altered in place, so migrations that change one drop it and forget the files'
metadata: the next scan reads every file again (the files are the truth).
"""

from __future__ import annotations

import logging
from typing import Final

from kbindex.daemon.backends.sqlite.engine import sqlite

log = logging.getLogger(__name__)

SCHEMA_VERSION: Final = 10
TOKENIZER: Final = "porter unicode61 remove_diacritics 2"
EXACT_TOKENIZER: Final = "unicode61 remove_diacritics 2"
VOCABULARY: Final = "docs_exact_words"
"""Every word of ``docs_exact`` with the number of documents holding it (fts5vocab)."""
FTS_HASH_BYTES: Final = 16 << 20
"""Pending index data an FTS5 table holds in memory before it writes a segment (v3)."""

_V1: Final = f"""
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
    skip_detail TEXT
);
CREATE INDEX files_root_relpath ON files(root, relpath);
CREATE VIRTUAL TABLE docs USING fts5(name, title, body, tokenize='{TOKENIZER}');
CREATE VIRTUAL TABLE docs_exact USING fts5(
    name, title, body, content='docs', tokenize='{EXACT_TOKENIZER}'
);
"""

_V2: Final = f"""
DROP TABLE IF EXISTS docs_exact;
DROP TABLE docs;
DELETE FROM files;
CREATE VIRTUAL TABLE docs USING fts5(
    name, title, body, subwords, grams, tokenize='{TOKENIZER}'
);
CREATE VIRTUAL TABLE docs_exact USING fts5(
    name, title, body, subwords, grams, content='docs', tokenize='{EXACT_TOKENIZER}'
);
"""
# v2 adds two derived columns (daemon/indexing/tokens.py, written by daemon/indexing/documents.py):
# subwords (camelCase parts and joined snake_case forms of identifiers) and grams
# (character bigrams of Chinese, Japanese, Korean, Thai text; empty for other text).

_V3: Final = f"""
INSERT INTO docs(docs, rank) VALUES ('hashsize', {FTS_HASH_BYTES});
INSERT INTO docs(docs, rank) VALUES ('automerge', 16);
DROP TABLE docs_exact;
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value INTEGER NOT NULL);
INSERT OR IGNORE INTO meta VALUES ('writes', 0);
"""
# v3: a larger hashsize (fewer segments flushed and merged again during a full index)
# and automerge 16 (larger, rarer merges; ``Store.optimize`` merges what is left).
# docs_exact moved to a second file (undone by v5).

_V4: Final = """
ALTER TABLE files ADD COLUMN ctime_ns INTEGER NOT NULL DEFAULT 0;
ALTER TABLE files ADD COLUMN ino INTEGER NOT NULL DEFAULT 0;
ALTER TABLE files ADD COLUMN dev INTEGER NOT NULL DEFAULT 0;
"""
# v4 records what git's index compares besides size and mtime (``Seen.signature``). The
# zeros of existing rows never match a real file, so the next scan re-reads each once.

_V5: Final = f"""
DROP TABLE IF EXISTS meta;
DROP TABLE docs;
DELETE FROM files;
CREATE VIRTUAL TABLE docs USING fts5(
    name, title, body, subwords, grams, tokenize='{TOKENIZER}'
);
INSERT INTO docs(docs, rank) VALUES ('hashsize', {FTS_HASH_BYTES});
INSERT INTO docs(docs, rank) VALUES ('automerge', 16);
CREATE VIRTUAL TABLE docs_exact USING fts5(
    words, content='', detail=none, tokenize='{EXACT_TOKENIZER}'
);
CREATE VIRTUAL TABLE {VOCABULARY} USING fts5vocab(docs_exact, 'row');
INSERT INTO docs_exact(docs_exact, rank) VALUES ('hashsize', {FTS_HASH_BYTES});
INSERT INTO docs_exact(docs_exact, rank) VALUES ('automerge', 16);
"""
# v5 brings docs_exact back into this file, written by the one writer in the same
# transaction as docs: no second file to keep in step, repair or attach. The old file
# (``store.legacy_exact_path``) is deleted on open. Every file is read again, which also
# derives the tokens of symbol terms in ``subwords`` (C++ -> cplusplus; ``tokens``).

_V6: Final = f"""
DELETE FROM files;
DELETE FROM docs;
DROP TABLE docs_exact;
CREATE VIRTUAL TABLE docs_exact USING fts5(
    words, content='', detail=none, tokenize='{EXACT_TOKENIZER}'
);
INSERT INTO docs_exact(docs_exact, rank) VALUES ('hashsize', {FTS_HASH_BYTES});
INSERT INTO docs_exact(docs_exact, rank) VALUES ('automerge', 16);
CREATE VIRTUAL TABLE docs_grams USING fts5(
    grams, content='', detail=none, columnsize=0, tokenize='ascii'
);
INSERT INTO docs_grams(docs_grams, rank) VALUES ('hashsize', {FTS_HASH_BYTES});
INSERT INTO docs_grams(docs_grams, rank) VALUES ('automerge', 16);
"""
# v6 adds the trigram index grep reads. Its rows must come from the same writes as the
# documents', so every file is read again (emptying docs_exact takes recreating it:
# a contentless table cannot be emptied without its rows' words).

_V7: Final = f"""
DELETE FROM files;
DROP TABLE IF EXISTS {VOCABULARY};
DROP TABLE IF EXISTS docs_exact;
DROP TABLE IF EXISTS docs_grams;
DROP TABLE IF EXISTS texts;
DROP TABLE docs;
CREATE VIRTUAL TABLE docs USING fts5(
    name, title, body, subwords, grams, content='', tokenize='{TOKENIZER}'
);
INSERT INTO docs(docs, rank) VALUES ('hashsize', {FTS_HASH_BYTES});
INSERT INTO docs(docs, rank) VALUES ('automerge', 16);
CREATE TABLE texts(
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    title TEXT NOT NULL,
    body BLOB NOT NULL
);
CREATE VIRTUAL TABLE docs_exact USING fts5(
    words, content='', detail=none, tokenize='{EXACT_TOKENIZER}'
);
CREATE VIRTUAL TABLE {VOCABULARY} USING fts5vocab(docs_exact, 'row');
INSERT INTO docs_exact(docs_exact, rank) VALUES ('hashsize', {FTS_HASH_BYTES});
INSERT INTO docs_exact(docs_exact, rank) VALUES ('automerge', 16);
CREATE VIRTUAL TABLE docs_grams USING fts5(
    grams, content='', detail=none, columnsize=0, tokenize='ascii'
);
INSERT INTO docs_grams(docs_grams, rank) VALUES ('hashsize', {FTS_HASH_BYTES});
INSERT INTO docs_grams(docs_grams, rank) VALUES ('automerge', 16);
"""
# v7 stops storing a second copy of every file's text inside ``docs`` (1.37 GB of a
# kernel tree's index): the text moves to ``texts``, compressed to about a fifth. Every
# table is made anew and every file read again.

_V8: Final = f"""
DELETE FROM files;
DROP TABLE IF EXISTS {VOCABULARY};
DROP TABLE IF EXISTS docs_exact;
DROP TABLE IF EXISTS docs_grams;
DROP TABLE IF EXISTS texts;
DROP TABLE docs;
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
# v8 keeps no text at all: the full-text tables remove rows by rowid (``engine``), so
# the compressed copy of every file (``texts``, 0.22x a kernel tree) has no more use;
# snippets come from the files. ``docs_grams`` keeps its column sizes, which
# ``contentless_delete`` needs. Every table is made anew and every file read again.

_V9: Final = """
UPDATE files SET mtime_ns = -1 WHERE skip_reason IS NULL AND size > 8192;
"""
# v9 marks the trigrams of a text holding a NUL (``grams.NUL_MARK``). Only a file past
# the 8 KiB that text detection samples can hold one: those are read again at the next
# scan (-1 is ``textfile.RETRY_MTIME_NS``), and grep names them until then (``sweep``).

_V10: Final = """
ALTER TABLE files ADD COLUMN kind TEXT NOT NULL DEFAULT '';
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
UPDATE files SET mtime_ns = -1, kind = '';
"""
# v10 keeps what a file holds besides its words (issue 41): its kind (from its path,
# ``indexing.kinds``), ``fields`` (``source`` 'meta': a front matter key and value;
# 'tag': a tag, key ''; 'date': a front matter date, ``number`` its POSIX seconds) and
# ``links`` (``target`` relative to the root, or a wikilink's name with ``wiki``). Rows
# are keyed by the files row's id and written with its document. Every file is read
# again at the next scan (-1 is ``textfile.RETRY_MTIME_NS``) to fill them.

MIGRATIONS: Final[dict[int, str]] = {
    1: _V1,
    2: _V2,
    3: _V3,
    4: _V4,
    5: _V5,
    6: _V6,
    7: _V7,
    8: _V8,
    9: _V9,
    10: _V10,
}


def create(conn: sqlite.Connection) -> None:
    """Bring an empty database to the current schema (tests and tools; ``migrate`` does
    the same for the daemon, one committed step at a time)."""
    for version in sorted(MIGRATIONS):
        conn.executescript(MIGRATIONS[version])
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")


def migrate(conn: sqlite.Connection) -> None:
    """Bring the database on ``conn`` (no transaction open) to SCHEMA_VERSION, one
    transaction per step. The caller has checked the version is not newer."""
    (version,) = conn.execute("PRAGMA user_version").fetchone()
    for target in range(version + 1, SCHEMA_VERSION + 1):
        log.info("migrating index schema to version %d", target)
        try:
            conn.executescript(
                f"BEGIN IMMEDIATE; {MIGRATIONS[target]}; PRAGMA user_version = {target}; COMMIT;"
            )
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
