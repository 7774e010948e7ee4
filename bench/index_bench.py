"""kbindex performance benchmark: kbindexd against the bare FTS5 ceiling on one corpus.

Builds (or reuses) the synthetic corpus, warms the page cache, bulk-loads it into a bare
FTS5 table in-process, then starts kbindexd on it from a cold state directory and
measures: full index time, index size, the periodic and client-requested no-change
rescans, search latency through the socket, and the daemon's peak RSS. Prints a table
with PASS/FAIL against the targets and writes everything as JSON.

A benchmark, not a test: it takes minutes at full size and never runs in CI.

    .venv/bin/python bench/index_bench.py                       # 20,000 files, ~200 MB
    .venv/bin/python bench/index_bench.py --files 2000 --mb 20  # a quick run
"""

from __future__ import annotations

import argparse
import os
import platform
import random
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
import corpus
import report
from kbindex.daemon.backends.sqlite import render as fts5
from kbindex.daemon.engine import sqlite
from kbindex.daemon.searching.query import to_plan
from kbindex.proto.client import Client

HERE = Path(__file__).resolve().parent
QUERY_KINDS = ("common", "rare", "phrase", "question", "prefix*")
QUESTIONS = (
    "how does {0} {1} the {2}?",
    "why is {0} {1} with {2}?",
    "where are {0} and {1} {2}?",
    "what {0} {1} {2} for {3}?",
)


def make_queries(material: dict[str, list[str]], per_kind: int, seed: int) -> list[tuple[str, str]]:
    """(kind, query) pairs, ``per_kind`` of each kind, shuffled with a fixed seed."""
    rng = random.Random(seed)
    common, middle, rare = material["common"], material["middle"], material["rare"]
    queries: list[tuple[str, str]] = []
    for _ in range(per_kind):
        words = [rng.choice(common), *rng.sample(middle, 3)]
        stem = rng.choice(middle)
        queries += [
            ("common", rng.choice(common)),
            ("rare", rng.choice(rare)),
            ("phrase", f'"{rng.choice(material["phrases"])}"'),
            ("question", rng.choice(QUESTIONS).format(*words)),
            ("prefix*", stem[: max(4, len(stem) - 2)] + "*"),
        ]
    rng.shuffle(queries)
    return queries


def warm_cache(root: Path) -> float:
    started = time.perf_counter()
    for dirpath, _dirs, names in os.walk(root):
        for name in names:
            with open(os.path.join(dirpath, name), "rb") as fh:
                while fh.read(1 << 20):
                    pass
    return time.perf_counter() - started


async def measure_daemon(
    root: Path,
    work: Path,
    queries: list[tuple[str, str]],
    matches: list[tuple[str, str]],
    bare_searcher: bare.Searcher,
    args: argparse.Namespace,
) -> dict[str, Any]:
    options = ["--include-ext", "*", "--scan-interval", str(args.scan_interval)]
    out: dict[str, Any] = {}
    with common.running_daemon(root, work, *options) as d:
        out["command"] = d.command
        await common.wait_serving(d)
        async with Client.connect(d.sock, client_name="index_bench") as c:
            out["serving_after_s"] = round(time.perf_counter() - d.started, 3)
            st = await common.wait_scan(c, args.timeout, poll=0.05)
            wall = time.perf_counter() - d.started
            out["full"] = {
                "wall_s": round(wall, 3),
                "last_scan_seconds": round(st.last_scan_seconds, 3),
                "cpu_s": round(common.cpu_seconds(d.proc.pid), 2),
                "indexed_files": st.indexed_files,
                "skipped": st.skipped,
                "index_size_mb_live": st.index_size_mb,
                "peak_rss_mb": round(common.peak_rss_mb(d.proc.pid), 1),
            }
            # The periodic rescan comes scan_interval seconds after the first scan.
            within = args.scan_interval + args.timeout
            st = await common.wait_scan(c, within, after=st.last_scan_at, poll=0.2)
            out["periodic_rescan_s"] = round(st.last_scan_seconds, 3)
            out["ping"] = await _pings(c, 200)
            out["search"] = await _searches(c, queries, matches, bare_searcher, args.warmup)
            out["rescan"] = await _rescans(c, args.rescans)
            out["peak_rss_mb"] = round(common.peak_rss_mb(d.proc.pid), 1)
    out["exit_code"] = d.proc.returncode
    out["tables"] = bare.table_sizes(d.state / "index.sqlite3")
    out["index_bytes"] = out["tables"]["file"]
    return out


