"""The Unix-socket server: frames in, requests to the service, replies out.

Each connection reads frames in a loop and runs every request as its own task, so a
slow request never holds up the next one on the same connection; replies are written
whole under a per-connection lock and carry the request's id. Every failure a client
can cause is answered with an ErrorReply: a malformed frame, an unknown op, a bad
argument. Only a frame too large to read, or one not completed within the frame
timeout, ends the connection (after the reply), since the stream cannot be
resynchronised without reading the announced body.

Resources a client can pin are bounded: a partial frame for ``frame_timeout`` seconds
(and a reply it does not take, as long),
requests in flight per connection (MAX_IN_FLIGHT), and connections (below the open-file
limit). When the connection limit is reached, or accept() fails for want of file
descriptors, the connection idle longest (silent ones first) is closed to make room;
a connection with a request in flight is never closed for this.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import resource
import socket
import struct
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import anyio
import msgspec
from anyio.abc import SocketAttribute, SocketListener, SocketStream, TaskGroup
from kbindex.daemon.serving.failures import error_reply
from kbindex.proto import framing, streams
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
MAX_CONNECTIONS: Final = 1000
RESERVED_FDS: Final = 64
"""File descriptors kept for everything but connections (the index, the watcher, files
being read): the connection limit is at most the open-file limit minus these."""
LINGER_SECONDS: Final = 1.0
FD_WARNING_SECONDS: Final = 10.0
"""At most one warning this often while connections cannot be accepted."""
_OUT_OF_FDS: Final = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})

Handler = Callable[[Request, Callable[[Reply], Awaitable[None]]], Awaitable[Reply]]

_encoder = msgspec.msgpack.Encoder()
_envelope = msgspec.msgpack.Decoder(Envelope)
_request = msgspec.msgpack.Decoder(AnyRequest)
_NOT_UTF8: Final = "a string is not valid UTF-8"


def decode_request(body: bytes) -> Request | ErrorReply:
    """A request, or the error reply that explains why ``body`` is not one."""
    try:
        envelope = _envelope.decode(body)
    except msgspec.DecodeError as exc:
        return ErrorReply(code=ErrorCode.BAD_FRAME, message=f"malformed frame: {exc}")
    except UnicodeDecodeError:  # msgspec's error for a string that is not UTF-8
        return ErrorReply(code=ErrorCode.BAD_FRAME, message=f"malformed frame: {_NOT_UTF8}")
    except RecursionError:
        return ErrorReply(code=ErrorCode.BAD_FRAME, message="malformed frame: nested too deeply")
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
    except UnicodeDecodeError:
        return ErrorReply(
            id=envelope.id,
            code=ErrorCode.INVALID_ARGUMENT,
            message=f"invalid {envelope.op} request: {_NOT_UTF8}",
        )
    except RecursionError:
        return ErrorReply(
            id=envelope.id,
            code=ErrorCode.INVALID_ARGUMENT,
            message=f"invalid {envelope.op} request: nested too deeply",
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


def connection_limit() -> int:
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return MAX_CONNECTIONS
    return max(8, min(MAX_CONNECTIONS, soft - RESERVED_FDS))


def _client_gone(exc: BaseException) -> bool:
    """Whether ``exc`` (or every error in a group) only says the client went away, as
    when it sends requests and leaves before their answers: nothing to answer or log."""
    if isinstance(exc, BaseExceptionGroup):
        return all(_client_gone(e) for e in exc.exceptions)
    return isinstance(exc, anyio.BrokenResourceError | anyio.ClosedResourceError | OSError)


@dataclass(eq=False)
class _Connection:
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    reader: streams.FrameReader | None = None
    in_flight: int = 0
    spoken: bool = False
    """Whether a whole frame ever came in: silent connections are closed first."""

    def evictable(self) -> tuple[bool, float] | None:
        """Sort key among connections that may be closed to make room, or None."""
        if self.reader is None or self.reader.idle_since is None or self.in_flight:
            return None
        return (self.spoken, self.reader.idle_since)


async def _linger(stream: SocketStream) -> None:
    """Half-close, then read and drop what the peer still sends, for at most a second.
    Closing a socket with unread input resets it, and the peer may then lose the error
    reply already on its way (``permission_denied`` seen as "connection lost"):
    lingering lets the reply arrive first."""
    with contextlib.suppress(Exception), anyio.move_on_after(LINGER_SECONDS):
        await stream.send_eof()
        while True:
            await stream.receive(65536)


class Server:
    def __init__(
        self,
        handler: Handler,
        socket_path: Path,
        inherited: socket.socket | None = None,
        *,
        frame_timeout: float = 10.0,
    ) -> None:
        self.handler = handler
        self.socket_path = socket_path
        self.inherited = inherited
        self.connections = 0
        self.in_flight = 0
        self.frame_timeout = frame_timeout
        """Seconds a frame may take to arrive once its first byte has, and a reply to
        be taken (settings: ``frame_timeout_seconds``)."""
        self.max_connections = connection_limit()
        self.evicted = 0
        self._open: set[_Connection] = set()
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
                        await self._accept_loop(listener, connections)
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

    async def _accept_loop(self, listener: SocketListener, connections: TaskGroup) -> None:
        warned_at = -FD_WARNING_SECONDS
        while True:
            try:
                stream = await listener.accept()
            except anyio.BrokenResourceError as exc:
                cause = exc.__cause__
                if not isinstance(cause, OSError) or cause.errno not in _OUT_OF_FDS:
                    raise
                # Out of file descriptors (a client opened connections up to the limit
                # and left them): the listener is not broken, so make room and let the
                # connection waiting in the backlog in.
                if time.monotonic() - warned_at >= FD_WARNING_SECONDS:
                    warned_at = time.monotonic()
                    log.warning(
                        "cannot accept connections (%s) with %d open; closing idle ones",
                        cause.strerror,
                        len(self._open),
                    )
                if not self._evict_one():
                    await anyio.sleep(0.1)
                await anyio.sleep(0.01)
                continue
            conn = _Connection()
            if len(self._open) >= self.max_connections and not self._evict_one():
                connections.start_soon(self._refuse, stream)
                continue
            self._open.add(conn)
            connections.start_soon(self._connection, stream, conn)

    def _evict_one(self) -> bool:
        """Close the connection idle longest, silent ones first; False if none is idle."""
        candidates = [(key, c) for c in self._open if (key := c.evictable()) is not None]
        if not candidates:
            return False
        _key, victim = min(candidates, key=lambda kc: kc[0])
        self._open.discard(victim)
        victim.scope.cancel()
        self.evicted += 1
        if self.evicted == 1 or self.evicted % 100 == 0:
            log.warning(
                "%d connections open (limit %d): closed idle ones (%d so far)",
                len(self._open) + 1,
                self.max_connections,
                self.evicted,
            )
        return True

    async def _refuse(self, stream: SocketStream) -> None:
        reply = ErrorReply(
            code=ErrorCode.BUSY,
            message=f"kbindexd has {len(self._open)} connections busy; try again shortly",
        )
        with contextlib.suppress(Exception), anyio.move_on_after(1):
            async with stream:
                await streams.write_frame(stream, _encoder.encode(reply))

    async def _connection(self, stream: SocketStream, conn: _Connection) -> None:
        self.connections += 1
        try:
            with conn.scope:
                async with stream:
                    await self._converse(stream, conn)
        except Exception as exc:
            # Whatever one connection does must not take the daemon down with it.
            if not _client_gone(exc):
                log.exception("connection ended by an internal error")
        finally:
            self._open.discard(conn)
            self.connections -= 1

    async def _converse(self, stream: SocketStream, conn: _Connection) -> None:
        writer = streams.FrameWriter(stream, self.frame_timeout)

        async def send(reply: Reply) -> None:
            try:
                await writer.write(_encoder.encode(reply))
            except TimeoutError:
                # A client that sends requests and never reads the replies is closed:
                # its requests would stay in flight, and its connection could never be
                # closed to make room, nor drained.
                conn.scope.cancel()
                raise anyio.BrokenResourceError from None

        async def send_last(reply: Reply) -> None:
            # The connection closes after this: a peer that does not read it anyway
            # must not keep it open.
            with anyio.move_on_after(1):
                await send(reply)
            await _linger(stream)

        # Root is let in: it can read the user's files and the index anyway, so refusing
        # it protects nothing (and would break diagnostics run with sudo).
        uid = peer_uid(stream)
        if uid is not None and uid not in (os.getuid(), 0):
            await send(
                ErrorReply(
                    code=ErrorCode.PERMISSION_DENIED,
                    message="connections from other users are refused",
                )
            )
            await _linger(stream)
            return
        reader = streams.FrameReader(stream, framing.MAX_REQUEST_BYTES, self.frame_timeout)
        conn.reader = reader
        # fast_acquire: an uncontended slot costs no pass of the event loop.
        slots = anyio.Semaphore(MAX_IN_FLIGHT, fast_acquire=True)
        async with anyio.create_task_group() as tg:
            while True:
                try:
                    body = await reader.read()
                except framing.FrameTooLarge as exc:
                    await send_last(ErrorReply(code=ErrorCode.FRAME_TOO_LARGE, message=str(exc)))
                    break
                except streams.SlowFrame as exc:
                    await send_last(ErrorReply(code=ErrorCode.BAD_FRAME, message=str(exc)))
                    break
                except framing.IncompleteFrame:
                    break
                if body is None:
                    break
                conn.spoken = True
                decoded = decode_request(body)
                if isinstance(decoded, ErrorReply):
                    await send(decoded)
                    continue
                await slots.acquire()
                tg.start_soon(self._answer, decoded, send, slots, conn)

    async def _answer(
        self,
        request: Request,
        send: Callable[[Reply], Awaitable[None]],
        slots: anyio.Semaphore,
        conn: _Connection,
    ) -> None:
        async def emit(reply: Reply) -> None:
            await send(msgspec.structs.replace(reply, id=request.id))

        self.in_flight += 1
        conn.in_flight += 1
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
            conn.in_flight -= 1
            if self.in_flight == 0 and self._idle is not None:
                self._idle.set()
            slots.release()
