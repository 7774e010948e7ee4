"""kbctl's start-up: a whole ``kbctl search WORD`` process against the interpreter's floor.

A CLI started once per query pays the interpreter's start and its own imports every
time, and on a warm index that is nearly all of its time. Side by side, interleaved
run by run (so load hits every command alike), wall time from spawn to exit:

* ``python -c pass``: the floor, with site (a venv's .pth files) as kbctl gets it;
* ``python -S -c pass``: the interpreter alone;
* ``import kbindex.ctl.main``: kbctl's imports, no request;
* ``kbctl search RARE``: the console script, a rare word (a few matches) per run;
* ``kbctl search COMMON``: the same with a word in nearly every file (the search itself).

kbindexd runs over bench/corpus.py's corpus (reused when it exists) with its own state
dir and socket in a temp dir, and is stopped at the end. Prints p50 and p90 per command.

    .venv/bin/python bench/cli_startup.py [--files 20000 --mb 200] [--runs 40]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
import common
import corpus
from kbindex.proto.client import Client

KBCTL = str(Path(sys.executable).with_name("kbctl"))


def wall_ms(command: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return (time.perf_counter() - started) * 1000


async def indexed(d: common.Daemon) -> int:
    await common.wait_serving(d)
    async with Client.connect(d.sock) as c:
        st = await common.wait_scan(c, within=600)
    return st.indexed_files


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--files", type=int, default=corpus.DEFAULT_FILES)
    p.add_argument("--mb", type=float, default=corpus.DEFAULT_MB)
    p.add_argument("--seed", type=int, default=corpus.DEFAULT_SEED)
    p.add_argument("--corpus", type=Path, help="an existing corpus.py directory")
    p.add_argument("--runs", type=int, default=40)
    args = p.parse_args()
    root = args.corpus or corpus.default_out(args.files, args.mb, args.seed)
    manifest = corpus.build(root, args.files, args.mb, args.seed)
    rare, common_words = manifest["queries"]["rare"], manifest["queries"]["common"]
    with tempfile.TemporaryDirectory(prefix="kb-cli-") as tmp:
        work = Path(tmp)
        (work / "config").mkdir()
        with common.running_daemon(root, work) as d:
            files = anyio.run(indexed, d)
            kbctl = [KBCTL, "--socket", str(d.sock), "search"]
            commands = {
                "python -c pass": lambda i: [sys.executable, "-c", "pass"],
                "python -S -c pass": lambda i: [sys.executable, "-S", "-c", "pass"],
                "import kbindex.ctl.main": lambda i: [
                    sys.executable,
                    "-c",
                    "import kbindex.ctl.main",
                ],
                "kbctl search RARE": lambda i: [*kbctl, rare[i % len(rare)]],
                "kbctl search COMMON": lambda i: [*kbctl, common_words[i % 20]],
            }
            times: dict[str, list[float]] = {name: [] for name in commands}
            load = os.getloadavg()
            for i in range(-3, args.runs):  # three warm-up rounds, not kept
                for name, command in commands.items():
                    ms = wall_ms(command(i))
                    if i >= 0:
                        times[name].append(ms)
    print(f"corpus {root}: {files:,} files indexed; {args.runs} runs each, interleaved")
    print(f"load average before: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    floor = common.percentile(times["python -c pass"], 0.5)
    print(f"{'command':<26}{'p50 ms':>9}{'p90 ms':>9}{'p50 - floor':>13}")
    for name, values in times.items():
        p50, p90 = common.percentile(values, 0.5), common.percentile(values, 0.9)
        print(f"{name:<26}{p50:>9.1f}{p90:>9.1f}{p50 - floor:>13.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
