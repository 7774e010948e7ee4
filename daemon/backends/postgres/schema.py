"""The shared index's tables in PostgreSQL, and the migrations that bring them up to date.

- ``kb_files``: every file a daemon's scan found, keyed by (machine, path): each daemon
  writes its own machine's rows only, and every daemon reads all of them.
- ``kb_docs``: each indexed file's text (stored: other machines' daemons show its
  snippets and cannot read the file) and three ``tsvector`` columns with GIN indexes:
  ``words`` (stemmed, weighted by column for ranking), ``exact`` (unstemmed, for
  prefix terms, as SQLite's ``docs_exact``) and ``grams`` (byte trigrams, for grep).
- ``kb_postings``: per document and lexeme of ``words``, its frequency weighted by
  column (``kb_tf``: title 3, path 2, body 1, derived words 0.5, as SQLite's bm25
  weights) and the document's length: bm25 ranks from it. ``ts_rank`` has no inverse
  document frequency, so a common word weighs as much as a rare one; a lexeme's
  document frequency is an index-only count of its postings, so there is no table of
  counts that every writer would update.
- ``kb_segments`` (v2; built in one pass since v3): the text of each document over a
  ``tsvector``'s limits (``kb_docs.limited``) again, in segments of SEGMENT_WORDS words,
  each with the next OVERLAP_WORDS words: phrases in such documents are matched and
  counted here (see ``writes``).
- ``kb_meta``: the schema version.

Text reaches ``to_tsvector`` through ``kb_plain``, which turns every run of characters
that are not letters or digits into a space, on both the document and the query side:
PostgreSQL's parser would otherwise keep ``docs/a.md``, ``foo.bar`` or ``1.2.3`` as one
token where SQLite's tokenizer (and a person typing a part) sees several words. Stemmed
text also goes through ``kb_stemmable``, which marks words of one or two letters with a
``0`` so that the stemmer leaves them alone: SQLite's porter does not stem them, and
PostgreSQL's made "as" and "a" one word ("as non" matched 228 files, SQLite 98).

All of it lives in the schema ``kbindex`` (NAMESPACE), which only its owner may
change: the owner creates and upgrades it with ``kbindexd db migrate`` (``migrate``),
and daemons, whose roles need no CREATE anywhere, only ``check`` its version, at start
and in every write batch. Daemons' sessions search ``kbindex`` alone (after
``pg_catalog``, which PostgreSQL searches first), so nothing another role creates in
``public`` is ever resolved by them; the SQL functions are SQL-standard bodies
(``BEGIN ATOMIC``), whose names are bound once, when the owner creates them, and the one
PL/pgSQL function pins its ``search_path``. (A reader's ``public.array_positions(text[],
text)`` once ran inside a writer's inserts: an exact-typed function beats the polymorphic
built-in wherever ``public`` is searched.)

Migration N takes a database at version N-1 to N; all of them run in one transaction,
under an advisory lock. Versions 1-3 lived in ``public``: version 4 moves them into
``kbindex``, binds the functions' names and adds ``kb_machines`` and the row-level
security policies (inactive until the owner enables them: docs/postgres.md).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Final

import psycopg

if TYPE_CHECKING:
    from kbindex.daemon.backends.postgres.connections import Connection
from kbindex.daemon.index.interface import IndexRefused

log = logging.getLogger(__name__)

SCHEMA_VERSION: Final = 8
NAMESPACE: Final = "kbindex"
COMMAND: Final = "kbindexd db migrate --dsn URL"
"""What the database's owner runs to create or upgrade the schema."""
MIGRATION_LOCK: Final = 0x6B62696E  # "kbin": one advisory lock key for migrations
EXACT: Final = "kb_exact"
"""Words as written, accents folded: prefix terms (``exact``)."""
CONFIG: Final = "kb_words"
"""The text search configuration of ``words``: PostgreSQL's ``english`` with Porter's
original stemmer and no stop words, as SQLite's ``porter`` tokenizer. (``english``
stems with Snowball's Porter2, so ``thus`` and ``thuing`` or ``vomly`` and ``vomness``
fell together differently, and it drops stop words, so the phrase "the leeck" matched
every document holding "leeck".) Accents are folded (``unaccent``), as SQLite's
``remove_diacritics 2`` does: "café" finds "cafe"."""
EXTENSIONS: Final = ("unaccent",)
"""It ships with PostgreSQL (contrib) and is trusted: a database owner may create it."""

