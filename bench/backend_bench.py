"""Issue 21: kbindexd on SQLite and on PostgreSQL, side by side over the same tree.

Each round runs a full index from nothing on each backend (the order alternates round by
round, so the machine's drift hits both): spawn to the first scan done, files/s, the
daemon's CPU (and the server's, for a throwaway cluster: the PostgreSQL backend's work
is done there), the index size (status ``index_size_mb``; for PostgreSQL also
pg_total_relation_size of kb_files + kb_docs as a cross-check), search latency through
the socket over index_bench.py's query set (limit 10, after a warm-up), and the daemon's
peak RSS (VmHWM). PostgreSQL is a throwaway cluster (bench/pgcluster.py, from
tests/pgserver.py: durability off, as in the tests) unless ``--dsn`` names a database the
benchmark may empty.

The first round also compares the result lists: every single-word and phrase query
(limit 100) must give the same total and the same set of files on both backends. Above
100 hits the set is the top 100 of each backend's ranking, so a difference there is one of
ranking, and is counted apart from a difference of matching. It also compares each of the
timed queries' first ten hits (limit 10, all kinds): their overlap is the share of
SQLite's ten that PostgreSQL also gives (the parity policy of issue 39 asks at least 0.8).

For PostgreSQL it counts the WAL the server wrote during the full index
(``pg_current_wal_lsn()`` before and after; the throwaway cluster writes full pages, as a
real server does, though it does not fsync).

A CORPUS that is not the generated one (``--real``: any tree of text, e.g. the kernel's
Documentation) gets its queries from its own words: common words are in many files, rare
ones in two to four, phrases are two adjacent words of a file.

    .venv/bin/python bench/backend_bench.py                       # /tmp/bench/corpus
    .venv/bin/python bench/backend_bench.py CORPUS --rounds 3 --json OUT
    .venv/bin/python bench/backend_bench.py --dsn postgresql:///kbbench?host=/run/postgresql
    .venv/bin/python bench/backend_bench.py /work/data/linux-source-6.1/Documentation --real
"""

from __future__ import annotations

import argparse
import collections
import os
import random
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import bare
import common
import corpus
import pgcluster
import report
from index_bench import QUERY_KINDS, make_queries, warm_cache
from kbindex.proto.client import Client

HERE = Path(__file__).resolve().parent
BACKENDS = ("sqlite", "postgres")
COMPARED_KINDS = ("common", "rare", "phrase")
"""Queries whose matches do not depend on ranking: one word, or one phrase."""
COMPARE_LIMIT = 100


async def run_backend(
    backend: str,
    root: Path,
    work: Path,
    dbs: pgcluster.Databases,
    queries: list[tuple[str, str]],
    args: argparse.Namespace,
    compare: bool,
) -> dict[str, Any]:
    options = ["--include-ext", "*", "--scan-interval", "86400", "--semantic", "off"]
    dsn = ""
    if backend == "postgres":
        dsn = dbs.fresh()
        options += ["--backend", "postgres", "--dsn", dsn, "--machine", "bench"]
    postmaster = dbs.postmaster_pid() if backend == "postgres" else None
    server_cpu = pgcluster.server_cpu_seconds(postmaster) if postmaster else 0.0
    out: dict[str, Any] = {"backend": backend, "loadavg_before": os.getloadavg()}
    wal_before = pgcluster.wal_lsn(dsn) if dsn else None
    with common.running_daemon(root, work, *options, name=backend) as d:
        await common.wait_serving(d)
        async with Client.connect(d.sock, client_name="backend_bench") as c:
            st = await common.wait_scan(c, args.timeout, poll=0.05)
            wall = time.perf_counter() - d.started
            out["full"] = {
                "wall_s": round(wall, 2),
                "scan_s": round(st.last_scan_seconds or 0.0, 2),
                "files": st.indexed_files,
                "files_per_s": round(st.indexed_files / wall, 1),
                "cpu_s": round(common.cpu_seconds(d.proc.pid), 1),
                "server_cpu_s": (
                    round(pgcluster.server_cpu_seconds(postmaster) - server_cpu, 1)
                    if postmaster
                    else None
                ),
                "index_size_mb": st.index_size_mb,
                "peak_rss_mb": round(common.peak_rss_mb(d.proc.pid), 1),
            }
            if dsn:
                out["full"]["wal_mb"] = round(pgcluster.wal_since(dsn, wal_before) / 1e6, 1)
                out["full"]["relations_mb"] = round(pgcluster.relation_mb(dsn), 1)
                out["full"]["tables_mb"] = pgcluster.table_mb(dsn)
            out["search"], out["top10"] = await searches(c, queries, args.warmup)
            if compare:
                out["lists"] = await result_lists(c, queries)
            out["peak_rss_mb"] = round(common.peak_rss_mb(d.proc.pid), 1)
    out["exit_code"] = d.proc.returncode
    if backend == "sqlite":
        out["full"]["file_mb"] = round(bare.table_sizes(d.state / "index.sqlite3")["file"] / 1e6, 1)
    out["loadavg_after"] = os.getloadavg()
    return out


