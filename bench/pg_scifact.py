"""Issue 21: how close PostgreSQL's full-text search gets to SQLite's bm25 on SciFact.

Loads the SciFact corpus into a PostgreSQL database (a throwaway cluster from
tests/pgserver.py, or ``--dsn``) with psycopg directly, not through kbindexd: one row per
document as the daemon would store it (name ``<id>.md``, title, body = ``# title`` + text),
a ``tsvector`` with weights A/B/C for name/title/body (``english`` config) and a GIN index.
Then ranks every train query with each variant (query form x ranking) and prints nDCG@10,
Recall@100 (eval_scifact.py's definitions) and the p50/p99 in-process latency.

Query forms: ``or`` (the question's lexemes OR'ed; the english config drops stopwords),
``and-or`` (plainto_tsquery's AND, the OR form when that finds nothing), ``web``
(websearch_to_tsquery). Rankings: ``ts_rank``/``ts_rank_cd`` with weights and
normalization flags; ``bm25`` computed in SQL (k1 1.2, b 0.75, idf and weighted term
frequency as FTS5 computes them, column weights name 2, title 3, body 1 as
``searcher.BM25_WEIGHTS``; document length = the tsvector's positions), with the corpus
size and mean length from ``root_stats`` (one row per root), either over the GIN
candidates' tsvectors (``bm25``; ``bm25/topN`` after a cheap ts_rank cut) with document
frequencies from ``lexemes`` (built with ts_stat), or over a postings table (lexeme,
document, weighted tf, length): ``bm25-postings`` with ``lexemes``, ``/df-counted`` with
each frequency counted from the postings themselves.

    .venv/bin/python bench/pg_scifact.py
    .venv/bin/python bench/pg_scifact.py --only or:bm25,or:ts_rank_cd/32 --json /tmp/pg.json
    .venv/bin/python bench/pg_scifact.py --copies 10 --only bm25-postings   # latency at 51,830
    .venv/bin/python bench/pg_scifact.py --dsn postgresql:///scifact?host=/tmp/pg
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import common
import pgcluster
import psycopg
from eval_scifact import DATASET, quality, read_qrels, read_queries

K1, B = 1.2, 0.75
NAME_W, TITLE_W, BODY_W = 2, 3, 1
RANK_WEIGHTS = "'{0.1, 0.333, 1.0, 0.667}'"
"""ts_rank's {D, C, B, A} weights: body 1, title 3, name 2, scaled to at most 1."""

SCHEMA = f"""
CREATE TABLE documents (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name text NOT NULL,
    title text NOT NULL,
    body text NOT NULL,
    tsv tsvector NOT NULL,
    len integer NOT NULL
);
CREATE TABLE lexemes (lexeme text PRIMARY KEY, df integer NOT NULL);
-- one row per root, kept by the root's one writer in its own transactions (no row that
-- every writer updates); the view sums them
CREATE TABLE root_stats (root text PRIMARY KEY, docs bigint NOT NULL, tokens bigint NOT NULL);
CREATE VIEW corpus_stats AS
    SELECT sum(docs)::bigint AS n, sum(tokens)::float8 / nullif(sum(docs), 0) AS avgdl
    FROM root_stats;
CREATE TABLE postings (
    lexeme text NOT NULL,
    doc bigint NOT NULL,
    tf real NOT NULL,
    len integer NOT NULL,
    PRIMARY KEY (lexeme, doc) INCLUDE (tf, len)
);

-- the OR of the lexemes of a text: each quoted, so no input is a tsquery syntax error
CREATE FUNCTION kb_or_query(q text) RETURNS tsquery LANGUAGE sql STABLE AS $$
    SELECT string_agg(
        '''' || replace(replace(l, '\\', '\\\\'), '''', '''''') || '''', ' | '
    )::tsquery
    FROM unnest(tsvector_to_array(to_tsvector('english', q))) AS l
$$;
-- a lexeme's weighted term frequency from its weights in a tsvector (A name, B title, C body)
CREATE FUNCTION kb_tf(w text[]) RETURNS float8 LANGUAGE sql IMMUTABLE AS $$
    SELECT {NAME_W} * cardinality(array_positions(w, 'A'))
         + {TITLE_W} * cardinality(array_positions(w, 'B'))
         + {BODY_W} * cardinality(array_positions(w, 'C'))
$$;
"""

LOAD = """
INSERT INTO documents (name, title, body, tsv, len)
SELECT s.name, s.title, s.body, v.tsv,
       (SELECT coalesce(sum(cardinality(positions)), 0) FROM unnest(v.tsv))
FROM staging s, LATERAL (SELECT
    setweight(to_tsvector('english', s.name), 'A')
    || setweight(to_tsvector('english', s.title), 'B')
    || setweight(to_tsvector('english', s.body), 'C') AS tsv) v;
CREATE INDEX documents_tsv ON documents USING gin (tsv);
INSERT INTO lexemes SELECT word, ndoc FROM ts_stat('SELECT tsv FROM documents');
INSERT INTO root_stats SELECT 'scifact', count(*), sum(len) FROM documents;
INSERT INTO postings SELECT u.lexeme, d.id, kb_tf(u.weights), d.len
FROM documents d, unnest(d.tsv) u;
"""

