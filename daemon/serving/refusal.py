"""The daemon with no configuration in force, on a socket systemd gave it.

Why not exit, as a bad configuration does elsewhere (exit 2): systemd starts a
socket-activated service again on the next connection whatever ``RestartPreventExitStatus=``
says, and five quick exits hit the start limit; the socket unit then fails, every
client sees its connection reset, and nothing works until ``systemctl --user
reset-failed``. So a daemon handed its socket whose configuration is refused (a root
that does not exist, an unknown key, a backend that is not installed) stays up instead:
it serves the socket, tells systemd READY=1 with the reason in STATUS=, answers
``status`` with the reason (``unconfigured``) and every other request with a
``config_error`` that says what to fix, and reads the configuration again on SIGHUP
(``systemctl --user reload``), ``reload`` and ``refresh`` (``kbctl reindex``). Once it
validates, ``wait_for_configuration`` returns it and the caller starts the daemon with
it on the same socket.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Final

import anyio
import anyio.to_thread
from kbindex.daemon.serving.control import ConfigRefused
from kbindex.daemon.serving.notify import Notifier, watchdog_loop
from kbindex.daemon.serving.server import Server
from kbindex.daemon.serving.service import VERSION, Emit, hello_reply
from kbindex.daemon.settings import Settings, SettingsError
from kbindex.proto.messages import (
    Hello,
    Ping,
    Pong,
    Refresh,
    RefreshReply,
    Reload,
    ReloadReply,
    Reply,
    Request,
    Status,
    StatusReply,
)

log = logging.getLogger(__name__)

DRAIN_SECONDS: Final = 5.0
FIX: Final = "fix it, then run: systemctl --user reload kbindexd (or kbctl reload)"


class Refusal:
    """Requests answered while no configuration is in force."""

    def __init__(
        self, problem: str, reread: Callable[[], Settings], notifier: Notifier, socket_path: str
    ) -> None:
        self.problem = problem
        self.reread = reread
        self.notifier = notifier
        self.socket_path = socket_path
        self.started_at = time.time()
        self.accepted: Settings | None = None
        self.done = anyio.Event()
        """Set once a configuration validates, or when a signal stops the daemon."""
        self._lock = anyio.Lock()

    @property
    def advice(self) -> str:
        return f"kbindexd refused its configuration: {self.problem}; {FIX}"

    async def retry(self) -> bool:
        """Read the configuration again; True once it validates (the daemon then starts
        with it, and says READY=1 when it serves)."""
        async with self._lock:
            if self.accepted is not None:
                return True
            self.notifier.reloading("reading the configuration again")
            try:
                self.accepted = await anyio.to_thread.run_sync(self.reread)
            except SettingsError as exc:
                self.problem = str(exc)
                log.error("%s", self.advice)
                self.notifier.ready(self.advice)
                return False
            log.info("the configuration validates now: starting with it")
            self.done.set()
            return True

    async def handle(self, request: Request, emit: Emit) -> Reply:
        match request:
            case Hello():
                return hello_reply(request, [])
            case Ping():
                return Pong()
            case Status():
                return self.status()
            case Reload():
                if await self.retry():
                    return ReloadReply(
                        message="the configuration validates now: kbindexd is starting with it"
                    )
            case Refresh():
                if await self.retry():
                    # The first scan of the daemon that starts now is the refresh.
                    return RefreshReply(queued=True)
        raise ConfigRefused(self.advice)

    def status(self) -> StatusReply:
        return StatusReply(
            version=VERSION,
            pid=os.getpid(),
            started_at=self.started_at,
            indexed_files=0,
            total_documents=0,
            index_size_mb=0.0,
            socket_path=self.socket_path,
            config_error=self.problem,
            unconfigured=True,
        )


async def wait_for_configuration(
    problem: str,
    reread: Callable[[], Settings],
    notifier: Notifier,
    inherited: socket.socket,
) -> Settings | None:
    """Serve ``inherited`` with no configuration until one validates (returned), or a
    signal stops the daemon (None). ``inherited`` stays open for the daemon: the
    server here listens on a duplicate of it."""
    name = inherited.getsockname()
    refusal = Refusal(problem, reread, notifier, name if isinstance(name, str) else "")
    log.error("%s", refusal.advice)
    server = Server(refusal.handle, Path(refusal.socket_path), inherited=inherited.dup())
    async with anyio.create_task_group() as tg:
        await tg.start(server.serve)
        notifier.ready(refusal.advice)
        tg.start_soon(watchdog_loop, notifier)
        tg.start_soon(_signals, refusal)
        await refusal.done.wait()
        # A reply on its way (the kbctl reload that fixed it) is sent before the
        # duplicate closes; connections still open are closed, and clients reconnect.
        await server.drain(DRAIN_SECONDS)
        tg.cancel_scope.cancel()
    return refusal.accepted


async def _signals(refusal: Refusal) -> None:
    stops = (signal.SIGTERM, signal.SIGINT)
    with anyio.open_signal_receiver(signal.SIGHUP, *stops) as signals:
        async for signum in signals:
            if signum in stops:
                log.info("received %s: stopping", signal.Signals(signum).name)
                refusal.notifier.stopping("stopping")
                refusal.done.set()
                return
            await refusal.retry()