async def searches(
    c: Client, queries: list[tuple[str, str]], warmup: int
) -> tuple[dict[str, Any], list[list[str]]]:
    """Latencies by kind, and each query's first ten hits (relpaths, in order)."""
    for _kind, q in queries[:warmup]:
        await c.search(q, limit=10)
    times: dict[str, list[float]] = {k: [] for k in QUERY_KINDS}
    top10: list[list[str]] = []
    for kind, q in queries:
        t = time.perf_counter_ns()
        r = await c.search(q, limit=10)
        ms = (time.perf_counter_ns() - t) / 1e6
        times[kind].append(ms)
        top10.append([h.relpath for h in r.hits])
    return report.latencies(times), top10


def overlap(
    a: list[list[str]], b: list[list[str]], queries: list[tuple[str, str]]
) -> dict[str, Any]:
    """The share of ``a``'s first ten that ``b`` also has, per query (1 when both are
    empty): the mean, overall and by kind, and the queries under 0.8."""
    shares = [
        len(set(x) & set(y)) / len(x) if x else float(not y) for x, y in zip(a, b, strict=True)
    ]
    by_kind: dict[str, list[float]] = collections.defaultdict(list)
    for (kind, _q), share in zip(queries, shares, strict=True):
        by_kind[kind].append(share)
    return {
        "mean": round(sum(shares) / len(shares), 4),
        "by_kind": {k: round(sum(v) / len(v), 4) for k, v in by_kind.items()},
        "under_0.8": [
            {"query": q, "share": round(s, 2)}
            for (_k, q), s in zip(queries, shares, strict=True)
            if s < 0.8
        ],
    }


_WORD = re.compile(r"[A-Za-z]{4,}")


def real_material(root: Path, seed: int) -> dict[str, list[str]]:
    """Query material (as ``corpus._query_material``) from a real tree's own words."""
    rng = random.Random(seed)
    df: collections.Counter[str] = collections.Counter()
    pairs: list[str] = []
    files = sorted(p for p in root.rglob("*") if p.is_file() and not p.is_symlink())
    for path in files:
        words = _WORD.findall(path.read_bytes()[:200_000].decode("utf-8", "replace").lower())
        df.update(set(words))
        if len(words) > 2 and rng.random() < 0.1:
            i = rng.randrange(len(words) - 1)
            pairs.append(f"{words[i]} {words[i + 1]}")
    ranked = [w for w, _n in df.most_common()]
    rare = sorted(w for w, n in df.items() if 2 <= n <= 4)
    return {
        "common": ranked[20:120],
        "middle": ranked[300:3000],
        "rare": rng.sample(rare, min(400, len(rare))),
        "phrases": rng.sample(pairs, min(400, len(pairs))),
    }


async def result_lists(
    c: Client, queries: list[tuple[str, str]]
) -> dict[str, tuple[int, list[str]]]:
    """query -> (total hits, relpaths of the first COMPARE_LIMIT hits)."""
    lists: dict[str, tuple[int, list[str]]] = {}
    for kind, q in queries:
        if kind in COMPARED_KINDS and q not in lists:
            r = await c.search(q, limit=COMPARE_LIMIT)
            lists[q] = (r.total_hits, sorted(h.relpath for h in r.hits))
    return lists


