"""A full index by two kbindexd builds in turn: wall time, CPU and memory while indexing.

Each run starts the build on ``TREE`` (only read) with ``--include-ext '*'`` and an empty
state directory under the scratch folder, samples the daemon's resident set from
/proc every ``--sample`` seconds until the first scan is done (status), and keeps: wall
time to that point, CPU seconds, peak RSS (VmHWM), RSS at the end and when the peak
was reached, index bytes, load averages before and after. Builds alternate (A, B, A,
B, ...) because other work on the machine moves wall times between runs; memory is not
load-sensitive. Each state directory is deleted after its run, except the last one of
each build with ``--keep DIR`` (moved to ``DIR/state-old`` and ``DIR/state-new``: kept
indexes for ``rescan_ab.py`` and ``grep_ab.py``, which need one per build when the
schemas differ).

With ``--backend postgres`` each run indexes into a fresh database (a throwaway cluster,
or ``--dsn``'s database emptied: ``pgcluster``), and the figures add the server's CPU
seconds (throwaway cluster only) and the tables' size in place of the index file's.

    .venv/bin/python bench/index_ab.py TREE --old /tmp/km-base/.venv/bin/kbindexd [--pairs 2]
        [--keep DIR]
    .venv/bin/python bench/index_ab.py TREE --old OLD/kbindexd --backend postgres [--dsn URL]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import tempfile
import threading
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import anyio
import common
import pgcluster
from kbindex.daemon.engine import disk_bytes, sqlite
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


def _owner_made(exe: Path) -> bool:
    """Whether this build's daemons need the schema made by its owner first (``kbindexd
    db migrate``, schema 4 on): builds before make their own tables."""
    probe = "import kbindex.daemon.backends.postgres.migrate"
    run = subprocess.run([exe.parent / "python", "-c", probe], capture_output=True, check=False)
    return run.returncode == 0


def one_run(
    tree: Path,
    work: Path,
    exe: Path,
    name: str,
    every: float,
    dbs: pgcluster.Databases | None,
    keep: Path | None = None,
) -> dict[str, Any]:
    load_before = load()
    dsn = dbs.fresh(migrate=_owner_made(exe)) if dbs is not None else ""
    backend = ("--backend", "postgres", "--dsn", dsn, "--machine", "bench") if dsn else ()
    postmaster = dbs.postmaster_pid() if dbs is not None else None
    server_cpu = pgcluster.server_cpu_seconds(postmaster) if postmaster else 0.0
    d = common.start_daemon(tree, work, *OPTIONS, *backend, exe=exe, name=name)
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
            "index_bytes": (
                round(pgcluster.relation_mb(dsn) * 1e6)
                if dsn
                else sum(disk_bytes(d.state / "index.sqlite3"))
            ),
            "free_bytes": 0 if dsn else free_bytes(d.state / "index.sqlite3"),
            "server_cpu_s": (
                round(pgcluster.server_cpu_seconds(postmaster) - server_cpu, 1)
                if postmaster
                else None
            ),
            "load_before_after": [load_before, load()],
            "rss_timeline": [(round(t, 1), round(r)) for t, r in samples[::step]],
        }
    finally:
        done.set()
        common.stop_daemon(d)
        if keep is not None:
            shutil.rmtree(keep, ignore_errors=True)
            keep.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(d.state, keep)
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
    p.add_argument("--backend", choices=("sqlite", "postgres"), default="sqlite")
    p.add_argument("--dsn", help="with --backend postgres: a database the benchmark may empty")
    p.add_argument("--keep", type=Path, help="keep each build's last state in this folder")
    args = p.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="kb-index-ab-"))
    (work / "config").mkdir(parents=True, exist_ok=True)
    order = [("old", args.old), ("new", args.new)] if args.old else [("new", args.new)]
    runs = []
    with ExitStack() as stack:
        dbs = None
        if args.backend == "postgres":
            dbs = stack.enter_context(pgcluster.databases(args.dsn))
        for pair in range(args.pairs):
            for name, exe in order:
                last = args.keep is not None and dbs is None and pair == args.pairs - 1
                keep = args.keep / f"state-{name}" if last and args.keep else None
                r = one_run(args.tree, work, exe, name, args.sample, dbs, keep)
                runs.append(r)
                server = f", server CPU {r['server_cpu_s']} s" if r["server_cpu_s"] else ""
                print(
                    f"{name}: wall {r['wall_s']} s, CPU {r['cpu_s']} s{server},"
                    f" peak RSS {r['peak_rss_mb']} MB (at {r['peak_sampled_at_s']} s),"
                    f" RSS at end {r['rss_end_mb']} MB, {r['indexed_files']} files,"
                    f" index {r['index_bytes'] / 1e6:.0f} MB"
                    f" ({r['free_bytes'] / 1e6:.0f} MB free pages),"
                    f" load {r['load_before_after']}",
                    flush=True,
                )
    common.write_results({"tree": str(args.tree), "runs": runs}, args.json, work / "index_ab.json")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