_V1: Final = r"""
CREATE TEXT SEARCH DICTIONARY kb_porter (TEMPLATE = snowball, Language = porter);
CREATE TEXT SEARCH CONFIGURATION kb_words (COPY = english);
ALTER TEXT SEARCH CONFIGURATION kb_words
    ALTER MAPPING FOR asciiword, asciihword, hword_asciipart, word, hword, hword_part
    WITH unaccent, kb_porter;
ALTER TEXT SEARCH CONFIGURATION kb_words
    ALTER MAPPING FOR numword, numhword, hword_numpart WITH unaccent, simple;
CREATE TEXT SEARCH CONFIGURATION kb_exact (COPY = simple);
ALTER TEXT SEARCH CONFIGURATION kb_exact
    ALTER MAPPING FOR asciiword, asciihword, hword_asciipart, word, hword, hword_part,
        numword, numhword, hword_numpart
    WITH unaccent, simple;
CREATE FUNCTION kb_plain(text) RETURNS text LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    AS $$ SELECT regexp_replace($1, '[^[:alnum:]]+', ' ', 'g') $$;
CREATE FUNCTION kb_stemmable(text) RETURNS text LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    AS $$ SELECT regexp_replace(kb_plain($1), '\m([[:alpha:]]{1,2})\M', '\10', 'g') $$;
CREATE TABLE kb_files(
    id bigserial PRIMARY KEY,
    machine text NOT NULL,
    path text NOT NULL,
    root text NOT NULL,
    relpath text NOT NULL,
    size bigint NOT NULL,
    mtime_ns bigint NOT NULL,
    indexed_at double precision NOT NULL,
    encoding text,
    skip_reason text,
    skip_detail text,
    ctime_ns bigint NOT NULL,
    ino bigint NOT NULL,
    dev bigint NOT NULL,
    UNIQUE (machine, path)
);
CREATE INDEX kb_files_relpath ON kb_files(relpath text_pattern_ops);
CREATE INDEX kb_files_root ON kb_files(machine, root);
CREATE TABLE kb_docs(
    id bigint PRIMARY KEY REFERENCES kb_files(id) ON DELETE CASCADE,
    title text NOT NULL,
    body text NOT NULL,
    length integer NOT NULL,
    words tsvector NOT NULL,
    exact tsvector NOT NULL,
    grams tsvector NOT NULL
);
CREATE INDEX kb_docs_words ON kb_docs USING gin(words);
CREATE INDEX kb_docs_exact ON kb_docs USING gin(exact);
CREATE INDEX kb_docs_grams ON kb_docs USING gin(grams);
CREATE FUNCTION kb_tf(text[]) RETURNS real LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT (3 * cardinality(array_positions($1, 'A'))
            + 2 * cardinality(array_positions($1, 'B'))
            + cardinality(array_positions($1, 'C'))
            + 0.5 * cardinality(array_positions($1, 'D')))::real
$$;
CREATE TABLE kb_postings(
    lexeme text NOT NULL,
    doc bigint NOT NULL REFERENCES kb_docs(id) ON DELETE CASCADE,
    tf real NOT NULL,
    length integer NOT NULL,
    PRIMARY KEY (lexeme, doc) INCLUDE (tf, length)
);
CREATE INDEX kb_postings_doc ON kb_postings(doc);
"""

SEGMENT_WORDS: Final = 200
"""Words per segment: fewer than the 255 positions a ``tsvector`` keeps per lexeme, and
far from its last position (16,383), so a segment's positions are all exact."""
OVERLAP_WORDS: Final = 32
"""Words of the next segment that a segment's ``tsvector`` also holds (not counted in
its frequencies): a phrase of up to OVERLAP_WORDS + 1 words is whole in one segment."""

