"""kbindex live-update benchmark: how soon a change is searchable, and what it costs.

Copies the synthetic corpus (bench/corpus.py) into a scratch root, starts kbindexd on
it from a cold state directory (its periodic scan set to an hour, so only the watcher
acts), and measures:

- full index: files/s of the first scan (the reference throughput);
- event-to-searchable latency: 200 single-file changes (new files and appends to
  existing ones, each with a unique token), each timed from just before the write until
  a search finds the token; p50/p99 (targets: < 300 ms, < 1 s);
- a burst: 5,000 new files written as fast as possible; files/s from the first write
  until all are indexed and nothing is pending (target: >= 70% of the full index);
- idle cost: the daemon's CPU seconds over 60 idle seconds, from /proc/PID/stat.

A benchmark, not a test: it takes a couple of minutes and never runs in CI.

    .venv/bin/python bench/live_bench.py                        # 10,000 files, ~100 MB
    .venv/bin/python bench/live_bench.py --files 2000 --mb 20 --idle 10   # a quick run
    KB_LOG_LEVEL=debug .venv/bin/python bench/live_bench.py --keep  # every refresh logged
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import common
import corpus
import report
from kbindex.proto.client import Client

POLL = 0.005


async def latency(c: Client, root: Path, existing: list[Path], n: int) -> dict[str, Any]:
    """n changes, alternating a new file and an append to an existing one."""
    times: list[float] = []
    (root / "live").mkdir(exist_ok=True)
    rng = random.Random(7)
    for i in range(n):
        token = f"livetoken{i:04d}q{rng.randrange(10**6):06d}"
        started = time.perf_counter()
        if i % 2 == 0:
            (root / "live" / f"new-{i:04d}.md").write_text(f"# change {i}\n\n{token}\n")
        else:
            with rng.choice(existing).open("a", encoding="utf-8") as fh:
                fh.write(f"\n{token}\n")
        while not (await c.search(token, limit=1)).hits:
            if time.perf_counter() - started > 30:
                raise SystemExit(f"change {i} not searchable after 30 s")
            await anyio.sleep(POLL)
        times.append((time.perf_counter() - started) * 1000)
        # Changes arrive one at a time here, as a person editing makes them.
        await anyio.sleep(0.02)
    return report.latency(times)


async def burst(c: Client, root: Path, existing: list[Path], count: int) -> dict[str, Any]:
    before = await common.wait_status(c, lambda s: s.pending == 0 and not s.scanning, 120)
    rng = random.Random(11)
    bodies = [p.read_bytes() for p in rng.sample(existing, min(len(existing), 500))]
    payload = [
        (root / "burst" / f"d{i % 50:02d}" / f"b{i:05d}.md", bodies[i % len(bodies)])
        for i in range(count)
    ]
    for d in {p.parent for p, _ in payload}:
        d.mkdir(parents=True, exist_ok=True)
    total_bytes = sum(len(b) for _, b in payload)
    started = time.perf_counter()
    for path, body in payload:
        path.write_bytes(body + f"\nburst {path.stem}\n".encode())
    written = time.perf_counter()
    want = before.indexed_files + count
    await common.wait_status(c, lambda s: s.indexed_files >= want and s.pending == 0, 600)
    settled = time.perf_counter()
    return {
        "files": count,
        "mb": round(total_bytes / 1e6, 1),
        "write_s": round(written - started, 3),
        "settled_after_last_write_s": round(settled - written, 3),
        "first_write_to_settled_s": round(settled - started, 3),
        "files_per_s": round(count / (settled - started), 1),
    }


async def measure(args: argparse.Namespace) -> dict[str, Any]:
    src = args.corpus or corpus.default_out(args.files, args.mb, args.seed)
    manifest = corpus.build(src, args.files, args.mb, args.seed)
    work = Path(tempfile.mkdtemp(prefix="kblive-", dir="/tmp"))
    root = work / "root"
    shutil.copytree(manifest["path"], root)
    existing = sorted(root.rglob("*.md"))
    out: dict[str, Any] = {"corpus": {k: manifest[k] for k in ("files", "bytes", "directories")}}
    try:
        with common.running_daemon(
            root, work, "--include-ext", "*", "--scan-interval", "3600"
        ) as d:
            out["command"] = d.command
            await common.wait_serving(d)
            async with Client.connect(d.sock, client_name="live_bench") as c:
                st = await common.wait_status(c, lambda s: s.last_scan_at is not None, 1200)
                out["full_index"] = {
                    "files": st.indexed_files,
                    "seconds": round(st.last_scan_seconds or 0.0, 3),
                    "files_per_s": round(st.indexed_files / (st.last_scan_seconds or 1.0), 1),
                }
                out["latency"] = await latency(c, root, existing, args.changes)
                out["burst"] = await burst(c, root, existing, args.burst)
                out["burst"]["vs_full_index"] = round(
                    out["burst"]["files_per_s"] / out["full_index"]["files_per_s"], 3
                )
                await common.wait_status(c, lambda s: s.pending == 0 and not s.scanning, 120)
                cpu_before = common.cpu_seconds(d.proc.pid)
                await anyio.sleep(args.idle)
                out["idle"] = {
                    "seconds": args.idle,
                    "cpu_seconds": round(common.cpu_seconds(d.proc.pid) - cpu_before, 3),
                }
                final = await c.status()
                out["status"] = {
                    "watch": final.watch,
                    "lag": final.lag,
                    "files_moved": final.files_moved,
                }
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    return out


def verdicts(r: dict[str, Any]) -> list[tuple[str, str, str, bool]]:
    lat, b, idle = r["latency"], r["burst"], r["idle"]
    return [
        ("latency p50", f"{lat['p50_ms']:.0f} ms", "< 300 ms", lat["p50_ms"] < 300),
        ("latency p99", f"{lat['p99_ms']:.0f} ms", "< 1000 ms", lat["p99_ms"] < 1000),
        (
            "burst throughput",
            f"{b['files_per_s']:.0f} files/s = {b['vs_full_index']:.0%} of full index "
            f"({r['full_index']['files_per_s']:.0f} files/s)",
            ">= 70%",
            b["vs_full_index"] >= 0.7,
        ),
        (
            "idle CPU",
            f"{idle['cpu_seconds']:.2f} s over {idle['seconds']:.0f} s",
            "near zero (< 1%)",
            idle["cpu_seconds"] < 0.01 * idle["seconds"],
        ),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=10_000, help="corpus files")
    parser.add_argument("--mb", type=float, default=100.0, help="corpus size")
    parser.add_argument("--seed", type=int, default=corpus.DEFAULT_SEED)
    parser.add_argument("--corpus", type=Path, help="corpus directory (default under /tmp)")
    parser.add_argument("--changes", type=int, default=200, help="single-file changes")
    parser.add_argument("--burst", type=int, default=5000, help="files in the burst")
    parser.add_argument("--idle", type=float, default=60.0, help="idle seconds measured")
    parser.add_argument("--json", type=Path, help="write the results here")
    parser.add_argument("--keep", action="store_true", help="keep the scratch directory")
    args = parser.parse_args(argv)
    result = anyio.run(measure, args)
    text = json.dumps(result, indent=1, default=lambda o: getattr(o, "__dict__", str(o)))
    if args.json:
        args.json.write_text(text)
    lat, b = result["latency"], result["burst"]
    print(f"corpus: {result['corpus']['files']:,} files, {result['corpus']['bytes'] / 1e6:.0f} MB")
    print(
        f"full index: {result['full_index']['files']:,} files in "
        f"{result['full_index']['seconds']:.2f} s"
    )
    print(
        f"latency over {lat['n']} changes: p50 {lat['p50_ms']:.0f} ms, p90 {lat['p90_ms']:.0f}"
        f" ms, p99 {lat['p99_ms']:.0f} ms, max {lat['max_ms']:.0f} ms"
    )
    print(
        f"burst: {b['files']:,} files ({b['mb']} MB) written in {b['write_s']:.2f} s, settled "
        f"{b['settled_after_last_write_s']:.2f} s after the last write"
    )
    for name, value, target, ok in verdicts(result):
        print(f"{'PASS' if ok else 'FAIL'}  {name}: {value} (target {target})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
