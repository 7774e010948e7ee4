"""kbindex load benchmark: many protocol clients at once while files change underneath.

Generates a deterministic corpus under /tmp (half ``stable/``, never touched, half
``churn/``, which a writer changes), starts kbindexd on it (its own state dir and
socket, ``--scan-interval 3600`` so only the watcher keeps the index current) and waits
for the first scan. Then, for each pass (default: 200 clients, then 20 on the same
daemon), every client opens its own connection and sends ``--requests`` requests, one
after the other, drawn from a mix:

- search (50%): a word, two words, a natural-language question (ranked OR), a prefix
  (``sched*``), a "quoted phrase", an exclusion, ``any`` and ``raw`` modes, a path
  filter, and an exact token that only one stable file holds (the answer is checked);
- status (10%), ping (8%);
- read_file (20%): a stable file (must succeed and be that file) or an original churn
  file (``not_found`` is expected once the writer has deleted or renamed it);
- find_files (12%): one directory (for a stable one, the listing is checked).

Meanwhile a writer thread changes ``churn/`` at ``--change-rate`` changes/s: in-place
rewrites, appends, atomic replaces (write a temporary file, rename it over), creations,
renames and deletions. Every error reply and exception is recorded; an error counts as
expected only when it is a ``not_found`` for a churn file the writer removed before the
reply arrived; everything else (timeouts, lost connections, internal errors, wrong
answers) is unexpected. Measured per pass: requests/s, latency p50/p90/p99/max per op,
the daemon's RSS (every 0.5 s: peak and final), CPU seconds, open file descriptors and
threads before/after, and the clients' own CPU (they run in ``--procs`` processes). After
each pass the writer stops, the daemon settles, and the index is compared with the disk
(path, size and mtime of every file); a forced refresh then shows what the watcher had
missed (it should find nothing to change).

A benchmark, not a test: the default run takes a few minutes and never runs in CI.

    .venv/bin/python bench/load_bench.py --json /tmp/load.json      # 200 then 20 clients
    .venv/bin/python bench/load_bench.py --passes 50 --requests 100 --files 500  # quick
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing as mp
import os
import random
import resource
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from hashlib import sha1
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import common
from kbindex.proto.client import Client, ClientError, ConnectionLost, DaemonError
from kbindex.proto.messages import StatusReply

DIRS = 20
"""Directories under each of stable/ and churn/."""
TOPIC = str.split(
    "scheduler queue task worker lease retry backoff index token snippet ranking journal "
    "ledger archive harbor lantern meadow quartz saffron tundra kernel socket daemon buffer "
    "cache shard replica quorum snapshot compaction latency throughput watchdog inotify "
    "parser lexer grammar planner executor cursor vacuum checkpoint manifest"
)
FUNCTION = str.split("the of and to a in is that for it as with be by on not this are or from")
SYLLABLES = str.split("ka lo mi ne ru sa ti vo pe zu ba de fi go hu ja ke li mo nu")
SLOW_SECONDS = 2.0
"""Requests slower than this are listed (op, when sent, how long) in the JSON."""


# ------------------------------------------------------------------ corpus and vocabulary


def vocabulary(seed: int) -> tuple[list[str], list[float]]:
    """Topic words, function words and made-up words, with Zipf-like weights."""
    rng = random.Random(seed)
    made = sorted({"".join(rng.choices(SYLLABLES, k=rng.randint(2, 4))) for _ in range(3000)})
    rng.shuffle(made)
    words = FUNCTION + TOPIC + made
    weights = [1.0 / (rank + 8) for rank in range(len(words))]
    return words, weights


def paragraph(rng: random.Random, words: list[str], weights: list[float], n: int) -> str:
    chosen = rng.choices(words, weights, k=n)
    lines = [" ".join(chosen[i : i + 12]) for i in range(0, n, 12)]
    return "\n".join(lines)


def document(rng: random.Random, words: list[str], weights: list[float], title: str) -> str:
    parts = [f"# {title}\n"]
    for _ in range(rng.randint(2, 8)):
        parts.append(f"## {rng.choice(TOPIC)} {rng.choice(TOPIC)}\n")
        parts.append(paragraph(rng, words, weights, rng.randint(40, 130)) + "\n")
    return "\n".join(parts)


def stable_token(n: int) -> str:
    return f"stabletok{n:05d}x"


def build_corpus(root: Path, files: int, seed: int) -> tuple[list[str], list[str]]:
    """Write ``files`` files (half stable, half churn); return their relpaths.

    Not corpus.py's corpus: the checks rely on this layout (stable/ and churn/, DIRS
    directories each) and on a token only one stable file holds."""
    words, weights = vocabulary(seed)
    rng = random.Random(seed)
    stable, churn = [], []
    for n in range(files):
        kind = "stable" if n % 2 == 0 else "churn"
        ext = ".txt" if n % 5 == 4 else ".md"
        rel = f"{kind}/d{n // 2 % DIRS:02d}/f{n:05d}{ext}"
        body = document(rng, words, weights, f"Note {n} {rng.choice(TOPIC)}")
        if kind == "stable":
            body += f"\nunique marker {stable_token(n)}\n"
            stable.append(rel)
        else:
            churn.append(rel)
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(body, encoding="utf-8")
    return stable, churn


def disk_state(root: Path) -> dict[str, tuple[int, int]]:
    out = {}
    for path in root.rglob("*"):
        if path.suffix in (".md", ".txt") and path.is_file():
            st = path.stat()
            out[path.relative_to(root).as_posix()] = (st.st_size, st.st_mtime_ns)
    return out


# ------------------------------------------------------------------ the writer


@dataclass
class Writer:
    """Changes churn/ at ``rate`` changes per second in a thread of its own."""

    root: Path
    live: list[str]
    rate: float
    seed: int
    removed_at: dict[str, float] = field(default_factory=dict)
    """Relpath -> wall time it first stopped existing (deleted or renamed away)."""
    counts: Counter[str] = field(default_factory=Counter)
    errors: list[str] = field(default_factory=list)
    seconds: float = 0.0
    _stop: threading.Event = field(default_factory=threading.Event)
    _serial: int = 0

    def run(self) -> None:
        rng = random.Random(self.seed)
        words, weights = vocabulary(self.seed)
        started = time.monotonic()
        n = 0
        while not self._stop.is_set():
            n += 1
            try:
                self._change(rng, words, weights)
            except OSError as exc:
                self.errors.append(f"{type(exc).__name__}: {exc}")
            delay = started + n / self.rate - time.monotonic()
            if delay > 0:
                self._stop.wait(delay)
        self.seconds = time.monotonic() - started

    def stop(self) -> None:
        self._stop.set()

    def _new_name(self, rng: random.Random, prefix: str) -> str:
        self._serial += 1
        ext = rng.choice((".md", ".md", ".txt"))
        return f"churn/d{rng.randrange(DIRS):02d}/{prefix}{self.seed}-{self._serial:06d}{ext}"

    def _change(self, rng: random.Random, words: list[str], weights: list[float]) -> None:
        op = rng.choices(
            ("rewrite", "append", "replace", "create", "rename", "delete"),
            (30, 15, 15, 15, 10, 15),
        )[0]
        if op != "create" and len(self.live) < 10:
            op = "create"
        self.counts[op] += 1
        token = f"chg{self.seed}x{sum(self.counts.values()):06d}"
        if op == "create":
            rel = self._new_name(rng, "n")
            (self.root / rel).write_text(
                document(rng, words, weights, f"new {token}"), encoding="utf-8"
            )
            self.live.append(rel)
            return
        i = rng.randrange(len(self.live))
        rel = self.live[i]
        path = self.root / rel
        if op == "rewrite":
            path.write_text(document(rng, words, weights, f"rewritten {token}"), encoding="utf-8")
        elif op == "append":
            with path.open("a", encoding="utf-8") as fh:
                fh.write(f"\nappended {token} {paragraph(rng, words, weights, 30)}\n")
        elif op == "replace":
            tmp = path.with_name(path.name + ".tmp")
            tmp.write_text(document(rng, words, weights, f"replaced {token}"), encoding="utf-8")
            os.replace(tmp, path)
        elif op == "rename":
            new = self._new_name(rng, "r")
            self.removed_at.setdefault(rel, time.time())
            os.rename(path, self.root / new)
            self.live[i] = new
        else:  # delete
            self.removed_at.setdefault(rel, time.time())
            path.unlink()
            self.live[i] = self.live[-1]
            self.live.pop()


# ------------------------------------------------------------------ clients (worker processes)

OPS = ("search", "status", "ping", "read_file", "find_files")
OP_WEIGHTS = (50, 10, 8, 20, 12)
SEARCH_KINDS = (
    "word",
    "two_words",
    "natural",
    "prefix",
    "phrase",
    "exclude",
    "any",
    "raw",
    "path",
    "exact",
)


@dataclass(frozen=True)
class Material:
    sock: str
    seed: int
    requests: int
    timeout: float
    stable: list[str]
    churn: list[str]
    stable_per_dir: dict[str, int]


def search_args(rng: random.Random, kind: str, m: Material) -> tuple[str, dict[str, Any], str]:
    """(query, keyword arguments, expected relpath of the first hit or '')."""
    a, b, c = rng.sample(TOPIC, 3)
    if kind == "word":
        return a, {}, ""
    if kind == "two_words":
        return f"{a} {b}", {}, ""
    if kind == "natural":
        return (
            rng.choice(
                (
                    f"how does the {a} handle a {b} when the {c} fails",
                    f"what is the difference between {a} and {b}",
                    f"why would the {a} retry the {b} after a {c} timeout",
                    f"where is the {a} {b} configured for the {c}",
                )
            ),
            {},
            "",
        )
    if kind == "prefix":
        return a[: rng.randint(3, 5)] + "*", {}, ""
    if kind == "phrase":
        return f'"{a} {b}"', {}, ""
    if kind == "exclude":
        return f"{a} -{b}", {}, ""
    if kind == "any":
        return f"{a} {b} {c}", {"mode": "any"}, ""
    if kind == "raw":
        return f"{a} AND ({b} OR {c}*)", {"mode": "raw"}, ""
    if kind == "path":
        return a, {"path": f"stable/d{rng.randrange(DIRS):02d}/*"}, ""
    rel = rng.choice(m.stable)
    n = int(rel.rsplit("/f", 1)[1].split(".")[0])
    return stable_token(n), {"limit": 3}, rel


async def one_request(
    c: Client, rng: random.Random, m: Material, ctx: dict[str, str]
) -> str | None:
    """Send one request, filling ``ctx`` (op, detail, path) first; return a problem or None."""
    op = ctx["op"] = rng.choices(OPS, OP_WEIGHTS)[0]
    if op == "search":
        kind = ctx["detail"] = rng.choice(SEARCH_KINDS)
        query, kwargs, want = search_args(rng, kind, m)
        reply = await c.search(query, **kwargs)
        if want and (not reply.hits or reply.hits[0].relpath != want):
            got = reply.hits[0].relpath if reply.hits else "no hit"
            return f"wrong_answer: {query} gave {got}, not {want}"
        return None
    if op == "status":
        st = await c.status()
        return None if st.pid > 0 else "wrong_answer: status without pid"
    if op == "ping":
        await c.ping()
        return None
    if op == "read_file":
        stable = rng.random() < 0.6
        ctx["detail"] = "stable" if stable else "churn"
        rel = ctx["path"] = rng.choice(m.stable if stable else m.churn)
        r = await c.read_file(rel, start_line=1, end_line=rng.choice((20, 200)))
        if not r.path.endswith(rel) or (stable and r.total_lines < 3):
            return f"wrong_answer: read {rel} gave {r.path}, {r.total_lines} lines"
        return None
    stable = rng.random() < 0.5
    ctx["detail"] = "stable" if stable else "churn"
    glob = f"{ctx['detail']}/d{rng.randrange(DIRS):02d}/*"
    r = await c.find_files(glob, limit=1000)
    want = m.stable_per_dir[glob] if stable else None
    if want is not None and (r.total != want or len(r.files) != want):
        return f"wrong_answer: {glob} listed {r.total}, not {want}"
    return None


async def one_client(
    cid: int,
    m: Material,
    out: dict[str, Any],
    ready: Ready,
    go: anyio.Event,
) -> None:
    rng = random.Random(m.seed * 100_003 + cid)
    left = m.requests
    reconnects = 0
    waited = False
    while left > 0 and reconnects <= 3:
        try:
            started = time.perf_counter()
            async with Client.connect(m.sock, client_name=f"load-{cid}") as c:
                out["connect_s"].append(time.perf_counter() - started)
                if not waited:
                    ready.one()
                    await go.wait()
                    waited = True
                while left > 0:
                    left -= 1
                    t0 = time.perf_counter()
                    ctx = {"op": "?", "detail": "", "path": ""}
                    try:
                        with anyio.fail_after(m.timeout):
                            problem = await one_request(c, rng, m, ctx)
                    except DaemonError as exc:
                        problem = f"{exc.code}: {exc.message}"
                    except TimeoutError:
                        problem = f"timeout: no reply within {m.timeout:.0f} s"
                    elapsed = time.perf_counter() - t0
                    op, detail, path = ctx["op"], ctx["detail"], ctx["path"]
                    second = int(time.time() - out["go_at"])
                    out["per_second"][second] = out["per_second"].get(second, 0) + 1
                    if elapsed > SLOW_SECONDS and len(out["slow"]) < 200:
                        out["slow"].append(
                            {"op": op, "detail": detail, "client": cid,
                             "sent_at_s": round(t0 - out["go_perf"], 3),
                             "seconds": round(elapsed, 3)}
                        )  # fmt: skip
                    out["lat"].setdefault(op, []).append(elapsed)
                    if op == "search":
                        out["lat"].setdefault(f"search:{detail}", []).append(elapsed)
                    if problem is not None:
                        out["errors"].append(
                            {"op": op, "detail": detail, "problem": problem, "path": path,
                             "t": time.time(), "client": cid}
                        )  # fmt: skip
        except Exception as exc:  # every failure is recorded, none ends the run
            if isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
                exc = exc.exceptions[0]
            kind = "connection_lost" if isinstance(exc, ConnectionLost) else "connect"
            if not isinstance(exc, ClientError):
                kind = f"exception {type(exc).__name__}"
            out["errors"].append(
                {"op": "connection", "detail": "", "problem": f"{kind}: {exc}", "path": "",
                 "t": time.time(), "client": cid}
            )  # fmt: skip
            reconnects += 1
            if not waited:
                ready.one()
                await go.wait()
                waited = True
    out["lost_requests"] += left


class Ready:
    """Counts clients down to zero: set once every one has connected (or failed to)."""

    def __init__(self, n: int) -> None:
        self.left = n
        self.all = anyio.Event()

    def one(self) -> None:
        self.left -= 1
        if self.left <= 0:
            self.all.set()


async def run_clients(ids: list[int], m: Material, barrier: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"lat": {}, "errors": [], "connect_s": [], "lost_requests": 0}
    out |= {"per_second": {}, "slow": [], "go_at": 0.0, "go_perf": 0.0}
    ready = Ready(len(ids))
    go = anyio.Event()
    async with anyio.create_task_group() as tg:
        for cid in ids:
            tg.start_soon(one_client, cid, m, out, ready, go)
        await ready.all.wait()
        await anyio.to_thread.run_sync(barrier.wait)
        out["start"] = out["go_at"] = time.time()
        out["go_perf"] = time.perf_counter()
        ru = resource.getrusage(resource.RUSAGE_SELF)
        cpu0 = ru.ru_utime + ru.ru_stime
        go.set()
    out["end"] = time.time()
    ru = resource.getrusage(resource.RUSAGE_SELF)
    out["cpu_s"] = ru.ru_utime + ru.ru_stime - cpu0
    return out


def worker(ids: list[int], m: Material, barrier: Any, results: Any) -> None:
    try:
        results.put(anyio.run(run_clients, ids, m, barrier))
    except BaseException as exc:  # report instead of hanging the parent
        results.put({"fatal": f"{type(exc).__name__}: {exc}"})
        raise


# ------------------------------------------------------------------ the daemon


def proc_status(pid: int) -> dict[str, int]:
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM", "Threads"):
            out[key] = int(value.split()[0])
    fds = os.listdir(f"/proc/{pid}/fd")
    out["fds"] = len(fds)
    targets = []
    for fd in fds:
        with contextlib.suppress(OSError):  # closed meanwhile
            targets.append(os.readlink(f"/proc/{pid}/fd/{fd}"))
    out["sockets"] = sum(t.startswith("socket:") for t in targets)
    return out


def sched_seconds(pid: int) -> tuple[float, float]:
    """(seconds on a CPU, seconds runnable but waiting for one), summed over threads."""
    on = wait = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        with contextlib.suppress(OSError, ValueError):
            a, b, _ = Path(f"/proc/{pid}/task/{tid}/schedstat").read_text().split()
            on, wait = on + int(a), wait + int(b)
    return on / 1e9, wait / 1e9


def code_version() -> dict[str, str]:
    """The commit and a digest of uncommitted changes: the daemon is edited concurrently."""
    diff = common.git("diff", "HEAD", "--", "daemon", "proto")
    return {
        "head": common.git("rev-parse", "HEAD").strip(),
        "diff_sha1": sha1(diff.encode()).hexdigest(),
    }


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


async def settle(c: Client, quiet: float = 1.5, within: float = 120) -> tuple[StatusReply, float]:
    """Wait until nothing is pending or scanning for ``quiet`` seconds in a row."""
    started = time.monotonic()
    calm_since: float | None = None
    while True:
        st = await c.status()
        now = time.monotonic()
        if st.pending == 0 and not st.scanning:
            calm_since = calm_since or now
            if now - calm_since >= quiet:
                return st, now - started
        else:
            calm_since = None
        if now - started > within:
            return st, now - started
        await anyio.sleep(0.1)


async def index_state(c: Client) -> dict[str, tuple[int, int]]:
    out: dict[str, tuple[int, int]] = {}
    for kind in ("stable", "churn"):
        for d in range(DIRS):
            r = await c.find_files(f"{kind}/d{d:02d}/*", limit=1000)
            if r.truncated:
                raise SystemExit(f"{kind}/d{d:02d} holds more than 1,000 files")
            for f in r.files:
                out[f.relpath] = (f.size, round(f.last_modified * 1e9))
    total = (await c.find_files("*", limit=1)).total
    if total != len(out):
        out["<files outside the listed directories>"] = (total - len(out), 0)
    return out


def compare(disk: dict[str, tuple[int, int]], index: dict[str, tuple[int, int]]) -> dict[str, Any]:
    missing = sorted(set(disk) - set(index))
    phantom = sorted(set(index) - set(disk))
    stale = sorted(
        p
        for p in set(disk) & set(index)
        if disk[p][0] != index[p][0] or abs(disk[p][1] - index[p][1]) > 10_000
    )
    return {
        "disk_files": len(disk),
        "index_files": len(index),
        "missing": len(missing),
        "phantom": len(phantom),
        "stale": len(stale),
        "examples": (missing[:3] + phantom[:3] + stale[:3]),
        "equal": not (missing or phantom or stale),
    }


# ------------------------------------------------------------------ one pass


def percentiles(values: list[float]) -> dict[str, float]:
    ms = [v * 1000 for v in values]
    if not ms:
        return {"n": 0}
    return {
        "n": len(ms),
        "p50_ms": round(common.percentile(ms, 0.5), 2),
        "p90_ms": round(common.percentile(ms, 0.9), 2),
        "p99_ms": round(common.percentile(ms, 0.99), 2),
        "max_ms": round(max(ms), 2),
        "mean_ms": round(statistics.fmean(ms), 2),
    }


def classify(errors: list[dict[str, Any]], removed_at: dict[str, float]) -> list[dict[str, Any]]:
    for e in errors:
        expected = False
        if e["op"] == "read_file" and e["problem"].startswith("not_found"):
            gone = removed_at.get(e["path"])
            expected = gone is not None and gone <= e["t"]
        e["expected"] = expected
    return errors


async def run_pass(
    args: argparse.Namespace,
    n_clients: int,
    pid: int,
    sock: Path,
    root: Path,
    stable: list[str],
    churn_initial: list[str],
    writer_live: list[str],
    removed_at: dict[str, float],
    seed: int,
) -> dict[str, Any]:
    per_dir = Counter(rel.rsplit("/", 1)[0] + "/*" for rel in stable)
    m = Material(
        sock=str(sock),
        seed=seed,
        requests=args.requests,
        timeout=args.timeout,
        stable=stable,
        churn=churn_initial,
        stable_per_dir=dict(per_dir),
    )
    procs = max(1, min(args.procs, n_clients))
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(procs + 1)
    results = ctx.Queue()
    ids = list(range(n_clients))
    workers = [
        ctx.Process(target=worker, args=(ids[i::procs], m, barrier, results), daemon=True)
        for i in range(procs)
    ]
    before = proc_status(pid)
    cpu_before = common.cpu_seconds(pid)
    load_before = loadavg()
    for w in workers:
        w.start()
    # All clients connected: start the writer and the clock together.
    await anyio.to_thread.run_sync(barrier.wait, abandon_on_cancel=True)
    connected = proc_status(pid)
    writer = Writer(root, writer_live, args.change_rate, seed, removed_at)
    wthread = threading.Thread(target=writer.run, name="writer", daemon=True)
    wthread.start()
    samples: list[dict[str, float]] = []
    outs: list[dict[str, Any]] = []

    async def sample() -> None:
        t0 = time.monotonic()
        on0, wait0 = sched_seconds(pid)
        while True:
            s = proc_status(pid)
            on, wait = sched_seconds(pid)
            samples.append({"t": round(time.monotonic() - t0, 2), "rss_mb": s["VmRSS"] / 1024,
                            "fds": s["fds"], "threads": s["Threads"],
                            "cpu_s": round(on - on0, 3), "runq_wait_s": round(wait - wait0, 3)}
                           )  # fmt: skip
            await anyio.sleep(0.5)

    async with anyio.create_task_group() as tg:
        tg.start_soon(sample)
        for _ in workers:
            outs.append(await anyio.to_thread.run_sync(results.get))
        writer.stop()
        await anyio.to_thread.run_sync(wthread.join)
        cpu_load = common.cpu_seconds(pid) - cpu_before
        load_after = loadavg()
        async with Client.connect(sock, client_name="load_bench-check") as c:
            _, settle_s = await settle(c)
            disk = await anyio.to_thread.run_sync(disk_state, root)
            watched = compare(disk, await index_state(c))
            converge_s = 0.0
            while not watched["equal"] and converge_s < args.converge:
                await anyio.sleep(1.0)
                converge_s += 1.0
                watched = compare(disk, await index_state(c))
            watched["extra_wait_s"] = converge_s
            refresh = None
            async for r in c.refresh_wait():
                refresh = r
            after_refresh = compare(
                await anyio.to_thread.run_sync(disk_state, root), await index_state(c)
            )
            final_status = await c.status()
        tg.cancel_scope.cancel()
    for w in workers:
        w.join(10)
    fatal = [o["fatal"] for o in outs if "fatal" in o]
    if fatal:
        raise SystemExit(f"a client process failed: {fatal}")
    # The daemon closes its side of each connection as the clients leave: give it a moment.
    after = proc_status(pid)
    for _ in range(50):
        if after["sockets"] <= before["sockets"]:
            break
        await anyio.sleep(0.1)
        after = proc_status(pid)

    lat: dict[str, list[float]] = {}
    errors: list[dict[str, Any]] = []
    for o in outs:
        for k, v in o["lat"].items():
            lat.setdefault(k, []).extend(v)
        errors.extend(o["errors"])
    classify(errors, writer.removed_at)
    per_second: Counter[int] = Counter()
    for o in outs:
        # Every worker counts from its own start; they start within milliseconds.
        per_second.update({int(k): v for k, v in o["per_second"].items()})
    seconds = [per_second.get(i, 0) for i in range(max(per_second, default=-1) + 1)]
    slow = sorted((x for o in outs for x in o["slow"]), key=lambda x: x["sent_at_s"])
    unexpected = [e for e in errors if not e["expected"]]
    expected = [e for e in errors if e["expected"]]
    start, end = min(o["start"] for o in outs), max(o["end"] for o in outs)
    total = sum(len(v) for k, v in lat.items() if ":" not in k)
    wall = end - start
    peak = max([s["rss_mb"] for s in samples] + [before["VmRSS"] / 1024])
    return {
        "clients": n_clients,
        "requests_per_client": args.requests,
        "client_processes": procs,
        "requests": total,
        "lost_requests": sum(o["lost_requests"] for o in outs),
        "wall_s": round(wall, 2),
        "requests_per_s": round(total / wall, 1),
        "latency": {"all": percentiles([t for k, v in lat.items() if ":" not in k for t in v])}
        | {k: percentiles(v) for k, v in sorted(lat.items())},
        "connect": percentiles([t for o in outs for t in o["connect_s"]]),
        "completions_per_second": seconds,
        "seconds_without_a_reply": sum(1 for n in seconds[:-1] if n == 0),
        "slowest_second": min(seconds[:-1], default=0),
        "slow_requests": {
            "over_s": SLOW_SECONDS,
            "count": sum(1 for k, v in lat.items() if ":" not in k for t in v if t > SLOW_SECONDS),
            "first": slow[:200],
        },
        "failures": {
            "unexpected": len(unexpected),
            "expected": len(expected),
            "unexpected_by_kind": dict(
                Counter(f"{e['op']} {e['problem'].split(':')[0]}" for e in unexpected)
            ),
            "expected_by_kind": dict(
                Counter(f"{e['op']} {e['problem'].split(':')[0]}" for e in expected)
            ),
            "unexpected_examples": unexpected[:10],
        },
        "writer": {
            "changes": sum(writer.counts.values()),
            "seconds": round(writer.seconds, 2),
            "per_s": round(sum(writer.counts.values()) / max(writer.seconds, 1e-9), 1),
            "by_op": dict(writer.counts),
            "errors": writer.errors[:5],
        },
        "daemon": {
            "rss_mb_before": round(before["VmRSS"] / 1024, 1),
            "rss_mb_peak_sampled": round(peak, 1),
            "rss_mb_after": round(after["VmRSS"] / 1024, 1),
            "vm_hwm_mb": round(after["VmHWM"] / 1024, 1),
            "cpu_s": round(cpu_load, 2),
            "cpu_share": round(cpu_load / wall, 2),
            "runq_wait_s": samples[-1]["runq_wait_s"] if samples else None,
            "fds_before": before["fds"],
            "fds_connected": connected["fds"],
            "fds_peak": max([s["fds"] for s in samples] + [connected["fds"]]),
            "fds_after": after["fds"],
            "sockets_before": before["sockets"],
            "sockets_connected": connected["sockets"],
            "sockets_after": after["sockets"],
            "threads_before": before["Threads"],
            "threads_peak": max([s["threads"] for s in samples] + [connected["Threads"]]),
            "threads_after": after["Threads"],
            "rss_samples": samples,
        },
        "clients_cpu_s": round(sum(o["cpu_s"] for o in outs), 2),
        "loadavg_before": load_before,
        "loadavg_after": load_after,
        "settle_s": round(settle_s, 2),
        "index_vs_disk": watched,
        "refresh_after": {
            "files_changed": getattr(refresh, "files_changed", None),
            "files_removed": getattr(refresh, "files_removed", None),
            "errors": getattr(refresh, "errors", None),
        },
        "index_vs_disk_after_refresh": after_refresh,
        "status": {
            "indexed_files": final_status.indexed_files,
            "errors_encountered": final_status.errors_encountered,
            "watch": final_status.watch,
            "index_error": final_status.index_error,
        },
    }


async def measure(args: argparse.Namespace) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="kbload-", dir="/tmp"))
    root = work / "root"
    t0 = time.perf_counter()
    stable, churn = build_corpus(root, args.files, args.seed)
    out: dict[str, Any] = {
        "corpus": {
            "files": args.files,
            "bytes": sum(s for s, _ in disk_state(root).values()),
            "build_s": round(time.perf_counter() - t0, 2),
        },
        "cpus": os.cpu_count(),
        "loadavg_start": loadavg(),
        "code": code_version(),
        "work": str(work),
    }
    d = common.start_daemon(root, work, "--scan-interval", str(args.scan_interval))
    out["command"] = d.command
    try:
        await common.wait_serving(d)
        async with Client.connect(d.sock, client_name="load_bench") as c:
            st, _ = await settle(c, quiet=0.5, within=600)
            while st.last_scan_at is None:
                await anyio.sleep(0.1)
                st = await c.status()
            out["first_scan"] = {
                "files": st.indexed_files,
                "seconds": round(st.last_scan_seconds or 0.0, 2),
            }
        live, removed_at = list(churn), {}
        out["passes"] = []
        for i, n in enumerate(args.passes):
            r = await run_pass(
                args, n, d.proc.pid, d.sock, root, stable, churn, live, removed_at, args.seed + i
            )
            out["passes"].append(r)
            print(
                f"pass {i + 1}: {n} clients, {r['requests_per_s']:,.0f} req/s, "
                f"{r['failures']['unexpected']} unexpected failures",
                file=sys.stderr,
            )
    finally:
        out["daemon_exit"] = common.stop_daemon(d)
        text = d.log.read_text(errors="replace") if d.log.exists() else ""
        out["daemon_log"] = {
            "lines": len(text.splitlines()),
            "tracebacks": text.count("Traceback"),
            "error_lines": [ln for ln in text.splitlines() if " ERROR " in ln][:10],
            "tail": text.splitlines()[-15:],
        }
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    out["loadavg_end"] = loadavg()
    return out


# ------------------------------------------------------------------ output


def print_pass(r: dict[str, Any], file: Any = sys.stdout) -> None:
    f, d, w = r["failures"], r["daemon"], r["writer"]
    print(
        f"\n{r['clients']} clients x {r['requests_per_client']} requests "
        f"({r['client_processes']} client process(es)): {r['requests']:,} requests in "
        f"{r['wall_s']:.1f} s = {r['requests_per_s']:,.0f} req/s; "
        f"load average {r['loadavg_before']} -> {r['loadavg_after']}",
        file=file,
    )
    print(f"{'op':<22}{'n':>8}{'p50 ms':>9}{'p90 ms':>9}{'p99 ms':>9}{'max ms':>9}", file=file)
    for op, s in r["latency"].items():
        if s.get("n"):
            print(
                f"{op:<22}{s['n']:>8}{s['p50_ms']:>9.1f}{s['p90_ms']:>9.1f}"
                f"{s['p99_ms']:>9.1f}{s['max_ms']:>9.1f}",
                file=file,
            )
    print(
        f"failures: {f['unexpected']} unexpected {f['unexpected_by_kind'] or ''}; "
        f"{f['expected']} expected {f['expected_by_kind'] or ''}; "
        f"{r['lost_requests']} requests never sent",
        file=file,
    )
    sr = r["slow_requests"]
    print(
        f"slow: {sr['count']} requests over {sr['over_s']:.0f} s; replies per second "
        f"min {r['slowest_second']} (seconds without any reply: "
        f"{r['seconds_without_a_reply']})",
        file=file,
    )
    print(
        f"writer: {w['changes']} changes in {w['seconds']:.1f} s ({w['per_s']}/s) {w['by_op']}",
        file=file,
    )
    print(
        f"daemon: RSS {d['rss_mb_before']} -> peak {d['rss_mb_peak_sampled']} -> "
        f"{d['rss_mb_after']} MB (HWM {d['vm_hwm_mb']}); CPU {d['cpu_s']} s "
        f"({d['cpu_share']:.0%} of a core; {d['runq_wait_s']} s waiting for a CPU); "
        f"fds {d['fds_before']} -> {d['fds_connected']} "
        f"connected, peak {d['fds_peak']} -> {d['fds_after']} (sockets {d['sockets_before']} -> "
        f"{d['sockets_connected']} -> {d['sockets_after']}); threads "
        f"{d['threads_before']} -> peak {d['threads_peak']} -> {d['threads_after']}; "
        f"clients' CPU {r['clients_cpu_s']} s",
        file=file,
    )
    iv, ar, rf = r["index_vs_disk"], r["index_vs_disk_after_refresh"], r["refresh_after"]
    print(
        f"index vs disk after settling ({r['settle_s']} s): {iv['index_files']} indexed / "
        f"{iv['disk_files']} on disk, missing {iv['missing']}, phantom {iv['phantom']}, "
        f"stale {iv['stale']} -> {'EQUAL' if iv['equal'] else 'DIFFERENT ' + str(iv['examples'])}"
        f"; forced refresh changed {rf['files_changed']}, removed {rf['files_removed']}"
        f" -> {'EQUAL' if ar['equal'] else 'DIFFERENT'}",
        file=file,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--passes",
        type=lambda s: [int(x) for x in s.split(",")],
        default=[200, 20],
        help="clients in each pass, comma-separated (default 200,20)",
    )
    parser.add_argument("--requests", type=int, default=300, help="requests per client")
    parser.add_argument("--files", type=int, default=2000, help="corpus files")
    parser.add_argument("--change-rate", type=float, default=20.0, help="writer changes/s")
    parser.add_argument("--procs", type=int, default=1, help="processes running the clients")
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds per request")
    parser.add_argument("--converge", type=float, default=10.0, help="extra wait if unequal")
    parser.add_argument("--scan-interval", type=float, default=3600.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", type=Path, help="write the results here")
    parser.add_argument("--keep", action="store_true", help="keep the scratch directory")
    args = parser.parse_args(argv)
    result = anyio.run(measure, args)
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    c = result["corpus"]
    print(
        f"corpus: {c['files']:,} files, {c['bytes'] / 1e6:.1f} MB; first scan "
        f"{result['first_scan']['files']:,} files in {result['first_scan']['seconds']} s; "
        f"{result['cpus']} CPUs; load average {result['loadavg_start']} at start, "
        f"{result['loadavg_end']} at end"
    )
    for r in result["passes"]:
        print_pass(r)
    log = result["daemon_log"]
    print(
        f"\ndaemon exit code {result['daemon_exit']}; log: {log['lines']} lines, "
        f"{log['tracebacks']} tracebacks"
    )
    ok = all(
        r["failures"]["unexpected"] == 0 and r["index_vs_disk"]["equal"] and not r["lost_requests"]
        for r in result["passes"]
    )
    print("PASS" if ok else "FAIL", "(zero unexpected failures and index == disk after each pass)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