async def _pings(c: Client, n: int) -> dict[str, float]:
    """The transport's floor: a request the daemon answers without any work."""
    times = []
    for _ in range(n):
        t = time.perf_counter_ns()
        await c.ping()
        times.append((time.perf_counter_ns() - t) / 1e6)
    return report.latency(times)


async def _searches(
    c: Client,
    queries: list[tuple[str, str]],
    matches: list[tuple[str, str]],
    bare_searcher: bare.Searcher,
    warmup: int,
) -> dict[str, Any]:
    """Each query through the socket, and its bare FTS5 form in-process just before it:
    the machine's speed drifts by a quarter within minutes, so the two are measured
    side by side, query by query, and their per-query ratio is reported too."""
    before = await c.status()
    for (_kind, q), (_, match) in zip(queries[:warmup], matches[:warmup], strict=True):
        bare_searcher.ms(match)
        await c.search(q, limit=10)
    times: dict[str, list[float]] = {k: [] for k in QUERY_KINDS}
    bare_times: dict[str, list[float]] = {k: [] for k in QUERY_KINDS}
    hits: dict[str, list[int]] = {k: [] for k in QUERY_KINDS}
    ratios: list[float] = []
    for (kind, q), (_, match) in zip(queries, matches, strict=True):
        bare_ms = bare_searcher.ms(match)
        t = time.perf_counter_ns()
        r = await c.search(q, limit=10)
        daemon_ms = (time.perf_counter_ns() - t) / 1e6
        times[kind].append(daemon_ms)
        bare_times[kind].append(bare_ms)
        ratios.append(daemon_ms / bare_ms)
        hits[kind].append(r.total_hits)
    after = await c.status()
    result: dict[str, Any] = report.latencies(times)
    for kind in QUERY_KINDS:
        result[kind]["median_total_hits"] = statistics.median(hits[kind])
    result["median_ratio_to_bare"] = round(statistics.median(ratios), 3)
    result["bare"] = report.latencies(bare_times)
    result["overlapped_a_scan"] = after.last_scan_at != before.last_scan_at or after.scanning
    return result


async def _rescans(c: Client, n: int) -> dict[str, Any]:
    client_s: list[float] = []
    daemon_s: list[float] = []
    changed = 0
    for _ in range(n):
        t = time.perf_counter()
        async for reply in c.refresh_wait(full=False):
            changed += getattr(reply, "files_changed", 0)
        client_s.append(time.perf_counter() - t)
        daemon_s.append((await c.status()).last_scan_seconds or 0.0)
    return {
        "client_s": [round(x, 3) for x in client_s],
        "median_s": round(statistics.median(client_s), 3),
        "daemon_last_scan_seconds": [round(x, 3) for x in daemon_s],
        "files_changed": changed,
    }


