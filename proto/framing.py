"""Length-prefixed frames: a 4-byte big-endian body length, then the MessagePack body.

The length is checked against a maximum before a single byte of the body is read, so a
hostile or broken peer cannot make the reader allocate a giant buffer.
"""

from __future__ import annotations

import struct
from typing import Final

import anyio
from anyio.abc import ByteReceiveStream, ByteSendStream
from anyio.streams.buffered import BufferedByteReceiveStream

HEADER: Final = struct.Struct(">I")
MAX_REQUEST_BYTES: Final = 1 << 20
"""Largest request the daemon reads (1 MiB): requests are small."""
MAX_REPLY_BYTES: Final = 32 << 20
"""Largest reply a client reads (32 MiB): replies are bounded by the daemon's budgets."""


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


class FrameReader:
    """Reads whole frames from a byte stream."""

    def __init__(self, stream: ByteReceiveStream, max_size: int) -> None:
        self._stream = BufferedByteReceiveStream(stream)
        self._max_size = max_size

    async def read(self) -> bytes | None:
        """Return the next frame's body, or ``None`` at a clean end of stream.

        Raises FrameTooLarge or IncompleteFrame.
        """
        header = await self._read_exactly(HEADER.size, at_boundary=True)
        if header is None:
            return None
        (size,) = HEADER.unpack(header)
        if size > self._max_size:
            raise FrameTooLarge(size, self._max_size)
        body = await self._read_exactly(size, at_boundary=False)
        assert body is not None
        return body

    async def _read_exactly(self, n: int, *, at_boundary: bool) -> bytes | None:
        if n == 0:
            return b""
        chunks: list[bytes] = []
        remaining = n
        while remaining:
            try:
                chunk = await self._stream.receive(remaining)
            except Exception as exc:
                if _is_end_of_stream(exc):
                    if at_boundary and remaining == n:
                        return None
                    raise IncompleteFrame(f"stream ended {remaining} bytes short") from exc
                raise
            chunks.append(chunk)
            remaining -= len(chunk)
        return b"".join(chunks)


def _is_end_of_stream(exc: Exception) -> bool:
    return isinstance(exc, anyio.EndOfStream | anyio.IncompleteRead | anyio.BrokenResourceError)


async def write_frame(stream: ByteSendStream, body: bytes) -> None:
    await stream.send(pack(body))
