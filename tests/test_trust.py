"""Clients talk only to their own daemon; the daemon plants nothing through others' links.

The two-user cases run for real: the test process (root in CI) forks, and each child
drops to a throwaway uid with no account (setresuid) before it does its part, so the
kernel sees two different users exactly as on a shared machine. The children run only
code the test process has already imported (the interpreter under /root is not readable
by other uids), so the modules a child needs are loaded before the fork.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import secrets
import select
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import anyio
import pytest
from conftest import Daemon, MakeDaemon, write
from kbindex.daemon import app, settings
from kbindex.daemon.backends import BACKENDS
from kbindex.daemon.serving.instance import UnsafeStateDirectory, check_state_dir
from kbindex.proto.address import default_socket_path
from kbindex.proto.blocking import BlockingClient
from kbindex.proto.client import Client, ClientError, UntrustedDaemon
from kbindex.proto.messages import Ping, Pong
from mcp import Client as MCPClient
from mcp import StdioServerParameters
from mcp_helpers import CLIENT_TIMEOUT, FRONT_END, front_end_env, text

pytestmark = pytest.mark.anyio

needs_root = pytest.mark.skipif(
    os.geteuid() != 0, reason="switching to other uids needs root (CI runs as root)"
)

CHILD_SECONDS = 20

anyio.run(anyio.sleep, 0)  # loads the event loop's modules before any fork


def throwaway_uids() -> tuple[int, int]:
    """Two uids no account uses (nothing in /etc/passwd), different on every run."""
    base = 200_000 + secrets.randbelow(700_000)
    return base, base + 1


def _become(uid: int) -> None:
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)


def as_user(uid: int, fn: Callable[[], Any]) -> Any:
    """Run ``fn`` in a child process that runs as ``uid``; its JSON result comes back."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        code = 0
        try:
            os.close(read_end)
            signal.alarm(CHILD_SECONDS)  # a child that hangs dies, and the test fails
            _become(uid)
            result = fn()
        except BaseException as exc:
            result, code = {"error": f"{type(exc).__name__}: {exc}"}, 1
        with os.fdopen(write_end, "w") as out:
            json.dump(result, out)
        os._exit(code)
    os.close(write_end)
    with os.fdopen(read_end) as src:
        raw = src.read()
    os.waitpid(pid, 0)
    return json.loads(raw)


class Listener:
    """A socket served by another user: it records whether any byte ever reaches it."""

    def __init__(self, uid: int, sock_path: Path, dir_mode: int | None) -> None:
        self.ready_r, ready_w = os.pipe()
        self.done_r, self.done_w = os.pipe()
        self.got_r, got_w = os.pipe()
        self.pid = os.fork()
        if self.pid == 0:
            try:
                signal.alarm(CHILD_SECONDS)
                _become(uid)
                if dir_mode is not None:  # the other user makes the directory first
                    sock_path.parent.mkdir(mode=0o700)
                    sock_path.parent.chmod(dir_mode)
                srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                srv.bind(str(sock_path))
                sock_path.chmod(0o777)  # anyone may connect: that is the trap
                srv.listen(8)
                srv.setblocking(False)
                os.write(ready_w, b"r")
                received = 0
                conns: list[socket.socket] = []
                while not _readable(self.done_r):
                    with suppress(BlockingIOError):
                        conns.append(srv.accept()[0])
                    for conn in conns:
                        conn.setblocking(False)
                        with suppress(BlockingIOError):
                            received += len(conn.recv(65536))
                os.write(got_w, str(received).encode())
            finally:
                os._exit(0)
        os.close(ready_w)
        os.close(got_w)
        assert os.read(self.ready_r, 1) == b"r", "the other user's listener did not start"

    def bytes_received(self) -> int:
        """Stop the listener; how many bytes clients sent it."""
        os.write(self.done_w, b"x")
        got = int(os.read(self.got_r, 64) or b"-1")
        os.waitpid(self.pid, 0)
        return got


def _readable(fd: int) -> bool:
    return bool(select.select([fd], [], [], 0.01)[0])