_V2: Final = rf"""
CREATE FUNCTION kb_limited(tsvector) RETURNS boolean LANGUAGE sql IMMUTABLE STRICT
    PARALLEL SAFE AS $$
    SELECT EXISTS (SELECT 1 FROM unnest($1) t
                   WHERE cardinality(t.positions) >= 255 OR 16383 = ANY(t.positions))
$$;
CREATE FUNCTION kb_segments(regconfig, text)
    RETURNS TABLE(seq integer, core tsvector, words tsvector)
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT i / {SEGMENT_WORDS}, h || c, setweight(h, 'B') || setweight(c, 'A') || setweight(t, 'C')
    FROM (SELECT regexp_split_to_array(btrim($2), '\s+') AS w) a,
         generate_series(1, cardinality(a.w), {SEGMENT_WORDS}) i,
         LATERAL to_tsvector($1, array_to_string(a.w[i : i + {OVERLAP_WORDS - 1}], ' ')) h,
         LATERAL to_tsvector($1, array_to_string(
             a.w[i + {OVERLAP_WORDS} : i + {SEGMENT_WORDS - 1}], ' ')) c,
         LATERAL to_tsvector($1, array_to_string(
             a.w[i + {SEGMENT_WORDS} : i + {SEGMENT_WORDS + OVERLAP_WORDS - 1}], ' ')) t
    WHERE btrim($2) <> ''
$$;
CREATE FUNCTION kb_either(q tsquery) RETURNS tsquery LANGUAGE plpgsql IMMUTABLE STRICT
    PARALLEL SAFE AS $$
DECLARE
    short text;
BEGIN
    FOR short IN
        SELECT DISTINCT rtrim(w, '0')
        FROM unnest(tsvector_to_array(to_tsvector('simple', querytree(q)))) w
        WHERE w ~ '^[[:alpha:]]{{1,2}}0?$'
    LOOP
        q := ts_rewrite(q, quote_literal(short || '0')::tsquery, quote_literal(short)::tsquery);
        q := ts_rewrite(q, quote_literal(short)::tsquery,
                        (quote_literal(short) || ' | ' || quote_literal(short || '0'))::tsquery);
    END LOOP;
    RETURN q;
END
$$;
ALTER TABLE kb_docs ADD COLUMN limited boolean NOT NULL DEFAULT false;
UPDATE kb_docs SET limited = kb_limited(words);
UPDATE kb_files SET mtime_ns = -1 WHERE id IN (SELECT id FROM kb_docs WHERE limited);
CREATE TABLE kb_segments(
    doc bigint NOT NULL REFERENCES kb_docs(id) ON DELETE CASCADE,
    part "char" NOT NULL,
    seq integer NOT NULL,
    words tsvector NOT NULL,
    PRIMARY KEY (doc, part, seq)
);
CREATE INDEX kb_segments_words ON kb_segments USING gin(words);
"""
# kb_either: a word of one or two letters, which SQLite's porter leaves as it is, and
# a stem of one or two letters are one token in SQLite ("vo" matches "voing"), two
# lexemes here (``kb_stemmable`` marks the short word, "vo0"): a query takes either.
# A segment's weights say where its words are: B its first OVERLAP_WORDS words (the
# previous segment's overlap), A the rest of its own words, C the next segment's: a
# phrase's frequency is counted from segments without counting an occurrence twice
# (``reads``).
# v2: documents whose ``words`` lost positions (a lexeme past 255 of them, or words past
# position 16,383) are marked ``limited`` and get segments. Those already indexed are
# marked here, and their files' mtime forgotten: each machine's daemon reads them again
# at its next scan, which writes their segments and their frequencies as counted in full.