# The query's lexemes that the corpus has, with FTS5's idf (never below 1e-6).
TERMS = """
terms AS MATERIALIZED (
    SELECT l.lexeme, greatest(ln((s.n - l.df + 0.5) / (l.df + 0.5)), 1e-6) AS idf
    FROM unnest(tsvector_to_array(to_tsvector('english', %(q)s))) AS t(lexeme)
    JOIN lexemes l USING (lexeme), corpus_stats s
)"""
BM25_OF = f"sum(t.idf * u.tf * {K1 + 1} / (u.tf + {K1} * ({1 - B} + {B} * d.len / s.avgdl)))"

FORMS = {
    "or": "kb_or_query(%(q)s)",
    "and": "plainto_tsquery('english', %(q)s)",
    "web": "websearch_to_tsquery('english', %(q)s)",
}


def once(match: str) -> str:
    """The tsquery as a scalar subquery: PostgreSQL computes it once (an InitPlan); in
    a FROM-list subquery it is pulled up and the function runs again for every row."""
    return f"(SELECT {match})"


def ts_rank_sql(match: str, fn: str, weights: str | None, norm: int) -> str:
    q = once(match)
    args = f"{weights}, tsv, {q}, {norm}" if weights else f"tsv, {q}, {norm}"
    return f"SELECT name FROM documents WHERE tsv @@ {q} ORDER BY {fn}({args}) DESC LIMIT %(limit)s"


def bm25_sql(match: str, cut: int | None) -> str:
    """bm25 over the documents the GIN index matches (the best ``cut`` by ts_rank first)."""
    q = once(match)
    candidates = f"SELECT id, name, tsv, len FROM documents WHERE tsv @@ {q}"
    if cut:
        candidates += f" ORDER BY ts_rank({RANK_WEIGHTS}, tsv, {q}) DESC LIMIT {cut}"
    return f"""WITH {TERMS}, cand AS ({candidates})
    SELECT d.name FROM cand d CROSS JOIN corpus_stats s
    CROSS JOIN LATERAL (SELECT lexeme, kb_tf(weights) AS tf FROM unnest(d.tsv)) u
    JOIN terms t ON t.lexeme = u.lexeme
    GROUP BY d.id, d.name ORDER BY {BM25_OF} DESC, d.id LIMIT %(limit)s"""


def postings_sql(match: str | None) -> str:
    """bm25 over postings, each term's document frequency counted from the postings (an
    index-only count): no df table for writers to keep and contend on. With ``match``,
    only the documents that tsquery matches (GIN) are ranked."""
    only = f"WHERE u.doc IN (SELECT id FROM documents WHERE tsv @@ {once(match)})" if match else ""
    return f"""WITH terms AS MATERIALIZED (
        SELECT lexeme, greatest(ln((s.n - count(*) + 0.5) / (count(*) + 0.5)), 1e-6) AS idf
        FROM postings, corpus_stats s
        WHERE lexeme = ANY(tsvector_to_array(to_tsvector('english', %(q)s)))
        GROUP BY lexeme, s.n
    )
    SELECT d.name FROM (
        SELECT u.doc, {BM25_OF.replace("d.len", "u.len")} AS score
        FROM terms t JOIN postings u USING (lexeme), corpus_stats s {only}
        GROUP BY u.doc ORDER BY score DESC, u.doc LIMIT %(limit)s
    ) r JOIN documents d ON d.id = r.doc ORDER BY r.score DESC, r.doc"""


POSTINGS_SQL = f"""WITH {TERMS}
    SELECT d.name FROM (
        SELECT u.doc, {BM25_OF.replace("d.len", "u.len")} AS score
        FROM terms t JOIN postings u USING (lexeme), corpus_stats s
        GROUP BY u.doc ORDER BY score DESC, u.doc LIMIT %(limit)s
    ) r JOIN documents d ON d.id = r.doc ORDER BY r.score DESC, r.doc"""