@contextmanager
def fresh_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(dir="/tmp", prefix="kbtrust-"))
    path.chmod(0o1777)  # shared and sticky, as /tmp is
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


CLIENTS = ("async", "blocking")
"""The async Client (kbindex-mcp, doctor) and the BlockingClient (kbctl's commands)."""


def connect_as(uid: int, sock: Path | None, client: str = "async") -> dict[str, str]:
    """As ``uid``, connect with the default lookup (sock None, a minimal environment
    without XDG_RUNTIME_DIR, as an MCP host gives) or to ``sock``; what happened."""

    def attempt() -> dict[str, str]:
        for name in ("XDG_RUNTIME_DIR", "KBINDEX_SOCKET"):
            os.environ.pop(name, None)
        if client == "blocking":
            return blocking()
        return anyio.run(go)

    def blocking() -> dict[str, str]:
        try:
            with BlockingClient.connect(sock, client_name="victim") as c:
                c.request(Ping(), Pong)
        except UntrustedDaemon as exc:
            return {"refused": str(exc)}
        except ClientError as exc:
            return {"other": f"{type(exc).__name__}: {exc}"}
        return {"connected": "yes"}

    async def go() -> dict[str, str]:
        try:
            with anyio.fail_after(CHILD_SECONDS / 2):
                async with Client.connect(sock, client_name="victim") as c:
                    await c.ping()
        except UntrustedDaemon as exc:
            return {"refused": str(exc)}
        except (ClientError, TimeoutError) as exc:
            return {"other": f"{type(exc).__name__}: {exc}"}
        return {"connected": "yes"}

    result: dict[str, str] = as_user(uid, attempt)
    return result


@needs_root
@pytest.mark.parametrize("client", CLIENTS)
def test_the_fallback_directory_made_first_by_another_user_is_refused(client: str) -> None:
    """Another user makes /tmp/kbindex-$UID (mode 0777) before the victim and serves a
    socket there: the victim's client sends nothing and says why."""
    victim, other = throwaway_uids()
    sock = Path("/tmp") / f"kbindex-{victim}" / "kbindex.sock"
    shutil.rmtree(sock.parent, ignore_errors=True)
    try:
        listener = Listener(other, sock, dir_mode=0o777)
        outcome = connect_as(victim, None, client)
        assert listener.bytes_received() == 0
    finally:
        shutil.rmtree(sock.parent, ignore_errors=True)
    message = outcome.get("refused", "")
    assert str(sock.parent) in message, outcome
    assert f"uid {other}" in message
    assert "not to you" in message


@needs_root
@pytest.mark.parametrize("client", CLIENTS)
def test_a_directory_of_another_user_is_refused_even_when_not_shared(client: str) -> None:
    victim, other = throwaway_uids()
    with fresh_dir() as base:
        sock = base / "theirs" / "kb.sock"
        listener = Listener(other, sock, dir_mode=0o755)
        outcome = connect_as(victim, sock, client)
        assert listener.bytes_received() == 0
    assert f"uid {other}" in outcome.get("refused", ""), outcome


@needs_root
@pytest.mark.parametrize("client", CLIENTS)
def test_a_socket_served_by_another_user_is_refused_in_the_victims_own_directory(
    client: str,
) -> None:
    """The directory passes (the victim's, 0700), but the process behind the socket is
    another user's: SO_PEERCRED tells, and nothing is sent."""
    victim, other = throwaway_uids()
    with fresh_dir() as base:
        theirs = base / "theirs"
        theirs.mkdir(mode=0o700)
        os.chown(theirs, other, other)
        mine = base / "mine"
        mine.mkdir(mode=0o700)
        os.chown(mine, victim, victim)
        listener = Listener(other, theirs / "kb.sock", dir_mode=None)
        # A bound socket keeps answering under its new name: root moves it in.
        os.rename(theirs / "kb.sock", mine / "kb.sock")
        outcome = connect_as(victim, mine / "kb.sock", client)
        assert listener.bytes_received() == 0
    message = outcome.get("refused", "")
    assert f"served by uid {other}" in message, outcome
    assert str(mine / "kb.sock") in message


