"""The front end's one connection to kbindexd: opened on first use, reopened after a restart.

One Client connection carries every request of this process (the protocol multiplexes by
request id), so an HTTP front end serving many MCP sessions still holds a single socket.
The connection lives in a holder task inside the backend's own task group, because
``Client.connect`` is a context manager with a reader task that must outlive any single
tool call. When the daemon goes away the next request fails with ConnectionLost; the
backend drops that connection, opens a new one and sends the request once more: the
reads are idempotent, so resending them is safe. A note change is not (an append sent
twice appends twice), so it is sent again only when it never left (``NotSent``); lost
after it was written, it is reported, and the reply hash tells the agent what is there.
A request that times out retires its connection: later requests go over a new one, and
the old one is closed once nothing else waits on it.
"""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import anyio
from anyio.abc import TaskGroup, TaskStatus
from kbindex.proto.address import resolve_socket_path
from kbindex.proto.client import Client, ConnectionLost, DaemonError, DaemonUnavailable, NotSent
from kbindex.proto.messages import (
    PROTOCOL_VERSION,
    AppendNote,
    DeleteNote,
    EditNote,
    ErrorCode,
    FindFilesReply,
    Grep,
    GrepReply,
    Hello,
    HelloReply,
    Links,
    LinksReply,
    MoveNote,
    NoteChanges,
    NoteChangesReply,
    NoteReply,
    Progress,
    ReadFileReply,
    RefreshReply,
    SearchReply,
    StatusReply,
    WriteNote,
)

log = logging.getLogger(__name__)

T = TypeVar("T")

CLIENT_NAME = "kbindex-mcp"
REQUEST_TIMEOUT = 30.0
"""Seconds a single request (connect included) may take; refresh with progress is exempt."""
HELLO_TIMEOUT = 5.0
"""Seconds tools/list waits to learn whether notes can be written; a daemon that does not
answer by then is treated as one without writable roots (the list must not hang)."""

NoteRequest = WriteNote | EditNote | AppendNote | MoveNote | DeleteNote


class DaemonTimeout(Exception):
    """The daemon accepted a request but did not answer within REQUEST_TIMEOUT."""


