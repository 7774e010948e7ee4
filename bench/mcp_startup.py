"""kbindex-mcp against a minimal MCP SDK server: startup time, memory, search latency.

Side by side in one run, alternating which goes first:

* ``minimal``: an MCPServer with one trivial tool, written to a temp file here: the
  floor any Python MCP server on this SDK pays.
* ``kbindex-mcp``: the front end, its first call being a real ``search`` (which includes
  opening the connection to kbindexd).

For each: wall time from spawn to the result of the first tools/call (initialize,
initialized, tools/call, over stdio, as a client does it) and peak RSS (VmHWM from /proc
just before shutdown); medians over --runs. Then, with one kbindex-mcp running,
the round-trip time of ``search`` calls through it (p50/p99), next to the same search
sent to the daemon directly, so the front end's own share is visible.

The daemon runs over a small generated corpus in a temp dir; nothing else is touched.

    .venv/bin/python bench/mcp_startup.py [--runs 15] [--calls 500]
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

import anyio
import common
from kbindex.proto.client import Client

BIN = Path(sys.executable).parent
FRONT_END = str(BIN / "kbindex-mcp")
TARGET_STARTUP = 1.15
TARGET_P50_MS = 15.0

MINIMAL_SERVER = textwrap.dedent(
    """
    from mcp.server import MCPServer

    server = MCPServer("minimal")


    @server.tool()
    def echo(text: str) -> str:
        \"\"\"Return the text.\"\"\"
        return text


    if __name__ == "__main__":
        server.run()
    """
)

WORDS = str.split(
    "scheduler queue task worker lease retry backoff index token snippet ranking "
    "journal ledger archive ocelot harbor lantern meadow quartz saffron tundra"
)


def make_corpus(root: Path, files: int = 400) -> None:
    """Not corpus.py's corpus: short notes over WORDS only, so every query finds something
    and the search stays small next to the front end's own share."""
    rng = random.Random(7)
    for n in range(files):
        body = "\n".join(
            " ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 16))) for _ in range(30)
        )
        path = root / f"dir{n % 20:02}" / f"note{n:04}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"# Note {n}\n\n{body}\n", encoding="utf-8")


async def wait_daemon(d: common.Daemon) -> None:
    await common.wait_serving(d, 30.0)
    async with Client.connect(d.sock) as client:
        await common.wait_scan(client, 30.0, poll=0.05)


# ------------------------------------------------------------------ a raw stdio client