def _git_state() -> str:
    """The commit and whether the daemon's sources differ from it (figures depend on it)."""
    dirty = common.git("status", "--porcelain", "--", "daemon", "proto").strip()
    return common.git("rev-parse", "--short", "HEAD").strip() + (
        " + uncommitted daemon/proto changes" if dirty else ""
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--files", type=int, default=corpus.DEFAULT_FILES)
    p.add_argument("--mb", type=float, default=corpus.DEFAULT_MB)
    p.add_argument("--seed", type=int, default=corpus.DEFAULT_SEED)
    p.add_argument("--corpus", type=Path, help="corpus directory (default under /tmp)")
    p.add_argument("--json", type=Path, help="results file (default bench/out/...json)")
    p.add_argument("--queries-per-kind", type=int, default=80)
    p.add_argument("--warmup", type=int, default=25, help="untimed queries first")
    p.add_argument("--rescans", type=int, default=5)
    p.add_argument("--scan-interval", type=float, default=30.0)
    p.add_argument("--timeout", type=float, default=1800.0, help="per phase, seconds")
    p.add_argument("--keep", action="store_true", help="keep the work dir (state, logs)")
    p.add_argument("--no-breakdown", action="store_true", help="skip bare.py's like-daemon stages")
    args = p.parse_args(argv)

    root = args.corpus or corpus.default_out(args.files, args.mb, args.seed)
    t = time.perf_counter()
    manifest = corpus.build(root, args.files, args.mb, args.seed)
    print(f"corpus {root}: {manifest['files']} files, {manifest['bytes'] / 1e6:.1f} MB", end="")
    print(f" (ready in {time.perf_counter() - t:.1f} s)", flush=True)
    work = Path(tempfile.mkdtemp(prefix="kbindex-bench-", dir="/tmp"))
    try:
        print(f"page cache warmed in {warm_cache(root):.1f} s; bare FTS5 load...", flush=True)
        ceiling = bare.load(root, work / "bare.sqlite3")
        queries = make_queries(manifest["queries"], args.queries_per_kind, args.seed)
        # Bare FTS5 runs a prefix as its own prefix of stems (the raw form of "word*");
        # the daemon resolves it against the words it holds (daemon/searching/prefixes.py).
        matches = [
            (
                kind,
                fts5.render(
                    fts5.match(to_plan(q, "raw" if kind == "prefix*" else "auto")).expr or ()
                ),
            )
            for kind, q in queries
        ]
        # Merged as kbindexd merges after a full index; searched later, interleaved
        # with the daemon's searches (see _searches).
        ceiling["merge"] = bare.merge(work / "bare.sqlite3")
        ceiling["loadavg"] = os.getloadavg()
        print(f"bare FTS5: {ceiling['seconds']} s, merge {ceiling['merge']['seconds']} s")
        breakdown = []
        for stage in () if args.no_breakdown else bare.STAGES[1:]:
            # The daemon's write path piece by piece, in-process (see bare.py).
            staged = bare.load(root, work / f"stage-{stage}.sqlite3", stage)
            staged["loadavg"] = os.getloadavg()
            breakdown.append(staged)
            for suffix in ("", "-wal", "-shm"):
                Path(f"{work}/stage-{stage}.sqlite3{suffix}").unlink(missing_ok=True)
            print(f"  stage {stage}: {staged['seconds']} s", flush=True)
        print("kbindexd...", flush=True)
        load_before = os.getloadavg()
        bare_searcher = bare.Searcher(work / "bare.sqlite3")
        try:
            daemon = anyio.run(measure_daemon, root, work, queries, matches, bare_searcher, args)
        finally:
            bare_searcher.close()
        ceiling["search"] = daemon["search"].pop("bare")
    finally:
        if args.keep:
            print(f"work dir kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    results = {
        "when": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "argv": sys.argv,
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "sqlite": sqlite.sqlite_version,
            "platform": platform.platform(),
            "loadavg_before_after": [load_before, os.getloadavg()],
            "git": _git_state(),
        },
        "corpus": {k: v for k, v in manifest.items() if k != "queries"},
        "bare_fts5": ceiling,
        "breakdown": breakdown,
        "kbindexd": daemon,
    }
    results["summary"] = report.summarize(results)
    print(report.table(results))
    stamp = time.strftime("%Y%m%d-%H%M%S")
    common.write_results(
        results, args.json, HERE / "out" / f"index_bench-{args.files}f-{stamp}.json"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
