"""kbindex-mcp --http: only the user's clients get in, and a flood leaves them served.

The two-user cases run for real, as in test_trust.py: the test process (root in CI) runs
the daemon and the front end and is the user; a forked child that has dropped to a
throwaway uid is another local user, with only what loopback gives everyone. The child
speaks HTTP over a plain socket (nothing it would import after the fork: the
interpreter's files under /root are not readable by other uids).
"""

from __future__ import annotations

import json
import os
import resource
import signal
import socket
import stat
import time
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from conftest import Daemon, MakeDaemon, wait_for, with_writable_root, write
from kbindex.mcpfront.connections import Waiting, protocol_class
from kbindex.mcpfront.httpserver import ACCEPT_BATCH, bind
from mcp_helpers import CLIENT_TIMEOUT, FRONT_END, http_front_end, mcp_http, structured
from test_trust import CHILD_SECONDS, _become, _readable, as_user, needs_root, throwaway_uids

pytestmark = pytest.mark.anyio

SECRET = "zebrafish recipe: the user's private words"


def _message(method: str, params: dict[str, Any], rid: int | None = 1) -> bytes:
    body: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params}
    if rid is not None:
        body["id"] = rid
    return json.dumps(body).encode()


INITIALIZE = _message(
    "initialize",
    {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "other-user", "version": "0"},
    },
)


def raw_post(
    port: int, body: bytes, headers: dict[str, str], *, wait_for: bytes = b"", seconds: float = 5
) -> tuple[int, dict[str, str], bytes]:
    """POST /mcp over a plain socket: status, headers (lower-case names) and what came of
    the body until ``wait_for`` appeared in it, the server closed, or ``seconds`` passed."""
    head = [
        "POST /mcp HTTP/1.1",
        f"Host: 127.0.0.1:{port}",
        "Content-Type: application/json",
        "Accept: application/json, text/event-stream",
        f"Content-Length: {len(body)}",
        *(f"{k}: {v}" for k, v in headers.items()),
    ]
    data = b""
    # Not create_connection: its getaddrinfo imports the idna codec, out of reach.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(seconds)
        sock.connect(("127.0.0.1", port))
        sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode() + body)
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            try:
                chunk = sock.recv(65536)
            except (TimeoutError, ConnectionError):
                break
            if not chunk:
                break
            data += chunk
            if b"\r\n\r\n" in data:
                rest = data.split(b"\r\n\r\n", 1)[1]
                if (wait_for and wait_for in rest) or (not wait_for and rest):
                    break
    top, _, rest = data.partition(b"\r\n\r\n")
    lines = top.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1]) if lines and lines[0] else 0
    fields = {k.strip().lower(): v.strip() for k, _, v in (x.partition(":") for x in lines[1:])}
    return status, fields, rest


def try_everything(port: int, token_file: Path, secret: Path) -> dict[str, Any]:
    """What another local user can do through the port: initialize without a token and
    with a guessed one and, with any session the server gives, read, search and write a
    note; read the token file."""
    seen: dict[str, Any] = {"statuses": [], "bodies": b""}
    for auth in ({}, {"Authorization": "Bearer " + "A" * 43}, {"Authorization": "Basic eDp4"}):
        status, fields, body = raw_post(port, INITIALIZE, auth, wait_for=b'"result"')
        seen["statuses"].append(status)
        seen["bodies"] += body
        seen["www_authenticate"] = fields.get("www-authenticate", "")
        session = fields.get("mcp-session-id")
        if status != 200 or not session:
            continue
        with_session = {**auth, "Mcp-Session-Id": session, "Mcp-Protocol-Version": "2025-06-18"}
        raw_post(port, _message("notifications/initialized", {}, None), with_session)
        calls = [
            ("read_file", {"path": str(secret)}),
            ("search", {"query": "zebrafish"}),
            ("write_note", {"path": "planted.md", "content": "planted by another user\n"}),
        ]
        for n, (tool, arguments) in enumerate(calls, 2):
            call = _message("tools/call", {"name": tool, "arguments": arguments}, n)
            status, _, body = raw_post(port, call, with_session, wait_for=b'"result"')
            seen["statuses"].append(status)
            seen["bodies"] += body
    seen["bodies"] = seen["bodies"].decode("utf-8", "replace")
    try:
        seen["token"] = token_file.read_text()
    except OSError as exc:
        seen["token"] = type(exc).__name__
    return seen


