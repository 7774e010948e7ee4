"""Socket activation: a child process gets a real listening socket as fd 3, as from systemd.

A small launcher does what systemd does between fork and exec: dup2 the socket to fd 3,
set LISTEN_PID to its own pid, then exec the child, which keeps that pid.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from kbindex.daemon.serving.activation import inherited_socket

CHILD = """
import json, os, sys
from kbindex.daemon.serving.activation import ActivationError, inherited_socket
try:
    sock = inherited_socket()
except ActivationError as exc:
    print(json.dumps({"error": str(exc)}), flush=True)
    sys.exit(0)
if sock is None:
    print(json.dumps({"socket": None}), flush=True)
    sys.exit(0)
report = {
    "socket": sock.getsockname(),
    "blocking": sock.getblocking(),
    "inheritable": os.get_inheritable(sock.fileno()),
    "env": sorted(k for k in os.environ if k.startswith("LISTEN_")),
}
print(json.dumps(report), flush=True)
sock.setblocking(True)
conn, _ = sock.accept()
conn.sendall(conn.recv(100))
conn.close()
"""


LAUNCHER = """
import os, sys
fd, pid, child = int(sys.argv[1]), sys.argv[2], sys.argv[3]
os.dup2(fd, 3)
os.environ.update(
    LISTEN_PID=pid or str(os.getpid()), LISTEN_FDS="1", LISTEN_FDNAMES="kbindexd.socket"
)
os.execv(sys.executable, [sys.executable, "-c", child])
"""


def spawn(fd: int, *, pid: str = "") -> subprocess.Popen[str]:
    """Run CHILD with ``fd`` as its fd 3 and the activation variables set."""
    return subprocess.Popen(
        [sys.executable, "-c", LAUNCHER, str(fd), pid, CHILD],
        pass_fds=(fd,),
        stdout=subprocess.PIPE,
        text=True,
    )


def report(child: subprocess.Popen[str]) -> dict[str, object]:
    assert child.stdout is not None
    line = child.stdout.readline()
    result: dict[str, object] = json.loads(line)
    return result


@pytest.fixture
def listener(tmp_path: Path) -> Iterator[tuple[socket.socket, Path]]:
    path = tmp_path / "kbindex.sock"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(path))
    sock.listen()
    yield sock, path
    sock.close()


def test_child_serves_the_inherited_socket(listener: tuple[socket.socket, Path]) -> None:
    sock, path = listener
    with spawn(sock.fileno()) as child:
        got = report(child)
        assert got == {"socket": str(path), "blocking": False, "inheritable": False, "env": []}
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
            client.settimeout(5)
            client.connect(str(path))
            client.sendall(b"hello")
            assert client.recv(100) == b"hello"
        assert child.wait(timeout=5) == 0


def test_pid_mismatch_is_not_activation(listener: tuple[socket.socket, Path]) -> None:
    sock, _ = listener
    with spawn(sock.fileno(), pid="1") as child:
        assert report(child) == {"socket": None}
        assert child.wait(timeout=5) == 0


def test_pid_mismatch_in_process_unsets_variables() -> None:
    env = {"LISTEN_PID": str(os.getpid() + 1), "LISTEN_FDS": "1", "LISTEN_FDNAMES": "x"}
    assert inherited_socket(env) is None
    assert env == {}


def test_no_variables_is_not_activation() -> None:
    assert inherited_socket({}) is None
    assert inherited_socket({"LISTEN_PID": str(os.getpid()), "LISTEN_FDS": "0"}) is None
    assert inherited_socket({"LISTEN_PID": "x", "LISTEN_FDS": "1"}) is None


def test_fd_that_is_not_a_socket_is_a_clear_error(tmp_path: Path) -> None:
    with (
        open(tmp_path / "plain", "w") as plain,
        spawn(plain.fileno()) as child,
    ):
        error = report(child)["error"]
        assert isinstance(error, str)
        assert "fd 3" in error
        assert "is not a socket" in error
        assert child.wait(timeout=5) == 0


@pytest.mark.parametrize(
    ("kind", "problem"),
    [
        (socket.SOCK_DGRAM, "SOCK_DGRAM socket, expected SOCK_STREAM"),
        (socket.SOCK_STREAM, "is not listening"),
    ],
)
def test_wrong_kind_of_socket_is_a_clear_error(
    tmp_path: Path, kind: socket.SocketKind, problem: str
) -> None:
    with socket.socket(socket.AF_UNIX, kind) as sock:
        sock.bind(str(tmp_path / "s"))
        with spawn(sock.fileno()) as child:
            error = report(child)["error"]
            assert isinstance(error, str)
            assert problem in error
            assert child.wait(timeout=5) == 0


def test_tcp_socket_is_a_clear_error() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        with spawn(sock.fileno()) as child:
            error = report(child)["error"]
            assert isinstance(error, str)
            assert "AF_INET socket, expected AF_UNIX" in error
            assert child.wait(timeout=5) == 0
