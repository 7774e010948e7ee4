"""kbindex-mcp as a process: daemon down or restarting, stdin EOF, parent death, many front
ends at once, and the Streamable HTTP mode with its DNS-rebinding protection."""

from __future__ import annotations

import json
import os
import signal
import sys
import textwrap
from pathlib import Path

import anyio
import httpx2
import pytest
from anyio.streams.buffered import BufferedByteReceiveStream
from conftest import Daemon, MakeDaemon, wait_for, write
from kbindex.mcpfront import backend as backend_module
from kbindex.mcpfront.backend import Backend, DaemonTimeout
from mcp_helpers import (
    CLIENT_TIMEOUT,
    FRONT_END,
    corpus,
    front_end_env,
    http_front_end,
    mcp_http,
    mcp_stdio,
    structured,
    text,
)

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

INITIALIZE = (
    json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "tests", "version": "0"},
            },
        }
    )
    + "\n"
).encode()


async def test_daemon_not_running_then_started(make_daemon: MakeDaemon) -> None:
    daemon = make_daemon()
    corpus(daemon.root)
    async with mcp_stdio(daemon.socket) as client:
        # The front end starts and lists its tools without a daemon.
        assert len((await client.list_tools()).tools) == 6
        for name, args in (("search", {"query": "queue"}), ("get_index_stats", {})):
            result = await client.call_tool(name, args)
            assert result.is_error
            message = text(result)
            assert "not running" in message
            assert str(daemon.socket) in message
            assert "\n" not in message
            assert "Traceback" not in message
        # Connected lazily: the first call after the daemon comes up succeeds.
        await daemon.start()
        found = structured(await client.call_tool("search", {"query": "queue"}))
        assert found["total_hits"] == 2


async def test_reconnects_after_the_daemon_restarts(daemon: Daemon) -> None:
    corpus(daemon.root)
    await daemon.refresh()
    async with mcp_stdio(daemon.socket) as client:
        assert structured(await client.call_tool("search", {"query": "queue"}))["returned"] == 2
        # Restarted between two calls: the stale connection is replaced transparently.
        daemon.stop()
        await daemon.start()
        assert structured(await client.call_tool("search", {"query": "queue"}))["returned"] == 2
        # Down during a call: a clear error, then working again once it is back.
        daemon.stop()
        down = await client.call_tool("search", {"query": "queue"})
        assert down.is_error
        assert "not running" in text(down)
        await daemon.start()
        assert structured(await client.call_tool("get_index_stats", {}))["indexed_files"] == 4