@pytest.fixture
async def notes_daemon(make_daemon: MakeDaemon, tmp_path: Path) -> Daemon:
    d = with_writable_root(make_daemon, tmp_path)
    write(d.root / "secret.md", f"# Secret\n\n{SECRET}\n")
    await d.start()
    return d


# ------------------------------------------------------------------ the token


@pytest.mark.slow
@needs_root
async def test_another_user_without_the_token_is_refused_and_reads_nothing(
    notes_daemon: Daemon,
) -> None:
    """Before: initialize answered 200, then read_file and search gave the user's text
    and write_note made a file in the user's notes, owned by the user."""
    _, other = throwaway_uids()
    secret = notes_daemon.root / "secret.md"
    async with http_front_end(notes_daemon.socket) as front:
        # The directory may be listed by others: the file's own mode must keep the token.
        front.token_file.parent.chmod(0o755)
        seen = await anyio.to_thread.run_sync(
            as_user, other, lambda: try_everything(front.port, front.token_file, secret)
        )
    assert "error" not in seen, seen
    assert seen["statuses"] == [401, 401, 401], seen
    assert seen["token"] == "PermissionError"
    assert "zebrafish" not in seen["bodies"]
    assert str(front.token_file) in seen["bodies"]  # the 401 says where the token is
    assert "--print-token" in seen["bodies"]
    assert seen["www_authenticate"].startswith("Bearer")
    assert not (notes_daemon.root / "planted.md").exists()
    mode = stat.S_IMODE(front.token_file.stat().st_mode) if front.token_file.exists() else 0
    assert mode in (0, 0o600)


@pytest.mark.slow
@pytest.mark.timeout(180)  # three kbindex-mcp starts, each about a second of imports
async def test_the_users_client_with_the_token_is_served_end_to_end(
    daemon: Daemon, sockdir: Path
) -> None:
    write(daemon.root / "docs" / "fish.md", f"# Fish\n\n{SECRET}\n")
    await daemon.refresh()
    token_file = sockdir / "kbindex" / "mcp-http.token"
    async with http_front_end(daemon.socket, token_file=token_file) as front:
        token_dir = front.token_file.parent
        assert stat.S_IMODE(front.token_file.stat().st_mode) == 0o600
        assert stat.S_IMODE(token_dir.stat().st_mode) == 0o700
        token = front.token
        async with mcp_http(front.url, token) as client:
            found = structured(await client.call_tool("search", {"query": "zebrafish"}))
            assert [hit["relpath"] for hit in found["results"]] == ["docs/fish.md"]
            read = structured(await client.call_tool("read_file", {"path": "docs/fish.md"}))
            assert SECRET in read["text"]
        async with httpx2.AsyncClient(timeout=CLIENT_TIMEOUT) as http:
            for auth in ({}, {"Authorization": f"Bearer {token[:-1]}x"}):
                refused = await http.post(front.url, content=INITIALIZE, headers=auth)
                assert refused.status_code == 401
    # The token is kept across restarts (hosts configured with it keep working), and the
    # command a user puts in a host's configuration prints that same token.
    printed = await anyio.run_process([FRONT_END, "--print-token", "--token-file", str(token_file)])
    assert printed.stdout.decode().strip() == token
    async with (
        http_front_end(daemon.socket, token_file=token_file) as again,
        mcp_http(again.url, token) as client,
    ):
        assert structured(await client.call_tool("search", {"query": "zebrafish"}))
    renewed = await anyio.run_process([FRONT_END, "--new-token", "--token-file", str(token_file)])
    new = renewed.stdout.decode().strip()
    assert new not in ("", token)
    assert token_file.read_text().strip() == new


