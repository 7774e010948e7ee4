"""Length-prefixed frames: a 4-byte big-endian body length, then the MessagePack body.

The length is checked against a maximum before a single byte of the body is read, so a
hostile or broken peer cannot make the reader allocate a giant buffer.
"""

from __future__ import annotations

import struct
import time
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


class SlowFrame(Exception):
    """Raised when a frame, once begun, is not complete within the reader's timeout:
    a peer that sends a length and then nothing (or a byte now and then) must not hold
    a partial frame, and the buffer behind it, for ever."""

    def __init__(self, timeout: float) -> None:
        super().__init__(f"frame not completed within {timeout:g} s of its first byte")
        self.timeout = timeout


def pack(body: bytes) -> bytes:
    """Prefix ``body`` with its length."""
    return HEADER.pack(len(body)) + body


class FrameReader:
    """Reads whole frames from a byte stream.

    Waiting for the first byte of a frame is unbounded (an idle peer is no harm); with
    ``frame_timeout`` set, the rest of the frame must then arrive within that many
    seconds. ``idle_since`` is the monotonic time the reader began waiting for a frame,
    or None while it is inside one.
    """

    def __init__(
        self, stream: ByteReceiveStream, max_size: int, frame_timeout: float | None = None
    ) -> None:
        self._stream = BufferedByteReceiveStream(stream)
        self._max_size = max_size
        self._frame_timeout = frame_timeout
        self.idle_since: float | None = time.monotonic()

    async def read(self) -> bytes | None:
        """Return the next frame's body, or ``None`` at a clean end of stream.

        Raises FrameTooLarge, IncompleteFrame or SlowFrame.
        """
        self.idle_since = time.monotonic()
        first = await self._read_exactly(1, at_boundary=True)
        self.idle_since = None
        if first is None:
            return None
        if self._frame_timeout is None:
            return await self._rest(first)
        try:
            with anyio.fail_after(self._frame_timeout):
                return await self._rest(first)
        except TimeoutError:
            raise SlowFrame(self._frame_timeout) from None

    async def _rest(self, first: bytes) -> bytes:
        header = first + (await self._read_exactly(HEADER.size - 1, at_boundary=False) or b"")
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