class StdioPeer:
    """Newline-delimited JSON-RPC over a child's stdin/stdout: no client library in the
    measurement, so both servers are timed exactly alike."""

    def __init__(self, command: list[str]) -> None:
        self.started = time.perf_counter()
        self.proc = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=common.environment(),
        )
        self._ids = itertools.count(1)

    def send(self, method: str, params: dict[str, Any], *, notify: bool = False) -> int:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params}
        rid = 0
        if not notify:
            rid = next(self._ids)
            message["id"] = rid
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()
        return rid

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        rid = self.send(method, params)
        assert self.proc.stdout is not None
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError(f"server exited during {method}")
            reply: dict[str, Any] = json.loads(line)
            if reply.get("id") == rid:
                if "error" in reply:
                    raise RuntimeError(f"{method} failed: {reply['error']}")
                result: dict[str, Any] = reply["result"]
                return result

    def initialize(self) -> None:
        self.request(
            "initialize",
            {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "mcp_startup", "version": "1"},
            },
        )
        self.send("notifications/initialized", {}, notify=True)

    def call(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        result = self.request("tools/call", {"name": tool, "arguments": arguments})
        if result.get("isError"):
            raise RuntimeError(f"{tool} failed: {result['content']}")
        return result

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()


def first_call(command: list[str], tool: str, arguments: dict[str, Any]) -> tuple[float, float]:
    """(seconds from spawn to the first tools/call result, peak RSS in MB)."""
    peer = StdioPeer(command)
    try:
        peer.initialize()
        peer.call(tool, arguments)
        elapsed = time.perf_counter() - peer.started
        return elapsed, common.peak_rss_mb(peer.proc.pid)
    finally:
        peer.close()


async def direct_round_trips(socket: Path, queries: list[str]) -> list[float]:
    times: list[float] = []
    async with Client.connect(socket) as client:
        for query in queries:
            started = time.perf_counter()
            await client.search(query, limit=10)
            times.append(time.perf_counter() - started)
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=15, help="startups of each server")
    parser.add_argument("--calls", type=int, default=500, help="search calls for latency")
    args = parser.parse_args()

    base = Path(tempfile.mkdtemp(prefix="kbmcp-", dir="/tmp"))
    daemon: common.Daemon | None = None
    try:
        root = base / "root"
        make_corpus(root)
        minimal = base / "minimal_server.py"
        minimal.write_text(MINIMAL_SERVER)
        daemon = common.start_daemon(root, base)
        socket = daemon.sock
        anyio.run(wait_daemon, daemon)

        servers = {
            "minimal SDK server": ([sys.executable, str(minimal)], "echo", {"text": "hi"}),
            "kbindex-mcp": ([FRONT_END, "--socket", str(socket)], "search", {"query": "ocelot"}),
        }
        samples: dict[str, list[tuple[float, float]]] = {name: [] for name in servers}
        for spec in servers.values():  # warm the OS caches, not measured
            first_call(*spec)
        for run in range(args.runs):
            order = list(servers) if run % 2 == 0 else list(reversed(servers))
            for name in order:
                samples[name].append(first_call(*servers[name]))

        rng = random.Random(3)
        queries = [" ".join(rng.sample(WORDS, rng.randint(1, 3))) for _ in range(args.calls)]
        peer = StdioPeer([FRONT_END, "--socket", str(socket)])
        try:
            peer.initialize()
            for query in queries[:20]:
                peer.call("search", {"query": query})
            through: list[float] = []
            for query in queries:
                started = time.perf_counter()
                peer.call("search", {"query": query, "limit": 10})
                through.append(time.perf_counter() - started)
        finally:
            peer.close()
        direct = anyio.run(direct_round_trips, socket, queries)
    finally:
        if daemon is not None:
            common.stop_daemon(daemon)
        shutil.rmtree(base, ignore_errors=True)

    print(f"startup: spawn -> first tools/call result, medians of {args.runs} runs")
    print(f"{'server':<22}{'first call (ms)':>17}{'min (ms)':>10}{'peak RSS (MB)':>15}")
    medians: dict[str, tuple[float, float]] = {}
    for name, runs in samples.items():
        seconds = statistics.median(s for s, _ in runs)
        rss = statistics.median(r for _, r in runs)
        medians[name] = (seconds, rss)
        print(
            f"{name:<22}{seconds * 1000:>17.0f}{min(s for s, _ in runs) * 1000:>10.0f}{rss:>15.1f}"
        )
    (base_s, base_rss), (ours_s, ours_rss) = medians.values()
    print(
        f"kbindex-mcp / minimal: time x{ours_s / base_s:.2f}, RSS x{ours_rss / base_rss:.2f}"
        f" (target: within x{TARGET_STARTUP:.2f})"
    )
    print()
    print(f"search round trip, {args.calls} calls (limit 10, 400-file corpus)")
    print(f"{'path':<36}{'p50 (ms)':>10}{'p99 (ms)':>10}")
    for label, times in (
        ("MCP client -> kbindex-mcp -> daemon", through),
        ("client -> daemon", direct),
    ):
        p50_ms, p99_ms = common.percentile(times, 0.5) * 1000, common.percentile(times, 0.99) * 1000
        print(f"{label:<36}{p50_ms:>10.2f}{p99_ms:>10.2f}")
    p50 = common.percentile(through, 0.5) * 1000
    print(f"(target: p50 under {TARGET_P50_MS:.0f} ms through the front end: {p50:.2f} ms)")
    ok = ours_s <= base_s * TARGET_STARTUP and ours_rss <= base_rss * TARGET_STARTUP
    return 0 if ok and p50 < TARGET_P50_MS else 1


if __name__ == "__main__":
    sys.exit(main())
