"""Async client for the kbindexd socket: kbindex-mcp, kbctl doctor and the tests.

One connection carries many requests at once: each request gets a fresh id, and a
reader task routes every reply to the request of its id: to a private channel when
the caller follows the progress (``stream``), to a slot for the final reply alone
otherwise (``request``).

    async with Client.connect() as client:
        reply = await client.search("scheduler next task", limit=5)

kbctl's other commands send one request at a time and use the blocking client
(blocking.py) instead, which starts no event loop. Both raise the errors of errors.py.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import anyio
import msgspec
from anyio.abc import SocketAttribute, SocketStream
from anyio.streams.memory import MemoryObjectSendStream
from kbindex.proto import framing, streams
from kbindex.proto.address import resolve_socket_path
from kbindex.proto.errors import (
    ClientError,
    ConnectionLost,
    DaemonError,
    DaemonUnavailable,
    NotSent,
    RequestTooLarge,
    UntrustedDaemon,
    check_server,
    check_socket_dir,
    checked,
)
from kbindex.proto.messages import (
    PROTOCOL_VERSION,
    AddRoot,
    AnyReply,
    Check,
    CheckReply,
    ErrorCode,
    ErrorReply,
    FindFiles,
    FindFilesReply,
    Hello,
    HelloReply,
    Links,
    LinksReply,
    Ping,
    Pong,
    Progress,
    ReadFile,
    ReadFileReply,
    Refresh,
    RefreshReply,
    RemoveRoot,
    Reply,
    Request,
    RetireMachine,
    RetireReply,
    RootsReply,
    Search,
    SearchReply,
    Status,
    StatusReply,
    Why,
    WhyReply,
)

__all__ = [
    "Client",
    "ClientError",
    "ConnectionLost",
    "DaemonError",
    "DaemonUnavailable",
    "NotSent",
    "RequestTooLarge",
    "UntrustedDaemon",
]

R = TypeVar("R", bound=Reply)


class _Final:
    """Where the final reply to a ``request`` (or why none came) is put.

    Why a slot and an event, not a memory stream per request: a request that wants
    only the final reply is woken once, when it is there, with no stream to create
    and no pass of the event loop before each receive."""

    __slots__ = ("arrived", "value")

    def __init__(self) -> None:
        self.arrived = anyio.Event()
        self.value: Reply | ClientError | None = None

    def put(self, value: Reply | ClientError) -> None:
        if self.value is None:
            self.value = value
            self.arrived.set()


_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(AnyReply)


def _unsent(cause: ClientError) -> ClientError:
    """Why a request on a connection already closed fails: it was not sent."""
    return NotSent(str(cause)) if isinstance(cause, ConnectionLost) else cause


class Client:
    def __init__(self, stream: SocketStream, socket_path: str) -> None:
        self._reader = streams.FrameReader(stream, framing.MAX_REPLY_BYTES)
        self._writer = streams.FrameWriter(stream)
        self._ids = itertools.count(1)
        self._pending: dict[int, MemoryObjectSendStream[Reply | ClientError] | _Final] = {}
        self._closed: ClientError | None = None
        self._idle: anyio.Event | None = None
        self.socket_path = socket_path
        self.server: HelloReply | None = None

    @classmethod
    @asynccontextmanager
    async def connect(
        cls, socket_path: str | os.PathLike[str] | None = None, *, client_name: str = ""
    ) -> AsyncIterator[Client]:
        path = resolve_socket_path(socket_path)
        check_socket_dir(path)
        try:
            stream = await anyio.connect_unix(path)
        except OSError as exc:
            raise DaemonUnavailable(path, exc.strerror or type(exc).__name__) from None
        try:
            check_server(stream.extra(SocketAttribute.raw_socket), path)
        except UntrustedDaemon:
            await stream.aclose()
            raise
        try:
            async with stream, anyio.create_task_group() as tg:
                client = cls(stream, path)
                tg.start_soon(client._read_loop)
                try:
                    client.server = await client.hello(client_name)
                    yield client
                finally:
                    tg.cancel_scope.cancel()
        except BaseExceptionGroup as group:
            # anyio task groups wrap even a single exception; callers should see the
            # DaemonError or ConnectionLost itself, not a group around it.
            if len(group.exceptions) == 1:
                raise group.exceptions[0] from None
            raise

    # ------------------------------------------------------------ plumbing

    async def _read_loop(self) -> None:
        cause: ClientError = ConnectionLost("kbindexd closed the connection")
        try:
            while True:
                body = await self._reader.read()
                if body is None:
                    break
                reply = _decoder.decode(body)
                waiting = self._pending.get(reply.id)
                if isinstance(waiting, _Final):
                    if not isinstance(reply, Progress):
                        waiting.put(reply)
                elif waiting is not None:
                    try:  # without a pass of the event loop when there is room
                        waiting.send_nowait(reply)
                    except anyio.WouldBlock:
                        await waiting.send(reply)
                elif isinstance(reply, ErrorReply) and reply.id == 0:
                    # About the connection, not a request (busy, permission denied, a
                    # frame refused): it closes next, and this is why.
                    cause = DaemonError(reply.code, reply.message)
        except (framing.IncompleteFrame, framing.FrameTooLarge, msgspec.DecodeError) as exc:
            cause = ConnectionLost(f"bad reply from kbindexd: {exc}")
        except OSError as exc:
            if not isinstance(cause, DaemonError):
                cause = ConnectionLost(f"connection to kbindexd lost: {exc}")
        self._closed = cause
        for waiting in list(self._pending.values()):
            if isinstance(waiting, _Final):
                waiting.put(cause)
            else:
                waiting.send_nowait(cause)

    async def stream(self, request: Request) -> AsyncIterator[Reply]:
        """Send ``request`` and yield every reply to it: Progress replies, then the final one."""
        if self._closed is not None:
            raise _unsent(self._closed)
        send, receive = anyio.create_memory_object_stream[Reply | ClientError](64)
        rid = next(self._ids)
        self._pending[rid] = send
        try:
            await self._send(request, rid)
            async with receive:
                async for item in receive:
                    yield checked(item)
                    if not isinstance(item, Progress):
                        return
        finally:
            self._forget(rid)
            send.close()

    async def request(self, request: Request, expect: type[R]) -> R:
        """Send ``request`` and return its final reply, which must be of type ``expect``."""
        if self._closed is not None:
            raise _unsent(self._closed)
        final = _Final()
        rid = next(self._ids)
        self._pending[rid] = final
        try:
            await self._send(request, rid)
            await final.arrived.wait()
        finally:
            self._forget(rid)
        assert final.value is not None
        reply = checked(final.value)
        if not isinstance(reply, expect):
            raise DaemonError(ErrorCode.INTERNAL, f"unexpected reply {type(reply).__name__}")
        return reply

    def _forget(self, rid: int) -> None:
        del self._pending[rid]
        if not self._pending and self._idle is not None:
            self._idle.set()

    async def wait_idle(self) -> None:
        """Return once no request on this connection is waiting for its reply (a request
        given up by its caller no longer waits)."""
        while self._pending:
            self._idle = anyio.Event()
            await self._idle.wait()

    async def _send(self, request: Request, rid: int) -> None:
        body = _encoder.encode(msgspec.structs.replace(request, id=rid))
        if len(body) > framing.MAX_REQUEST_BYTES:
            raise RequestTooLarge(len(body), framing.MAX_REQUEST_BYTES)
        try:
            await self._writer.write(body)
        except (OSError, anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
            # A frame cut short is never read as a request: the daemon did nothing.
            raise NotSent(f"connection to kbindexd lost: {exc}") from None

    # ------------------------------------------------------------ operations

    async def hello(self, client_name: str = "") -> HelloReply:
        reply = await self.request(Hello(version=PROTOCOL_VERSION, client=client_name), HelloReply)
        return reply

    async def ping(self) -> Pong:
        return await self.request(Ping(), Pong)

    async def status(self) -> StatusReply:
        return await self.request(Status(), StatusReply)

    async def search(
        self,
        query: str,
        *,
        limit: int = 10,
        path: str | None = None,
        mode: str = "auto",
        **filters: Any,
    ) -> SearchReply:
        """``filters``: the fields of ``Filtered`` (``kind=["doc"]``, ``tag=[...]``...)."""
        return await self.request(
            Search(query=query, limit=limit, path=path, mode=mode, **filters), SearchReply
        )

    async def refresh(self, paths: list[str] | None = None, *, full: bool = False) -> RefreshReply:
        """Queue a refresh and return at once (``queued=True``)."""
        return await self.request(Refresh(paths=paths or [], full=full), RefreshReply)

    async def refresh_wait(
        self, paths: list[str] | None = None, *, full: bool = False
    ) -> AsyncIterator[Progress | RefreshReply]:
        """Run a refresh and follow it: Progress replies, then the RefreshReply."""
        async for reply in self.stream(Refresh(paths=paths or [], full=full, wait=True)):
            if isinstance(reply, Progress | RefreshReply):
                yield reply

    async def read_file(
        self,
        path: str,
        start_line: int | None = None,
        end_line: int | None = None,
        page: int | None = None,
    ) -> ReadFileReply:
        return await self.request(
            ReadFile(path=path, start_line=start_line, end_line=end_line, page=page),
            ReadFileReply,
        )

    async def find_files(self, glob: str = "*", limit: int = 100, **filters: Any) -> FindFilesReply:
        """``filters``: as ``search``'s."""
        return await self.request(FindFiles(glob=glob, limit=limit, **filters), FindFilesReply)

    async def links(
        self, path: str, *, backlinks: bool = False, limit: int | None = None
    ) -> LinksReply:
        return await self.request(Links(path=path, backlinks=backlinks, limit=limit), LinksReply)

    async def why(self, path: str) -> WhyReply:
        return await self.request(Why(path=path), WhyReply)

    async def add_root(self, path: str) -> RootsReply:
        """Index another directory (give it absolute) and persist it to the config file."""
        return await self.request(AddRoot(path=path), RootsReply)

    async def remove_root(self, path: str) -> RootsReply:
        return await self.request(RemoveRoot(path=path), RootsReply)

    async def retire_machine(self, name: str) -> RetireReply:
        return await self.request(RetireMachine(name=name), RetireReply)

    async def check(self) -> CheckReply:
        return await self.request(Check(), CheckReply)