class Backend:
    def __init__(self, socket_path: str, task_group: TaskGroup) -> None:
        self.socket_path = socket_path
        self._tg = task_group
        self._current: tuple[Client, anyio.Event] | None = None
        self._lock = anyio.Lock()

    @classmethod
    @asynccontextmanager
    async def open(
        cls, socket_path: str | os.PathLike[str] | None = None
    ) -> AsyncIterator[Backend]:
        """A backend for the daemon at ``socket_path`` (else $KBINDEX_SOCKET / the default).

        Nothing is connected yet: a front end must start, list its tools and answer with a
        clear error even while the daemon is down.
        """
        async with anyio.create_task_group() as tg:
            backend = cls(resolve_socket_path(socket_path), tg)
            try:
                yield backend
            finally:
                tg.cancel_scope.cancel()

    # ------------------------------------------------------------ connection

    async def _client(self) -> Client:
        current = self._current
        if current is not None:
            return current[0]
        async with self._lock:
            if self._current is None:
                client: Client = await self._tg.start(self._hold)
                return client
            return self._current[0]

    async def _hold(self, *, task_status: TaskStatus[Client]) -> None:
        """Open a connection, publish it, keep it open until it is dropped."""
        release = anyio.Event()
        started = False
        try:
            async with Client.connect(self.socket_path, client_name=CLIENT_NAME) as client:
                self._current = (client, release)
                started = True
                log.debug("connected to kbindexd at %s", self.socket_path)
                task_status.started(client)
                await release.wait()
        except Exception:
            if not started:
                raise  # reaches the caller of tg.start(): DaemonUnavailable and the like
            # After start nothing may escape: it would take the whole front end down.
            log.debug("connection to kbindexd closed with an error", exc_info=True)
        finally:
            if self._current is not None and self._current[1] is release:
                self._current = None

    def _drop(self, client: Client) -> None:
        current = self._current
        if current is not None and current[0] is client:
            self._current = None
            current[1].set()

    def _retire(self, client: Client) -> None:
        """Send nothing more over ``client``'s connection and close it once the requests
        still on it are answered; the next request opens a new one.

        Why not keep it: a request the daemon never answered holds one of the
        connection's slots there (a daemon runs a bounded number per connection), and a
        connection stuck in a daemon that hangs would take every later request down with
        it, while a new connection reaches a daemon started in its place. Why not close it
        at once: requests of other sessions may be on it, and a note change lost after it
        was sent cannot be sent again."""
        current = self._current
        if current is None or current[0] is not client:
            return
        self._current = None
        log.warning("kbindexd did not answer in time; later requests go over a new connection")
        release = current[1]

        async def close_when_idle() -> None:
            try:
                await client.wait_idle()
            finally:
                release.set()

        self._tg.start_soon(close_when_idle)

    def start_soon(self, task: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """Run ``task`` in the background for as long as the backend is open."""
        self._tg.start_soon(task)

    async def call(
        self,
        operation: Callable[[Client], Awaitable[T]],
        *,
        seconds: float | None,
        resend: bool = True,
    ) -> T:
        """Run ``operation`` on the shared connection; reconnect and retry once if it was
        lost (with ``resend`` false, only if the request never left). A request not
        answered within ``seconds`` retires its connection (``_retire``)."""
        used: Client | None = None
        try:
            with anyio.fail_after(seconds):
                for attempt in (1, 2):
                    client: Client | None = None
                    try:
                        client = used = await self._client()
                        return await operation(client)
                    except ConnectionLost as exc:
                        # Also raised by a daemon that accepts and closes at once (stopping).
                        if client is not None:
                            self._drop(client)
                        # client is None: lost while connecting, before the request left.
                        unsent = client is None or isinstance(exc, NotSent)
                        if attempt == 2 or not (resend or unsent):
                            raise
                        log.info("connection to kbindexd lost; reconnecting")
                    except DaemonError as exc:
                        if exc.code != ErrorCode.SHUTTING_DOWN or attempt == 2:
                            raise
                        # The daemon is restarting: the next connection may reach its successor.
                        if client is not None:
                            self._drop(client)
        except TimeoutError:
            if used is not None:
                self._retire(used)
            raise DaemonTimeout(f"kbindexd did not answer within {seconds:g} s") from None
        raise AssertionError("unreachable")

    # ------------------------------------------------------------ operations

    async def search(
        self,
        query: str,
        limit: int,
        path: str | None,
        mode: str = "auto",
        filters: dict[str, Any] | None = None,
    ) -> SearchReply:
        """``filters``: the fields of ``Filtered`` (``where.filters``)."""
        return await self.call(
            lambda c: c.search(query, limit=limit, path=path, mode=mode, **(filters or {})),
            seconds=REQUEST_TIMEOUT,
        )

    async def status(self) -> StatusReply:
        return await self.call(lambda c: c.status(), seconds=REQUEST_TIMEOUT)

    async def read_file(
        self,
        path: str,
        start_line: int | None = None,
        end_line: int | None = None,
        page: int | None = None,
    ) -> ReadFileReply:
        return await self.call(
            lambda c: c.read_file(path, start_line, end_line, page), seconds=REQUEST_TIMEOUT
        )

    async def grep(self, grep: Grep) -> GrepReply:
        return await self.call(lambda c: c.request(grep, GrepReply), seconds=REQUEST_TIMEOUT)

    async def find_files(
        self, glob: str, limit: int, filters: dict[str, Any] | None = None, newest: bool = False
    ) -> FindFilesReply:
        return await self.call(
            lambda c: c.find_files(glob, limit, newest=newest, **(filters or {})),
            seconds=REQUEST_TIMEOUT,
        )

    async def links(self, path: str, *, backlinks: bool, limit: int | None = None) -> LinksReply:
        request = Links(path=path, backlinks=backlinks, limit=limit)
        return await self.call(lambda c: c.request(request, LinksReply), seconds=REQUEST_TIMEOUT)

    async def note(self, request: NoteRequest) -> NoteReply:
        return await self.call(
            lambda c: c.request(request, NoteReply), seconds=REQUEST_TIMEOUT, resend=False
        )

    async def note_changes(self, since: int, wait: float) -> NoteChangesReply:
        request = NoteChanges(since=since, wait_seconds=wait)
        return await self.call(
            lambda c: c.request(request, NoteChangesReply), seconds=REQUEST_TIMEOUT + wait
        )

    async def capabilities(self) -> list[str]:
        """What the daemon can do now: asked afresh, since a reload can make a root
        writable or read-only after the connection was opened."""
        hello = Hello(version=PROTOCOL_VERSION, client=CLIENT_NAME)
        reply = await self.call(lambda c: c.request(hello, HelloReply), seconds=HELLO_TIMEOUT)
        return reply.capabilities

    async def refresh(
        self, paths: list[str], on_progress: Callable[[Progress], Awaitable[None]]
    ) -> RefreshReply:
        """Run a refresh to the end, passing each Progress reply to ``on_progress``."""

        async def follow(client: Client) -> RefreshReply:
            final: RefreshReply | None = None
            async for reply in client.refresh_wait(paths):
                if isinstance(reply, Progress):
                    await on_progress(reply)
                else:
                    final = reply
            if final is None:
                raise DaemonError(ErrorCode.INTERNAL, "refresh ended without a result")
            return final

        # No deadline: a full refresh of a large tree legitimately takes minutes, and the
        # caller sees progress; an MCP client that gives up cancels the request instead.
        return await self.call(follow, seconds=None)


__all__ = ["Backend", "DaemonTimeout", "DaemonUnavailable"]
