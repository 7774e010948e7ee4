"""No-change rescans (``kbctl reindex --wait``) by two kbindexd builds, alternated.

Starts each build on its own copy of a kept state directory (an index of ``TREE`` that
kbindexd already built, e.g. with ``tree_bench.py --keep`` or ``--build`` here), both at
once but idle (``--watch off``, no periodic scan), waits for each start-up scan in
turn, then sends ``refresh_wait(full=False)`` (what ``kbctl reindex --wait`` sends) to
one build, then the other, round by round (old, new, then new, old: the order flips so
neither always runs second). Each rescan's wall time through the client and the
daemon's CPU seconds around it (all threads, from /proc) are kept, with the load
averages of the round. Far quicker than ``tree_bench.py`` (no full index), so it suits
a loop of changes: the copies are kept in ``--work`` and reused by the next run.

    .venv/bin/python bench/rescan_ab.py /srv/kernel/linux-source-6.1 \\
        --state KEPT_STATE --old OTHER/.venv/bin/kbindexd [--rounds 10]
    .venv/bin/python bench/rescan_ab.py TREE --state NEW_DIR --build   # index TREE first

``--old-state`` gives the old build a kept state of its own (by default both start on
copies of ``--state``): a build refuses or rebuilds an index of another schema.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import time
from pathlib import Path
from typing import Any

import anyio
import common
from kbindex.proto.client import Client

OPTIONS = ("--include-ext", "*", "--watch", "off", "--scan-interval", "86400")


def load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


async def _wait_scanned(d: common.Daemon, within: float) -> float:
    await common.wait_serving(d)
    async with Client.connect(d.sock, client_name="rescan_ab") as c:
        await common.wait_scan(c, within, poll=0.05)
    return time.perf_counter() - d.started


async def _rescan(d: common.Daemon) -> tuple[float, float]:
    async with Client.connect(d.sock, client_name="rescan_ab") as c:
        cpu = common.cpu_seconds(d.proc.pid)
        t = time.perf_counter()
        async for _reply in c.refresh_wait(full=False):
            pass
        wall = time.perf_counter() - t
        return wall, common.cpu_seconds(d.proc.pid) - cpu


def build(tree: Path, state: Path, exe: Path) -> None:
    """Index ``tree`` from cold into ``state`` with ``exe``, then stop."""
    work = state.parent / f".{state.name}-build"
    work.mkdir(parents=True, exist_ok=True)
    d = common.start_daemon(tree, work, *OPTIONS, exe=exe)
    try:
        took = anyio.run(_wait_scanned, d, 3600.0)
    finally:
        common.stop_daemon(d)
    shutil.move(str(work / "state"), state)
    print(f"indexed {tree} into {state} in {took:.1f} s")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("tree", type=Path, help="the indexed tree (only read)")
    p.add_argument("--state", type=Path, required=True, help="a kept state dir of TREE")
    p.add_argument("--old-state", type=Path, help="the old build's kept state (default --state)")
    p.add_argument("--build", action="store_true", help="index TREE into --state first")
    p.add_argument("--old", type=Path, help="the other build's kbindexd (default: none)")
    p.add_argument("--new", type=Path, default=common.KBINDEXD, help="default: this venv's")
    p.add_argument("--rounds", type=int, default=10, help="rescans of each build")
    p.add_argument("--work", type=Path, default=Path("/tmp/kbindex-rescan-ab"))
    p.add_argument("--json", type=Path)
    args = p.parse_args()
    if args.build:
        build(args.tree.resolve(), args.state, args.new)
    builds = {"new": args.new} if args.old is None else {"old": args.old, "new": args.new}
    args.work.mkdir(parents=True, exist_ok=True)
    daemons: dict[str, common.Daemon] = {}
    out: dict[str, Any] = {"tree": str(args.tree), "commit": common.git("rev-parse", "HEAD")}
    try:
        for name, exe in builds.items():
            copy = args.work / f"state-{name}"
            if not copy.exists():  # a copy per build: they run at once
                kept = args.old_state if name == "old" and args.old_state else args.state
                shutil.copytree(kept, copy)
            daemons[name] = d = common.start_daemon(
                args.tree, args.work, *OPTIONS, exe=exe, name=name
            )
            out[f"{name}_command"] = d.command
            out[f"{name}_restart_to_idle_s"] = round(anyio.run(_wait_scanned, d, 600.0), 3)
        runs: dict[str, list[tuple[float, float]]] = {n: [] for n in builds}
        loads = []
        for r in range(args.rounds):
            order = list(builds) if r % 2 == 0 else list(reversed(builds))
            loads.append(load())
            for name in order:
                runs[name].append(anyio.run(_rescan, daemons[name]))
            line = "  ".join(
                f"{n} {runs[n][-1][0]:.3f} s (cpu {runs[n][-1][1]:.2f})" for n in order
            )
            print(f"round {r + 1}: {line}  load {loads[-1]}", flush=True)
        loads.append(load())
    finally:
        for d in daemons.values():
            common.stop_daemon(d)
    print()
    for name in builds:
        walls = [w for w, _ in runs[name]]
        cpus = [c for _, c in runs[name]]
        out[name] = {"wall_s": walls, "cpu_s": cpus}
        print(
            f"{name}: wall median {statistics.median(walls):.3f} s"
            f" (min {min(walls):.3f}, max {max(walls):.3f}),"
            f" CPU median {statistics.median(cpus):.2f} s"
        )
    if "old" in builds:
        wall_ratio = [n[0] / o[0] for o, n in zip(runs["old"], runs["new"], strict=True)]
        cpu_ratio = [n[1] / o[1] for o, n in zip(runs["old"], runs["new"], strict=True) if o[1]]
        out["wall_ratio_median"] = round(statistics.median(wall_ratio), 3)
        out["cpu_ratio_median"] = round(statistics.median(cpu_ratio), 3) if cpu_ratio else None
        print(
            f"new/old, round by round: wall median {out['wall_ratio_median']},"
            f" CPU median {out['cpu_ratio_median']}"
        )
    out["load"] = loads
    print(f"load (1/5/15 min) from {loads[0]} to {loads[-1]}")
    common.write_results(out, args.json, common.REPO / "bench" / "out" / "rescan_ab.json")


if __name__ == "__main__":
    main()
