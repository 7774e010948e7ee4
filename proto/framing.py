"""Length-prefixed frames: a 4-byte big-endian body length, then the MessagePack body.

The length is checked against a maximum before a single byte of the body is read, so a
hostile or broken peer cannot make the reader allocate a giant buffer.

This module is the format and a blocking reader and writer on a plain socket (kbctl: one
request at a time, without an event loop to start); ``streams.py`` reads and writes the
same frames on anyio streams (the daemon, the async client).
"""

from __future__ import annotations

import socket
import struct
from typing import Final

HEADER: Final = struct.Struct(">I")
MAX_REQUEST_BYTES: Final = 1 << 20
"""Largest request the daemon reads (1 MiB): requests are small."""
MAX_REPLY_BYTES: Final = 32 << 20
"""Largest reply a client reads (32 MiB): replies are bounded by the daemon's budgets."""
RECEIVE_BYTES: Final = 1 << 16
"""Most a reader takes from its stream at a time."""


class FrameTooLarge(Exception):
    """Raised when a frame header announces a body larger than the reader accepts.

    The stream is not resynchronisable after this (the body was not read), so the
    connection must be closed after answering.
    """

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"frame of {size} bytes exceeds the limit of {limit} bytes")
        self.size = size
        self.limit = limit


class IncompleteFrame(Exception):
    """Raised when the peer closed the stream in the middle of a frame."""


def pack(body: bytes) -> bytes:
    """Prefix ``body`` with its length."""
    return HEADER.pack(len(body)) + body


def send_frame(sock: socket.socket, body: bytes) -> None:
    """Write ``body`` as one frame on a blocking socket."""
    sock.sendall(pack(body))


def recv_frame(sock: socket.socket, max_size: int) -> bytes | None:
    """The next frame's body from a blocking socket, or ``None`` at a clean end of stream.

    Raises FrameTooLarge before reading a body longer than ``max_size``, IncompleteFrame
    when the stream ends inside a frame."""
    header = _recv_exactly(sock, HEADER.size, at_start=True)
    if header is None:
        return None
    (size,) = HEADER.unpack(header)
    if size > max_size:
        raise FrameTooLarge(size, max_size)
    body = _recv_exactly(sock, size, at_start=False)
    assert body is not None
    return body


def _recv_exactly(sock: socket.socket, size: int, *, at_start: bool) -> bytes | None:
    buffer = bytearray()
    while len(buffer) < size:
        chunk = sock.recv(min(size - len(buffer), RECEIVE_BYTES))
        if not chunk:
            if at_start and not buffer:
                return None
            raise IncompleteFrame(f"stream ended inside a frame ({len(buffer)} bytes)")
        buffer += chunk
    return bytes(buffer)
