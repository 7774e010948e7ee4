"""The daemon under a service manager, with the manager's side played by the test:
a real datagram socket as NOTIFY_SOCKET, a real listening socket passed as fd 3, real
signals."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from conftest import Daemon, MakeDaemon, wait_exit, wait_for, write
from kbindex.daemon.engine import sqlite
from kbindex.proto.client import Client, ClientError, DaemonError
from kbindex.proto.messages import RefreshReply, Reload, ReloadReply, StatusReply

pytestmark = pytest.mark.anyio


class NotifyListener:
    """The service manager's end of sd_notify: collects every datagram."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(str(path))
        self.sock.setblocking(False)
        self.messages: list[str] = []

    def drain(self) -> list[str]:
        while True:
            try:
                self.messages.append(self.sock.recv(4096).decode())
            except BlockingIOError:
                return self.messages

    def fields(self) -> list[str]:
        return [line for m in self.drain() for line in m.splitlines()]

    def close(self) -> None:
        self.sock.close()


@pytest.mark.slow
async def test_ready_status_watchdog_and_stopping(make_daemon: MakeDaemon, sockdir: Path) -> None:
    listener = NotifyListener(sockdir / "notify")
    d = make_daemon()
    for i in range(50):
        write(d.root / f"n{i}.md", f"note {i}\n")
    d.extra_env = {"NOTIFY_SOCKET": str(listener.path), "WATCHDOG_USEC": "400000"}
    try:
        await d.start()

        async def seen(prefix: str) -> bool:
            return any(f.startswith(prefix) for f in listener.fields())

        await wait_for(lambda: seen("READY=1"))
        await wait_for(lambda: seen("STATUS=idle, 50 files"))
        # WATCHDOG_USEC=0.4 s: pings every 0.2 s; several arrive within a couple of seconds.
        await wait_for(lambda: _count(listener.fields(), "WATCHDOG=1", at_least=3), timeout=5)
        assert d.stop() == 0
        assert "STOPPING=1" in listener.fields()
        ready_at = listener.fields().index("READY=1")
        assert ready_at >= 0
    finally:
        listener.close()


@pytest.mark.slow
async def test_a_saved_file_is_counted_at_once_in_status_and_the_status_line(
    make_daemon: MakeDaemon, sockdir: Path
) -> None:
    """A file saved after the first scan: once it is searchable, ``kbctl status`` counts
    it, and so does the line ``systemctl status`` shows, at the indexer's commit. Before,
    that line was counted again only after a full scan or 30 s later."""
    listener = NotifyListener(sockdir / "notify")
    d = make_daemon()
    write(d.root / "a.md", "first note\n")
    d.extra_env = {"NOTIFY_SOCKET": str(listener.path)}
    try:
        await d.start()

        async def seen(field: str) -> bool:
            return field in listener.fields()

        await wait_for(lambda: seen("STATUS=idle, 1 files"))
        write(d.root / "b.md", "second note with a freshword\n")
        async with d.client() as c:

            async def found() -> bool:
                return bool((await c.search("freshword")).hits)

            await wait_for(found)
            assert (await c.status()).indexed_files == 2  # one call: no cache to outwait
        # Well within the 30 s of the old recount.
        await wait_for(lambda: seen("STATUS=idle, 2 files"), timeout=10)
    finally:
        listener.close()


async def _count(fields: list[str], value: str, *, at_least: int) -> bool:
    return fields.count(value) >= at_least


async def test_socket_activation_serves_the_inherited_socket(
    make_daemon: MakeDaemon, sockdir: Path
) -> None:
    d = make_daemon()
    write(d.root / "a.md", "activated search\n")
    proc, listening = _activated(d)
    listening.close()  # the daemon holds it now
    try:

        async def answers() -> bool:
            try:
                async with Client.connect(d.socket) as c:
                    return bool((await c.search("activated")).hits)
            except ClientError:
                return False

        await wait_for(answers, timeout=20)
        proc.send_signal(signal.SIGTERM)
        assert wait_exit(proc) == 0
        # The socket file belongs to the service manager: the daemon leaves it in place.
        assert d.socket.exists()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.slow
