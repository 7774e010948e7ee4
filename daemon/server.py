"""The Unix-socket server: frames in, requests to the service, replies out.

Each connection reads frames in a loop and runs every request as its own task, so a
slow request never holds up the next one on the same connection; replies are written
whole under a per-connection lock and carry the request's id. Every failure a client
can cause is answered with an ErrorReply: a malformed frame, an unknown op, a bad
argument. Only a frame too large to read ends the connection (after the reply), since
the stream cannot be resynchronised without reading the announced body.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import struct
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Final

import anyio
import msgspec
from anyio.abc import SocketAttribute, SocketListener, SocketStream
from kbindex.daemon.service import error_reply
from kbindex.proto import framing
from kbindex.proto.messages import (
    REQUEST_OPS,
    AnyRequest,
    Envelope,
    ErrorCode,
    ErrorReply,
    Reply,
    Request,
)

log = logging.getLogger(__name__)

MAX_IN_FLIGHT: Final = 32
"""Requests one connection may have running at once; reading waits beyond that."""

Handler = Callable[[Request, Callable[[Reply], Awaitable[None]]], Awaitable[Reply]]

_encoder = msgspec.msgpack.Encoder()
_envelope = msgspec.msgpack.Decoder(Envelope)
_request = msgspec.msgpack.Decoder(AnyRequest)


def decode_request(body: bytes) -> Request | ErrorReply:
    """A request, or the error reply that explains why ``body`` is not one."""
    try:
        envelope = _envelope.decode(body)
    except msgspec.DecodeError as exc:
        return ErrorReply(code=ErrorCode.BAD_FRAME, message=f"malformed frame: {exc}")
    if envelope.op not in REQUEST_OPS:
        return ErrorReply(
            id=envelope.id,
            code=ErrorCode.UNKNOWN_OP,
            message=f"unknown op {envelope.op!r}; known ops: {', '.join(sorted(REQUEST_OPS))}",
        )
    try:
        request: Request = _request.decode(body)
    except msgspec.DecodeError as exc:
        return ErrorReply(
            id=envelope.id,
            code=ErrorCode.INVALID_ARGUMENT,
            message=f"invalid {envelope.op} request: {exc}",
        )
    return request


def peer_uid(stream: SocketStream) -> int | None:
    raw = stream.extra(SocketAttribute.raw_socket)
    try:
        creds = raw.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    except OSError:
        return None
    _pid, uid, _gid = struct.unpack("3i", creds)
    return int(uid)


class Server:
    def __init__(
        self, handler: Handler, socket_path: Path, inherited: socket.socket | None = None
    ) -> None:
        self.handler = handler
        self.socket_path = socket_path
        self.inherited = inherited
        self.connections = 0
        self.in_flight = 0
        self._accepting = anyio.CancelScope()
        self._idle: anyio.Event | None = None

    async def serve(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        listener: SocketListener
        if self.inherited is not None:
            listener = await SocketListener.from_socket(self.inherited)
        else:
            listener = await anyio.create_unix_listener(self.socket_path, mode=0o600)
        # Connections live in their own task group, outside the accept loop's scope, so
        # that stopping accepting (drain) does not cut off requests already in flight.
        async with anyio.create_task_group() as connections:
            try:
                async with listener:
                    with self._accepting:
                        task_status.started()
                        await listener.serve(self._connection, task_group=connections)
            finally:
                self._unlink()
            await anyio.sleep_forever()  # until the daemon's group is cancelled

    def _unlink(self) -> None:
        # Only a socket file this process created is removed; an inherited one belongs
        # to systemd.
        if self.inherited is None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.socket_path)

    @property
    def draining(self) -> bool:
        return self._accepting.cancel_called

    async def drain(self, deadline: float) -> bool:
        """Stop accepting and wait up to ``deadline`` seconds for requests in flight.
        Returns True when none is left."""
        self._accepting.cancel()
        if self.in_flight:
            self._idle = anyio.Event()
            with anyio.move_on_after(deadline):
                await self._idle.wait()
        return self.in_flight == 0

    async def _connection(self, stream: SocketStream) -> None:
        self.connections += 1
        try:
            async with stream:
                await self._converse(stream)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            pass  # the client went away; nothing to answer
        finally:
            self.connections -= 1

    async def _converse(self, stream: SocketStream) -> None:
        lock = anyio.Lock()

        async def send(reply: Reply) -> None:
            body = _encoder.encode(reply)
            async with lock:
                await framing.write_frame(stream, body)

        uid = peer_uid(stream)
        if uid is not None and uid not in (os.getuid(), 0):
            await send(
                ErrorReply(
                    code=ErrorCode.PERMISSION_DENIED,
                    message="connections from other users are refused",
                )
            )
            return
        reader = framing.FrameReader(stream, framing.MAX_REQUEST_BYTES)
        slots = anyio.Semaphore(MAX_IN_FLIGHT)
        async with anyio.create_task_group() as tg:
            while True:
                try:
                    body = await reader.read()
                except framing.FrameTooLarge as exc:
                    await send(ErrorReply(code=ErrorCode.FRAME_TOO_LARGE, message=str(exc)))
                    break
                except framing.IncompleteFrame:
                    break
                if body is None:
                    break
                decoded = decode_request(body)
                if isinstance(decoded, ErrorReply):
                    await send(decoded)
                    continue
                await slots.acquire()
                tg.start_soon(self._answer, decoded, send, slots)

    async def _answer(
        self, request: Request, send: Callable[[Reply], Awaitable[None]], slots: anyio.Semaphore
    ) -> None:
        async def emit(reply: Reply) -> None:
            await send(msgspec.structs.replace(reply, id=request.id))

        self.in_flight += 1
        try:
            try:
                reply = await self.handler(request, emit)
            except Exception as exc:
                known = error_reply(exc)
                if known is None:
                    log.exception("internal error answering %s", type(request).__name__)
                    known = ErrorReply(
                        code=ErrorCode.INTERNAL,
                        message=f"internal error ({type(exc).__name__}); see the kbindexd log",
                    )
                reply = known
            # The client may have left before its answer.
            with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                await emit(reply)
        finally:
            self.in_flight -= 1
            if self.in_flight == 0 and self._idle is not None:
                self._idle.set()
            slots.release()
