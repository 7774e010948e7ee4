"""sd_notify messages arrive on a real AF_UNIX datagram socket standing in for systemd."""

from __future__ import annotations

import logging
import os
import socket
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from kbindex.daemon.serving.notify import Notifier, watchdog_loop


@pytest.fixture
def receiver(tmp_path: Path) -> Iterator[tuple[socket.socket, str]]:
    """A bound datagram socket and the NOTIFY_SOCKET value that names it."""
    path = tmp_path / "notify"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(path))
    sock.settimeout(2)
    yield sock, str(path)
    sock.close()


def messages(sock: socket.socket) -> dict[str, str]:
    data = sock.recv(4096).decode()
    return dict(line.split("=", 1) for line in data.split("\n"))


def test_ready_status_watchdog_stopping(receiver: tuple[socket.socket, str]) -> None:
    sock, address = receiver
    notifier = Notifier.from_environ({"NOTIFY_SOCKET": address})
    assert notifier.enabled

    assert notifier.ready("serving 2 roots")
    assert messages(sock) == {"READY": "1", "STATUS": "serving 2 roots"}
    assert notifier.status("indexing\n12 files")
    assert messages(sock) == {"STATUS": "indexing 12 files"}
    assert notifier.watchdog()
    assert messages(sock) == {"WATCHDOG": "1"}
    assert notifier.stopping()
    assert messages(sock) == {"STOPPING": "1"}
    notifier.close()


def test_reloading_carries_monotonic_usec(receiver: tuple[socket.socket, str]) -> None:
    sock, address = receiver
    notifier = Notifier(address)
    before = time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000
    assert notifier.reloading()
    fields = messages(sock)
    assert fields["RELOADING"] == "1"
    assert before <= int(fields["MONOTONIC_USEC"]) <= before + 5_000_000
    notifier.close()


def test_abstract_namespace_address() -> None:
    name = f"kbindex-test-{uuid.uuid4().hex}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind("\0" + name)
        sock.settimeout(2)
        notifier = Notifier.from_environ({"NOTIFY_SOCKET": "@" + name})
        assert notifier.ready()
        assert messages(sock) == {"READY": "1"}
        notifier.close()


def test_socket_is_kept_open_and_close_on_exec(receiver: tuple[socket.socket, str]) -> None:
    sock, address = receiver
    notifier = Notifier(address)
    notifier.watchdog()
    first = notifier._sock
    notifier.watchdog()
    assert notifier._sock is first
    assert first is not None
    assert not os.get_inheritable(first.fileno())
    assert messages(sock) == messages(sock) == {"WATCHDOG": "1"}
    notifier.close()


def test_no_op_without_notify_socket() -> None:
    notifier = Notifier.from_environ({"WATCHDOG_USEC": "60000000"})
    assert not notifier.enabled
    assert not notifier.ready()
    assert not notifier.watchdog()
    assert notifier.watchdog_interval() is None
    assert notifier._sock is None


def test_unset_removes_the_variables(receiver: tuple[socket.socket, str]) -> None:
    _, address = receiver
    env = {"NOTIFY_SOCKET": address, "WATCHDOG_USEC": "1", "WATCHDOG_PID": "1", "HOME": "/x"}
    notifier = Notifier.from_environ(env, unset=True)
    assert notifier.enabled
    assert env == {"HOME": "/x"}


def test_send_failure_is_logged_once_and_never_raises(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    notifier = Notifier(str(tmp_path / "nobody-listens"))
    with caplog.at_level(logging.DEBUG, logger="kbindex.daemon.serving.notify"):
        assert not notifier.ready()
        assert not notifier.watchdog()
        assert not notifier.stopping()
    notifier.close()
    failures = [r for r in caplog.records if "sd_notify" in r.getMessage()]
    assert len(failures) == 1
    assert failures[0].levelno == logging.DEBUG


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"WATCHDOG_USEC": "60000000"}, 30.0),
        ({"WATCHDOG_USEC": "60000000", "WATCHDOG_PID": "{pid}"}, 30.0),
        ({"WATCHDOG_USEC": "60000000", "WATCHDOG_PID": "1"}, None),
        ({"WATCHDOG_USEC": "0"}, None),
        ({"WATCHDOG_USEC": "soon"}, None),
        ({}, None),
    ],
)
def test_watchdog_interval(env: dict[str, str], expected: float | None) -> None:
    env = {k: v.format(pid=os.getpid()) for k, v in env.items()}
    notifier = Notifier.from_environ({"NOTIFY_SOCKET": "/nonexistent/notify", **env})
    assert notifier.watchdog_interval() == expected


def test_watchdog_loop_pings_until_cancelled(receiver: tuple[socket.socket, str]) -> None:
    sock, address = receiver
    notifier = Notifier(address, watchdog_usec="40000")  # ping every 20 ms

    async def main() -> None:
        with anyio.move_on_after(0.15):
            await watchdog_loop(notifier)

    anyio.run(main)
    sock.settimeout(0.5)
    assert messages(sock) == {"WATCHDOG": "1"}
    assert messages(sock) == {"WATCHDOG": "1"}
    notifier.close()


def test_watchdog_loop_withholds_pings_when_unhealthy(
    receiver: tuple[socket.socket, str],
) -> None:
    sock, address = receiver
    notifier = Notifier(address, watchdog_usec="40000")

    async def main() -> None:
        with anyio.move_on_after(0.1):
            await watchdog_loop(notifier, healthy=lambda: False)

    anyio.run(main)
    sock.setblocking(False)
    with pytest.raises(BlockingIOError):
        sock.recv(4096)
    notifier.close()


def test_watchdog_loop_returns_when_watchdog_is_off() -> None:
    async def main() -> None:
        with anyio.fail_after(1):
            await watchdog_loop(Notifier(None))

    anyio.run(main)
