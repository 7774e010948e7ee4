"""The "before" baseline for search quality: bare FTS5 bm25 on SciFact, in-process.

One fts5 table (title, text) with ``porter unicode61``, built in a temporary file
under /tmp; each train query becomes the OR of its words, each
quoted (``"word1" OR "word2" ...``), ranked by FTS5's ``bm25()`` with equal column
weights, top 100. No kbindex code: this is what the engine gives with no query
compilation, derived columns or boosts. Prints nDCG@10, Recall@100 (the definitions
of eval_scifact.py), in-process latency and the index size.

    .venv/bin/python bench/bare_scifact.py
    .venv/bin/python bench/bare_scifact.py --tokenizer "porter unicode61 remove_diacritics 2"
"""

from __future__ import annotations

import argparse
import json
import re
import sqlite3
import tempfile
import time
from pathlib import Path
from typing import Any

import common
from eval_scifact import DATASET, quality, read_qrels, read_queries

WORD = re.compile(r"[^\W_]+")  # a token as unicode61 sees one


def build(dataset: Path, db_path: Path, tokenizer: str) -> tuple[sqlite3.Connection, float]:
    conn = sqlite3.connect(db_path, isolation_level=None)
    conn.execute(
        "CREATE VIRTUAL TABLE docs USING fts5(doc_id UNINDEXED, title, text,"
        f" tokenize='{tokenizer}')"
    )
    started = time.perf_counter()
    conn.execute("BEGIN")
    with (dataset / "corpus.jsonl").open(encoding="utf-8") as fh:
        rows = (json.loads(line) for line in fh)
        conn.executemany(
            "INSERT INTO docs(doc_id, title, text) VALUES (?, ?, ?)",
            ((d["_id"], d.get("title", ""), d["text"]) for d in rows),
        )
    conn.execute("COMMIT")
    return conn, time.perf_counter() - started


def or_query(text: str) -> str:
    return " OR ".join('"' + w + '"' for w in WORD.findall(text))


def evaluate(args: argparse.Namespace, db_path: Path) -> dict[str, Any]:
    conn, build_s = build(args.dataset, db_path, args.tokenizer)
    queries = read_queries(args.dataset, args.split)
    qrels = read_qrels(args.dataset, args.split)
    queries = {q: t for q, t in queries.items() if q in qrels}
    sql = "SELECT doc_id FROM docs WHERE docs MATCH ? ORDER BY rank LIMIT ?"
    ranked: dict[str, list[str]] = {}
    times: list[float] = []
    for qid, text in queries.items():
        t = time.perf_counter()
        ranked[qid] = [r[0] for r in conn.execute(sql, (or_query(text), args.limit))]
        times.append((time.perf_counter() - t) * 1000)
    conn.close()
    size = sqlite3.connect(db_path)
    tables = dict(size.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name"))
    size.close()
    return {
        "engine": f"bare FTS5, sqlite {sqlite3.sqlite_version}, tokenize='{args.tokenizer}'",
        "queries": len(queries),
        **quality(ranked, qrels),
        "latency_ms_in_process": {
            "p50": round(common.percentile(times, 0.50), 2),
            "p99": round(common.percentile(times, 0.99), 2),
        },
        "build_s": round(build_s, 2),
        "index_mb": round(db_path.stat().st_size / 1e6, 2),
        "fts_mb": round(sum(v for k, v in tables.items() if k.startswith("docs")) / 1e6, 2),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--dataset", type=Path, default=DATASET)
    p.add_argument("--split", default="train")
    p.add_argument("--limit", type=int, default=100)
    p.add_argument("--tokenizer", default="porter unicode61")
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="kbbare-", dir="/tmp") as tmp:
        out = evaluate(args, Path(tmp) / "bare.sqlite3")
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
