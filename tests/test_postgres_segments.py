"""Schema 3 builds a long document's segments in one pass over its words: the same
segments, byte for byte, as schema 2's function (which sliced the word array once per
segment, quadratic in the document's length), and upgrading a version 2 database reads
nothing again."""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import pytest
from kbindex.daemon.backends.postgres import schema

psycopg = pytest.importorskip("psycopg")

pytestmark = pytest.mark.slow

SEGMENTS = "SELECT seq, core::text, words::text FROM kb_segments('kb_words', %s) ORDER BY seq"


def _texts() -> list[str]:
    """Texts around every edge: empty, blanks, one word, a head's, a segment's and an
    overlap's lengths and one either side, long documents; runs of mixed white space."""
    rng = random.Random(7)
    vocab = [
        "".join(rng.choice("abcdefghij") for _ in range(rng.randint(1, 7))) for _ in range(300)
    ]
    words, overlap = schema.SEGMENT_WORDS, schema.OVERLAP_WORDS
    lengths = {1, overlap, words, words + overlap, 2 * words, 5 * words + overlap}
    lengths |= {n + d for n in list(lengths) for d in (-1, 1)} | {5000}
    texts = ["", "   ", "one", " lead  and\ttrail \n", "Ünïcode café 東京 1.2.3 a b"]
    texts += [" ".join(rng.choice(vocab) for _ in range(n)) for n in sorted(lengths)]
    for _ in range(20):
        n = rng.randint(0, 3000)
        texts.append(
            "".join(rng.choice(vocab) + rng.choice([" ", "\n", "\t ", "  "]) for _ in range(n))
        )
    return texts


@pytest.fixture
def version_2(pg_server: Any) -> Iterator[Any]:
    """A database at schema version 2, as kbindexd 2 left it."""
    name = pg_server.create_database()
    with psycopg.connect(pg_server.dsn(name), autocommit=True) as conn:
        conn.execute("CREATE EXTENSION unaccent")
        conn.execute(schema.MIGRATIONS[1])
        conn.execute(schema.MIGRATIONS[2])
        conn.execute("CREATE TABLE kb_meta(key text PRIMARY KEY, value text)")
        conn.execute("INSERT INTO kb_meta VALUES ('schema', '2')")
        yield conn
    pg_server.drop_database(name)


def test_segments_are_the_same_as_version_2s(version_2: Any, pg_dsn: str) -> None:
    with psycopg.connect(pg_dsn, autocommit=True) as current:
        schema.migrate(current)
        current.execute(f"SET search_path = {schema.NAMESPACE}")
        for text in _texts():
            old = version_2.execute(SEGMENTS, (text,)).fetchall()
            assert current.execute(SEGMENTS, (text,)).fetchall() == old, len(text.split())


def test_upgrading_a_version_2_database_reads_nothing_again(version_2: Any) -> None:
    long = " ".join(f"word{n % 400}" for n in range(1000))  # over 255 positions of a word
    version_2.execute(
        "INSERT INTO kb_files(id, machine, path, root, relpath, size, mtime_ns, indexed_at,"
        " ctime_ns, ino, dev) VALUES (1, 'm', '/r/a.txt', '/r', 'a.txt', 1, 7, 0, 0, 0, 0)"
    )
    version_2.execute(
        "INSERT INTO kb_docs VALUES (1, '', %s, 1000, to_tsvector('kb_words', %s), '', '', true)",
        (long, long),
    )
    before = version_2.execute(SEGMENTS, (long,)).fetchall()
    schema.migrate(version_2, upto=4)  # v5 has every file read again (issue 41)
    version_2.execute(f"SET search_path = {schema.NAMESPACE}")
    assert version_2.execute("SELECT mtime_ns FROM kb_files").fetchall() == [(7,)]
    version = version_2.execute("SELECT value FROM kb_meta WHERE key = 'schema'").fetchone()
    assert version == ("4",)
    assert version_2.execute(SEGMENTS, (long,)).fetchall() == before
    body = version_2.execute(
        "SELECT pg_get_functiondef('kb_segments(regconfig, text)'::regprocedure)"
    ).fetchone()
    assert "ORDINALITY" in body[0]  # the one-pass function replaced version 2's