async def test_sigterm_lets_a_request_in_flight_finish(daemon: Daemon) -> None:
    for i in range(3000):
        write(daemon.root / f"d{i % 30}" / f"f{i}.txt", f"text number {i} " * 20)
    final: list[object] = []
    async with daemon.client() as c:

        async def refresh() -> None:
            async for reply in c.refresh_wait(full=True):
                final.append(reply)

        async with anyio.create_task_group() as tg:
            tg.start_soon(refresh)
            await wait_for(lambda: _progressing(final))
            assert daemon.proc is not None
            daemon.proc.send_signal(signal.SIGTERM)
    assert isinstance(final[-1], RefreshReply), "the refresh in flight must get its answer"
    # Either it finished within the drain, or it ended early and says so.
    assert final[-1].interrupted or final[-1].files_changed == 3000, final[-1]
    assert daemon.proc is not None and wait_exit(daemon.proc) == 0


async def _progressing(replies: list[object]) -> bool:
    return len(replies) >= 1


@pytest.mark.slow
async def test_sigterm_during_large_index_then_restart_equals_disk(
    make_daemon: MakeDaemon,
) -> None:
    d = make_daemon()
    for i in range(4000):
        write(d.root / f"d{i % 40}" / f"f{i}.md", f"body {i} " * 30)
    await d.start(wait_scan=False)
    assert d.proc is not None
    d.proc.send_signal(signal.SIGTERM)
    assert wait_exit(d.proc) == 0
    d.proc = None
    _assert_consistent(d)
    await d.start()
    _assert_consistent(d)
    async with d.client() as c:
        assert (await c.status()).indexed_files == 4000


def _assert_consistent(d: Daemon) -> None:
    """Every row in files has exactly one document, and every document a file on disk."""
    conn = sqlite.connect(f"file:{d.db_path}?mode=ro", uri=True)
    try:
        files = dict(conn.execute("SELECT id, path FROM files WHERE skip_reason IS NULL"))
        docs = {r for (r,) in conn.execute("SELECT rowid FROM docs")}
    finally:
        conn.close()
    assert set(files) == docs
    assert all(os.path.exists(p) for p in files.values())


@pytest.mark.slow
async def test_sighup_reloads_roots_and_ignores_without_dropping_connections(
    make_daemon: MakeDaemon, tmp_path: Path
) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    write(first / "keep.md", "reload keep\n")
    write(first / "drafts" / "draft.md", "reload draft\n")
    write(second / "other.md", "reload other\n")
    config = tmp_path / "kb.toml"
    config.write_text(f'roots = ["{first}"]\n')
    d = make_daemon(first)
    d.roots = []  # roots come from the config file, as under systemd
    d.extra_args = ["--config", str(config)]
    await d.start()
    assert sorted(await d.search_paths("reload")) == ["drafts/draft.md", "keep.md"]

    async with d.client() as held:  # a connection open across the reload
        config.write_text(f'roots = ["{first}", "{second}"]\nexclude_globs = ["drafts/"]\n')
        assert d.proc is not None
        d.proc.send_signal(signal.SIGHUP)

        async def reloaded() -> bool:
            hits = sorted((await held.search("reload")).hits, key=lambda h: h.path)
            return [h.relpath for h in hits] == ["keep.md", "other.md"]

        await wait_for(reloaded, timeout=15)
        status = await held.status()
    assert sorted(r.path for r in status.roots) == sorted([str(first), str(second)])

    config.write_text("roots = [\n")  # a broken config is refused; the daemon keeps going
    d.proc.send_signal(signal.SIGHUP)
    await wait_for(lambda: _logged(d, "reload refused"))
    assert len(await d.search_paths("reload")) == 2


async def _logged(d: Daemon, text: str) -> bool:
    return text in d.log()


