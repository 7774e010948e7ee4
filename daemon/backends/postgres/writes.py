"""Writing a batch of documents to the shared index: their text, ``tsvector``s, segments
and postings, in one statement per chunk of text (``database`` makes the chunks).

A document's ``words`` are PostgreSQL's ``tsvector``, which keeps at most 255 positions
of a lexeme and none past 16,383: a long document, or one that says "the" a thousand
times, loses positions there. Such a document is marked ``limited`` (``kb_limited``);
its text is written again as segments (``kb_segments``), where every position is exact,
for phrases to be matched in (``render.condition``); and its frequencies and length,
which bm25 reads from the postings, are counted from the segments, in full.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from kbindex.daemon.backends.postgres import schema
from kbindex.daemon.backends.postgres.connections import Connection
from kbindex.daemon.index.values import Document

TSVECTOR_CHARS: Final = 500_000
"""Text per ``tsvector``, at most: PostgreSQL refuses one whose lexemes pass 1 MB, which
would fail the whole batch. A longer document is found by the words of its first
TSVECTOR_CHARS characters (grep still reads all of it)."""
_VECTORS: Final = f"""
    to_tsvector('{schema.CONFIG}', kb_stemmable(left(u.title, {TSVECTOR_CHARS}))) AS wa,
    to_tsvector('{schema.CONFIG}', kb_stemmable(u.name)) AS wb,
    to_tsvector('{schema.CONFIG}', kb_stemmable(left(u.body, {TSVECTOR_CHARS}))) AS wc,
    to_tsvector('{schema.CONFIG}', kb_stemmable(left(u.subwords, {TSVECTOR_CHARS})))
        || to_tsvector('simple', left(u.cjk, {TSVECTOR_CHARS})) AS wd
"""
"""A document's texts as ``tsvector``s: title, path, body and derived words, with CJK
bigrams (``tokens.grams``) unstemmed among the last."""
_WORDS: Final = (
    "setweight(v.wa, 'A') || setweight(v.wb, 'B') || setweight(v.wc, 'C') || setweight(v.wd, 'D')"
)
"""A document's ``words``: weights A-D rank title, path, body and derived words as
SQLite's bm25 column weights do (``kb_tf``)."""
_COUNTED: Final = "VALUES (3, l.wa), (2, l.wb), (1, l.wc), (0.5, l.wd)"
"""The ``tsvector``s of ``words`` with the weights ``kb_tf`` gives their positions: a
lexeme's frequency is counted from them (as ``kb_tf`` counts it from ``words``, for a
document whose ``words`` lost no positions, but without reading each position's weight,
which cost more than making the ``tsvector``s)."""
_PARTS: Final = f"""
    VALUES ('A', '{schema.CONFIG}'::regconfig, kb_stemmable(left(l.title, {TSVECTOR_CHARS})), 3),
           ('B', '{schema.CONFIG}', kb_stemmable(l.name), 2),
           ('C', '{schema.CONFIG}', kb_stemmable(left(l.body, {TSVECTOR_CHARS})), 1),
           ('D', '{schema.CONFIG}', kb_stemmable(left(l.subwords, {TSVECTOR_CHARS})), 0.5),
           ('E', 'simple', left(l.cjk, {TSVECTOR_CHARS}), 0.5)
"""
"""The texts of ``_WORDS`` one by one, with their weights in ``kb_tf``: a limited
document's segments and frequencies are made from them."""
INSERT_DOCS: Final = f"""
    WITH v AS MATERIALIZED (
        SELECT u.id, u.name, u.title, u.body, u.subwords, u.cjk, {_VECTORS},
               to_tsvector('{schema.EXACT}', kb_plain(left(u.exact, {TSVECTOR_CHARS}))) AS exact,
               array_to_tsvector(array_remove(string_to_array(u.grams, ' '), '')) AS grams
        FROM pg_temp.kb_batch u
    ), u AS MATERIALIZED (
        SELECT v.*, {_WORDS} AS words FROM v
    ), l AS MATERIALIZED (
        SELECT u.*, kb_limited(u.words) AS limited FROM u
    ), s AS MATERIALIZED (
        SELECT l.id, p.part, p.weight, g.seq, g.core, g.words
        FROM l CROSS JOIN LATERAL ({_PARTS}) AS p(part, config, text, weight)
        CROSS JOIN LATERAL kb_segments(p.config, p.text) g
        WHERE l.limited
    ), posted AS MATERIALIZED (
        SELECT l.id, t.lexeme, sum(c.weight * cardinality(t.positions))::real AS tf,
               sum(cardinality(t.positions))::integer AS n
        FROM l CROSS JOIN LATERAL ({_COUNTED}) AS c(weight, vector), unnest(c.vector) t
        WHERE NOT l.limited GROUP BY l.id, t.lexeme
        UNION ALL
        SELECT s.id, t.lexeme, sum(s.weight * cardinality(t.positions))::real,
               sum(cardinality(t.positions))::integer
        FROM s, unnest(s.core) t GROUP BY s.id, t.lexeme
    ), lengths AS (
        SELECT id, sum(n)::integer AS length FROM posted GROUP BY id
    ), d AS (
        INSERT INTO kb_docs(id, title, body, length, words, exact, grams, limited)
        SELECT l.id, l.title, l.body, coalesce(n.length, 0), l.words, l.exact, l.grams, l.limited
        FROM l LEFT JOIN lengths n ON n.id = l.id RETURNING id, length
    ), segments AS (
        INSERT INTO kb_segments(doc, part, seq, words)
        SELECT s.id, s.part::"char", s.seq, s.words FROM s
    )
    INSERT INTO kb_postings(lexeme, doc, tf, length)
    SELECT p.lexeme, d.id, p.tf, d.length FROM d JOIN posted p ON p.id = d.id
"""
"""A batch of documents, and their postings from the ``words`` just made. A document
whose ``words`` lost positions (``kb_limited``: a lexeme past 255 positions, or words
past position 16,383) also gets segments (``kb_segments``), and its frequencies and
length are counted from them in full: from ``words`` they were capped, and bm25 ranked
such long documents above where SQLite does."""


