"""The daemon's memory with search by meaning: idle before the model, peak while it
embeds, idle once everything is embedded; and the same tree with ``--semantic off``.

Starts kbindexd on TREE (only read; every text file; state under the work folder),
samples its resident set (/proc VmRSS) every half second and reads its peak (VmHWM)
at each stage:

- ``off``: a daemon with ``--semantic off``, idle after its first scan (then stopped);
- ``scanned``: a daemon with ``--semantic auto`` right after its first scan, before the
  model loads (it loads after the scan);
- ``embedding``: the highest RSS sampled while it embeds, and VmHWM when it is done;
- ``idle``: RSS ``--settle`` seconds after everything is embedded, after 50 searches
  by meaning (the query's model run and the matrix product leave their buffers).

    .venv/bin/python bench/meaning_memory.py TREE [--work DIR] [--include-ext '*'] [--json OUT]

``--work DIR`` keeps the state: a second run embeds nothing (the vectors are in the
file), which measures a restart.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import common
from kbindex.proto.client import Client

QUERIES = (
    "how to restore a backup archive",
    "parse command line options",
    "license terms for redistribution",
    "what changed in this release",
    "feeding the cats",
)


async def _idle_off(tree: Path, work: Path, settle: float, *options: str) -> dict[str, float]:
    with common.running_daemon(tree, work, *options, "--semantic", "off", name="off") as d:
        await common.wait_serving(d)
        async with Client.connect(d.sock, client_name="meaning_memory") as c:
            await common.wait_scan(c, 3600, poll=0.2)
        await anyio.sleep(settle)
        return {"rss_mb": common.rss_mb(d.proc.pid), "peak_mb": common.peak_rss_mb(d.proc.pid)}


async def _with_meaning(
    tree: Path, work: Path, settle: float, timeout: float, *options: str
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    with common.running_daemon(tree, work, *options, "--semantic", "auto") as d:
        await common.wait_serving(d)
        pid = d.proc.pid
        async with Client.connect(d.sock, client_name="meaning_memory") as c:
            await common.wait_scan(c, 3600, poll=0.1)
            out["scanned"] = {"rss_mb": common.rss_mb(pid), "peak_mb": common.peak_rss_mb(pid)}
            began = time.monotonic()
            highest = 0.0
            while True:
                highest = max(highest, common.rss_mb(pid))
                s = (await c.status()).semantic
                if s is None or s.state == "unavailable":
                    raise SystemExit(f"search by meaning is unavailable: {s}")
                if s.state == "ready" and not s.backlog and s.files:
                    break
                if time.monotonic() - began > timeout:
                    raise SystemExit(f"embedding not done after {timeout:.0f} s")
                await anyio.sleep(0.5)
            out["embedding"] = {
                "seconds": round(time.monotonic() - began, 1),
                "files": s.files,
                "passages": s.passages,
                "embedded_now": s.embedded,
                "highest_sampled_mb": round(highest, 1),
                "peak_mb": common.peak_rss_mb(pid),
                "vectors_mb": s.size_mb,
            }
            for _ in range(10):
                for q in QUERIES:
                    await c.search(q, limit=10, mode="hybrid")
        await anyio.sleep(settle)
        out["idle"] = {"rss_mb": common.rss_mb(pid), "peak_mb": common.peak_rss_mb(pid)}
    return out


async def measure(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    out: dict[str, Any] = {"tree": str(args.tree), "commit": common.git("rev-parse", "HEAD")[:12]}
    out["load_before"] = os.getloadavg()
    options = ("--include-ext", args.include_ext)
    out["off"] = await _idle_off(args.tree, work, args.settle, *options)
    out |= await _with_meaning(args.tree, work, args.settle, args.timeout, *options)
    out["load_after"] = os.getloadavg()
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("tree", type=lambda d: Path(d).resolve())
    p.add_argument("--work", type=Path, help="work folder to keep and reuse")
    p.add_argument("--settle", type=float, default=20.0, help="seconds idle before a reading")
    p.add_argument("--timeout", type=float, default=7200.0, help="seconds for embedding")
    p.add_argument("--include-ext", default="*", help="the daemon's --include-ext (default *)")
    p.add_argument("--json", type=Path, help="also write the results here")
    args = p.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="kbmem-", dir="/tmp"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        out = anyio.run(measure, args, work)
    finally:
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)
    text = json.dumps(out, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
