"""A full index by two kbindexd builds in turn: wall time, CPU and memory while indexing.

Each run starts the build on ``TREE`` (only read) with ``--include-ext '*'`` and an empty
state directory under the scratch folder, samples the daemon's resident set from
/proc every ``--sample`` seconds until the first scan is done (status), and keeps: wall
time to that point, CPU seconds, peak RSS (VmHWM), RSS at the end and when the peak
was reached, index bytes, load averages before and after. Builds alternate (A, B, A,
B, ...) because other work on the machine moves wall times between runs; memory is not
load-sensitive. Each state directory is deleted after its run.

    .venv/bin/python bench/index_ab.py TREE --old /tmp/km-base/.venv/bin/kbindexd [--pairs 2]
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import anyio
import common
from kbindex.daemon.storage.database import disk_bytes
from kbindex.daemon.storage.engine import sqlite
from kbindex.proto.client import Client

OPTIONS = ("--include-ext", "*", "--watch", "off", "--scan-interval", "86400")


def load() -> str:
    return "/".join(f"{x:.2f}" for x in os.getloadavg())


async def _wait_indexed(d: common.Daemon, within: float) -> int:
    await common.wait_serving(d)
    async with Client.connect(d.sock, client_name="index_ab") as c:
        return (await common.wait_scan(c, within, poll=0.2)).indexed_files


def free_bytes(db: Path) -> int:
    """Bytes of the index file on its free list: pages that merges left, counted in the
    file's size until later writes reuse them."""
    conn = sqlite.connect(f"file:{db}?mode=ro", uri=True)
    try:
        (pages,) = conn.execute("PRAGMA freelist_count").fetchone()
        (size,) = conn.execute("PRAGMA page_size").fetchone()
    finally:
        conn.close()
    return int(pages) * int(size)


def one_run(tree: Path, work: Path, exe: Path, name: str, every: float) -> dict[str, Any]:
    load_before = load()
    d = common.start_daemon(tree, work, *OPTIONS, exe=exe, name=name)
    samples: list[tuple[float, float]] = []
    done = threading.Event()

    def sample() -> None:
        while not done.wait(every):
            try:
                samples.append((time.perf_counter() - d.started, common.rss_mb(d.proc.pid)))
            except OSError:
                return

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        indexed = anyio.run(_wait_indexed, d, 3600.0)
        wall = time.perf_counter() - d.started
        done.set()
        sampler.join()
        step = max(1, int(5 / every))  # one sample in the timeline per 5 s
        peak_at = max(samples, key=lambda s: s[1]) if samples else (0.0, 0.0)
        figures = {
            "build": name,
            "exe": str(exe),
            "wall_s": round(wall, 1),
            "cpu_s": round(common.cpu_seconds(d.proc.pid), 1),
            "peak_rss_mb": round(common.peak_rss_mb(d.proc.pid)),
            "rss_end_mb": round(common.rss_mb(d.proc.pid)),
            "peak_sampled_at_s": round(peak_at[0], 1),
            "indexed_files": indexed,
            "index_bytes": sum(disk_bytes(d.state / "index.sqlite3")),
            "free_bytes": free_bytes(d.state / "index.sqlite3"),
            "load_before_after": [load_before, load()],
            "rss_timeline": [(round(t, 1), round(r)) for t, r in samples[::step]],
        }
    finally:
        done.set()
        common.stop_daemon(d)
        shutil.rmtree(d.state, ignore_errors=True)
    return figures


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("tree", type=Path)
    p.add_argument("--old", type=Path, help="the other build's kbindexd (run first in a pair)")
    p.add_argument("--new", type=Path, default=common.KBINDEXD)
    p.add_argument("--pairs", type=int, default=1)
    p.add_argument("--sample", type=float, default=0.25, help="seconds between RSS samples")
    p.add_argument("--work", type=Path, help="scratch folder (default: a new one in /tmp)")
    p.add_argument("--json", type=Path, help="results file")
    args = p.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="kb-index-ab-"))
    (work / "config").mkdir(parents=True, exist_ok=True)
    order = [("old", args.old), ("new", args.new)] if args.old else [("new", args.new)]
    runs = []
    for _ in range(args.pairs):
        for name, exe in order:
            r = one_run(args.tree, work, exe, name, args.sample)
            runs.append(r)
            print(
                f"{name}: wall {r['wall_s']} s, CPU {r['cpu_s']} s, peak RSS {r['peak_rss_mb']} MB"
                f" (at {r['peak_sampled_at_s']} s), RSS at end {r['rss_end_mb']} MB,"
                f" {r['indexed_files']} files, index {r['index_bytes'] / 1e6:.0f} MB"
                f" ({r['free_bytes'] / 1e6:.0f} MB free pages),"
                f" load {r['load_before_after']}",
                flush=True,
            )
    common.write_results({"tree": str(args.tree), "runs": runs}, args.json, work / "index_ab.json")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
