"""The sd_notify protocol: tell the service manager we are ready, alive or stopping.

systemd starts ``kbindexd`` as ``Type=notify`` with ``WatchdogSec=``; it sets
``NOTIFY_SOCKET`` (a datagram socket path, or ``@name`` for the abstract namespace) and
``WATCHDOG_USEC``/``WATCHDOG_PID``. Each message is one datagram of ``KEY=VALUE`` lines.
Implemented here directly rather than through libsystemd so the daemon has no native
dependency. Outside systemd (``NOTIFY_SOCKET`` unset) every method is a no-op, and no
method ever raises: a lost notification must not take the daemon down. ``status_loop``
keeps the STATUS= line current: a scan's progress, then the files indexed.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable, MutableMapping
from typing import Final

import anyio
import anyio.to_thread
from kbindex.daemon.health import Health
from kbindex.daemon.index.commits import Commits
from kbindex.daemon.index.interface import Index

logger = logging.getLogger(__name__)

NOTIFY_ENV = ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID")

# A send blocks only while the manager's receive queue is full; bound the wait so a
# stuck manager cannot freeze the daemon's event loop for long.
SEND_TIMEOUT_SECONDS = 0.5
STATUS_SECONDS: Final = 0.5
STATUS_RECOUNT_SECONDS: Final = 30.0


class Notifier:
    """One open datagram socket to the service manager, or nothing outside systemd."""

    def __init__(
        self,
        notify_socket: str | None,
        *,
        watchdog_usec: str | None = None,
        watchdog_pid: str | None = None,
    ) -> None:
        self._address = _socket_address(notify_socket)
        self._watchdog_usec = watchdog_usec
        self._watchdog_pid = watchdog_pid
        self._sock: socket.socket | None = None
        self._lock = threading.Lock()
        self._failure_logged = False

    @classmethod
    def from_environ(
        cls, environ: MutableMapping[str, str] | None = None, *, unset: bool = False
    ) -> Notifier:
        """Read ``NOTIFY_SOCKET``, ``WATCHDOG_USEC`` and ``WATCHDOG_PID``.

        With ``unset=True`` the variables are removed afterwards so child processes do
        not inherit them (what ``sd_notify(unset_environment=1)`` does).
        """
        env: MutableMapping[str, str] = os.environ if environ is None else environ
        notifier = cls(
            env.get("NOTIFY_SOCKET"),
            watchdog_usec=env.get("WATCHDOG_USEC"),
            watchdog_pid=env.get("WATCHDOG_PID"),
        )
        if unset:
            for name in NOTIFY_ENV:
                env.pop(name, None)
        return notifier

    @property
    def enabled(self) -> bool:
        return self._address is not None

    def ready(self, status: str | None = None) -> bool:
        """Startup is complete: the socket accepts connections."""
        return self.send("READY=1", *_status_field(status))

    def status(self, text: str) -> bool:
        """A one-line free-form status shown by ``systemctl status``."""
        return self.send(*_status_field(text))

    def watchdog(self) -> bool:
        """Keep-alive ping; must arrive at least every ``WatchdogSec``."""
        return self.send("WATCHDOG=1")

    def stopping(self, status: str | None = None) -> bool:
        return self.send("STOPPING=1", *_status_field(status))

    def reloading(self, status: str | None = None) -> bool:
        """Start of a configuration reload; send ``ready()`` when it is done.

        ``MONOTONIC_USEC`` is required by ``Type=notify-reload`` (systemd 253 and later)
        and ignored by older managers.
        """
        usec = time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000
        return self.send("RELOADING=1", f"MONOTONIC_USEC={usec}", *_status_field(status))

    def watchdog_interval(self) -> float | None:
        """Seconds between keep-alive pings (half of ``WATCHDOG_USEC``), or None.

        None when the watchdog is off, when its values are malformed, when there is no
        socket to ping, or when ``WATCHDOG_PID`` names another process (the variables
        were inherited from a parent that the manager is watching instead of us).
        """
        if not self.enabled or not self._watchdog_usec:
            return None
        if self._watchdog_pid:
            try:
                if int(self._watchdog_pid) != os.getpid():
                    return None
            except ValueError:
                logger.debug("ignoring malformed WATCHDOG_PID=%r", self._watchdog_pid)
                return None
        try:
            usec = int(self._watchdog_usec)
        except ValueError:
            logger.debug("ignoring malformed WATCHDOG_USEC=%r", self._watchdog_usec)
            return None
        if usec <= 0:
            return None
        return usec / 2 / 1_000_000

    def send(self, *fields: str) -> bool:
        """Send one datagram of ``KEY=VALUE`` lines; True when it was handed over."""
        if self._address is None or not fields:
            return False
        payload = "\n".join(fields).encode("utf-8", "replace")
        with self._lock:
            try:
                if self._sock is None:
                    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
                    sock.settimeout(SEND_TIMEOUT_SECONDS)
                    self._sock = sock
                self._sock.sendto(payload, self._address)
            except OSError as exc:
                if not self._failure_logged:
                    # Once only: a manager that went away would otherwise flood the log
                    # with one line per watchdog ping.
                    self._failure_logged = True
                    logger.debug("sd_notify to %r failed: %s", self._address, exc)
                return False
        return True

    def close(self) -> None:
        with self._lock:
            if self._sock is not None:
                self._sock.close()
                self._sock = None


async def watchdog_loop(notifier: Notifier, healthy: Callable[[], bool] | None = None) -> None:
    """Ping the watchdog at the interval the manager asked for, until cancelled.

    Runs as a task on the daemon's event loop, so a blocked loop stops the pings and
    systemd restarts the daemon. ``healthy`` lets the caller withhold a ping when some
    other part (the indexer thread, say) is known to be stuck. Returns at once when the
    watchdog is off.
    """
    interval = notifier.watchdog_interval()
    if interval is None:
        return
    logger.debug("watchdog: pinging every %.1f s", interval)
    while True:
        if healthy is None or healthy():
            notifier.watchdog()
        else:
            logger.warning("watchdog: withholding keep-alive, daemon reports unhealthy")
        await anyio.sleep(interval)


async def status_loop(notifier: Notifier, health: Health, index: Index, commits: Commits) -> None:
    """systemd STATUS= lines: progress while indexing (looked at every
    STATUS_SECONDS), the file count when idle (counted again after each commit, and
    every STATUS_RECOUNT_SECONDS for what is not announced here: other machines' rows
    in a shared index, a database server back)."""
    if not notifier.enabled:
        return
    last = ""
    counted: int | None = None
    recount_at = 0.0
    while True:
        progress = health.progress
        now = anyio.current_time()
        seen = commits.count
        text = last
        if progress is not None:
            text = f"{progress.phase} {progress.done:,}/{progress.total:,} files"
        elif health.last_scan_at is None:
            text = "first scan starting"
        elif seen != counted or now >= recount_at:
            try:
                files = (await anyio.to_thread.run_sync(index.stats)).counts.indexed
            except Exception as exc:
                if index.failure(exc) is None:
                    raise
                files = None  # damaged, rebuilt or unreachable: status says which
            text = f"idle, {files:,} files" if files is not None else "idle"
            counted, recount_at = seen, now + STATUS_RECOUNT_SECONDS
        if text != last:
            notifier.status(text)
            last = text
        with anyio.move_on_after(STATUS_SECONDS):
            await commits.changed(seen)


def _socket_address(raw: str | None) -> str | None:
    """The address to sendto(): a path, or a NUL-prefixed abstract name for ``@name``."""
    if not raw:
        return None
    if raw.startswith("@"):
        return "\0" + raw[1:]
    if raw.startswith("/"):
        return raw
    # e.g. "vsock:CID:PORT" (systemd 253 and later, for VMs): not used for user services.
    logger.debug("unsupported NOTIFY_SOCKET address %r; notifications disabled", raw)
    return None


def _status_field(text: str | None) -> tuple[str, ...]:
    if text is None:
        return ()
    # Fields are newline-separated, so a newline in the text would start a new field.
    return ("STATUS=" + " ".join(text.splitlines()),)
