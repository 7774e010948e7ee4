"""The read side of the shared index: search, listings, counts, grep's candidates.

Searches see every machine's documents; what is about files on this machine's disk
(a file's state, grep's candidates, which ``rg`` reads) is limited to its own rows.
Each function runs on a read-only connection whose statements the server cancels
past ``connections.READ_SECONDS``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace
from functools import partial
from typing import Any, Final, NamedTuple

import psycopg
from kbindex.daemon.backends.postgres import render
from kbindex.daemon.backends.postgres.connections import Connection
from kbindex.daemon.backends.postgres.filters import condition as filters_condition
from kbindex.daemon.backends.postgres.filters import parts as filters_parts
from kbindex.daemon.index.interface import BadQuery, TooSlow
from kbindex.daemon.index.plan import NO_FILTERS, Filters, PathFilter, Plan
from kbindex.daemon.index.values import (
    PENDING_PATHS,
    And,
    Candidates,
    Counts,
    File,
    FileState,
    Indexed,
    Listing,
    Query,
    Record,
)

K1: Final = 1.2
B: Final = 0.75
"""bm25's parameters, FTS5's."""
_BM25: Final = f"{{idf}} * {{tf}} * {K1 + 1} / ({{tf}} + {K1} * ({1 - B} + {B} * {{length}} / %s))"
"""A term's share of a document's score, from the columns named ``idf``, ``tf`` and
``length`` (``str.format``); the parameter is the mean length."""
IDF: Final = "greatest(ln(greatest((%s - {df} + 0.5) / ({df} + 0.5), 1)), 1e-6)"
"""FTS5's idf (at least 1e-6) of a term in ``df`` documents of the parameter's. The inner
``greatest``: the count of documents is cached (``database``), and a term counted since
in more documents than that made ``ln`` of a negative number fail the search."""


PREFIX_WORDS: Final = 64
"""Lexemes a prefix ranks by at most, the first in order (as SQLite's MAX_WORDS)."""
_PREFIX_PATTERN: Final = r"""'''([^'']+)'':\*'"""
"""A prefix's lexeme in ``querytree``'s text (``'deprec':*``), as an SQL literal."""
_PREFIXED: Final = f"""
    SELECT p.lexeme, count(*) AS df FROM kb_postings p
    WHERE p.lexeme >= x[1] AND p.lexeme <= x[1] || 'zzzzzzzzzzzzzzzz'
        AND starts_with(p.lexeme, x[1])
    GROUP BY p.lexeme ORDER BY p.lexeme LIMIT {PREFIX_WORDS}
"""
"""The lexemes that start with a prefix term's stem (``x[1]``), each with its document
count: a prefix ranks by every word it stands for, as in SQLite, not by its stem's own
postings alone. The range lets the postings' primary key find them: lexemes are
letters and digits, which collations sort between the two bounds (a tail past sixteen
z's is left out of the ranking, not of the matches)."""


class Stats(NamedTuple):
    """What bm25 needs of the whole index: documents and their mean length."""

    documents: int
    mean_length: float


_FILE_COLUMNS: Final = "f.path, f.root, f.relpath, f.size, f.mtime_ns, f.machine"
Boosts = tuple[tuple[str, float], ...]
"""Kinds and the factor on their documents' scores (``kinds.Classifier.boosts``)."""


def files_sql(filters: Filters) -> tuple[str, list[object]]:
    """``path_sql`` of the filters' path and the other ``filters`` (``postgres.filters``)
    in one condition."""
    cond, params = path_sql(filters.path)
    if not filters.structured:
        return cond, params
    more, more_params = filters_condition(filters)
    return f"{cond} AND {more}", [*params, *more_params]


def path_condition(raw_filter: str | None) -> tuple[str, list[object]]:
    """``path_sql`` of a path filter as typed."""
    return path_sql(PathFilter.parse(raw_filter))


def path_sql(parsed: PathFilter | None) -> tuple[str, list[object]]:
    """As SQLite's ``searcher.path_sql``, with a glob as a POSIX regular expression."""
    if parsed is None:
        return "true", []
    column = "f.path" if parsed.absolute else "f.relpath"
    if parsed.glob:
        return f"{column} ~ %s", [_glob_regex(parsed.glob)]
    return f"({column} = %s OR starts_with({column}, %s))", [parsed.stem, parsed.stem + "/"]


def _glob_regex(glob: str) -> str:
    """SQLite's GLOB as a regular expression: ``*``, ``?``, ``[...]`` and ``[^...]``."""
    out, i = ["^"], 0
    while i < len(glob):
        ch = glob[i]
        if ch == "*":
            out.append(".*")
        elif ch == "?":
            out.append(".")
        elif ch == "[" and (end := glob.find("]", i + 2)) != -1:
            inner = glob[i + 1 : end]
            negated = inner.startswith("^")
            inner = inner[1:] if negated else inner
            out.append("[" + ("^" if negated else "") + inner.replace("\\", "\\\\") + "]")
            i = end
        else:
            out.append(re.escape(ch))
        i += 1
    return "".join(out) + "$"


def stats(conn: Connection) -> Stats:
    row = conn.execute("SELECT count(*), coalesce(avg(length), 0) FROM kb_docs").fetchone()
    return Stats(int(row[0]), max(float(row[1]), 1.0)) if row else Stats(0, 1.0)


def search(
    conn: Connection,
    plan: Plan,
    corpus: Stats,
) -> tuple[list[Any], int, str]:
    """The best ``plan.limit`` documents' (id, score) rows, how many match, and the mode
    that found them."""
    query = render.query(plan)
    if query.main is None:
        return [], 0, query.mode
    limit, filters = plan.limit, plan.filters
    try:
        with conn.transaction():  # one snapshot for the ranking and the count
            ranked = partial(_ranked, conn, boosts=plan.boosts, recency=plan.recency)
            rows = ranked(query.main, limit, filters, corpus)
            mode = query.mode
            if not rows and query.fallback is not None:
                rows = ranked(query.fallback, limit, filters, corpus)
                mode = "any"
    except psycopg.errors.QueryCanceled:
        raise BadQuery("the query took too long; make it more specific") from None
    total = int(rows[0][-1]) if rows else 0
    return [row[:-1] for row in rows], total, mode


def _ranked(
    conn: Connection,
    expr: render.Expr,
    limit: int,
    filters: Filters,
    corpus: Stats,
    boosts: Boosts = (),
    recency: float = 0.0,
) -> list[Any]:
    """The best ``limit`` documents ``expr`` matches by bm25 (FTS5's: the same idf, k1
    and b, and column weights through ``kb_tf``), and how many it matches. GIN finds the
    matches; the query's lexemes' postings score them."""
    found = render.condition(expr)
    candidates = ""
    # The planner estimates a files row's filters well enough; not these sets, nor how
    # many documents any of several words matches (``all`` mode's fallback), which a
    # path or a root may cut to a few.
    by_row = expr.either and (filters.path is not None or bool(filters.roots))
    if filters.tags or filters.fields or filters.dated or by_row:
        candidates, matched, path_params = _narrowed(
            found.where, filters, expr.either, corpus.documents
        )
    else:
        matched, path_params = _matched(found.where, filters)
    if found.limited is not None:
        # A phrase: documents whose ``words`` lost positions are matched apart (``limits``).
        limited, limited_params = _matched(f"d.limited AND {found.limited}", filters)
        matched += f" UNION ALL {limited}"
        path_params = [*path_params, *limited_params]
    phrased = phrase_score = phrase_join = ""
    if found.phrases:
        others = expr.exact or expr.negated or expr.excluded or filters.path or filters.structured
        phrased = _phrases(found.phrases, only=expr.form == "{}" and not others)
        phrase_score = " + coalesce(ps.score, 0)"
        phrase_join = " LEFT JOIN phrase_scored ps ON ps.doc = m.id"
    sql = f"""
        WITH q AS MATERIALIZED (SELECT {found.columns}),
        terms AS MATERIALIZED (
            SELECT p.lexeme, {IDF.format(df="count(*)")} AS idf, count(*) AS df
            FROM kb_postings p
            WHERE p.lexeme = ANY(
                tsvector_to_array(to_tsvector('simple', querytree((SELECT r FROM q))))
            )
            GROUP BY p.lexeme
            UNION
            SELECT w.lexeme, {IDF.format(df="w.df")}, w.df
            FROM regexp_matches(querytree((SELECT r FROM q)), {_PREFIX_PATTERN}, 'g') x
            CROSS JOIN LATERAL ({_PREFIXED}) w
        ),{candidates}
        matched AS MATERIALIZED ({matched}),
        scored AS (
            SELECT u.doc, sum({_BM25.format(idf="t.idf", tf="u.tf", length="u.length")}) AS score
            FROM terms t CROSS JOIN LATERAL (
                SELECT p.doc, p.tf, p.length FROM kb_postings p
                WHERE p.lexeme = t.lexeme OFFSET 0
            ) u
            WHERE u.doc IN (SELECT id FROM matched)
            GROUP BY u.doc
        ){phrased}
        SELECT m.id, (coalesce(s.score, 0){phrase_score}){_boost(boosts)}{_recency(recency)}
            AS score, count(*) OVER () AS total
        FROM matched m LEFT JOIN scored s ON s.doc = m.id{phrase_join}{_kind_join(boosts, recency)}
        ORDER BY score DESC, m.id LIMIT %s
    """
    args = [*found.params, *[corpus.documents] * 2, *path_params, corpus.mean_length]
    if found.phrases:
        args += [corpus.documents, corpus.mean_length]
    args.append(limit)
    return conn.execute(sql, args).fetchall()


def _matched(where: str, filters: Filters) -> tuple[str, list[object]]:
    """The ids of the documents ``where`` (on ``kb_docs d``) matches that pass
    ``filters``, and the parameters. The files row is joined for a path or a row filter;
    a tag, field or date is looked up for each document the rest leaves, by its id in
    ``kb_fields`` (an index holds the rows whole: ``schema``, v8). Given the lookups as
    sets to join, the planner, which cannot tell how many documents a ``tsquery`` known
    only at run time matches nor how many rows a key's values have, often started from
    the set and tested each of its documents' ``words``, read from TOAST."""
    path, path_params = path_sql(filters.path)
    split = filters_parts(filters)
    joined = ""
    cond, params = "true", list[object]()
    if path_params or split.row != "true":
        # Every document has its files row: joined only to filter by it.
        joined = " JOIN kb_files f ON f.id = d.id"
        cond, params = f"{path} AND {split.row}", [*path_params, *split.row_params]
    for sql, set_params in split.sets:
        # OFFSET 0: a lookup per document, never turned into a join with the whole set.
        cond += f" AND EXISTS ({sql} AND doc = d.id OFFSET 0)"
        params += set_params
    return f"SELECT d.id FROM kb_docs d{joined} WHERE {where} AND {cond}", params


CANDIDATE_COST: Final = 8
"""What testing one document on its own costs (its row by key, its ``words`` from TOAST),
in matches found by the GIN index instead, about."""
HASHED: Final = 6
"""How many candidates per expected match are worth reading to keep the matches by a
hash of them: a candidate is read in a fraction of a page, a lookup of one match in
``kb_fields`` (``_matched``) takes two or three."""


def expected(either: bool, documents: int) -> str:
    """The share of the index a query is expected to match, from its words' counts in
    ``terms`` (an aggregate), as if the words were independent: each word's share of
    ``documents``, multiplied, or with ``either`` one minus the product of the shares
    that lack it."""
    # A number this daemon counted, not text a client typed.
    share = f"greatest(df, 1)::float8 / {documents}"
    if either:
        return f"(1 - exp(sum(ln(greatest(1 - {share}, 1e-9)))))"
    return f"exp(sum(ln({share})))"


def _narrowed(
    where: str, filters: Filters, either: bool, documents: int
) -> tuple[str, str, list[object]]:
    """For a filtered search: CTEs of the documents the filters pass (``candidates``),
    read up to the number of matches the query is expected to have, and a ``matched``
    that takes one of three ways, whichever the counts say is cheapest:

    - few candidates (under the expected matches over CANDIDATE_COST): each is tested
      against ``where``;
    - all of them read: the GIN index finds the matches, and a hash of the candidates
      keeps those that pass;
    - more: the GIN index finds the matches, and each is tested against the filters
      (``_matched``: its files row, a lookup per set).

    The expected matches are ``expected``'s share of ``documents``. The choice is made
    while the statement runs: the planner cannot estimate a ``tsquery`` known only then,
    nor how many rows a key's values have, and took a year of notes through their
    ``words`` one by one for a query that matched a handful."""
    path, path_params = path_sql(filters.path)
    split = filters_parts(filters)
    n = max(documents, 1)
    key, params = "f.id", [*path_params, *split.row_params]
    source, cond, sets = "SELECT f.id FROM kb_files f", f"{path} AND {split.row}", split.sets
    if not path_params and split.row == "true" and split.sets:
        key, params = "s.doc", list(split.sets[0][1])
        source, cond, sets = f"SELECT s.doc FROM ({split.sets[0][0]}) s", "true", sets[1:]
    for sql, set_params in sets:
        cond += f" AND EXISTS ({sql} AND doc = {key} OFFSET 0)"
        params += set_params
    # None of the query's words indexed: nothing expected, and the GIN index answers.
    ctes = f"""
        expected AS MATERIALIZED (
            SELECT ceil(coalesce({n} * {expected(either, n)}, 0))::bigint AS m FROM terms
        ),
        candidates(id) AS MATERIALIZED (
            {source} WHERE {cond} LIMIT (SELECT m * {HASHED} FROM expected)
        ),
        counted AS MATERIALIZED (
            SELECT count(*) AS c, (SELECT m FROM expected) AS m FROM candidates
        ),"""
    plain, plain_params = _matched(where, filters)
    # The sublink under IS TRUE is not made a join: it stays a hashed subplan, and
    # the GIN index, not the candidates, leads. DISTINCT: a document may be in a set
    # twice (two dates in the span).
    matched = f"""
        SELECT DISTINCT c.id FROM candidates c
        WHERE (SELECT c * {CANDIDATE_COST} < m FROM counted)
            AND EXISTS (SELECT 1 FROM kb_docs d WHERE d.id = c.id AND {where} OFFSET 0)
        UNION ALL
        SELECT d.id FROM kb_docs d
        WHERE (SELECT c * {CANDIDATE_COST} >= m AND c < m * {HASHED} FROM counted)
            AND {where} AND (d.id IN (SELECT id FROM candidates)) IS TRUE
        UNION ALL
        SELECT x.id FROM ({plain}) x WHERE (SELECT c >= m * {HASHED} FROM counted)"""
    return ctes, matched, [*params, *plain_params]


_PHRASE_TF: Final = """
    CASE WHEN d.limited THEN (
        SELECT coalesce(sum(
            (CASE s.part WHEN 'A' THEN 3 WHEN 'B' THEN 2 WHEN 'C' THEN 1 ELSE 0.5 END)::float8
            * round(ts_rank_cd('{0,1,1,1}', s.words, k.pq, 0)
                    - CASE WHEN s.seq > 0 THEN ts_rank_cd('{0,0,1,0}', s.words, k.pq, 0)
                      ELSE 0 END)), 0)
        FROM kb_segments s WHERE s.doc = d.id AND s.words @@ k.pq)
    ELSE round(6 * ts_rank_cd('{0.16666667,0.33333334,0.6666667,1}', d.words, k.pq, 0)) / 2
    END
"""
"""A phrase's frequency in document ``d``, weighted by column as ``kb_tf`` weighs words.
``ts_rank_cd`` with normalization 0 sums, over the phrase's occurrences, the weight of
their column (A 1 for title's 3, D 1/6 for derived words' 0.5). A limited document's is
counted in its segments (each weighted by ``part``): every occurrence in the segments'
A, B and C words, less those in a segment's first words (B), which the previous segment
counted already in its next segment's words (C)."""


def _phrases(pieces: tuple[int, ...], only: bool) -> str:
    """CTEs scoring the phrases ``pieces`` (``q``'s ``p`` columns) as FTS5's bm25 does:
    a phrase is one term, with its own frequency in each document and its own document
    frequency; ``only``: the query is this one phrase, so that is the count of matches.
    (Ranked by their words' postings, the top 100 of "vondnool the" and ten other
    phrases of the bench corpus were not SQLite's.)"""
    counted = []
    for i in pieces:
        p = f"(SELECT p{i} FROM q)"
        df = (
            "(SELECT count(*) FROM matched)"
            if only
            else f"((SELECT count(*) FROM kb_docs d WHERE d.words @@ {p} AND NOT d.limited)"
            f" + (SELECT count(DISTINCT s.doc) FROM kb_segments s WHERE s.words @@ {p}))"
        )
        counted.append(f"({p}, {df})")
    bm25 = _BM25.format(idf="k.idf", tf="x.tf", length="d.length")
    return f""",
        phrases AS MATERIALIZED (
            SELECT k.pq, {IDF.format(df="k.df")} AS idf
            FROM (VALUES {", ".join(counted)}) AS k(pq, df)
        ),
        phrase_scored AS (
            SELECT m.id AS doc, sum({bm25}) AS score
            FROM matched m JOIN kb_docs d ON d.id = m.id CROSS JOIN phrases k
            CROSS JOIN LATERAL (SELECT {_PHRASE_TF} AS tf) x
            WHERE x.tf > 0
            GROUP BY m.id
        )"""


def _boost(boosts: Boosts) -> str:
    """The factor of a document's kind (``kinds.Classifier.boosts``; ``kf`` its files
    row), as in SQLite's ranking."""
    if not boosts:
        return ""
    # Kinds are KINDS' names and the factors numbers: nothing a client typed.
    cases = " ".join(f"WHEN '{kind}' THEN {factor!r}" for kind, factor in boosts)
    return f" * CASE kf.kind {cases} ELSE 1.0 END"


def _recency(half_life: float) -> str:
    """The decay of a document's age (``Plan.recency``; ``kf`` its files row), as in
    SQLite's ranking."""
    if half_life <= 0:
        return ""
    # A number the daemon computed, not text a client typed.
    dated = (
        "coalesce((SELECT max(x.number) FROM kb_fields x WHERE x.doc = kf.id"
        " AND x.source = 'date'), kf.mtime_ns / 1e9)"
    )
    age = f"greatest(0, extract(epoch FROM now())::float8 - {dated})"
    return f" * power(0.5, {age} / {half_life!r})"


def _kind_join(boosts: Boosts, recency: float = 0.0) -> str:
    return " JOIN kb_files kf ON kf.id = m.id" if boosts or recency > 0 else ""


def files(
    conn: Connection,
    path_filter: str | None,
    limit: int | None,
    filters: Filters = NO_FILTERS,
    newest: bool = False,
) -> Listing:
    """See ``Index.files``: by root and path (``newest``: the most recently modified
    first) with a limit, in no order without one."""
    cond, params = files_sql(replace(filters, path=PathFilter.parse(path_filter)))
    base = f"FROM kb_files f WHERE f.skip_reason IS NULL AND {cond}"
    columns = f"{_FILE_COLUMNS}, f.id, f.indexed_at"
    if limit is None:
        rows = conn.execute(f"SELECT {columns} {base}", params).fetchall()
        return Listing([_indexed(row) for row in rows], len(rows))
    try:
        with conn.transaction():
            rows = conn.execute(
                f"SELECT {columns} {base} ORDER BY"
                f" {'f.mtime_ns DESC, ' if newest else ''}f.root, f.relpath, f.machine LIMIT %s",
                [*params, limit],
            ).fetchall()
            total = conn.execute(f"SELECT count(*) {base}", params).fetchone()
    except psycopg.errors.QueryCanceled:
        raise BadQuery("listing the files took too long; narrow the glob") from None
    except psycopg.errors.InvalidRegularExpression as exc:
        raise BadQuery(f"bad glob: {exc}") from None
    return Listing([_indexed(row) for row in rows], int(total[0]) if total else 0)


def _indexed(row: tuple[Any, ...]) -> Indexed:
    path, root, relpath, size, mtime_ns, machine, file_id, indexed_at = row
    return Indexed(path, root, relpath, size, mtime_ns, file_id, indexed_at, machine=machine)


def state(conn: Connection, machine: str, path: str, under: bool) -> FileState | None:
    """See ``Index.state``: of this machine's files."""
    where = "(path = %s OR starts_with(path, %s))" if under else "path = %s"
    params = (machine, path, path + "/") if under else (machine, path)
    row = conn.execute(
        f"SELECT skip_reason, skip_detail FROM kb_files WHERE machine = %s AND {where} LIMIT 1",
        params,
    ).fetchone()
    return None if row is None else (_text(row[0]), _text(row[1]))


def counts(conn: Connection, machine: str) -> Counts:
    indexed = 0
    skipped: dict[str, int] = {}
    per_root: dict[str, int] = {}
    per_machine: dict[str, int] = {}
    rows = conn.execute(
        "SELECT machine, root, skip_reason, count(*) FROM kb_files GROUP BY 1, 2, 3"
    ).fetchall()
    for host, root, reason, n in rows:
        if reason is not None:
            if host == machine:
                skipped[str(reason)] = skipped.get(str(reason), 0) + int(n)
            continue
        indexed += int(n)
        per_machine[str(host)] = per_machine.get(str(host), 0) + int(n)
        if host == machine:
            per_root[str(root)] = int(n)
    return Counts(indexed, skipped, per_root, per_machine)


def candidates(
    conn: Connection,
    machine: str,
    query: Query,
    path_filter: str | None,
    pending: Sequence[str],
    new: Sequence[tuple[str, str]],
    filters: Filters = NO_FILTERS,
) -> Candidates:
    """As ``candidates.find``, from this machine's rows (``rg`` reads the local files).
    The phrase prefilter of SQLite (``phrases``) is left out: it only narrows. With
    ``filters``, files not indexed yet are left out (what they hold is not known)."""
    cond, params = files_sql(replace(filters, path=PathFilter.parse(path_filter)))
    new = [] if filters.structured else new
    new_cond, new_params = path_condition(path_filter)
    narrowed = len(pending) <= PENDING_PATHS
    match = _trigram_query(query) if narrowed else None
    indexed = f"f.machine = %s AND f.skip_reason IS NULL AND {cond}"
    try:
        with conn.transaction():
            if match is None:
                sql = f"SELECT f.path, f.size FROM kb_files f WHERE {indexed}"
                rows = conn.execute(sql, [machine, *params]).fetchall()
            else:
                sql = (
                    "SELECT f.path, f.size FROM kb_docs d JOIN kb_files f ON f.id = d.id"
                    f" WHERE d.grams @@ %s::tsquery AND {indexed}"
                )
                rows = conn.execute(sql, [match, machine, *params]).fetchall()
                for p in pending:
                    rows += conn.execute(
                        "SELECT f.path, f.size FROM kb_files f WHERE (f.path = %s OR"
                        f" starts_with(f.path, %s)) AND {indexed}",
                        [p, p + "/", machine, *params],
                    ).fetchall()
            if new:
                rows += conn.execute(
                    "SELECT f.path, 0 FROM unnest(%s::text[], %s::text[]) AS f(path, relpath)"
                    f" WHERE {new_cond}",
                    [[p for p, _ in new], [r for _, r in new], *new_params],
                ).fetchall()
    except psycopg.errors.QueryCanceled:
        raise TooSlow("finding the candidate files took too long; narrow the path") from None
    sizes = {str(path): int(size) for path, size in rows}
    return Candidates.of(sizes, scanned_all=match is None)


def _trigram_query(query: Query) -> str | None:
    """A trigram query as ``tsquery`` text (the trigrams are hex words: nothing to quote)."""
    if query is None:
        return None
    if isinstance(query, str):
        return f"'{query}'"
    glue = " & " if isinstance(query, And) else " | "
    return "(" + glue.join(sorted(_trigram_query(p) or "" for p in query.parts)) + ")"


def records(conn: Connection, ids: Sequence[int]) -> list[Record]:
    rows = conn.execute(
        f"SELECT f.id, {_FILE_COLUMNS}, d.title, d.body"
        " FROM kb_files f JOIN kb_docs d ON d.id = f.id WHERE f.id = ANY(%s)",
        (list(ids),),
    ).fetchall()
    return [Record(int(r[0]), File(*r[1:6], machine=r[6]), str(r[7]), str(r[8])) for r in rows]


def _text(value: object) -> str | None:
    return None if value is None else str(value)