def variants() -> dict[str, list[str]]:
    """Variant name -> the SQL statements tried in turn until one returns rows."""
    out: dict[str, list[str]] = {}
    for fn in ("ts_rank", "ts_rank_cd"):
        for norm in (0, 1, 2, 4, 8, 16, 32):
            out[f"or:{fn}/{norm}"] = [ts_rank_sql(FORMS["or"], fn, RANK_WEIGHTS, norm)]
        out[f"or:{fn}/default-weights"] = [ts_rank_sql(FORMS["or"], fn, None, 0)]
    out["or:bm25"] = [bm25_sql(FORMS["or"], None)]
    for cut in (200, 500, 1000):
        out[f"or:bm25/top{cut}"] = [bm25_sql(FORMS["or"], cut)]
    out["bm25-postings"] = [POSTINGS_SQL]
    out["bm25-postings/df-counted"] = [postings_sql(None)]
    out["and-or:bm25-postings/df-counted"] = [postings_sql(FORMS["and"]), postings_sql(None)]
    out["and-or:ts_rank/1"] = [
        ts_rank_sql(FORMS[f], "ts_rank", RANK_WEIGHTS, 1) for f in ("and", "or")
    ]
    out["and-or:bm25"] = [bm25_sql(FORMS[f], None) for f in ("and", "or")]
    out["web:ts_rank/1"] = [ts_rank_sql(FORMS["web"], "ts_rank", RANK_WEIGHTS, 1)]
    out["web:bm25"] = [bm25_sql(FORMS["web"], None)]
    return out


def load(conn: psycopg.Connection[Any], dataset: Path, copies: int) -> dict[str, Any]:
    """The corpus ``copies`` times (copy k > 0 named ``<id>.k.md``) and the derived tables."""
    started = time.perf_counter()
    conn.execute(SCHEMA)
    conn.execute("CREATE TEMP TABLE staging (name text, title text, body text)")
    with conn.cursor().copy("COPY staging FROM STDIN") as copy:
        for k in range(copies):
            with (dataset / "corpus.jsonl").open(encoding="utf-8") as fh:
                for line in fh:
                    doc = json.loads(line)
                    title = " ".join(doc.get("title", "").split())
                    body = (f"# {title}\n\n" if title else "") + doc["text"]
                    copy.write_row((f"{doc['_id']}{f'.{k}' if k else ''}.md", title, body))
    conn.execute(LOAD)
    conn.execute("VACUUM ANALYZE")  # visibility map: index-only scans of postings
    sizes = conn.execute(
        "SELECT relname, pg_total_relation_size(oid) FROM pg_class"
        " WHERE relname IN ('documents', 'lexemes', 'postings') ORDER BY relname"
    ).fetchall()
    return {
        "load_s": round(time.perf_counter() - started, 1),
        "mb": {name: round(size / 1e6, 2) for name, size in sizes},
    }


def evaluate(
    conn: psycopg.Connection[Any],
    statements: list[str],
    queries: dict[str, str],
    qrels: dict[str, dict[str, int]],
    limit: int,
) -> dict[str, Any]:
    ranked: dict[str, list[str]] = {}
    times: list[float] = []
    for qid, text in queries.items():
        t = time.perf_counter()
        rows: list[tuple[str]] = []
        for sql in statements:
            rows = conn.execute(sql, {"q": text, "limit": limit}).fetchall()  # type: ignore[arg-type]
            if rows:
                break
        times.append((time.perf_counter() - t) * 1000)
        ranked[qid] = [name.removesuffix(".md") for (name,) in rows]
    return quality(ranked, qrels) | {
        "p50_ms": round(common.percentile(times, 0.50), 2),
        "p99_ms": round(common.percentile(times, 0.99), 2),
    }


def run(args: argparse.Namespace, dsn: str) -> dict[str, Any]:
    queries = read_queries(args.dataset, args.split)
    qrels = read_qrels(args.dataset, args.split)
    queries = {q: t for q, t in queries.items() if q in qrels}
    out: dict[str, Any] = {"queries": len(queries)}
    with psycopg.connect(dsn, autocommit=True) as conn:
        out["server"] = conn.execute("SHOW server_version").fetchone()
        out["load"] = load(conn, args.dataset, args.copies)
        # A search is a short query: a parallel plan's worker start-up (tens of ms on a busy
        # machine) costs more than it saves, and the planner picks one for the AND form.
        conn.execute("SET max_parallel_workers_per_gather = 0")
        out["documents"] = conn.execute("SELECT n FROM corpus_stats").fetchone()
        out["postings"] = conn.execute("SELECT count(*) FROM postings").fetchone()
        chosen = variants()
        if args.only:
            chosen = {k: v for k, v in chosen.items() if k in args.only.split(",")}
        out["variants"] = {}
        for name, statements in chosen.items():
            out["variants"][name] = res = evaluate(conn, statements, queries, qrels, args.limit)
            print(f"{name:28} {res}", file=sys.stderr, flush=True)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--dataset", type=Path, default=DATASET)
    p.add_argument("--split", default="train")
    p.add_argument("--limit", type=int, default=100)
    p.add_argument("--dsn", help="an empty database to load into (default: a throwaway cluster)")
    p.add_argument(
        "--copies",
        type=int,
        default=1,
        help="load the corpus this many times: latency at that size (quality then is not"
        " comparable: the copies are not in the qrels)",
    )
    p.add_argument("--only", help="variants to run, separated by commas (default: all)")
    p.add_argument("--json", type=Path, help="also write the results here")
    args = p.parse_args()
    with pgcluster.databases(args.dsn) as databases:
        out = run(args, databases.fresh())
    text = json.dumps(out, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
