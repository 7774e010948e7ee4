"""Ablations on the current code, in-process: bm25 field weights and tokenization sizes.

``weights`` (the default): writes SciFact as eval_scifact.py does (one ``<doc_id>.md``
per document under /tmp), indexes it with the daemon's own ``Store.apply`` (batches of
``indexer.BATCH_FILES``, files read by ``textfile.load``), then runs every train query
through ``to_plan`` (mode auto) and ``searcher.search`` with the current
``BM25_WEIGHTS`` and with each point of a small grid (name, title, subwords; body and
grams stay 1.0). The grid ranks by nDCG@10 at limit 10 (the same top 10 as limit 100);
the defaults and the best point are also run at limit 100 for Recall@100. The
difference to the defaults comes with its paired standard error over the queries.

``sizes DIR...``: the index-size cost of each tokenization choice on any folder (every
file ``textfile.load`` accepts), four FTS5 layouts built from the same rows:
(i) docs(name, title, body); (ii) + subwords; (iii) + grams (the daemon's docs);
(iv) + docs_exact (external content, unstemmed), i.e. the daemon's two tables.
``scifact`` as a DIR means the SciFact corpus written as .md files.

    .venv/bin/python bench/ablate_scifact.py weights
    .venv/bin/python bench/ablate_scifact.py sizes scifact /tmp/kbindex-bench/corpus-20000f-200mb-s1
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import common
from eval_scifact import DATASET, ndcg_at, read_qrels, read_queries, recall_at, write_corpus
from kbindex.daemon.backends.sqlite.schema import EXACT_TOKENIZER
from kbindex.daemon.backends.sqlite.searcher import BM25_WEIGHTS, search
from kbindex.daemon.backends.sqlite.store import Store
from kbindex.daemon.engine import TOKENIZER, sqlite
from kbindex.daemon.index import tokens
from kbindex.daemon.indexing import textfile
from kbindex.daemon.indexing.indexer import BATCH_FILES
from kbindex.daemon.roots import Roots
from kbindex.daemon.searching.query import to_plan
from kbindex.daemon.searching.texts import Texts

MAX_FILE_BYTES = 10 * 1024 * 1024
GRID_NAME = (0.0, 1.0, 2.0, 3.0)
GRID_TITLE = (1.0, 2.0, 3.0, 4.0, 5.0)
GRID_SUBWORDS = (0.0, 0.5, 1.0)
NOISE = 0.003


def _files(root: Path) -> list[tuple[str, str]]:
    out = []
    for dirpath, _dirs, names in os.walk(root):
        for name in sorted(names):
            path = os.path.join(dirpath, name)
            out.append((path, os.path.relpath(path, root)))
    return out


def index_with_store(root: Path, db_path: Path) -> float:
    store = Store(db_path, Texts(Roots((root,))).current)
    store.open()
    started = time.perf_counter()
    common.index_roots(store, [root], max_bytes=MAX_FILE_BYTES, batch=BATCH_FILES)
    seconds = time.perf_counter() - started
    store.close()
    return seconds


# ------------------------------------------------------------------ weights


def run_queries(
    conn: sqlite.Connection, compiled: dict[str, Any], weights: tuple[float, ...], limit: int
) -> dict[str, list[str]]:
    return {
        qid: [Path(h.relpath).stem for h in search(conn, replace(c, limit=limit), weights).hits]
        for qid, c in compiled.items()
    }


def per_query_ndcg(ranked: dict[str, list[str]], qrels: dict[str, dict[str, int]]) -> list[float]:
    return [ndcg_at(ranked[q], qrels[q], 10) for q in sorted(ranked)]


def weights_main(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    root, db = work / "corpus", work / "index.sqlite3"
    write_corpus(args.dataset, root)
    build_s = index_with_store(root, db)
    queries = read_queries(args.dataset, "train")
    qrels = read_qrels(args.dataset, "train")
    compiled = {q: to_plan(t) for q, t in queries.items() if q in qrels}
    conn = sqlite.connect(f"file:{db}?mode=ro", uri=True)
    base = per_query_ndcg(run_queries(conn, compiled, BM25_WEIGHTS, 10), qrels)
    grid = []
    started = time.perf_counter()
    for name, title, sub in itertools.product(GRID_NAME, GRID_TITLE, GRID_SUBWORDS):
        w = (name, title, 1.0, sub, 1.0)
        scores = per_query_ndcg(run_queries(conn, compiled, w, 10), qrels)
        diffs = [a - b for a, b in zip(scores, base, strict=True)]
        se = statistics.stdev(diffs) / math.sqrt(len(diffs))
        grid.append(
            {
                "weights": w,
                "ndcg@10": round(statistics.fmean(scores), 4),
                "delta": round(statistics.fmean(diffs), 4),
                "delta_se": round(se, 4),
            }
        )
    grid.sort(key=lambda g: -g["ndcg@10"])
    best = grid[0]

    def full(w: tuple[float, ...]) -> dict[str, Any]:
        ranked = run_queries(conn, compiled, w, 100)
        return {
            "weights": w,
            "ndcg@10": round(statistics.fmean(per_query_ndcg(ranked, qrels)), 4),
            "recall@100": round(
                statistics.fmean(recall_at(ranked[q], qrels[q], 100) for q in ranked), 4
            ),
        }

    out = {
        "queries": len(compiled),
        "index_build_s": round(build_s, 2),
        "grid_points": len(grid),
        "grid_s": round(time.perf_counter() - started, 1),
        "defaults": full(BM25_WEIGHTS),
        "best": full(best["weights"]) | {"delta": best["delta"], "delta_se": best["delta_se"]},
        "top10": grid[:10],
        "bottom3": grid[-3:],
        "by_axis": _by_axis(grid),
    }
    out["best_beats_defaults_by_more_than_noise"] = best["delta"] > NOISE
    conn.close()
    return out


def _by_axis(grid: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """For each weight value: the best nDCG@10 over the other axes."""
    axes = {"name": 0, "title": 1, "subwords": 3}
    out: dict[str, dict[str, float]] = {}
    for axis, i in axes.items():
        best: dict[str, float] = {}
        for g in grid:
            key = f"{g['weights'][i]:g}"
            best[key] = max(best.get(key, 0.0), g["ndcg@10"])
        out[axis] = best
    return out


# ------------------------------------------------------------------ sizes

LAYOUTS = {
    "i_name_title_body": ("name, title, body", False),
    "ii_plus_subwords": ("name, title, body, subwords", False),
    "iii_plus_grams": ("name, title, body, subwords, grams", False),
    "iv_plus_docs_exact": ("name, title, body, subwords, grams", True),
}


def _rows(root: Path) -> tuple[list[tuple[str, ...]], int]:
    rows, total = [], 0
    for path, rel in _files(root):
        loaded = textfile.load(path, MAX_FILE_BYTES)
        if isinstance(loaded, textfile.Loaded):
            total += loaded.size
            body = loaded.text
            subwords = tokens.subwords_of(tokens.chunks(rel, body), rel, body)
            rows.append((rel, loaded.title, body, subwords, tokens.grams(rel, body)))
    return rows, total


def _fts_bytes(db: Path) -> tuple[int, dict[str, int]]:
    conn = sqlite.connect(db)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    tables = dict(conn.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name"))
    conn.close()
    return db.stat().st_size, {k: int(v) for k, v in tables.items()}


def sizes_one(root: Path, work: Path) -> dict[str, Any]:
    rows, corpus_bytes = _rows(root)
    out: dict[str, Any] = {
        "dir": str(root),
        "files": len(rows),
        "corpus_mb": round(corpus_bytes / 1e6, 2),
    }
    for label, (cols, exact) in LAYOUTS.items():
        db = work / f"{label}.sqlite3"
        conn = sqlite.connect(db, isolation_level=None)
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute(f"CREATE VIRTUAL TABLE docs USING fts5({cols}, tokenize='{TOKENIZER}')")
        if exact:
            conn.execute(
                f"CREATE VIRTUAL TABLE docs_exact USING fts5({cols}, content='docs',"
                f" tokenize='{EXACT_TOKENIZER}')"
            )
        n = cols.count(",") + 1
        marks = ", ".join("?" * (n + 1))
        conn.execute("BEGIN")
        for rowid, row in enumerate(rows, 1):
            conn.execute(f"INSERT INTO docs(rowid, {cols}) VALUES ({marks})", (rowid, *row[:n]))
            if exact:
                conn.execute(
                    f"INSERT INTO docs_exact(rowid, {cols}) VALUES ({marks})", (rowid, *row[:n])
                )
        conn.execute("COMMIT")
        conn.close()
        file_bytes, tables = _fts_bytes(db)
        out[label] = {
            "file_mb": round(file_bytes / 1e6, 2),
            "pct_of_corpus": round(100 * file_bytes / corpus_bytes, 1),
            "docs_content_mb": round(tables.get("docs_content", 0) / 1e6, 2),
            "docs_inverted_mb": round(
                (tables.get("docs_data", 0) + tables.get("docs_idx", 0)) / 1e6, 2
            ),
            "docs_exact_inverted_mb": round(
                (tables.get("docs_exact_data", 0) + tables.get("docs_exact_idx", 0)) / 1e6, 2
            ),
        }
        for suffix in ("", "-wal", "-shm"):
            Path(f"{db}{suffix}").unlink(missing_ok=True)
    # The daemon's real schema (files table included), written by Store.apply.
    db = work / "store.sqlite3"
    index_with_store(root, db)
    file_bytes, _ = _fts_bytes(db)
    out["daemon_store"] = {
        "file_mb": round(file_bytes / 1e6, 2),
        "pct_of_corpus": round(100 * file_bytes / corpus_bytes, 1),
    }
    db.unlink()
    subwords_mb = sum(len(r[3].encode()) for r in rows) / 1e6
    grams_mb = sum(len(r[4].encode()) for r in rows) / 1e6
    out["derived_text_mb"] = {"subwords": round(subwords_mb, 2), "grams": round(grams_mb, 2)}
    return out


def sizes_main(args: argparse.Namespace, work: Path) -> list[dict[str, Any]]:
    results = []
    for d in args.dirs:
        if d == "scifact":
            root = work / "scifact"
            write_corpus(args.dataset, root)
        else:
            root = Path(d).resolve()
        results.append(sizes_one(root, work))
    return results


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--dataset", type=Path, default=DATASET)
    sub = p.add_subparsers(dest="cmd")
    sub.add_parser("weights")
    sizes = sub.add_parser("sizes")
    sizes.add_argument("dirs", nargs="+", help="folders, or 'scifact'")
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="kbablate-", dir="/tmp") as tmp:
        load = os.getloadavg()
        out: Any = (
            sizes_main(args, Path(tmp)) if args.cmd == "sizes" else weights_main(args, Path(tmp))
        )
    print(json.dumps({"loadavg_before_after": [load, os.getloadavg()], "results": out}, indent=1))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
