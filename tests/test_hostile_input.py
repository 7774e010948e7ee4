"""Hostile input over the socket, against a real daemon: fuzzed and malformed frames,
slow and abandoned connections. Whatever one connection sends, the daemon answers it
with errors or closes it, never crashes, keeps answering a well-behaved client promptly,
and keeps its memory bounded.

The hostile side uses blocking sockets in a worker thread while a well-behaved client
runs on the event loop, so the two really are concurrent.
"""

from __future__ import annotations

import contextlib
import os
import resource
import socket
import struct
import time
from collections.abc import Callable
from pathlib import Path

import anyio
import anyio.to_thread
import msgspec
import pytest
from conftest import Daemon, MakeDaemon, wait_for, write
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kbindex.proto import framing
from kbindex.proto.client import Client, ClientError
from kbindex.proto.messages import (
    PROTOCOL_VERSION,
    REQUEST_OPS,
    ErrorCode,
    ErrorReply,
    HelloReply,
    Pong,
)
from raw_socket import RawConnection

pytestmark = pytest.mark.anyio

MAX = framing.MAX_REQUEST_BYTES
REPLY_DEADLINE = 5.0
"""Seconds any one reply (or the end of a closed connection) may take."""
GOOD_DEADLINE = 2.0
"""Seconds the well-behaved client's each ping and search may take while fuzzing runs."""
PING_ID = 4_242_424
SAFE_OPS = sorted(REQUEST_OPS - {"add_root", "remove_root", "refresh"})
"""Ops fuzzed with arbitrary fields: not the ones that could change roots or the config
if a random value happened to be valid."""
FRAME_TIMEOUT = 1.0
"""The frame timeout the slow-client daemons run with (KBINDEX_FRAME_TIMEOUT: the
setting frame_timeout_seconds)."""


class Raw(RawConnection):
    """A raw connection with the reply deadline of these tests."""

    def __init__(self, path: Path) -> None:
        super().__init__(path, timeout=REPLY_DEADLINE)

    def replies_until_pong(self) -> list[object]:
        """Send a ping and read every reply up to its Pong: the connection still works."""
        self.send({"op": "ping", "id": PING_ID})
        replies = []
        while True:
            reply = self.recv()
            assert reply is not None, f"connection closed; replies before: {replies}"
            if isinstance(reply, Pong) and reply.id == PING_ID:
                return replies
            replies.append(reply)


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def pid_of(d: Daemon) -> int:
    assert d.proc is not None
    return d.proc.pid


def assert_alive(d: Daemon) -> None:
    assert d.proc is not None and d.proc.poll() is None, f"kbindexd died:\n{d.log()}"


def codes(replies: list[object]) -> list[str]:
    return [r.code for r in replies if isinstance(r, ErrorReply)]


