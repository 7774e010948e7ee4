"""Search quality on BEIR SciFact (train split), through a real kbindexd.

Writes the corpus as one Markdown file per document (``<doc_id>.md``: the title as a
``# `` heading, then the text) into a temporary folder outside the repository, starts
kbindexd on it with its own state directory and socket under /tmp, waits for the first
scan, then sends every train query as the ordinary Search request a client sends
(mode ``auto``, limit 100). Hits map back to document ids by file name. Prints
nDCG@10 and Recall@100 (BEIR definitions; a query with no hits counts as 0), search
latency through the socket, full-index time and index size per table.

    .venv/bin/python bench/eval_scifact.py
    .venv/bin/python bench/eval_scifact.py --mode any --json /tmp/scifact.json
    .venv/bin/python bench/eval_scifact.py --index-only /tmp/stdlib   # size and time only
    .venv/bin/python bench/eval_scifact.py --mode words,hybrid,semantic --work /tmp/scifact-sem
    .venv/bin/python bench/eval_scifact.py --mode words --backend postgres [--dsn URL]

With a mode by meaning (``hybrid``, ``semantic``; needs ``kbindex[semantic]``) the daemon
runs with ``--semantic auto`` and the queries wait until every document is embedded; the
embedding time, passages and rate are reported. ``--work DIR`` keeps the corpus and the
daemon's state there, so a second run reuses the vectors (nothing is embedded again).

``--backend postgres`` runs the daemon on a PostgreSQL database: ``--dsn``'s (the
benchmark drops the daemon's tables in it first) or a fresh one in a throwaway cluster
(bench/pgcluster.py). The index size is then pg_total_relation_size of its tables.

The dataset is read from /work/shared/datasets/scifact and never copied into the repo.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import bare
import common
import pgcluster
from kbindex.proto.client import Client

DATASET = Path("/work/shared/datasets/scifact")


# ------------------------------------------------------------------ dataset


def write_corpus(dataset: Path, into: Path) -> int:
    """One ``<doc_id>.md`` per corpus line; returns the number of documents."""
    into.mkdir(parents=True, exist_ok=True)
    n = 0
    with (dataset / "corpus.jsonl").open(encoding="utf-8") as fh:
        for line in fh:
            doc = json.loads(line)
            title = " ".join(doc.get("title", "").split())
            head = f"# {title}\n\n" if title else ""
            (into / f"{doc['_id']}.md").write_text(head + doc["text"] + "\n", encoding="utf-8")
            n += 1
    return n


def read_queries(dataset: Path, split: str) -> dict[str, str]:
    queries: dict[str, str] = {}
    with (dataset / f"queries-{split}.jsonl").open(encoding="utf-8") as fh:
        for line in fh:
            q = json.loads(line)
            queries[q["_id"]] = q["text"]
    return queries


def read_qrels(dataset: Path, split: str) -> dict[str, dict[str, int]]:
    """query id -> {doc id: grade}; the file has a header line and CRLF endings."""
    qrels: dict[str, dict[str, int]] = {}
    lines = (dataset / "qrels" / f"{split}.tsv").read_text(encoding="utf-8").splitlines()
    for line in lines[1:]:
        fields = line.split()
        if len(fields) == 3 and int(fields[2]) > 0:
            qrels.setdefault(fields[0], {})[fields[1]] = int(fields[2])
    return qrels


# ------------------------------------------------------------------ metrics


def ndcg_at(ranked: list[str], relevant: dict[str, int], k: int) -> float:
    dcg = sum(relevant.get(d, 0) / math.log2(i + 2) for i, d in enumerate(ranked[:k]))
    ideal = sorted(relevant.values(), reverse=True)[:k]
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / idcg if idcg else 0.0


def recall_at(ranked: list[str], relevant: dict[str, int], k: int) -> float:
    return len(set(ranked[:k]) & relevant.keys()) / len(relevant) if relevant else 0.0


def quality(ranked: dict[str, list[str]], qrels: dict[str, dict[str, int]]) -> dict[str, Any]:
    """nDCG@10 and Recall@100, means over the ranked queries, and how many found nothing."""
    return {
        "ndcg@10": round(statistics.fmean(ndcg_at(r, qrels[q], 10) for q, r in ranked.items()), 4),
        "recall@100": round(
            statistics.fmean(recall_at(r, qrels[q], 100) for q, r in ranked.items()), 4
        ),
        "no_hits": sum(1 for r in ranked.values() if not r),
    }


# ------------------------------------------------------------------ daemon


async def run_queries(
    sock: Path, queries: dict[str, str], mode: str, limit: int
) -> tuple[dict[str, list[str]], list[float]]:
    ranked: dict[str, list[str]] = {}
    times: list[float] = []
    async with Client.connect(sock, client_name="eval_scifact") as c:
        for qid, text in queries.items():
            t = time.perf_counter()
            reply = await c.search(text, limit=limit, mode=mode)
            times.append((time.perf_counter() - t) * 1000)
            ranked[qid] = [Path(h.relpath).stem for h in reply.hits]
    return ranked, times


# ------------------------------------------------------------------ main


async def wait_embedded(c: Client, timeout: float) -> dict[str, Any]:
    """Wait until search by meaning has embedded every file; what it took."""
    began = time.perf_counter()
    while time.perf_counter() - began < timeout:
        s = (await c.status()).semantic
        if s is not None and s.state == "unavailable":
            raise SystemExit(f"search by meaning is unavailable: {s.detail}")
        if s is not None and s.state == "ready" and not s.backlog and s.files:
            return {
                "wall_s": round(time.perf_counter() - began, 1),
                "files": s.files,
                "passages": s.passages,
                "embedded_now": s.embedded,
                "vectors_mb": s.size_mb,
            }
        await anyio.sleep(1.0)
    raise SystemExit(f"embedding not done after {timeout:.0f} s")


async def evaluate(args: argparse.Namespace, work: Path, dsn: str) -> dict[str, Any]:
    out: dict[str, Any] = {"backend": args.backend}
    modes = args.mode.split(",")
    meaning = any(m in ("hybrid", "semantic") for m in modes)
    extra = ["--semantic", "auto" if meaning else "off"]
    if dsn:
        extra += ["--backend", "postgres", "--dsn", dsn, "--machine", "scifact"]
    if args.index_only:
        root = args.index_only
        extra += ["--include-ext", "*"]
    else:
        root = work / "corpus"
        if not root.exists():
            out["documents"] = write_corpus(args.dataset, root)
    with common.running_daemon(root, work, "--scan-interval", "86400", *extra) as d:
        await common.wait_serving(d)
        async with Client.connect(d.sock, client_name="eval_scifact") as c:
            st = await common.wait_scan(c, args.timeout, poll=0.1)
            out["index"] = {
                "wall_s": round(time.perf_counter() - d.started, 2),
                "scan_s": round(st.last_scan_seconds or 0.0, 2),
                "indexed_files": st.indexed_files,
                "index_size_mb": st.index_size_mb,
            }
            if meaning:
                out["embedding"] = await wait_embedded(c, args.embed_timeout)
        if not args.index_only:
            queries = read_queries(args.dataset, args.split)
            qrels = read_qrels(args.dataset, args.split)
            queries = {q: t for q, t in queries.items() if q in qrels}
            out["queries"] = len(queries)
            for mode in modes:
                ranked, times = await run_queries(d.sock, queries, mode, args.limit)
                out[mode] = quality(ranked, qrels) | {
                    "latency_ms": {
                        "p50": round(common.percentile(times, 0.50), 2),
                        "p99": round(common.percentile(times, 0.99), 2),
                        "max": round(max(times), 2),
                    }
                }
    if dsn:
        out["tables"] = {"kb_files+kb_docs": int(pgcluster.relation_mb(dsn) * 1e6)}
    else:
        out["tables"] = bare.table_sizes(d.state / "index.sqlite3")
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--dataset", type=Path, default=DATASET)
    p.add_argument("--split", default="train")
    p.add_argument(
        "--mode",
        default="auto",
        help="search mode, or several separated by commas (auto, words, all, any, raw,"
        " hybrid, semantic)",
    )
    p.add_argument(
        "--embed-timeout", type=float, default=7200.0, help="seconds for embedding everything"
    )
    p.add_argument("--work", type=Path, help="work folder to keep and reuse (corpus, state)")
    p.add_argument("--limit", type=int, default=100)
    p.add_argument("--timeout", type=float, default=600.0, help="seconds for the first scan")
    p.add_argument(
        "--index-only",
        metavar="DIR",
        type=lambda d: Path(d).resolve(),
        help="index DIR (every text file), no queries",
    )
    p.add_argument("--keep", action="store_true", help="keep the work folder")
    p.add_argument("--backend", choices=("sqlite", "postgres"), default="sqlite")
    p.add_argument("--dsn", help="with --backend postgres: a database it may empty")
    p.add_argument("--json", type=Path, help="also write the results here")
    args = p.parse_args()
    if args.work:
        args.work.mkdir(parents=True, exist_ok=True)
    work = args.work or Path(tempfile.mkdtemp(prefix="kbeval-", dir="/tmp"))
    try:
        if args.backend == "postgres":
            with pgcluster.databases(args.dsn) as dbs:
                out = anyio.run(evaluate, args, work, dbs.fresh())
        else:
            out = anyio.run(evaluate, args, work, "")
    finally:
        if args.keep or args.work:
            print(f"work folder kept: {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)
    mb = {k: round(v / 1e6, 2) for k, v in out.pop("tables").items()}
    out["index_mb"] = {k: v for k, v in mb.items() if v >= 0.01}
    text = json.dumps(out, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
