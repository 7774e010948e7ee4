"""Greps of two kbindexd builds on the same kept index, alternated, against rg.

``grep_bench.py --against`` alternates two builds' full index, but times the greps of
this checkout only; a grep change needs both builds' greps in the same minutes (the
2-core VM drifts with other sessions' load). This copies a kept state dir (from
``grep_bench.py --keep``) twice, starts the old build on one copy and this checkout's
on the other, and per pattern runs rounds of: old grep, new grep, ``rg -uu -n`` whole
process (output read through a pipe), in an order that rotates every round. The
figures are p50s, new over old and rg over each, with the load average before and
after each pattern; the totals of both builds are checked against the lines rg prints
over the indexed files. ``--old-state`` gives the old build a kept state of its own (a
build refuses or rebuilds an index of another schema).

    .venv/bin/python bench/grep_ab.py /tmp/bench/corpus --state KEPT/state-new \\
        --against /tmp/grep-old/.venv/bin/kbindexd [--none '.' ...] [--rounds 7]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import anyio
import common
from grep_bench import (
    DAEMON_OPTIONS,
    KINDS,
    NO_TRIGRAM,
    TWO_CHARS,
    Case,
    _wait_indexed,
    excluded_globs,
    indexed_files,
    load,
    rg_whole,
    timed_grep,
)
from kbindex.proto.blocking import BlockingClient

HERE = Path(__file__).resolve().parent


def cases_of(args: argparse.Namespace) -> list[Case]:
    given = [
        Case(
            kind, p, fixed=kind == "literal", word=kind == "identifier", ignore_case=kind == "icase"
        )
        for kind in KINDS
        for p in getattr(args, kind) or []
    ]
    return given or [*(Case("none", p) for p in NO_TRIGRAM), Case("none", TWO_CHARS, fixed=True)]


def measure(
    clients: dict[str, BlockingClient], tree: Path, case: Case, globs: list[str], rounds: int
) -> dict[str, Any]:
    rg = ["rg", "-uu", "-n", *case.flags(), "--", case.pattern, "."]
    same = ["rg", "-uu", "-n", *case.flags(), *globs, "--", case.pattern, "."]
    totals = {name: timed_grep(c, case)[1].total for name, c in clients.items()}  # warm-up
    expected = rg_whole(same, tree)[2]
    out: dict[str, Any] = {"load_before": load()}
    times: dict[str, list[float]] = {"old": [], "new": [], "rg": []}
    order = ["old", "new", "rg"]
    for r in range(rounds):
        for who in order[r % 3 :] + order[: r % 3]:
            if who == "rg":
                times[who].append(rg_whole(rg, tree)[0])
            else:
                seconds, reply = timed_grep(clients[who], case)
                times[who].append(seconds)
                totals[who] = reply.total
    out["load_after"] = load()
    out["p50_ms"] = {k: round(statistics.median(v) * 1e3, 1) for k, v in times.items()}
    out["totals"] = {**totals, "rg_same_files": expected}
    return out


def row(case: Case, m: dict[str, Any]) -> str:
    p = m["p50_ms"]
    same = len(set(m["totals"].values())) == 1
    return (
        f"| {case.label()} | {p['old']:.0f} ms | {p['new']:.0f} ms | {p['old'] / p['new']:.2f}x"
        f" | {p['rg']:.0f} ms | {p['rg'] / p['old']:.2f}x -> {p['rg'] / p['new']:.2f}x"
        f" | {m['totals']['new']}{'' if same else ' MISMATCH ' + str(m['totals'])}"
        f" | {m['load_before'].split('/')[0]} -> {m['load_after'].split('/')[0]} |"
    )


def run_cases(
    clients: dict[str, BlockingClient],
    tree: Path,
    globs: list[str],
    args: argparse.Namespace,
    results: dict[str, Any],
) -> list[str]:
    lines = [
        "| pattern | old p50 | new p50 | old / new | rg -uu p50 | x rg: old -> new"
        " | total | load |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    results["cases"] = []
    for case in cases_of(args):
        m = measure(clients, tree, case, globs, args.rounds)
        results["cases"].append({"case": case.label(), **m})
        lines.append(row(case, m))
        print(lines[-1], flush=True)
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("tree", type=Path, help="the indexed tree (only read)")
    p.add_argument("--state", type=Path, required=True, help="a kept state dir to copy")
    p.add_argument("--old-state", type=Path, help="the old build's kept state (default --state)")
    p.add_argument("--against", type=Path, required=True, help="the old build's kbindexd")
    for kind in KINDS:
        p.add_argument(f"--{kind}", action="append", help=f"a {kind} pattern (repeat)")
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--json", type=Path, help="results file (default bench/out/...json)")
    args = p.parse_args(argv)
    tree = args.tree.resolve()
    work = Path(tempfile.mkdtemp(prefix="kbindex-grep-ab-", dir="/tmp"))
    results: dict[str, Any] = {"argv": sys.argv, "tree": str(tree), "load_before": load()}
    daemons: dict[str, common.Daemon] = {}
    try:
        for name, exe in (("old", args.against), ("new", common.KBINDEXD)):
            kept = args.old_state if name == "old" and args.old_state else args.state
            shutil.copytree(kept, work / f"state-{name}")
            daemons[name] = common.start_daemon(tree, work, *DAEMON_OPTIONS, exe=exe, name=name)
        for d in daemons.values():
            anyio.run(_wait_indexed, d, 3600.0)
        paths, _ = indexed_files(daemons["new"].state / "index.sqlite3")
        globs, _ = excluded_globs(tree, paths)
        with ExitStack() as stack:
            clients = {
                n: stack.enter_context(BlockingClient.connect(d.sock, client_name="grep_ab"))
                for n, d in daemons.items()
            }
            lines = run_cases(clients, tree, globs, args, results)
    finally:
        for d in daemons.values():
            common.stop_daemon(d)
        shutil.rmtree(work, ignore_errors=True)
    results["load_after"] = load()
    print("\n".join(lines))
    print(f"load average 1/5/15 min: {results['load_before']} -> {results['load_after']}")
    stamp = time.strftime("%Y%m%d-%H%M%S")
    common.write_results(results, args.json, HERE / "out" / f"grep_ab-{tree.name}-{stamp}.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
