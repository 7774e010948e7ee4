"""Blocking client for the kbindexd socket: one request at a time, no event loop.

kbctl sends one request (or follows one refresh) per process, so it needs neither
anyio nor asyncio, whose imports cost more than the rest of its start-up together.
The frames (framing.py), the messages (messages.py), the trust checks and the errors
(errors.py) are the async client's own.

    with BlockingClient.connect(path, client_name="kbctl") as client:
        reply = client.request(Search(query="scheduler"), SearchReply)
"""

from __future__ import annotations

import itertools
import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TypeVar

import msgspec
from kbindex.proto import framing
from kbindex.proto.address import resolve_socket_path
from kbindex.proto.errors import (
    ConnectionLost,
    DaemonError,
    DaemonUnavailable,
    RequestTooLarge,
    check_server,
    check_socket_dir,
)
from kbindex.proto.messages import (
    PROTOCOL_VERSION,
    ErrorReply,
    Hello,
    HelloReply,
    Progress,
    Reply,
    Request,
)

R = TypeVar("R", bound=Reply)

_encoder = msgspec.msgpack.Encoder()


class BlockingClient:
    def __init__(self, sock: socket.socket, socket_path: str) -> None:
        self._sock = sock
        self._ids = itertools.count(1)
        self.socket_path = socket_path
        self.server: HelloReply | None = None

    @classmethod
    @contextmanager
    def connect(
        cls, socket_path: str | os.PathLike[str] | None = None, *, client_name: str = ""
    ) -> Iterator[BlockingClient]:
        path = resolve_socket_path(socket_path)
        check_socket_dir(path)
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            try:
                sock.connect(path)
            except OSError as exc:
                raise DaemonUnavailable(path, exc.strerror or type(exc).__name__) from None
            check_server(sock, path)
            client = cls(sock, path)
            client.server = client.request(
                Hello(version=PROTOCOL_VERSION, client=client_name), HelloReply
            )
            yield client

    def request(self, request: Request, expect: type[R]) -> R:
        """Send ``request`` and return its final reply, which must be of type ``expect``."""
        *_, reply = self.stream(request, expect)  # Progress replies, then the final one
        assert isinstance(reply, expect)
        return reply

    def stream(self, request: Request, expect: type[R]) -> Iterator[R | Progress]:
        """Send ``request`` and yield every reply to it: Progress replies, then the final
        one, which must be of type ``expect`` (any other reply is a bad reply)."""
        # Why not one decoder for every reply type: msgspec prepares each type a decoder
        # names, and preparing them all cost kbctl more than its request.
        decoder = msgspec.msgpack.Decoder(expect | Progress | ErrorReply)
        rid = next(self._ids)
        body = _encoder.encode(msgspec.structs.replace(request, id=rid))
        if len(body) > framing.MAX_REQUEST_BYTES:
            raise RequestTooLarge(len(body), framing.MAX_REQUEST_BYTES)
        try:
            framing.send_frame(self._sock, body)
        except OSError as exc:
            raise ConnectionLost(f"connection to kbindexd lost: {exc}") from None
        while True:
            reply = self._receive(decoder)
            if reply.id == rid:
                if isinstance(reply, ErrorReply):
                    raise DaemonError(reply.code, reply.message)
                yield reply
                if not isinstance(reply, Progress):
                    return
            elif isinstance(reply, ErrorReply) and reply.id == 0:
                # About the connection, not a request (busy, permission denied, a frame
                # refused): it closes next, and this is why.
                raise DaemonError(reply.code, reply.message)

    def _receive(
        self, decoder: msgspec.msgpack.Decoder[R | Progress | ErrorReply]
    ) -> R | Progress | ErrorReply:
        try:
            body = framing.recv_frame(self._sock, framing.MAX_REPLY_BYTES)
            if body is None:
                raise ConnectionLost("kbindexd closed the connection")
            reply = decoder.decode(body)
        except (framing.IncompleteFrame, framing.FrameTooLarge, msgspec.DecodeError) as exc:
            raise ConnectionLost(f"bad reply from kbindexd: {exc}") from None
        except OSError as exc:
            raise ConnectionLost(f"connection to kbindexd lost: {exc}") from None
        return reply