class Watchdog:
    """A well-behaved client, connected the whole time, pinging and searching; each
    answer must come within GOOD_DEADLINE and be right."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self.answers = 0
        self.slowest = 0.0
        self.stop = anyio.Event()

    async def run(self) -> None:
        while not self.stop.is_set():
            started = time.monotonic()
            with anyio.fail_after(GOOD_DEADLINE):
                assert isinstance(await self.client.ping(), Pong)
                reply = await self.client.search("needle")
                assert [h.relpath for h in reply.hits] == ["needle.md"]
            self.slowest = max(self.slowest, time.monotonic() - started)
            self.answers += 1
            await anyio.sleep(0.01)


async def fuzz_while_watched(d: Daemon, fuzz: Callable[[], None]) -> Watchdog:
    """Run ``fuzz`` in a thread while a watchdog client keeps asking."""
    async with d.client() as good, anyio.create_task_group() as tg:
        dog = Watchdog(good)
        tg.start_soon(dog.run)
        try:
            await anyio.to_thread.run_sync(fuzz)
        finally:
            dog.stop.set()
    assert_alive(d)
    assert dog.answers > 0
    return dog


@pytest.fixture
async def fuzzed(daemon: Daemon) -> Daemon:
    write(daemon.root / "needle.md", "# Needle\n\nthe needle is here\n")
    write(daemon.root / "hay.md", "only hay\n")
    await daemon.refresh()
    return daemon


# ---------------------------------------------------------------- strategies

_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats()
    | st.text(max_size=40)
    | st.binary(max_size=40)
)
_values = st.recursive(
    _scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
_fields = sorted(
    {"id", "version", "client", "query", "limit", "path", "mode", "start_line", "end_line", "glob"}
)
_wrong_typed = st.builds(
    lambda op, fields: {"op": op, **fields},
    st.sampled_from(SAFE_OPS),
    st.dictionaries(st.sampled_from(_fields), _values, max_size=4),
)


def _nested(depth: int, kind: str) -> bytes:
    if kind == "array":
        return b"\x91" * depth + b"\xc0"
    return b"\x81\xa1k" * depth + b"\xc0"


# ---------------------------------------------------------------- tests


@pytest.mark.slow
async def test_fuzzed_frames_get_errors_and_never_disturb_a_good_client(fuzzed: Daemon) -> None:
    sock = fuzzed.socket
    tried: dict[str, int] = {}

    def count(kind: str) -> None:
        tried[kind] = tried.get(kind, 0) + 1

    cfg = settings(
        max_examples=120,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )

    @cfg
    @given(st.binary(min_size=1, max_size=2048))
    def raw_bytes(data: bytes) -> None:
        count("raw bytes")
        with Raw(sock) as conn:
            conn.send_raw(data)
            for reply in conn.replies_until_close():
                assert isinstance(reply, ErrorReply) or hasattr(reply, "id")

    @cfg
    @given(st.binary(max_size=2048))
    def framed_garbage(body: bytes) -> None:
        count("framed random bytes")
        with Raw(sock) as conn:
            conn.send_raw(framing.pack(body))
            assert isinstance(conn.recv(), ErrorReply)
            assert conn.replies_until_pong() == []

    @cfg
    @given(st.integers(min_value=MAX + 1, max_value=2**32 - 1), st.binary(max_size=64))
    def giant_prefix(size: int, tail: bytes) -> None:
        count("giant length prefix")
        with Raw(sock) as conn:
            conn.send_raw(struct.pack(">I", size) + tail)
            assert codes(conn.replies_until_close()) == ["frame_too_large"]

    @cfg
    @given(st.sampled_from(SAFE_OPS), st.data())
    def truncated(op: str, data: st.DataObject) -> None:
        count("truncated frame")
        frame = framing.pack(msgspec.msgpack.encode({"op": op, "id": 3, "query": "x", "path": "a"}))
        cut = data.draw(st.integers(min_value=1, max_value=len(frame) - 1))
        with Raw(sock) as conn:
            conn.send_raw(frame[:cut])
            assert conn.replies_until_close() == []

    @cfg
    @given(_wrong_typed)
    def wrong_types(message: dict[str, object]) -> None:
        count("valid msgpack, arbitrary field values")
        with Raw(sock) as conn:
            conn.send(message)
            reply = conn.recv()
            assert conn.replies_until_pong() == []
            if isinstance(reply, ErrorReply):
                # The note operations answer with POSIX names (EROFS here: no root is
                # writable; EINVAL for an empty or odd path).
                assert reply.code in {
                    "invalid_argument", "bad_frame", "bad_query", "bad_filter", "outside_roots",
                    "not_found", "version_mismatch", *ErrorCode.NOTE_CODES,
                }, reply  # fmt: skip
            rid = message.get("id", 0)
            if isinstance(rid, int) and not isinstance(rid, bool) and -(2**63) <= rid < 2**64:
                assert getattr(reply, "id", None) in (rid, 0)

    @cfg
    @given(st.text(max_size=30).filter(lambda s: s not in REQUEST_OPS), st.integers(0, 2**32))
    def unknown_op(op: str, rid: int) -> None:
        count("unknown op")
        with Raw(sock) as conn:
            conn.send({"op": op, "id": rid})
            reply = conn.recv()
            assert conn.replies_until_pong() == []
            assert isinstance(reply, ErrorReply) and (reply.code, reply.id) == ("unknown_op", rid)

    @cfg
    @given(
        st.integers(min_value=-(2**63), max_value=2**64 - 1).filter(lambda v: v != PROTOCOL_VERSION)
    )
    def hello_versions(version: int) -> None:
        count("Hello with a wrong version")
        with Raw(sock) as conn:
            conn.send({"op": "hello", "id": 5, "version": version})
            reply = conn.recv()
            assert conn.replies_until_pong() == []
            assert isinstance(reply, ErrorReply), reply
            assert (reply.code, reply.id) == ("version_mismatch", 5)

    def fuzz() -> None:
        for test in (
            raw_bytes, framed_garbage, giant_prefix, truncated, wrong_types, unknown_op,
            hello_versions,
        ):  # fmt: skip
            test()

    dog = await fuzz_while_watched(fuzzed, fuzz)
    assert sum(tried.values()) >= 700, tried
    assert dog.slowest < GOOD_DEADLINE


@pytest.mark.slow
async def test_deep_nesting_and_huge_strings_are_refused_and_memory_stays_bounded(
    fuzzed: Daemon,
) -> None:
    """Thousands of hostile frames on a few connections: nested 1 to 500,000 levels deep
    (as the whole body or a field's value), strings just under the frame limit, frames
    just over it. RSS must stay within 50 MB of where it started."""
    pid = pid_of(fuzzed)
    sock = fuzzed.socket
    prefix_ping = b"\x82" + msgspec.msgpack.encode("op") + msgspec.msgpack.encode("ping")
    under = MAX - 64
    stats: dict[str, int] = {}

    def bodies() -> list[tuple[str, bytes]]:
        out: list[tuple[str, bytes]] = []
        for depth in (1, 10, 100, 1_000, 10_000, 100_000, 500_000):
            for kind in ("array", "map"):
                nested = _nested(min(depth, (MAX - 64) // 3), kind)  # a map level is 3 bytes
                out.append(("deep nesting (whole body)", nested))
                out.append(("deep nesting (a field)", prefix_ping + b"\xa1x" + nested))
        out.append(("string just under the limit (query)", msgspec.msgpack.encode(
            {"op": "search", "id": 1, "query": "a " * (under // 2)})))  # fmt: skip
        out.append(("string just under the limit (path)", msgspec.msgpack.encode(
            {"op": "read_file", "id": 1, "path": "a/" * (under // 2)})))  # fmt: skip
        out.append(("string just under the limit (glob)", msgspec.msgpack.encode(
            {"op": "find_files", "id": 1, "glob": "*a" * (under // 2)})))  # fmt: skip
        return out

    def fuzz() -> None:
        corpus = bodies()
        with Raw(sock) as conn:
            for _round in range(40):
                for kind, body in corpus:
                    stats[kind] = stats.get(kind, 0) + 1
                    conn.send_raw(framing.pack(body))
                    reply = conn.recv()
                    if kind == "deep nesting (a field)" and isinstance(reply, Pong):
                        continue  # shallow enough to skip as an unknown field
                    assert isinstance(reply, ErrorReply), (kind, reply)
                    assert reply.code in {"bad_frame", "invalid_argument", "bad_query"}, reply
            assert conn.replies_until_pong() == []
        for _ in range(40):
            stats["frame just over the limit"] = stats.get("frame just over the limit", 0) + 1
            with Raw(sock) as conn:
                conn.send_raw(struct.pack(">I", MAX + 1) + b"x" * 4096)
                assert codes(conn.replies_until_close()) == ["frame_too_large"]

    await fuzz_while_watched(fuzzed, fuzz)  # warm up: allocator pools, caches
    before = rss_kib(pid)
    await fuzz_while_watched(fuzzed, fuzz)
    await fuzz_while_watched(fuzzed, fuzz)
    after = rss_kib(pid)
    assert sum(stats.values()) >= 1_000, stats
    assert after - before < 50 * 1024, f"RSS grew from {before} to {after} KiB"


async def test_clients_that_leave_before_their_error_replies_do_not_crash_it(
    fuzzed: Daemon,
) -> None:
    """Bursts of malformed frames, the connection closed at once: the daemon's error
    replies meet a broken pipe, which ends that connection and nothing else."""
    burst = framing.pack(b"\xc1") * 2000

    def fuzz() -> None:
        for _ in range(100):
            with Raw(fuzzed.socket) as conn:
                conn.send_raw(burst)
        with Raw(fuzzed.socket) as conn:
            assert conn.replies_until_pong() == []

    await fuzz_while_watched(fuzzed, fuzz)
    assert "internal error" not in fuzzed.log()


async def test_requests_before_hello_are_served(fuzzed: Daemon) -> None:
    """Hello is optional (it checks versions): a request first is answered, not refused."""
    with Raw(fuzzed.socket) as conn:
        assert conn.replies_until_pong() == []
        conn.send({"op": "hello", "id": 2, "version": PROTOCOL_VERSION})
        reply = conn.recv()
        assert isinstance(reply, HelloReply) and reply.id == 2


async def start_with(d: Daemon, *, frame_timeout: float | None = None, nofile: int = 0) -> None:
    if frame_timeout is not None:
        d.extra_env["KBINDEX_FRAME_TIMEOUT"] = str(frame_timeout)
    limits = resource.getrlimit(resource.RLIMIT_NOFILE)
    if nofile:
        resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, limits[1]))
    try:
        d.proc = d.spawn()
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, limits)

    async def ready() -> bool:
        assert_alive(d)
        try:
            async with d.client() as c:
                await c.ping()
                return True
        except ClientError:
            return False

    await wait_for(ready, timeout=20)


def closed_within(conn: Raw, seconds: float) -> list[object]:
    """Replies until the daemon closes ``conn``; fails if it does not within ``seconds``."""
    conn.sock.settimeout(seconds)
    replies = []
    while (reply := conn.recv()) is not None:
        replies.append(reply)
    return replies


@pytest.mark.slow
async def test_slow_clients_are_cut_off_and_do_not_block_others(make_daemon: MakeDaemon) -> None:
    """A client that sends a length prefix and then nothing, or a frame at one byte per
    100 ms, holds a partial frame: the daemon closes it after the frame timeout (with a
    clear error), while a client connected all along is answered at once."""
    d = make_daemon()
    await start_with(d, frame_timeout=FRAME_TIMEOUT)
    frame = framing.pack(msgspec.msgpack.encode({"op": "ping", "id": 1}))
    async with d.client() as good:
        stalled = Raw(d.socket)
        stalled.send_raw(struct.pack(">I", 100))
        dribbler = Raw(d.socket)
        started = time.monotonic()

        def dribble() -> list[object]:
            for byte in frame:
                try:
                    dribbler.send_raw(bytes([byte]))
                except (BrokenPipeError, ConnectionResetError):
                    break
                time.sleep(0.1)
            return closed_within(dribbler, REPLY_DEADLINE)

        async with anyio.create_task_group() as tg:
            results: dict[str, list[object]] = {}

            async def run(name: str, fn: Callable[[], list[object]]) -> None:
                results[name] = await anyio.to_thread.run_sync(fn)

            tg.start_soon(run, "stalled", lambda: closed_within(stalled, REPLY_DEADLINE))
            tg.start_soon(run, "dribbler", dribble)
            while not results.keys() >= {"stalled", "dribbler"}:
                with anyio.fail_after(GOOD_DEADLINE):
                    await good.ping()
                await anyio.sleep(0.05)
        elapsed = time.monotonic() - started
        stalled.sock.close()
        dribbler.sock.close()
    assert codes(results["stalled"]) == ["bad_frame"]
    assert [getattr(r, "code", "pong") for r in results["dribbler"]] in (["bad_frame"], [])
    assert FRAME_TIMEOUT <= elapsed < FRAME_TIMEOUT + 3
    assert_alive(d)


@pytest.mark.slow
async def test_abandoned_connections_beyond_the_fd_limit_do_not_crash_or_lock_out(
    make_daemon: MakeDaemon,
) -> None:
    """The daemon runs with a soft limit of 128 open files; 300 connections are opened
    and left idle. New clients must still be served (the longest-idle silent
    connections make room), as must one connected all along. Then its limit is lowered
    under what it has open, so that accept() itself fails (EMFILE): it must not crash."""
    d = make_daemon()
    await start_with(d, nofile=128)
    pid = pid_of(d)
    abandoned: list[socket.socket] = []

    def abandon(n: int) -> None:
        for _ in range(n):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.setblocking(False)
            with contextlib.suppress(BlockingIOError):  # backlog full: in progress
                s.connect(str(d.socket))
            abandoned.append(s)

    async def served() -> None:
        with anyio.fail_after(GOOD_DEADLINE):
            await good.ping()
        for _ in range(5):
            with anyio.fail_after(GOOD_DEADLINE):
                async with d.client() as fresh:
                    await fresh.status()
        assert_alive(d)

    try:
        async with d.client() as good:
            abandon(300)
            await served()
            assert "closed idle ones" in d.log()
            hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
            # The daemon closes idle connections meanwhile, so the room left under the
            # limit can grow back between counting and connecting: a few rounds.
            for _ in range(5):
                open_fds = len(os.listdir(f"/proc/{pid}/fd"))
                resource.prlimit(pid, resource.RLIMIT_NOFILE, (open_fds + 2, hard))
                abandon(100)
                await served()
                if "cannot accept connections (Too many open files)" in d.log():
                    break
            assert "cannot accept connections (Too many open files)" in d.log()
    finally:
        for s in abandoned:
            s.close()
    # Once they are gone, the daemon is as it was.
    async with d.client() as c:
        await c.ping()
    assert_alive(d)


@pytest.mark.slow
async def test_a_client_that_never_reads_its_replies_is_closed(
    make_daemon: MakeDaemon,
) -> None:
    """Requests for large replies sent and never read: once the socket's buffers are
    full, a reply waits at most the frame timeout, then the connection is closed (its
    requests no longer pin the daemon), while a client connected all along is served."""
    d = make_daemon()
    write(d.root / "big.md", "a line of text that takes some room\n" * 5000)  # ~180 KB
    await start_with(d, frame_timeout=FRAME_TIMEOUT)
    await d.refresh()
    hog = Raw(d.socket)
    hog.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    for rid in range(1, 33):
        hog.send({"op": "read_file", "id": rid, "path": "big.md"})
    async with d.client() as good:
        with anyio.fail_after(GOOD_DEADLINE):
            await good.ping()
        await anyio.sleep(FRAME_TIMEOUT + 1)
        with anyio.fail_after(GOOD_DEADLINE):
            assert (await good.status()).indexed_files == 1
    # 32 replies of 180 KB: far more than the buffers hold. The daemon closed the
    # connection before sending them all.
    hog.sock.settimeout(REPLY_DEADLINE)
    data = b""
    try:
        while chunk := hog.sock.recv(1 << 20):
            data += chunk
    except TimeoutError:
        pytest.fail("the connection of a client that never reads was not closed")
    finally:
        hog.sock.close()
    whole, pos = 0, 0
    while pos + 4 <= len(data) and pos + 4 + struct.unpack(">I", data[pos : pos + 4])[0] <= len(
        data
    ):
        pos += 4 + struct.unpack(">I", data[pos : pos + 4])[0]
        whole += 1
    assert whole < 32, f"all {whole} replies were sent: never closed"
    assert_alive(d)
