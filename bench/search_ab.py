"""Two kbindexd builds side by side on one index: search latency through the socket,
query by query, alternating, and whether they list the same documents.

The VM's speed drifts by a quarter within minutes, so two builds measured one after
the other cannot be compared; here each of the bench's 400 queries (``index_bench``'s
mix, same seed) goes to A, then to B, three times, and the median of each is kept.
Both daemons serve copies of the same index (made by ``--keep`` runs or a first scan
here), and both are asked through this checkout's client.

    git worktree add /tmp/kb-old REV
    (cd /tmp/kb-old && python3 -m venv .venv &&
     .venv/bin/pip install -q -e . --config-settings editable_mode=strict)
    .venv/bin/python bench/search_ab.py /tmp/kb-old/.venv/bin/kbindexd .venv/bin/kbindexd
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import common
import corpus
import index_bench
from kbindex.proto.client import Client


async def _first_scan(d: common.Daemon) -> None:
    await common.wait_serving(d, 600.0)
    async with Client.connect(d.sock) as c:
        async for _ in c.refresh_wait(full=False):
            pass


async def _compare(socks: tuple[Path, Path], queries: list[tuple[str, str]]) -> dict[str, Any]:
    async with Client.connect(socks[0]) as a, Client.connect(socks[1]) as b:
        for _ in range(2):  # both warm, every page read once
            for _, q in queries:
                await a.search(q, limit=10)
                await b.search(q, limit=10)
        pings: tuple[list[float], list[float]] = ([], [])
        for _ in range(300):
            for c, out in zip((a, b), pings, strict=True):
                t = time.perf_counter()
                await c.ping()
                out.append((time.perf_counter() - t) * 1e3)
        times: dict[str, tuple[list[float], list[float]]] = {}
        differ: list[str] = []
        ties: list[str] = []
        lists: list[dict[str, Any]] = []
        for kind, q in queries:
            runs: tuple[list[float], list[float]] = ([], [])
            for _ in range(3):
                replies = []
                for c, out in zip((a, b), runs, strict=True):
                    t = time.perf_counter()
                    replies.append(await c.search(q, limit=10))
                    out.append((time.perf_counter() - t) * 1e3)
            ra, rb = replies
            lists.append(
                {"kind": kind, "query": q}
                | {
                    side: {"total_hits": r.total_hits, "hits": [[h.path, h.score] for h in r.hits]}
                    for side, r in zip("ab", replies, strict=True)
                }
            )
            if ra.total_hits != rb.total_hits or [h.path for h in ra.hits] != [
                h.path for h in rb.hits
            ]:
                # The same scores (as replies round them) in the same order: only equal
                # documents changed places (ties go by file id, which follows write order).
                same_scores = ra.total_hits == rb.total_hits and [h.score for h in ra.hits] == [
                    h.score for h in rb.hits
                ]
                (ties if same_scores else differ).append(q)
            pair = times.setdefault(kind, ([], []))
            for side, out in zip(pair, runs, strict=True):
                side.append(statistics.median(out))
    return {"pings": pings, "times": times, "differ": differ, "ties": ties, "lists": lists}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("a", type=Path, help="kbindexd of build A (the before)")
    p.add_argument("b", type=Path, help="kbindexd of build B (the after)")
    p.add_argument("--state", type=Path, help="a kept state dir to copy (default: index here)")
    p.add_argument("--files", type=int, default=20_000)
    p.add_argument("--mb", type=float, default=200)
    p.add_argument("--seed", type=int, default=corpus.DEFAULT_SEED)
    p.add_argument("--save", type=Path, help="write every query's lists (A and B) here, JSON")
    args = p.parse_args(argv)
    root = corpus.default_out(args.files, args.mb, args.seed)
    manifest = corpus.build(root, args.files, args.mb, args.seed)
    queries = index_bench.make_queries(manifest["queries"], 80, args.seed)
    work = Path(tempfile.mkdtemp(prefix="kbindex-ab-", dir="/tmp"))
    # Meaning off: a build whose venv has the semantic extra would embed in the
    # background while its searches are timed.
    options = ("--watch", "off", "--scan-interval", "100000", "--semantic", "off")
    try:
        with contextlib.ExitStack() as daemons:
            for name, exe in zip("ab", (args.a, args.b), strict=True):
                state = work / f"state-{name}"
                if args.state:
                    shutil.copytree(args.state, state, ignore=shutil.ignore_patterns("*sock*"))
                elif name == "b":  # one first scan (by A), then a copy for B
                    shutil.copytree(work / "state-a", state)
                run = common.running_daemon(root, work, *options, exe=exe, name=name)
                anyio.run(_first_scan, daemons.enter_context(run))
            out = anyio.run(_compare, (work / "a.sock", work / "b.sock"), queries)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if args.save:
        args.save.write_text(json.dumps(out["lists"], indent=1) + "\n")
    pa, pb = out["pings"]
    print(f"ping p50          A {statistics.median(pa):6.3f}  B {statistics.median(pb):6.3f} ms")
    every: tuple[list[float], list[float]] = ([], [])
    for kind, (ta, tb) in out["times"].items():
        every[0].extend(ta)
        every[1].extend(tb)
        a50, b50 = statistics.median(ta), statistics.median(tb)
        print(f"{kind:9s} p50      A {a50:6.2f}  B {b50:6.2f} ms")
    ratios = [b / a for a, b in zip(*every, strict=True)]
    p99 = [common.percentile(ms, 0.99) for ms in every]
    print(
        f"all p50 / p99     A {statistics.median(every[0]):6.2f} / {p99[0]:.2f}"
        f"  B {statistics.median(every[1]):6.2f} / {p99[1]:.2f} ms;"
        f" median B/A {statistics.median(ratios):.3f}"
    )
    print(
        f"queries whose hits or total_hits differ: {len(out['differ'])} of {len(queries)};"
        f" {len(out['ties'])} more list equal-scored hits in another order"
    )
    for q in out["differ"][:10]:
        print("  ", q)
    return 1 if out["differ"] else 0


if __name__ == "__main__":
    sys.exit(main())