STAGE: Final = """
    CREATE TEMP TABLE IF NOT EXISTS kb_batch(
        id bigint, name text, title text, body text, subwords text, cjk text, exact text,
        grams text
    ) ON COMMIT DELETE ROWS
"""
"""Where a chunk's documents wait for INSERT_DOCS: one per session, emptied after each
chunk. They are sent with COPY, not as a statement's parameters: a server logging slow
statements (``log_min_duration_statement``) logs their parameters in full, which were
the documents' text. (A temporary table needs only the ``TEMPORARY`` right on the
database, which every role has unless the owner revoked it.)"""


def insert(conn: Connection, chunk: list[tuple[int, Document]]) -> None:
    """Write these documents (their ids have files rows, and no documents rows), in
    the transaction open on ``conn``."""

    def clean(text: str) -> str:
        return text.replace("\x00", " ")  # PostgreSQL text cannot hold NUL

    conn.execute(STAGE)
    with conn.cursor().copy("COPY pg_temp.kb_batch FROM STDIN") as copy:
        for file_id, doc in chunk:
            copy.write_row(
                (file_id, *(clean(doc.row[i]) for i in range(5)), clean(doc.exact), doc.grams)
            )
    conn.execute(INSERT_DOCS)
    conn.execute("TRUNCATE pg_temp.kb_batch")
    structure(conn, chunk)


def structure(conn: Connection, chunk: list[tuple[int, Document]]) -> None:
    """The ``kb_fields`` and ``kb_links`` rows of these documents (just written)."""
    fields: list[tuple[int, str, str, str, float | None]] = []
    links: list[tuple[int, str, bool, str, int]] = []
    for file_id, doc in chunk:
        front = doc.structure.front
        fields += [(file_id, "meta", k, v, None) for k, v in front.fields]
        fields += [(file_id, "tag", "", t, None) for t in front.tags]
        fields += [(file_id, "date", k, "", when) for k, when in front.dates]
        links += [(file_id, x.target, x.wiki, x.text, x.line) for x in doc.structure.links]
    if fields:
        conn.execute(
            "INSERT INTO kb_fields(doc, source, key, value, number)"
            " SELECT * FROM unnest(%s::bigint[], %s::text[], %s::text[], %s::text[],"
            " %s::float8[])",
            _columns(fields),
        )
    if links:
        conn.execute(
            "INSERT INTO kb_links(doc, target, wiki, text, line)"
            " SELECT * FROM unnest(%s::bigint[], %s::text[], %s::boolean[], %s::text[],"
            " %s::integer[])",
            _columns(links),
        )


def _columns(rows: Sequence[tuple[object, ...]]) -> list[list[object]]:
    """``rows`` as one list per column, for ``unnest``; NUL out of text (PostgreSQL text
    cannot hold it)."""
    return [
        [v.replace("\x00", " ") if isinstance(v, str) else v for v in column]
        for column in zip(*rows, strict=True)
    ]