def compare_lists(
    a: dict[str, tuple[int, list[str]]], b: dict[str, tuple[int, list[str]]]
) -> dict[str, Any]:
    """How many queries agree; each one that does not, with what only one side found."""
    agree, ranking_only, differ = 0, [], []
    for q in a:
        (total_a, files_a), (total_b, files_b) = a[q], b[q]
        only_a, only_b = sorted(set(files_a) - set(files_b)), sorted(set(files_b) - set(files_a))
        if total_a == total_b and not only_a and not only_b:
            agree += 1
            continue
        entry = {
            "query": q,
            "total_sqlite": total_a,
            "total_postgres": total_b,
            "only_sqlite": only_a,
            "only_postgres": only_b,
        }
        # Same total, more hits than the limit: each side's top 100 of the same matches.
        if total_a == total_b and total_a > COMPARE_LIMIT:
            ranking_only.append(entry)
        else:
            differ.append(entry)
    return {
        "queries": len(a),
        "agree": agree,
        "same_total_other_top100": ranking_only,
        "disagree": differ,
    }


def table(rounds: list[dict[str, Any]]) -> str:
    rows = [
        ("full index wall s (spawn -> scan done)", lambda r: f"{r['full']['wall_s']:.1f}"),
        ("files/s", lambda r: f"{r['full']['files_per_s']:.0f}"),
        ("daemon CPU s", lambda r: f"{r['full']['cpu_s']:.1f}"),
        ("server CPU s", lambda r: f"{r['full']['server_cpu_s'] or 0:.1f}"),
        ("index size MiB (status index_size_mb)", lambda r: f"{r['full']['index_size_mb']:.0f}"),
        ("WAL written MB", lambda r: f"{r['full'].get('wal_mb', 0):.0f}"),
        (
            "  cross-check, 10^6 bytes (file / pg_total_relation_size)",
            lambda r: f"{r['full'].get('file_mb') or r['full'].get('relations_mb'):.0f}",
        ),
        ("search p50 ms (all 400)", lambda r: f"{r['search']['all']['p50_ms']:.2f}"),
        ("search p99 ms (all 400)", lambda r: f"{r['search']['all']['p99_ms']:.2f}"),
        *[
            (
                f"  {k} p50 / p99 ms",
                lambda r, k=k: f"{r['search'][k]['p50_ms']:.2f} / {r['search'][k]['p99_ms']:.2f}",
            )
            for k in QUERY_KINDS
        ],
        ("peak RSS MB (daemon)", lambda r: f"{r['peak_rss_mb']:.0f}"),
        ("load 1 min before", lambda r: f"{r['loadavg_before'][0]:.2f}"),
    ]
    heads = [f"{r['backend']} #{r['round']}" for r in rounds]
    width = max(len(label) for label, _ in rows) + 2
    lines = ["".ljust(width) + "".join(h.rjust(16) for h in heads)]
    for label, cell in rows:
        lines.append(label.ljust(width) + "".join(cell(r).rjust(16) for r in rounds))
    return "\n".join(lines)