_V3: Final = rf"""
CREATE OR REPLACE FUNCTION kb_segments(regconfig, text)
    RETURNS TABLE(seq integer, core tsvector, words tsvector)
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    WITH w AS (
        SELECT (o - 1)::integer AS n, word
        FROM unnest(regexp_split_to_array(btrim($2), '\s+')) WITH ORDINALITY AS u(word, o)
        WHERE btrim($2) <> ''
    ), placed AS (
        SELECT n / {SEGMENT_WORDS} AS seq,
            CASE WHEN n % {SEGMENT_WORDS} < {OVERLAP_WORDS} THEN 'h' ELSE 'c' END AS part, n, word
        FROM w
        UNION ALL
        SELECT n / {SEGMENT_WORDS} - 1, 't', n, word
        FROM w WHERE n >= {SEGMENT_WORDS} AND n % {SEGMENT_WORDS} < {OVERLAP_WORDS}
    ), texts AS (
        SELECT seq, part, string_agg(word, ' ' ORDER BY n) AS text
        FROM placed GROUP BY seq, part
    )
    SELECT seq, h || c, setweight(h, 'B') || setweight(c, 'A') || setweight(t, 'C')
    FROM (
        SELECT seq,
            to_tsvector($1, coalesce(max(text) FILTER (WHERE part = 'h'), '')) AS h,
            to_tsvector($1, coalesce(max(text) FILTER (WHERE part = 'c'), '')) AS c,
            to_tsvector($1, coalesce(max(text) FILTER (WHERE part = 't'), '')) AS t
        FROM texts GROUP BY seq
    ) parts
    ORDER BY seq
$$;
"""
# v3: the same segments in one pass over the words. v2's function sliced the word array
# once per segment, and a slice of a text[] walks it from its start: quadratic in the
# document's length (most of a full index's time on PostgreSQL). Each word now goes to
# its segment's head (h, its first OVERLAP_WORDS words) or core (c), and a head's words
# also to the previous segment's tail (t): the output is the same, byte for byte.

_V5: Final = """
ALTER TABLE kb_files ADD COLUMN kind text NOT NULL DEFAULT '';
CREATE TABLE kb_fields(
    doc bigint NOT NULL REFERENCES kb_docs(id) ON DELETE CASCADE,
    source text NOT NULL,
    key text NOT NULL,
    value text NOT NULL,
    number double precision
);
CREATE INDEX kb_fields_value ON kb_fields(source, key, lower(value), doc);
CREATE INDEX kb_fields_number ON kb_fields(source, key, number, doc);
CREATE INDEX kb_fields_doc ON kb_fields(doc);
CREATE TABLE kb_links(
    doc bigint NOT NULL REFERENCES kb_docs(id) ON DELETE CASCADE,
    target text NOT NULL,
    wiki boolean NOT NULL,
    text text NOT NULL,
    line integer NOT NULL
);
CREATE INDEX kb_links_doc ON kb_links(doc);
CREATE INDEX kb_links_target ON kb_links(target);
UPDATE kb_files SET mtime_ns = -1 WHERE skip_reason IS NULL;
"""
# v5 (issue 41): each file's kind, and what its text holds besides its words, as in
# SQLite's v10: ``kb_fields`` (front matter values, tags, dates) and ``kb_links``, both
# removed with their document. Every machine's daemon reads its indexed files again at
# its next scan to fill them (-1 matches no file's mtime).

_V6: Final = rf"""
ALTER TABLE kb_postings DROP CONSTRAINT kb_postings_doc_fkey;
DROP INDEX kb_postings_doc;
CREATE FUNCTION kb_unpost() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, {NAMESPACE} AS $$
BEGIN
    DELETE FROM {NAMESPACE}.kb_postings
    WHERE doc = OLD.id AND lexeme = ANY(pg_catalog.tsvector_to_array(OLD.words));
    RETURN NULL;
END
$$;
CREATE TRIGGER kb_unpost AFTER DELETE ON kb_docs FOR EACH ROW EXECUTE FUNCTION kb_unpost();
"""
# v6: a document's postings go with it by their primary key, (lexeme, doc), for each
# lexeme of its ``words`` (a limited document's postings, counted from its segments, are
# of the same lexemes: the same texts), where a foreign key needed an index of the
# postings by document: an index entry more for every posting written, in the WAL and
# on disk. SECURITY DEFINER: the cascade of a foreign
# key ignores row-level security, and so does this one, whose owner is the tables'; it
# deletes only the postings of a document its caller could delete.

_V7: Final = f"""
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_settings
               WHERE name = 'default_toast_compression' AND 'lz4' = ANY(enumvals)) THEN
        ALTER TABLE {NAMESPACE}.kb_docs
            ALTER COLUMN body SET COMPRESSION lz4, ALTER COLUMN words SET COMPRESSION lz4,
            ALTER COLUMN exact SET COMPRESSION lz4, ALTER COLUMN grams SET COMPRESSION lz4;
        ALTER TABLE {NAMESPACE}.kb_segments ALTER COLUMN words SET COMPRESSION lz4;
    END IF;
END
$$;
"""
# v7: documents' text and tsvectors are compressed with lz4 where the server has it
# (PostgreSQL 14 on, built with lz4 as Debian's is): about as small as pglz, the
# default, and much faster to compress, which every write of a document does. Rows
# written before keep pglz until they are written again; a server without lz4 keeps
# pglz.