@needs_root
def test_kbctl_exits_non_zero_on_a_shared_socket_directory() -> None:
    _, other = throwaway_uids()
    with fresh_dir() as base:
        sock = base / "shared" / "kb.sock"
        listener = Listener(other, sock, dir_mode=0o1777)
        done = subprocess.run(
            [sys.executable, "-m", "kbindex.ctl.main", "--socket", str(sock), "search", "x"],
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert listener.bytes_received() == 0
    assert done.returncode == 1
    assert done.stdout == ""
    assert str(sock.parent) in done.stderr
    assert "writable by others" in done.stderr or f"uid {other}" in done.stderr


@pytest.mark.slow
@needs_root
async def test_every_mcp_tool_answers_with_the_refusal_and_no_results() -> None:
    _, other = throwaway_uids()
    with fresh_dir() as base:
        sock = base / "shared" / "kb.sock"
        listener = Listener(other, sock, dir_mode=0o777)
        params = StdioServerParameters(
            command=FRONT_END, args=["--socket", str(sock)], env=front_end_env()
        )
        calls = {
            "search": {"query": "notes"},
            "read_file": {"path": "a.md"},
            "find_files": {"glob": "*"},
            "get_index_stats": {},
        }
        async with MCPClient(params, read_timeout_seconds=CLIENT_TIMEOUT) as client:
            for tool, arguments in calls.items():
                result = await client.call_tool(tool, arguments)
                assert result.is_error, (tool, result)
                assert str(sock.parent) in text(result), tool
                assert result.structured_content is None, tool
        assert listener.bytes_received() == 0


# ------------------------------------------------------------ the daemon's own files


async def test_the_daemon_refuses_a_socket_directory_others_can_write(
    make_daemon: MakeDaemon, tmp_path: Path
) -> None:
    daemon = make_daemon(write(tmp_path / "root" / "a.md", "alpha").parent)
    with fresh_dir() as base:
        shared = base / "shared"
        shared.mkdir()
        shared.chmod(0o1777)
        daemon.socket = shared / "kb.sock"
        proc = daemon.spawn()
        assert proc.wait(timeout=30) != 0
    assert "writable by others" in daemon.log()
    assert not (shared / "kb.sock").exists()


@pytest.mark.slow
async def test_a_socket_in_tmp_is_refused_with_advice_that_leaves_tmp_alone(
    make_daemon: MakeDaemon, tmp_path: Path
) -> None:
    """``--socket /tmp/kb.sock``: /tmp is shared on purpose (mode 1777). The daemon and
    kbctl refuse it and say to put the socket elsewhere, never to remove or chmod /tmp;
    only a lax directory of the user's own is to be made private."""
    sock = Path("/tmp") / f"kbt-{secrets.token_hex(4)}.sock"
    daemon = make_daemon(write(tmp_path / "root" / "a.md", "alpha").parent)
    daemon.socket = sock
    assert daemon.spawn().wait(timeout=30) != 0
    ctl = subprocess.run(
        [sys.executable, "-m", "kbindex.ctl.main", "--socket", str(sock), "status"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert ctl.returncode == 1 and ctl.stdout == ""
    for message in (daemon.log(), ctl.stderr):
        assert "the socket directory /tmp is shared" in message, message
        assert "Leave /tmp as it is" in message and "$KBINDEX_SOCKET" in message
        assert "remove" not in message.lower() and "chmod" not in message
    assert not sock.exists()
    with fresh_dir() as base:
        mine = base / "mine"
        mine.mkdir()
        mine.chmod(0o777)
        ctl = subprocess.run(
            [sys.executable, "-m", "kbindex.ctl.main", "--socket", str(mine / "kb.sock"), "status"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    assert f"make it private with chmod go-w {mine}" in ctl.stderr, ctl.stderr


async def test_a_link_planted_as_the_lock_file_is_not_followed(
    make_daemon: MakeDaemon, tmp_path: Path
) -> None:
    """Before: the daemon wrote its pid through the link into the target file."""
    daemon = make_daemon(write(tmp_path / "root" / "a.md", "alpha").parent)
    precious = write(tmp_path / "precious.txt", "keep me\n")
    daemon.socket.parent.mkdir(exist_ok=True)
    Path(f"{daemon.socket}.lock").symlink_to(precious)
    proc = daemon.spawn()
    assert proc.wait(timeout=30) != 0
    assert precious.read_text() == "keep me\n"
    assert "symbolic link" in daemon.log()


def run_daemon_as(uid: int, argv: list[str], home: Path) -> dict[str, Any]:
    """``kbindexd ARGV`` in a child running as ``uid`` (in-process: the interpreter is
    not readable by other uids); its exit status and what it logged."""

    def daemon() -> dict[str, Any]:
        os.environ["XDG_CONFIG_HOME"] = str(home)  # no config file of the test's user
        logged: list[str] = []
        handler = logging.Handler()
        handler.emit = lambda record: logged.append(record.getMessage())  # type: ignore[method-assign]
        logging.getLogger("kbindexd").addHandler(handler)
        code = app.main(argv)
        return {"code": code, "log": logged}

    result: dict[str, Any] = as_user(uid, daemon)
    return result


@pytest.mark.slow
@needs_root
def test_the_daemon_refuses_a_state_directory_another_user_made(tmp_path: Path) -> None:
    """Another user made the state directory first (open to all, as a shared folder is)
    and left an index file of theirs in it: the daemon would write the index of the
    victim's files into it, for them to read. It refuses at start, with exit status 2
    (a restart cannot help) and one line saying whose it is; their file stays empty."""
    victim, other = throwaway_uids()
    with fresh_dir() as base:
        for name in ("root", "sock"):
            (base / name).mkdir(mode=0o700)
            os.chown(base / name, victim, victim)
        write(base / "root" / "a.md", "private words\n")
        state = base / "state"

        def plant() -> dict[str, str]:
            state.mkdir()
            state.chmod(0o777)
            trap = state / "index.sqlite3"
            trap.touch()
            trap.chmod(0o666)
            return {}

        assert as_user(other, plant) == {}
        argv = [str(base / "root"), "--state-dir", str(state), "--socket", str(base / "sock" / "s")]
        outcome = run_daemon_as(victim, argv, base)
        assert (state / "index.sqlite3").stat().st_size == 0
    assert outcome["code"] == 2, outcome
    (line,) = outcome["log"]
    assert f"{state} belongs to uid {other}, not to you" in line
    assert "--state-dir" in line


@pytest.mark.slow
def test_the_daemon_refuses_a_state_directory_others_can_write(
    make_daemon: MakeDaemon, tmp_path: Path
) -> None:
    daemon = make_daemon(write(tmp_path / "root" / "a.md", "alpha").parent)
    daemon.state_dir = tmp_path / "shared" / "state"
    daemon.state_dir.mkdir(parents=True)
    daemon.state_dir.chmod(0o777)
    proc = daemon.spawn()
    assert proc.wait(timeout=30) == 2  # not restarted by systemd: it would not help
    refusal = f"{daemon.state_dir} is writable by others (mode 777)"
    assert refusal in daemon.log() and f"chmod go-w {daemon.state_dir}" in daemon.log()
    assert os.listdir(daemon.state_dir) == []
    assert not daemon.socket.exists()


@pytest.mark.parametrize(
    ("where", "mode", "problem"),
    [
        ("state", 0o770, "is writable by its group (mode 770)"),
        ("state", 0o1777, "is writable by others (mode 1777)"),  # sticky is no excuse here
        ("parent", 0o777, "is writable by others (mode 777)"),
        ("parent", 0o775, "is writable by its group (mode 775)"),
        ("grandparent", 0o757, "is writable by others (mode 757)"),
        ("link", 0o777, ""),  # a link of the user's own: what counts is where it leads
        ("parent", 0o1777, ""),  # as /tmp: others may add entries, not move ours
        ("state", 0o755, ""),
    ],
)
def test_a_state_directory_others_can_change_is_refused(
    tmp_path: Path, where: str, mode: int, problem: str
) -> None:
    state = tmp_path / "a" / "b" / "state"
    state.mkdir(parents=True, mode=0o700)
    changed = {"state": state, "parent": state.parent, "grandparent": state.parent.parent}
    given = state
    if where == "link":
        given = tmp_path / "link"
        given.symlink_to(state)
    else:
        changed[where].chmod(mode)
    if not problem:
        check_state_dir(given)
        return
    with pytest.raises(UnsafeStateDirectory) as refused:
        check_state_dir(given)
    assert f"{changed[where]} {problem}" in str(refused.value)
    assert str(refused.value).endswith(f"chmod go-w {changed[where]}")


@needs_root
def test_a_state_directory_reached_through_another_users_link_is_refused(
    tmp_path: Path,
) -> None:
    """A link in a sticky folder is its owner's to point elsewhere at any time."""
    _, other = throwaway_uids()
    with fresh_dir() as base:
        state = tmp_path / "state"
        state.mkdir(mode=0o700)
        link = base / "kbstate"
        link.symlink_to(state)
        os.lchown(link, other, other)
        with pytest.raises(UnsafeStateDirectory) as refused:
            check_state_dir(link)
    assert f"{link} is a symbolic link of uid {other}" in str(refused.value)
    assert "--state-dir" in str(refused.value)


@pytest.mark.slow
async def test_a_state_directory_in_a_sticky_shared_folder_is_accepted(
    make_daemon: MakeDaemon,
) -> None:
    """As /tmp: others may add entries to a sticky folder, not rename or remove ours."""
    with fresh_dir() as base:
        daemon = make_daemon(write(base / "root" / "a.md", "alpha\n").parent)
        daemon.state_dir = base / "state"
        await daemon.start()
        assert await daemon.search_paths("alpha") == ["a.md"]
        assert stat.S_IMODE(daemon.state_dir.stat().st_mode) == 0o700
        daemon.stop()


# ------------------------------------------------------------ finding the socket


def test_lookup_prefers_the_users_runtime_directory_without_xdg_runtime_dir(
    tmp_path: Path,
) -> None:
    """MCP hosts start front ends without XDG_RUNTIME_DIR; the systemd user service
    serves in /run/user/$UID all the same."""
    uid = os.getuid()
    (tmp_path / str(uid)).mkdir()
    found = default_socket_path({"HOME": "/h"}, run_user=tmp_path)
    assert found == str(tmp_path / str(uid) / "kbindex" / "kbindex.sock")
    xdg = default_socket_path({"XDG_RUNTIME_DIR": "/x"}, run_user=tmp_path)
    assert xdg == "/x/kbindex/kbindex.sock"
    assert default_socket_path({}, run_user=tmp_path / "none") == f"/tmp/kbindex-{uid}/kbindex.sock"


@pytest.mark.slow
async def test_kbctl_takes_a_socket_path_relative_to_the_current_directory(
    daemon: Daemon,
) -> None:
    """``--socket kb.sock`` run in the socket's directory: the directory checked for
    trust is the current one (a bare file name has no directory part of its own)."""
    done = subprocess.run(
        [sys.executable, "-m", "kbindex.ctl.main", "--socket", daemon.socket.name, "status"],
        cwd=daemon.socket.parent,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 0, done.stderr
    assert f"socket: {daemon.socket}" in done.stdout


@needs_root
def test_lookup_skips_a_runtime_directory_that_is_not_the_users(tmp_path: Path) -> None:
    uid = os.getuid()
    (tmp_path / str(uid)).mkdir()
    os.chown(tmp_path / str(uid), 123_456, 123_456)
    found = default_socket_path({}, run_user=tmp_path)
    assert found == f"/tmp/kbindex-{uid}/kbindex.sock"


def test_log_level_is_case_insensitive(tmp_path: Path) -> None:
    parser = argparse.ArgumentParser()
    settings.add_arguments(parser, tuple(BACKENDS))
    config = write(tmp_path / "config.toml", "")
    base = [str(tmp_path), "--state-dir", str(tmp_path / "s"), "--config", str(config)]
    given = settings.load(parser.parse_args([*base, "--log-level", "INFO"]), {})
    assert given.log_level == "info"
    from_env = settings.load(parser.parse_args(base), {"KBINDEX_LOG_LEVEL": "WARNING"})
    assert from_env.log_level == "warning"
