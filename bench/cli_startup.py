"""kbctl's start-up: a whole ``kbctl search WORD`` process against the interpreter's floor.

A CLI started once per query pays the interpreter's start and its own imports every
time, and on a warm index that is nearly all of its time. Side by side, interleaved
run by run (so load hits every command alike), wall time from spawn to exit and the
process's CPU time (user + system, less disturbed by other load than the wall):

* ``python -c pass``: the floor, with site (a venv's .pth files) as kbctl gets it;
* ``python -S -c pass``: the interpreter alone;
* ``import msgspec``: the protocol's library alone (typing, inspect, datetime, ...);
* ``import kbindex.ctl.main``: kbctl's imports, no request;
* ``kbctl search RARE``: the console script, a rare word (a few matches) per run;
* ``kbctl search COMMON``: the same with a word in nearly every file (the search itself).

With ``--against OTHER/.venv/bin/kbctl`` another build's console script runs the same
two searches in the same rounds, against the same daemon: old and new, paired.

kbctl's modules (kbindex.ctl, kbindex.proto) are byte-compiled first, in each build, as
pip does when it installs a wheel: an editable install run with PYTHONDONTWRITEBYTECODE
set (as on this project's VMs) would otherwise compile them again in every process.

kbindexd runs over bench/corpus.py's corpus (reused when it exists) with its own state
dir and socket in a temp dir, and is stopped at the end. Prints p50 and p90 per command.

    .venv/bin/python bench/cli_startup.py [--files 20000 --mb 200] [--runs 40]
        [--against OTHER/.venv/bin/kbctl]
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


def timed(command: list[str]) -> tuple[float, float]:
    """Wall and CPU milliseconds of one run of ``command``, from spawn to exit."""
    started = time.perf_counter()
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = (time.perf_counter() - started) * 1000
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{command} exited with {proc.returncode}")
    return wall, (usage.ru_utime + usage.ru_stime) * 1000


def byte_compile(kbctl: Path) -> None:
    """Byte-compile the kbindex.ctl and kbindex.proto that ``kbctl``'s interpreter imports."""
    python = str(kbctl.with_name("python"))
    where = "import kbindex.ctl as c, kbindex.proto as p; print(c.__path__[0], p.__path__[0])"
    dirs = subprocess.run([python, "-c", where], capture_output=True, text=True, check=True)
    subprocess.run([python, "-m", "compileall", "-q", *dirs.stdout.split()], check=True)


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
    p.add_argument("--against", type=Path, metavar="KBCTL", help="another build's kbctl")
    args = p.parse_args()
    for build in (Path(KBCTL), args.against):
        if build is not None:
            byte_compile(build)
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
                "import msgspec": lambda i: [sys.executable, "-c", "import msgspec"],
                "import kbindex.ctl.main": lambda i: [
                    sys.executable,
                    "-c",
                    "import kbindex.ctl.main",
                ],
                "kbctl search RARE": lambda i: [*kbctl, rare[i % len(rare)]],
                "kbctl search COMMON": lambda i: [*kbctl, common_words[i % 20]],
            }
            if args.against is not None:
                other = [str(args.against), "--socket", str(d.sock), "search"]
                commands["against: search RARE"] = lambda i: [*other, rare[i % len(rare)]]
                commands["against: search COMMON"] = lambda i: [*other, common_words[i % 20]]
            walls: dict[str, list[float]] = {name: [] for name in commands}
            cpus: dict[str, list[float]] = {name: [] for name in commands}
            load = os.getloadavg()
            for i in range(-3, args.runs):  # three warm-up rounds, not kept
                for name, command in commands.items():
                    wall, cpu = timed(command(i))
                    if i >= 0:
                        walls[name].append(wall)
                        cpus[name].append(cpu)
            after = os.getloadavg()
    print(f"corpus {root}: {files:,} files indexed; {args.runs} runs each, interleaved")
    if args.against is not None:
        print(f"against: {args.against}")
    print(f"load average before: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}, after: {after[0]:.2f}")
    floor = common.percentile(walls["python -c pass"], 0.5)
    print(f"{'command':<26}{'p50 ms':>9}{'p90 ms':>9}{'p50 - floor':>13}{'CPU p50 ms':>12}")
    for name, values in walls.items():
        p50, p90 = common.percentile(values, 0.5), common.percentile(values, 0.9)
        cpu = common.percentile(cpus[name], 0.5)
        print(f"{name:<26}{p50:>9.1f}{p90:>9.1f}{p50 - floor:>13.1f}{cpu:>12.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