_V8: Final = """
CREATE INDEX kb_fields_of ON kb_fields(doc, source, key) INCLUDE (value, number);
DROP INDEX kb_fields_doc;
"""
# v8: a document's fields found from its id alone, the index holding their values and
# numbers: a filtered search asks, for each document it matched, whether it has the tag,
# value or date asked for, and the index answers without reading the table (an index on
# ``lower(value)`` cannot: PostgreSQL reads the row for an expression's column). It
# serves what ``kb_fields_doc`` did (a document's rows, as the first column).


_SEGMENTS_BODY: Final = _V3[_V3.index("AS $$") + 5 : _V3.rindex("$$;")].strip()

_V4: Final = rf"""
CREATE OR REPLACE FUNCTION kb_plain(text) RETURNS text LANGUAGE sql IMMUTABLE STRICT
    PARALLEL SAFE
BEGIN ATOMIC SELECT pg_catalog.regexp_replace($1, '[^[:alnum:]]+', ' ', 'g'); END;
CREATE OR REPLACE FUNCTION kb_stemmable(text) RETURNS text LANGUAGE sql IMMUTABLE STRICT
    PARALLEL SAFE
BEGIN ATOMIC
    SELECT pg_catalog.regexp_replace({NAMESPACE}.kb_plain($1), '\m([[:alpha:]]{{1,2}})\M',
                                     '\10', 'g');
END;
CREATE OR REPLACE FUNCTION kb_tf(text[]) RETURNS real LANGUAGE sql IMMUTABLE STRICT
    PARALLEL SAFE
BEGIN ATOMIC
    SELECT (3 * pg_catalog.cardinality(pg_catalog.array_positions($1, 'A'::text))
            + 2 * pg_catalog.cardinality(pg_catalog.array_positions($1, 'B'::text))
            + pg_catalog.cardinality(pg_catalog.array_positions($1, 'C'::text))
            + 0.5 * pg_catalog.cardinality(pg_catalog.array_positions($1, 'D'::text)))::real;
END;
CREATE OR REPLACE FUNCTION kb_limited(tsvector) RETURNS boolean LANGUAGE sql IMMUTABLE STRICT
    PARALLEL SAFE
BEGIN ATOMIC
    SELECT EXISTS (SELECT 1 FROM pg_catalog.unnest($1) t
                   WHERE pg_catalog.cardinality(t.positions) >= 255
                      OR 16383 = ANY(t.positions));
END;
CREATE OR REPLACE FUNCTION kb_segments(regconfig, text)
    RETURNS TABLE(seq integer, core tsvector, words tsvector)
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
BEGIN ATOMIC
    {_SEGMENTS_BODY};
END;
ALTER FUNCTION kb_either(tsquery) SET search_path = pg_catalog, {NAMESPACE};
CREATE TABLE kb_machines(
    name text PRIMARY KEY,
    owner name NOT NULL DEFAULT current_user,
    holder text,
    heartbeat timestamptz,
    expires timestamptz
);
CREATE FUNCTION kb_mine(text) RETURNS boolean LANGUAGE sql STABLE STRICT PARALLEL SAFE
BEGIN ATOMIC
    SELECT EXISTS (SELECT 1 FROM {NAMESPACE}.kb_machines m
                   WHERE m.name = $1 AND m.owner = CURRENT_USER);
END;
CREATE FUNCTION kb_mine_file(bigint) RETURNS boolean LANGUAGE sql STABLE STRICT PARALLEL SAFE
BEGIN ATOMIC
    SELECT EXISTS (SELECT 1 FROM {NAMESPACE}.kb_files f
                   JOIN {NAMESPACE}.kb_machines m ON m.name = f.machine
                   WHERE f.id = $1 AND m.owner = CURRENT_USER);
END;
CREATE POLICY kb_read ON kb_machines FOR SELECT USING (true);
CREATE POLICY kb_own ON kb_machines USING (owner = CURRENT_USER)
    WITH CHECK (owner = CURRENT_USER);
CREATE POLICY kb_read ON kb_files FOR SELECT USING (true);
CREATE POLICY kb_own ON kb_files USING (kb_mine(machine)) WITH CHECK (kb_mine(machine));
CREATE POLICY kb_read ON kb_docs FOR SELECT USING (true);
CREATE POLICY kb_own ON kb_docs USING (kb_mine_file(id)) WITH CHECK (kb_mine_file(id));
CREATE POLICY kb_read ON kb_postings FOR SELECT USING (true);
CREATE POLICY kb_own ON kb_postings USING (kb_mine_file(doc)) WITH CHECK (kb_mine_file(doc));
CREATE POLICY kb_read ON kb_segments FOR SELECT USING (true);
CREATE POLICY kb_own ON kb_segments USING (kb_mine_file(doc)) WITH CHECK (kb_mine_file(doc));
"""
# v4: the SQL functions' bodies are bound when created (BEGIN ATOMIC; still inlined),
# built-ins named with their schema; kb_either (PL/pgSQL) pins its search_path.
# kb_machines: each machine name's owner (the role that registered it), and the lease of
# the daemon writing it (``holder`` until ``expires``, renewed by its heartbeat). The
# policies tie a machine's rows to its owner's role; they act once the owner enables
# row-level security on the tables (docs/postgres.md); the owner itself is not bound.

