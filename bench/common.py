"""What the benchmark scripts share: a kbindexd to measure, figures from /proc, percentiles.

Every script starts the daemon the same way: its own state directory, socket, log and an
empty config directory under the script's scratch folder, with the KBINDEX_* variables
removed, so a figure never depends on the caller's environment or user config.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
from kbindex.proto.client import Client
from kbindex.proto.messages import StatusReply

KBINDEXD = Path(sys.executable).with_name("kbindexd")
REPO = Path(__file__).resolve().parent.parent


# ------------------------------------------------------------------ the daemon


@dataclass(frozen=True)
class Daemon:
    proc: subprocess.Popen[bytes]
    command: list[str]
    state: Path
    sock: Path
    log: Path
    started: float
    """``time.perf_counter()`` just before the spawn: start-up timings count from here."""


def environment() -> dict[str, str]:
    """This process's environment without the KBINDEX_* variables but KBINDEX_RG
    (which ripgrep a daemon runs for grep)."""
    return {
        k: v for k, v in os.environ.items() if not k.startswith("KBINDEX_") or k == "KBINDEX_RG"
    }


def start_daemon(
    root: Path, work: Path, *options: str, exe: Path = KBINDEXD, name: str = "kbindexd"
) -> Daemon:
    """Spawn ``exe`` on ``root``: state in ``work/state`` (``work/state-NAME`` for another
    name), socket ``NAME.sock`` and log ``NAME.log`` in ``work``. Returns at once; see
    ``wait_serving``. ``KB_LOG_LEVEL`` sets the daemon's log level (default warning)."""
    state = work / ("state" if name == "kbindexd" else f"state-{name}")
    sock, log = work / f"{name}.sock", work / f"{name}.log"
    env = environment()
    env["XDG_CONFIG_HOME"] = str(work / "config")  # no user config file
    cmd = [str(exe), str(root), "--state-dir", str(state), "--socket", str(sock)]
    cmd += ["--log-level", os.environ.get("KB_LOG_LEVEL", "warning"), *options]
    with log.open("wb") as out:
        started = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=out, env=env)
    return Daemon(proc, cmd, state, sock, log, started)


def stop_daemon(d: Daemon, within: float = 120.0) -> int:
    """SIGTERM, then SIGKILL if it has not exited ``within`` seconds; the exit code."""
    if d.proc.poll() is None:
        d.proc.send_signal(signal.SIGTERM)
        try:
            d.proc.wait(timeout=within)
        except subprocess.TimeoutExpired:
            d.proc.kill()
    return d.proc.wait()


@contextmanager
def running_daemon(
    root: Path, work: Path, *options: str, exe: Path = KBINDEXD, name: str = "kbindexd"
) -> Iterator[Daemon]:
    """``start_daemon``, stopped on the way out (its exit code: ``d.proc.returncode``)."""
    d = start_daemon(root, work, *options, exe=exe, name=name)
    try:
        yield d
    finally:
        stop_daemon(d)


async def wait_serving(d: Daemon, within: float = 60.0) -> None:
    """Until the socket accepts a connection: the cheapest sign of a daemon serving, so a
    start-up time measured after it includes nothing but the daemon's own start."""
    deadline = time.monotonic() + within
    while True:
        if d.proc.poll() is not None:
            raise SystemExit(f"kbindexd exited with {d.proc.returncode}; see {d.log}")
        try:
            stream = await anyio.connect_unix(d.sock)
        except OSError:
            if time.monotonic() > deadline:
                raise SystemExit(f"kbindexd did not start serving in time; see {d.log}") from None
            await anyio.sleep(0.02)
        else:
            await stream.aclose()
            return


async def wait_status(
    c: Client, ok: Callable[[StatusReply], bool], within: float, poll: float = 0.02
) -> StatusReply:
    """Poll status until ``ok`` holds for it."""
    deadline = time.monotonic() + within
    while True:
        st = await c.status()
        if ok(st):
            return st
        if time.monotonic() > deadline:
            raise SystemExit(f"condition not reached within {within:.0f} s; last status: {st}")
        await anyio.sleep(poll)


async def wait_scan(
    c: Client, within: float, *, after: float | None = None, poll: float = 0.02
) -> StatusReply:
    """Poll status until a whole-roots scan newer than ``after`` has finished."""

    def done(st: StatusReply) -> bool:
        return st.last_scan_at is not None and st.last_scan_at != after and not st.scanning

    return await wait_status(c, done, within, poll)


# ------------------------------------------------------------------ figures


def percentile(values: list[float], q: float) -> float:
    """The value at rank ``q`` (0 to 1) of the sorted values, nearest rank, halves up:
    always a value that was measured."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * (len(ordered) - 1) + 0.5))]


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process: less disturbed than wall time by other load."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def peak_rss_mb(pid: int) -> float:
    """The process's peak resident set so far (VmHWM)."""
    return rss_mb(pid, "VmHWM")


def rss_mb(pid: int, field: str = "VmRSS") -> float:
    """A memory figure of the process from /proc/PID/status: its resident set now by
    default."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def git(*args: str) -> str:
    """A git command's output in this repository ('' if git fails): results record the
    code they measured, and the daemon is edited while benchmarks run."""
    run = subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, check=False)
    return run.stdout


def write_results(results: dict[str, Any], path: Path | None, default: Path) -> Path:
    """Write a benchmark's figures as JSON to ``path`` (or ``default``) and say where."""
    target = path or default
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(results, indent=1))
    print(f"results written to {target}")
    return target


# ------------------------------------------------------------------ in-process indexing


def index_roots(idx: Any, roots: list[Path], *, max_bytes: int, batch: int = 500) -> None:
    """Index every file under ``roots`` into ``idx`` (an opened ``Index``) in this process,
    as the daemon's indexer prepares them (read, then ``documents.prepare``), in batches
    of ``batch``: the benchmarks that measure the index itself, not the daemon around it."""
    from kbindex.daemon.index.values import Batch, Update
    from kbindex.daemon.indexing import textfile
    from kbindex.daemon.indexing.documents import prepare
    from kbindex.daemon.indexing.kinds import Classifier
    from kbindex.daemon.indexing.scanner import Seen

    kinds = Classifier()

    for root in roots:
        pending: list[Any] = []
        for dirpath, _dirs, names in os.walk(root):
            for name in sorted(names):
                path = os.path.join(dirpath, name)
                st = os.stat(path)
                seen = Seen(path, str(root), st.st_size, st.st_mtime_ns)
                loaded = textfile.load(path, max_bytes)
                if isinstance(loaded, textfile.Loaded):
                    loaded = prepare(seen.relpath, loaded)
                pending.append(Update(seen, loaded, kinds.of(seen.root, seen.relpath)))
                if len(pending) >= batch:
                    idx.apply(Batch(pending))
                    pending = []
        if pending:
            idx.apply(Batch(pending))
