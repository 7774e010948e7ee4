"""Writable notes through MCP: write-to-searchable latency, and writes per second with 20
clients writing at once while searches run.

A kbindexd over a writable root holding a small corpus (``--files`` notes), reached by
kbindex-mcp processes over stdio, spoken to with raw JSON-RPC (no client library in the
measurement, as in mcp_startup.py):

* latency: ``--writes`` times, write_note of a new note holding a word no other note
  has, then at once a search for that word, which must find it (the write returns
  indexed). Percentiles of the write, of the search after it, and of both together;
  the same sequence straight to the daemon's socket shows the front end's share.
* throughput: ``--clients`` front ends each writing ``--per-client`` new notes as fast
  as they are answered, while one more runs searches back to back. Writes per second
  over the wall time, latency of both under that load, errors, and every note found
  afterwards.

Load averages (1/5/15 min) are recorded before and after: the machine is shared.

    .venv/bin/python bench/notes_bench.py [--writes 200] [--clients 20] [--per-client 25]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import common
from anyio.abc import Process
from anyio.streams.buffered import BufferedByteReceiveStream
from kbindex.proto.client import Client
from kbindex.proto.messages import NoteReply, WriteNote

FRONT_END = str(Path(sys.executable).with_name("kbindex-mcp"))
TARGET_WRITE_P50_MS = 50.0
WORDS = str.split(
    "scheduler queue task worker lease retry backoff index token snippet ranking "
    "journal ledger archive ocelot harbor lantern meadow quartz saffron tundra"
)


def make_corpus(root: Path, files: int) -> None:
    rng = random.Random(11)
    for n in range(files):
        body = "\n".join(
            " ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 16))) for _ in range(20)
        )
        path = root / f"dir{n % 20:02}" / f"note{n:04}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"# Note {n}\n\n{body}\n", encoding="utf-8")


def note_text(marker: str, rng: random.Random) -> str:
    """About a kilobyte: a heading, lines of common words, the marker in the middle."""
    lines = [" ".join(rng.choice(WORDS) for _ in range(12)) for _ in range(12)]
    lines.insert(6, f"remember {marker} for later")
    return "# Written by the benchmark\n\n" + "\n".join(lines) + "\n"


class Peer:
    """One kbindex-mcp over stdio, newline-delimited JSON-RPC."""

    def __init__(self, proc: Process) -> None:
        self.proc = proc
        assert proc.stdout is not None
        self._lines = BufferedByteReceiveStream(proc.stdout)
        self._ids = itertools.count(1)

    @classmethod
    async def open(cls, socket: Path) -> Peer:
        command = [FRONT_END, "--socket", str(socket)]
        proc = await anyio.open_process(command, env=common.environment(), stderr=None)
        peer = cls(proc)
        await peer.request(
            "initialize",
            {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "notes_bench", "version": "1"},
            },
        )
        await peer._send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return peer

    async def _send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        await self.proc.stdin.send(json.dumps(message).encode() + b"\n")

    async def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        rid = next(self._ids)
        await self._send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        while True:
            reply: dict[str, Any] = json.loads(await self._lines.receive_until(b"\n", 1 << 24))
            if reply.get("id") == rid:
                if "error" in reply:
                    raise RuntimeError(f"{method} failed: {reply['error']}")
                result: dict[str, Any] = reply["result"]
                return result

    async def call(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        result = await self.request("tools/call", {"name": tool, "arguments": arguments})
        if result.get("isError"):
            raise RuntimeError(f"{tool}: {result['content'][0]['text']}")
        structured: dict[str, Any] = result["structuredContent"]
        return structured

    async def close(self) -> None:
        assert self.proc.stdin is not None
        await self.proc.stdin.aclose()
        with anyio.move_on_after(10):
            await self.proc.wait()
        if self.proc.returncode is None:
            self.proc.kill()
            await self.proc.wait()


def figures(seconds: list[float]) -> dict[str, float]:
    return {
        "p50_ms": round(common.percentile(seconds, 0.5) * 1000, 2),
        "p99_ms": round(common.percentile(seconds, 0.99) * 1000, 2),
        "max_ms": round(max(seconds) * 1000, 2),
    }


async def latency(socket: Path, writes: int) -> dict[str, Any]:
    rng = random.Random(5)
    peer = await Peer.open(socket)
    write_s: list[float] = []
    search_s: list[float] = []
    try:
        for i in range(20):  # warm-up: connection, caches; not measured
            await peer.call("write_note", {"path": f"warm/w{i}.md", "content": "warm\n"})
            await peer.call("search", {"query": "warm"})
        for i in range(writes):
            marker = f"zqlat{i:04}x"
            started = time.perf_counter()
            await peer.call(
                "write_note", {"path": f"lat/n{i:04}.md", "content": note_text(marker, rng)}
            )
            written = time.perf_counter()
            found = await peer.call("search", {"query": marker, "limit": 1})
            done = time.perf_counter()
            if found["returned"] != 1:
                raise SystemExit(f"write {i}: the search right after it found nothing")
            write_s.append(written - started)
            search_s.append(done - written)
    finally:
        await peer.close()
    # The same sequence straight to the daemon: what the front end adds.
    direct: list[float] = []
    async with Client.connect(socket) as client:
        for i in range(writes):
            content = note_text(f"zqdir{i:04}x", rng)
            started = time.perf_counter()
            await client.request(WriteNote(path=f"direct/n{i:04}.md", content=content), NoteReply)
            direct.append(time.perf_counter() - started)
    total = [w + s for w, s in zip(write_s, search_s, strict=True)]
    return {
        "writes": writes,
        "write_note": figures(write_s),
        "search_after": figures(search_s),
        "write_then_found": figures(total),
        "write_direct": figures(direct),
    }


async def throughput(socket: Path, clients: int, per_client: int) -> dict[str, Any]:
    peers = [await Peer.open(socket) for _ in range(clients + 1)]
    searcher, writers = peers[0], peers[1:]
    write_s: list[float] = []
    search_s: list[float] = []
    errors: list[str] = []
    writing = clients

    async def write_all(n: int, peer: Peer) -> None:
        nonlocal writing
        rng = random.Random(n)
        try:
            for i in range(per_client):
                args = {"path": f"c{n:02}/n{i:03}.md", "content": note_text(f"zqc{n}n{i}x", rng)}
                started = time.perf_counter()
                try:
                    await peer.call("write_note", args)
                except RuntimeError as exc:
                    errors.append(str(exc))
                    continue
                write_s.append(time.perf_counter() - started)
        finally:
            writing -= 1

    async def search_meanwhile() -> None:
        rng = random.Random(9)
        while writing:
            query = " ".join(rng.sample(WORDS, 2))
            started = time.perf_counter()
            await searcher.call("search", {"query": query})
            search_s.append(time.perf_counter() - started)

    try:
        started = time.perf_counter()
        async with anyio.create_task_group() as tg:
            tg.start_soon(search_meanwhile)
            for n, peer in enumerate(writers):
                tg.start_soon(write_all, n, peer)
        wall = time.perf_counter() - started
        missing = 0
        for n in range(clients):
            for i in range(per_client):
                found = await searcher.call("search", {"query": f"zqc{n}n{i}x", "limit": 1})
                missing += found["returned"] != 1
    finally:
        for peer in peers:
            await peer.close()
    return {
        "clients": clients,
        "writes": len(write_s),
        "errors": len(errors),
        "first_errors": errors[:3],
        "seconds": round(wall, 2),
        "writes_per_second": round(len(write_s) / wall, 1),
        "write_note": figures(write_s),
        "searches": len(search_s),
        "search_meanwhile": figures(search_s),
        "not_found_after": missing,
    }


async def run(args: argparse.Namespace, socket: Path, daemon: common.Daemon) -> dict[str, Any]:
    await common.wait_serving(daemon, 60.0)
    async with Client.connect(socket) as client:
        await common.wait_scan(client, 120.0, poll=0.05)
    return {
        "latency": await latency(socket, args.writes),
        "throughput": await throughput(socket, args.clients, args.per_client),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=2000, help="notes in the root at start")
    parser.add_argument("--writes", type=int, default=200, help="writes timed one by one")
    parser.add_argument("--clients", type=int, default=20, help="front ends writing at once")
    parser.add_argument("--per-client", type=int, default=25, help="notes each writes")
    parser.add_argument("--json", type=Path, help="results file (default bench/out/...)")
    args = parser.parse_args()

    base = Path(tempfile.mkdtemp(prefix="kbnotes-", dir="/tmp"))
    load_before = os.getloadavg()
    try:
        root = base / "notes"
        make_corpus(root, args.files)
        config = base / "config.toml"
        config.write_text(f'[root."{root}"]\nwritable = true\n')
        with common.running_daemon(root, base, "--config", str(config)) as daemon:
            results = anyio.run(run, args, daemon.sock, daemon)
            results["daemon_peak_rss_mb"] = round(common.peak_rss_mb(daemon.proc.pid), 1)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    load_after = os.getloadavg()
    results.update(
        corpus_files=args.files,
        load_before=[round(x, 2) for x in load_before],
        load_after=[round(x, 2) for x in load_after],
        commit=common.git("rev-parse", "--short", "HEAD").strip(),
    )

    lat, thr = results["latency"], results["throughput"]
    print(f"latency over {lat['writes']} writes (corpus {args.files} notes), ms")
    print(f"{'':<34}{'p50':>8}{'p99':>8}{'max':>8}")
    for label, key in (
        ("write_note through MCP", "write_note"),
        ("search right after (finds it)", "search_after"),
        ("write, then found", "write_then_found"),
        ("WriteNote straight to the daemon", "write_direct"),
    ):
        f = lat[key]
        print(f"{label:<34}{f['p50_ms']:>8.1f}{f['p99_ms']:>8.1f}{f['max_ms']:>8.1f}")
    print()
    print(
        f"{thr['clients']} clients writing at once, searches alongside: {thr['writes']} writes "
        f"in {thr['seconds']:.1f} s = {thr['writes_per_second']:.1f} writes/s, "
        f"{thr['errors']} errors, {thr['not_found_after']} not found afterwards"
    )
    for label, key in (("write_note", "write_note"), ("search meanwhile", "search_meanwhile")):
        f = thr[key]
        print(f"  {label:<18} p50 {f['p50_ms']:.1f} ms, p99 {f['p99_ms']:.1f} ms")
    print(f"  ({thr['searches']} searches)")
    print(f"load average before {results['load_before']}, after {results['load_after']}")
    common.write_results(results, args.json, common.REPO / "bench" / "out" / "notes_bench.json")
    ok = lat["write_note"]["p50_ms"] < TARGET_WRITE_P50_MS
    ok = ok and not thr["errors"] and not thr["not_found_after"]
    print(f"target: write_note p50 under {TARGET_WRITE_P50_MS:.0f} ms: {'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