TABLES: Final = ("kb_meta", "kb_files", "kb_docs", "kb_postings", "kb_segments")
"""The tables of versions 1-3, which lived in ``public``."""
_LEGACY_OBJECTS: Final = (
    *(f"TABLE public.{name}" for name in TABLES),
    *(
        f"FUNCTION public.{f}"
        for f in (
            "kb_plain(text)",
            "kb_stemmable(text)",
            "kb_tf(text[])",
            "kb_limited(tsvector)",
            "kb_segments(regconfig, text)",
            "kb_either(tsquery)",
        )
    ),
    "TEXT SEARCH CONFIGURATION public.kb_words",
    "TEXT SEARCH CONFIGURATION public.kb_exact",
    "TEXT SEARCH DICTIONARY public.kb_porter",
)

MIGRATIONS: Final[dict[int, str]] = {1: _V1, 2: _V2, 3: _V3, 4: _V4, 5: _V5, 6: _V6, 7: _V7, 8: _V8}


class SchemaRefused(IndexRefused):
    """The schema is missing, of another version, or this role may not use it."""


class NewerSchema(SchemaRefused):
    """The database was written by a newer kbindexd."""


class ExtensionMissing(IndexRefused):
    """An extension the schema needs cannot be created."""


def version(conn: Connection) -> tuple[int, str]:
    """The schema's version and where it lives (NAMESPACE, ``public`` for versions 1-3,
    or ``""``: none yet)."""
    for where in (NAMESPACE, "public"):
        found = conn.execute("SELECT to_regclass(%s)", (f"{where}.kb_meta",)).fetchone()
        if found and found[0] is not None:
            row = conn.execute(f"SELECT value FROM {where}.kb_meta WHERE key = 'schema'").fetchone()
            return (int(str(row[0])) if row else 0), where
    return 0, ""


def check(conn: Connection) -> None:
    """Raise SchemaRefused, with what to do in one line, unless the shared index's
    schema is the one this kbindexd reads and writes (a daemon's check: it creates
    nothing)."""
    try:
        found, where = version(conn)
    except psycopg.errors.InsufficientPrivilege as exc:
        raise SchemaRefused(
            f"this PostgreSQL user may not read the shared index ({exc.diag.message_primary});"
            " its owner grants the reader or writer role (docs/postgres.md)"
        ) from None
    if found > SCHEMA_VERSION:
        raise NewerSchema(
            f"the shared index has schema version {found}, newer than this kbindexd"
            f" ({SCHEMA_VERSION}); upgrade kbindex on this machine"
        )
    if not where:
        raise SchemaRefused(f"the shared index has no schema yet: its owner runs `{COMMAND}` once")
    if found != SCHEMA_VERSION or where != NAMESPACE:
        raise SchemaRefused(
            f"the shared index has schema version {found}, this kbindexd needs"
            f" {SCHEMA_VERSION}: its owner runs `{COMMAND}`"
        )