def test_version_5_has_every_indexed_file_read_again(version_2: Any) -> None:
    """Kinds, front matter fields and links are filled by reading the files again: the
    upgrade forgets each indexed file's mtime (issue 41)."""
    version_2.execute(
        "INSERT INTO kb_files(id, machine, path, root, relpath, size, mtime_ns, indexed_at,"
        " ctime_ns, ino, dev) VALUES (1, 'm', '/r/a.md', '/r', 'a.md', 1, 7, 0, 0, 0, 0)"
    )
    schema.migrate(version_2)
    version_2.execute(f"SET search_path = {schema.NAMESPACE}")
    assert version_2.execute("SELECT mtime_ns, kind FROM kb_files").fetchall() == [(-1, "")]
    version_2.execute("INSERT INTO kb_docs VALUES (1, '', 'x', 1, '', '', '', false)")
    version_2.execute("INSERT INTO kb_fields VALUES (1, 'tag', '', 'x', NULL)")
    version_2.execute("INSERT INTO kb_links VALUES (1, 'b.md', false, 'b', 1)")
    version_2.execute("DELETE FROM kb_docs")  # their rows go with the document
    assert version_2.execute("SELECT count(*) FROM kb_fields").fetchone() == (0,)
    assert version_2.execute("SELECT count(*) FROM kb_links").fetchone() == (0,)


def test_version_6_deletes_postings_with_their_document(version_2: Any) -> None:
    """Postings have no index by document since version 6 (each one cost an entry more):
    a document's go with it by their lexemes, a limited document's too, whether the
    document or its file is deleted."""
    schema.migrate(version_2, upto=5)
    version_2.execute(f"SET search_path = {schema.NAMESPACE}")
    texts = {1: "lantern kite festival", 2: " ".join(f"word{n % 400}" for n in range(1000))}
    for i, text in texts.items():
        version_2.execute(
            "INSERT INTO kb_files(id, machine, path, root, relpath, size, mtime_ns, indexed_at,"
            " ctime_ns, ino, dev) VALUES (%s, 'm', %s, '/r', %s, 1, 7, 0, 0, 0, 0)",
            (i, f"/r/{i}.txt", f"{i}.txt"),
        )
        version_2.execute(
            "INSERT INTO kb_docs VALUES (%s, '', %s, 1, to_tsvector('kb_words', %s), '', '', %s)",
            (i, text, text, i == 2),
        )
        version_2.execute(
            "INSERT INTO kb_postings SELECT lexeme, %s, 1, 1"
            " FROM unnest(to_tsvector('kb_words', %s))",
            (i, text),
        )
    schema.migrate(version_2)
    assert version_2.execute("SELECT to_regclass('kb_postings_doc')").fetchone() == (None,)
    postings = "SELECT doc, count(*) FROM kb_postings GROUP BY doc ORDER BY doc"
    assert version_2.execute(postings).fetchall() == [(1, 3), (2, 400)]
    version_2.execute("DELETE FROM kb_files WHERE id = 1")
    assert version_2.execute(postings).fetchall() == [(2, 400)]
    version_2.execute("DELETE FROM kb_docs WHERE id = 2")
    assert version_2.execute(postings).fetchall() == []


def test_version_7_compresses_documents_with_lz4(version_2: Any) -> None:
    """Documents written after version 7 are compressed with lz4 (the server's build has
    it, as Debian's does), not pglz: faster to write, about as small."""
    schema.migrate(version_2)
    version_2.execute(f"SET search_path = {schema.NAMESPACE}")
    version_2.execute(
        "INSERT INTO kb_files(id, machine, path, root, relpath, size, mtime_ns, indexed_at,"
        " ctime_ns, ino, dev) VALUES (1, 'm', '/r/a.txt', '/r', 'a.txt', 1, 7, 0, 0, 0, 0)"
    )
    text = " ".join(f"word{n % 700}" for n in range(5000))
    version_2.execute(
        "INSERT INTO kb_docs VALUES (1, '', %s, 1, to_tsvector('kb_words', %s),"
        " to_tsvector('kb_exact', %s), '', false)",
        (text, text, text),
    )
    stored = version_2.execute(
        "SELECT pg_column_compression(body), pg_column_compression(words),"
        " pg_column_compression(exact) FROM kb_docs"
    ).fetchone()
    assert stored == ("lz4", "lz4", "lz4")