def _activated(d: Daemon, *extra: str) -> tuple[subprocess.Popen[bytes], socket.socket]:
    """kbindexd started on a listening socket passed as fd 3, as systemd does; the
    socket is returned (still open, as systemd keeps it)."""
    listening = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listening.bind(str(d.socket))
    listening.listen()
    fd = listening.fileno()
    # A tiny launcher puts the socket at fd 3 and sets LISTEN_PID to its own pid, then
    # execs the daemon in the same process, as systemd does.
    launcher = (
        "import os, sys\n"
        f"os.dup2({fd}, 3)\n"
        "os.environ['LISTEN_FDS'] = '1'\n"
        "os.environ['LISTEN_PID'] = str(os.getpid())\n"
        "os.execv(sys.executable, [sys.executable] + sys.argv[1:])\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("KBINDEX_")}
    env["KBINDEX_SEMANTIC"] = "off"
    with d.log_path.open("ab") as log:
        proc = subprocess.Popen(
            [sys.executable, "-c", launcher, *d.command(*extra)[1:]],
            pass_fds=(fd,),
            stdout=log,
            stderr=log,
            env=env,
        )
    return proc, listening


@pytest.mark.slow
async def test_a_refused_configuration_keeps_serving_the_socket_until_fixed(
    make_daemon: MakeDaemon, tmp_path: Path
) -> None:
    d = make_daemon()
    root = d.root
    write(root / "a.md", "refusal fixed\n")
    config = tmp_path / "kb.toml"
    config.write_text(f'roots = ["{tmp_path / "gone"}"]\n')
    d.roots = []  # from the config file, as under systemd
    proc, listening = _activated(d, "--config", str(config))
    try:

        async def refused() -> StatusReply | None:
            try:
                async with Client.connect(d.socket) as c:
                    return await c.status()
            except ClientError:
                return None

        status = await wait_for(refused, timeout=20)
        assert status.unconfigured
        assert f"root {tmp_path / 'gone'} does not exist" in status.config_error
        async with Client.connect(d.socket) as c:
            with pytest.raises(DaemonError) as refusal:
                await c.search("refusal")
            assert refusal.value.code == "config_error"
            assert "systemctl --user reload kbindexd" in refusal.value.message
            with pytest.raises(DaemonError):
                await c.request(Reload(), ReloadReply)  # still broken: still refused
        assert proc.poll() is None

        config.write_text(f'roots = ["{root}"]\n')
        async with Client.connect(d.socket) as c:
            reply = await c.request(Reload(), ReloadReply)
        assert "starting with it" in reply.message

        async def found() -> bool:
            try:
                async with Client.connect(d.socket) as c:
                    return bool((await c.search("refusal")).hits)
            except ClientError:
                return False

        await wait_for(found, timeout=20)
        proc.send_signal(signal.SIGTERM)
        assert wait_exit(proc) == 0
    finally:
        listening.close()
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.slow
async def test_reload_request_answers_once_the_configuration_is_in_force(
    make_daemon: MakeDaemon, tmp_path: Path
) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    write(first / "one.md", "inforce one\n")
    write(second / "two.md", "inforce two\n")
    config = tmp_path / "kb.toml"
    config.write_text(f'roots = ["{first}"]\n')
    d = make_daemon(first)
    d.roots = []
    d.extra_args = ["--config", str(config)]
    await d.start()
    config.write_text(f'roots = ["{first}", "{second}"]\n')
    async with d.client() as c:
        reply = await c.request(Reload(), ReloadReply)
        assert "1 added" in reply.message
        status = await c.status()  # no waiting: in force when the reply came
        assert sorted(r.path for r in status.roots) == sorted([str(first), str(second)])
        config.write_text("roots = [\n")
        with pytest.raises(DaemonError) as refused:
            await c.request(Reload(), ReloadReply)
        assert refused.value.code == "config_error"
        assert (await c.status()).config_error