async def bench(
    root: Path,
    work: Path,
    dbs: pgcluster.Databases,
    queries: list[tuple[str, str]],
    args: argparse.Namespace,
) -> list[dict[str, Any]]:
    rounds: list[dict[str, Any]] = []
    for n in range(1, args.rounds + 1):
        order = BACKENDS if n % 2 else BACKENDS[::-1]
        for backend in order:
            print(f"round {n}: {backend}...", flush=True)
            # A state folder of its own per run: each one indexes from nothing.
            run_work = work / f"round-{n}"
            run_work.mkdir(exist_ok=True)
            res = await run_backend(backend, root, run_work, dbs, queries, args, compare=n == 1)
            res["round"] = n
            rounds.append(res)
            f = res["full"]
            print(f"  {f['wall_s']} s, {f['files']} files, p50 {res['search']['all']['p50_ms']} ms")
    return rounds


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("corpus", nargs="?", type=Path, default=Path("/tmp/bench/corpus"))
    p.add_argument("--files", type=int, default=corpus.DEFAULT_FILES, help="to build it")
    p.add_argument("--mb", type=float, default=corpus.DEFAULT_MB, help="to build it")
    p.add_argument("--seed", type=int, default=corpus.DEFAULT_SEED)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--real", action="store_true", help="CORPUS is a real tree: not generated")
    p.add_argument("--dsn", help="a database the benchmark may empty (default: a throwaway one)")
    p.add_argument("--queries-per-kind", type=int, default=80)
    p.add_argument("--warmup", type=int, default=25, help="untimed queries first")
    p.add_argument("--timeout", type=float, default=3600.0, help="for a full index, seconds")
    p.add_argument("--json", type=Path, help="results file (default bench/out/...json)")
    args = p.parse_args(argv)

    root = args.corpus.resolve()
    if args.real:
        sizes = [p.stat().st_size for p in root.rglob("*") if p.is_file() and not p.is_symlink()]
        manifest = {"path": str(root), "files": len(sizes), "bytes": sum(sizes)}
        manifest["queries"] = real_material(root, args.seed)
    else:
        manifest = corpus.build(root, args.files, args.mb, args.seed)
    print(f"corpus {root}: {manifest['files']} files, {manifest['bytes'] / 1e6:.1f} MB")
    print(f"page cache warmed in {warm_cache(root):.1f} s", flush=True)
    queries = make_queries(manifest["queries"], args.queries_per_kind, args.seed)
    work = Path(tempfile.mkdtemp(prefix="kbbackend-", dir="/tmp"))
    try:
        with pgcluster.databases(args.dsn) as dbs:
            rounds = anyio.run(bench, root, work, dbs, queries, args)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    first = {r["backend"]: r.pop("lists") for r in rounds if "lists" in r}
    lists = compare_lists(first["sqlite"], first["postgres"])
    tops = {r["backend"]: r.pop("top10") for r in rounds if r["round"] == 1}
    top10 = overlap(tops["sqlite"], tops["postgres"], queries)
    for r in rounds:
        r.pop("top10", None)
    print(table(rounds))
    print(
        f"\nresult lists (limit {COMPARE_LIMIT}, single words and phrases):"
        f" {lists['agree']} of {lists['queries']} queries agree;"
        f" {len(lists['same_total_other_top100'])} same total, other top {COMPARE_LIMIT};"
        f" {len(lists['disagree'])} disagree"
    )
    for e in lists["disagree"]:
        print(
            f"  {e['query']!r}: totals {e['total_sqlite']} / {e['total_postgres']};"
            f" only sqlite {e['only_sqlite'][:5]} ({len(e['only_sqlite'])});"
            f" only postgres {e['only_postgres'][:5]} ({len(e['only_postgres'])})"
        )
    print(
        f"top-10 overlap, {len(queries)} queries: mean {top10['mean']};"
        f" by kind {top10['by_kind']}; {len(top10['under_0.8'])} under 0.8"
    )
    sq = next(r for r in rounds if r["backend"] == "sqlite")["full"]
    for r in rounds:
        if r["backend"] == "postgres":
            f = r["full"]
            print(
                f"postgres #{r['round']} against sqlite #1: time {f['wall_s'] / sq['wall_s']:.2f}x,"
                f" size {f['index_size_mb'] / sq['index_size_mb']:.2f}x,"
                f" WAL {f['wal_mb'] * 1e6 / manifest['bytes']:.2f}x the corpus;"
                f" tables {f['tables_mb']}"
            )
    results = {
        "when": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "argv": sys.argv,
        "git": common.git("rev-parse", "--short", "HEAD").strip(),
        "cpus": os.cpu_count(),
        "corpus": {k: v for k, v in manifest.items() if k != "queries"},
        "rounds": rounds,
        "lists": lists,
        "top10": top10,
    }
    stamp = time.strftime("%Y%m%d-%H%M%S")
    common.write_results(results, args.json, HERE / "out" / f"backend_bench-{stamp}.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