def _state(pid: int) -> str | None:
    """The process state letter, or None once it is gone (a zombie counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    state = stat.rsplit(")", 1)[1].split()[0]
    return None if state in ("Z", "X") else state


async def _gone(pid: int) -> bool:
    return _state(pid) is None


async def test_exits_on_stdin_eof_with_only_protocol_on_stdout(daemon: Daemon) -> None:
    proc = await anyio.open_process(
        [FRONT_END, "--socket", str(daemon.socket)], env=front_end_env()
    )
    async with proc:
        assert proc.stdin is not None
        assert proc.stdout is not None
        assert proc.stderr is not None
        await proc.stdin.send(INITIALIZE)
        with anyio.fail_after(CLIENT_TIMEOUT):
            first = await proc.stdout.receive()
        await proc.stdin.aclose()
        with anyio.fail_after(5):
            code = await proc.wait()
        rest = b"".join([chunk async for chunk in proc.stdout])
        errors = b"".join([chunk async for chunk in proc.stderr])
    assert code == 0, errors.decode()
    lines = (first + rest).decode().splitlines()
    assert [json.loads(line)["id"] for line in lines] == [1]
    assert b"Traceback" not in errors


async def test_exits_when_its_parent_dies(daemon: Daemon) -> None:
    """The parent is SIGKILLed while the front end's stdin stays open (held by this test):
    no EOF ever arrives, only the parent-death watchdog can end it."""
    parent_script = textwrap.dedent(
        f"""
        import subprocess, sys, signal
        child = subprocess.Popen([{FRONT_END!r}, "--socket", {str(daemon.socket)!r}])
        print(child.pid, flush=True)
        signal.pause()
        """
    )
    read_end, write_end = os.pipe()
    child_pid = 0
    try:
        async with await anyio.open_process(
            [sys.executable, "-c", parent_script], stdin=read_end, env=front_end_env()
        ) as parent:
            os.close(read_end)
            assert parent.stdout is not None
            out = BufferedByteReceiveStream(parent.stdout)
            with anyio.fail_after(CLIENT_TIMEOUT):
                child_pid = int(await out.receive_until(b"\n", 100))
                # The child shares the parent's stdout: its answer proves it is serving.
                os.write(write_end, INITIALIZE)
                answer = await out.receive_until(b"\n", 100_000)
            assert json.loads(answer)["id"] == 1
            parent.kill()
            await parent.wait()
        await wait_for(lambda: _gone(child_pid), timeout=5)
    finally:
        os.close(write_end)
        if child_pid and _state(child_pid) is not None:
            os.kill(child_pid, signal.SIGKILL)


async def test_twenty_front_ends_at_once_survive_a_daemon_restart(daemon: Daemon) -> None:
    """20 front ends, each connected to the daemon: correct answers for each, then the
    daemon restarts under all of them, and every one answers its next call."""
    count = 20
    for n in range(count):
        write(daemon.root / f"animal{n:02}.md", f"# Animal {n}\n\nuniqueword{n} lives here\n")
    await daemon.refresh()
    answers: dict[int, tuple[list[str], str]] = {}
    after: dict[int, list[str]] = {}
    first_round = anyio.Semaphore(0)
    restarted = anyio.Event()

    async def one(n: int) -> None:
        async with mcp_stdio(daemon.socket) as client:
            found = structured(await client.call_tool("search", {"query": f"uniqueword{n}"}))
            read = structured(
                await client.call_tool("read_file", {"path": f"animal{n:02}.md", "start_line": 3})
            )
            answers[n] = ([r["relpath"] for r in found["results"]], read["text"])
            first_round.release()
            await restarted.wait()
            again = structured(await client.call_tool("search", {"query": f"uniqueword{n}"}))
            after[n] = [r["relpath"] for r in again["results"]]

    with anyio.fail_after(80):
        async with anyio.create_task_group() as tg:
            for n in range(count):
                tg.start_soon(one, n)
            for _ in range(count):
                await first_round.acquire()
            daemon.stop()
            await daemon.start()
            restarted.set()
    assert answers == {n: ([f"animal{n:02}.md"], f"uniqueword{n} lives here") for n in range(count)}
    assert after == {n: [f"animal{n:02}.md"] for n in range(count)}


async def test_http_serves_many_clients_and_rejects_foreign_hosts(daemon: Daemon) -> None:
    corpus(daemon.root)
    await daemon.refresh()
    async with http_front_end(daemon.socket) as front:
        url, proc = front.url, front.proc
        assert url.startswith("http://127.0.0.1:")
        assert url.endswith("/mcp")
        results: list[int] = []

        async def one(query: str) -> None:
            async with mcp_http(url, front.token) as client:
                found = structured(await client.call_tool("search", {"query": query}))
                results.append(found["total_hits"])
                seen: list[float] = []

                async def on_progress(
                    progress: float, total: float | None, message: str | None
                ) -> None:
                    seen.append(progress)

                refreshed = await client.call_tool(
                    "refresh_index", {"filepath": "docs"}, progress_callback=on_progress
                )
                assert structured(refreshed)["success"] is True
                assert seen, "no progress notification over HTTP"

        with anyio.fail_after(CLIENT_TIMEOUT):
            async with anyio.create_task_group() as tg:
                for query in ("queue", "scheduler", "zebrafish"):
                    tg.start_soon(one, query)
        assert sorted(results) == [1, 1, 2]

        port = url.split(":")[2].split("/")[0]
        headers = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "Authorization": f"Bearer {front.token}",
        }
        async with httpx2.AsyncClient(timeout=CLIENT_TIMEOUT) as http:
            rebinding = await http.post(
                url, content=INITIALIZE, headers={**headers, "Host": f"evil.example:{port}"}
            )
            assert rebinding.status_code == 421
            foreign = await http.post(
                url, content=INITIALIZE, headers={**headers, "Origin": "http://evil.example"}
            )
            assert foreign.status_code == 403
            local = await http.post(
                url, content=INITIALIZE, headers={**headers, "Origin": "http://localhost:6274"}
            )
            assert local.status_code == 200
        proc.terminate()
        with anyio.fail_after(10):
            await proc.wait()
        assert proc.stdout is not None
        assert b"".join([chunk async for chunk in proc.stdout]) == b""


async def test_a_request_that_times_out_sends_later_ones_over_a_new_connection(
    make_daemon: MakeDaemon, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """kbindexd stops answering (SIGSTOP: alive, connections open, nothing read) and a
    successor serves the same socket path, as a supervisor would start one. Before: the
    front end kept the stuck connection, so every later call waited on it and timed out
    too. The front end's own Backend, in-process, with a one-second timeout."""
    monkeypatch.setattr(backend_module, "REQUEST_TIMEOUT", 1.0)
    stuck = make_daemon()
    corpus(stuck.root)
    await stuck.start()
    assert stuck.proc is not None
    async with Backend.open(stuck.socket) as backend:
        assert [h.relpath for h in (await backend.search("zebrafish", 5, None)).hits]
        stuck.proc.send_signal(signal.SIGSTOP)
        try:
            with pytest.raises(DaemonTimeout):
                await backend.search("zebrafish", 5, None)
            # The stuck daemon keeps its socket and lock under other names, as if gone.
            stuck.socket.rename(stuck.socket.with_name("stuck.sock"))
            lock = stuck.socket.with_name(stuck.socket.name + ".lock")
            lock.rename(lock.with_name("stuck.sock.lock"))
            successor = make_daemon(stuck.root)
            successor.state_dir = tmp_path / "successor-state"
            successor.log_path = tmp_path / "successor.log"
            await successor.start()
            with anyio.fail_after(CLIENT_TIMEOUT):
                found = await backend.search("zebrafish", 5, None)
            assert [h.relpath for h in found.hits] == ["a b/späce.md"]
        finally:
            stuck.proc.send_signal(signal.SIGCONT)