def migrate(conn: Connection, upto: int = SCHEMA_VERSION) -> tuple[int, int]:
    """Create or upgrade the shared index's schema to SCHEMA_VERSION (tests of one step:
    ``upto``), in one transaction: ``kbindexd db migrate``, as the role that is to own
    it. Returns the versions before and after."""
    try:
        return _migrate(conn, upto)
    except psycopg.errors.InsufficientPrivilege as exc:
        raise SchemaRefused(
            f"this PostgreSQL user may not create the shared index's schema"
            f" ({exc.diag.message_primary}); run this as the database's owner, or grant"
            " this role CREATE on the database"
        ) from None


def _migrate(conn: Connection, upto: int) -> tuple[int, int]:
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
        conn.execute(f"CREATE SCHEMA IF NOT EXISTS {NAMESPACE}")
        places = {_create_extension(conn, name) for name in EXTENSIONS}
        before, where = version(conn)
        was = before if where else 0
        if before > SCHEMA_VERSION:
            raise NewerSchema(
                f"the shared index has schema version {before}, newer than this kbindexd"
                f" ({SCHEMA_VERSION}); upgrade kbindex on this machine"
            )
        others = sorted(places - {NAMESPACE, "public"})
        # Objects are created in the first schema listed; pg_catalog, unlisted, is
        # searched before all of them.
        path = ", ".join([NAMESPACE, *others])
        if where == "public":
            conn.execute(f"SET LOCAL search_path = {', '.join(['public', *others])}")
            for target in range(before + 1, 4):
                log.info("migrating the shared index to schema version %d", target)
                _step(conn, target, "public")
            for thing in _LEGACY_OBJECTS:
                conn.execute(f"ALTER {thing} SET SCHEMA {NAMESPACE}")
            before = max(before, 3)
        conn.execute(f"SET LOCAL search_path = {path}")
        conn.execute("CREATE TABLE IF NOT EXISTS kb_meta(key text PRIMARY KEY, value text)")
        for target in range(before + 1, upto + 1):
            log.info("migrating the shared index to schema version %d", target)
            _step(conn, target, NAMESPACE)
        _warn_older(conn)
    return was, upto


def _warn_older(conn: Connection) -> None:
    """Leave the version in ``public.kb_meta``, where a kbindexd of before schema 4 looks:
    it then stops with "newer than this kbindexd; upgrade", rather than make tables of its
    own in ``public`` (and index into them) where its role may create. Where the owner
    may not create in ``public``, such a kbindexd cannot either."""
    try:
        with conn.transaction():
            conn.execute(
                "CREATE TABLE IF NOT EXISTS public.kb_meta(key text PRIMARY KEY, value text)"
            )
            conn.execute(
                "INSERT INTO public.kb_meta VALUES ('schema', %s)"
                " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (str(SCHEMA_VERSION),),
            )
            conn.execute("GRANT SELECT ON public.kb_meta TO PUBLIC")
    except psycopg.errors.InsufficientPrivilege:
        pass


def _step(conn: Connection, target: int, where: str) -> None:
    conn.execute(MIGRATIONS[target])
    conn.execute(
        f"INSERT INTO {where}.kb_meta VALUES ('schema', %s)"
        " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        (str(target),),
    )


def _create_extension(conn: Connection, name: str) -> str:
    """Create the extension (in NAMESPACE) unless it exists; the schema it is in."""
    try:
        with conn.transaction():  # a savepoint: the migration goes on or stops cleanly
            conn.execute(f"CREATE EXTENSION IF NOT EXISTS {name} SCHEMA {NAMESPACE}")
    except psycopg.Error as exc:
        raise ExtensionMissing(
            f"the shared index needs PostgreSQL's {name} extension ({exc.diag.message_primary});"
            f" install the server's contrib package or ask its owner to CREATE EXTENSION {name}"
        ) from None
    row = conn.execute(
        "SELECT extnamespace::regnamespace::text FROM pg_extension WHERE extname = %s", (name,)
    ).fetchone()
    return str(row[0]) if row else NAMESPACE