# ------------------------------------------------------------------ floods


class Flood:
    """Another user's flood, from a child process: ``requests`` initialize requests
    without the token, one connection each, then ``idle`` connections that send nothing,
    kept open, and new ones opened (the oldest closed) until ``stop``."""

    def __init__(self, uid: int, port: int, *, idle: int, requests: int) -> None:
        ready_r, ready_w = os.pipe()
        self.done_r, self.done_w = os.pipe()
        self.out_r, out_w = os.pipe()
        self.pid = os.fork()
        if self.pid == 0:  # the child: never returns into pytest
            report: dict[str, Any] = {}
            try:
                signal.alarm(3 * CHILD_SECONDS)
                resource.setrlimit(resource.RLIMIT_NOFILE, (idle + 256, idle + 256))
                _become(uid)
                statuses: dict[int, int] = {}
                for _ in range(requests):
                    status = raw_post(port, INITIALIZE, {})[0]
                    statuses[status] = statuses.get(status, 0) + 1
                report["statuses"] = statuses
                held: deque[socket.socket] = deque()

                def open_one() -> None:
                    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                    sock.setblocking(False)
                    sock.connect_ex(("127.0.0.1", port))
                    held.append(sock)
                    if len(held) > idle:
                        held.popleft().close()

                for _ in range(idle):
                    open_one()
                os.write(ready_w, b"r")
                opened = idle
                while not _readable(self.done_r):
                    for _ in range(20):
                        open_one()
                    opened += 20
                report["opened"] = opened
            except BaseException as exc:
                report["error"] = f"{type(exc).__name__}: {exc}"
            finally:
                os.write(out_w, json.dumps(report).encode())
                os._exit(0)
        os.close(ready_w)
        os.close(out_w)
        with os.fdopen(ready_r, "rb") as ready:
            self.started = ready.read(1) == b"r"

    def stop(self) -> dict[str, Any]:
        os.write(self.done_w, b"x")
        with os.fdopen(self.out_r, "rb") as out:
            raw = out.read()
        os.waitpid(self.pid, 0)
        report: dict[str, Any] = json.loads(raw)
        return report


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


@pytest.mark.slow
@pytest.mark.timeout(180)
@needs_root
async def test_a_flood_from_another_user_leaves_the_users_client_served(daemon: Daemon) -> None:
    """Thousands of session requests and of connections that send nothing, from another
    user, against a front end allowed 1,024 descriptors. Before: each request opened a
    session; the idle connections took every descriptor, accept() failed (and logged a
    traceback each time, thousands of lines a second) and the user's client could not
    connect at all."""
    write(daemon.root / "docs" / "fish.md", f"# Fish\n\n{SECRET}\n")
    await daemon.refresh()
    _, other = throwaway_uids()
    async with http_front_end(daemon.socket, nofile=1024) as front:
        flood = await anyio.to_thread.run_sync(
            lambda: Flood(other, front.port, idle=3000, requests=1000)
        )
        try:
            assert flood.started
            most_fds = open_fds(front.proc.pid)
            with anyio.fail_after(CLIENT_TIMEOUT):
                async with mcp_http(front.url, front.token) as client:
                    found = structured(await client.call_tool("search", {"query": "zebrafish"}))
                    assert found["results"][0]["relpath"] == "docs/fish.md"
                    most_fds = max(most_fds, open_fds(front.proc.pid))
                    path = "docs/fish.md"
                    read = structured(await client.call_tool("read_file", {"path": path}))
                    assert SECRET in read["text"]
            most_fds = max(most_fds, open_fds(front.proc.pid))
        finally:
            report = await anyio.to_thread.run_sync(flood.stop)
        assert "error" not in report, report
        assert report["statuses"] == {"401": 1000}, report
        assert report["opened"] > 3000
        assert most_fds < 1024 - 64
        # The same warning over and over (a misconfigured client of the user's own this
        # time, with the token but a Host header of another name): said once, then counted.
        headers = {
            "Authorization": f"Bearer {front.token}",
            "Host": f"elsewhere.example:{front.port}",
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
        }
        async with httpx2.AsyncClient(timeout=CLIENT_TIMEOUT) as http:
            for _ in range(300):
                response = await http.post(front.url, content=INITIALIZE, headers=headers)
                assert response.status_code == 421
        front.proc.terminate()
        with anyio.fail_after(CLIENT_TIMEOUT):
            await front.proc.wait()
        log = await front.read_log()
    lines = log.splitlines()
    assert len(lines) < 20, log[-3000:]
    refused = [line for line in lines if "without the right token" in line]
    assert len(refused) == 2
    assert "[repeated 999 more times" in refused[1]
    wrong_host = [line for line in lines if "Invalid Host header" in line]
    assert len(wrong_host) == 2
    assert "[repeated 299 more times" in wrong_host[1]


# ------------------------------------------------------------------ the connections


async def hello(scope: Any, receive: Any, send: Any) -> None:
    """An ASGI app: ``/slow`` streams five chunks over 1.5 s, anything else says hello."""
    assert scope["type"] == "http"
    await send({"type": "http.response.start", "status": 200, "headers": []})
    if scope["path"] == "/slow":
        for _ in range(5):
            await send({"type": "http.response.body", "body": b"chunk ", "more_body": True})
            await anyio.sleep(0.3)
    await send({"type": "http.response.body", "body": b"hello"})


@asynccontextmanager
async def bounded_server(waiting: Waiting, request_seconds: float) -> AsyncIterator[int]:
    """uvicorn serving ``hello`` on loopback with the front end's protocol; the port."""
    import uvicorn

    sock = bind("127.0.0.1", 0)
    config = uvicorn.Config(
        hello,
        http=protocol_class(waiting, request_seconds),
        lifespan="off",
        log_config=None,
        backlog=ACCEPT_BATCH,
    )
    server = uvicorn.Server(config)
    async with anyio.create_task_group() as tg:
        tg.start_soon(server.serve, [sock])

        async def started() -> bool:
            return server.started

        await wait_for(started)
        try:
            yield sock.getsockname()[1]
        finally:
            server.should_exit = True


def closed_by_server(sock: socket.socket) -> bool:
    """Whether the server has closed ``sock`` (a non-blocking socket it never wrote to)."""
    try:
        return sock.recv(1) == b""
    except BlockingIOError:
        return False
    except ConnectionError:
        return True


@pytest.mark.slow
async def test_a_request_that_trickles_in_is_cut_off_but_a_long_response_is_not() -> None:
    """Before (uvicorn alone): a byte now and then kept the connection for ever."""
    async with bounded_server(Waiting(most=64), request_seconds=0.5) as port:
        trickle = socket.create_connection(("127.0.0.1", port))
        trickle.setblocking(False)
        with anyio.fail_after(10):
            for byte in b"GET / HTTP/1.1\r\nHost: x\r\nX-Padding: " + b"a" * 10_000:
                trickle.send(bytes([byte]))
                await anyio.sleep(0.05)
                if closed_by_server(trickle):
                    break
        assert closed_by_server(trickle)
        trickle.close()
        async with httpx2.AsyncClient() as http:
            slow = await http.get(f"http://127.0.0.1:{port}/slow")
        assert slow.text == "chunk " * 5 + "hello"


@pytest.mark.slow
async def test_connections_that_send_nothing_are_bounded_and_a_client_is_still_served() -> None:
    waiting = Waiting(most=8)
    async with bounded_server(waiting, request_seconds=30) as port:
        idle = [socket.create_connection(("127.0.0.1", port)) for _ in range(40)]
        for sock in idle:
            sock.setblocking(False)

        async def oldest_closed() -> bool:
            return all(closed_by_server(sock) for sock in idle[:32])

        await wait_for(oldest_closed)
        assert not any(closed_by_server(sock) for sock in idle[32:])
        async with httpx2.AsyncClient() as http:
            answer = await http.get(f"http://127.0.0.1:{port}/")
        assert answer.text == "hello"
        for sock in idle:
            sock.close()
    assert waiting.closed >= 32
