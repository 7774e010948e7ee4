"""Frames (see ``framing.py``) read and written on anyio byte streams: the daemon's
connections and the async client's.
"""

from __future__ import annotations

import contextlib
import time

import anyio
from anyio.abc import ByteReceiveStream, ByteSendStream, SocketAttribute
from anyio.streams.buffered import BufferedByteReceiveStream
from kbindex.proto.framing import HEADER, RECEIVE_BYTES, FrameTooLarge, IncompleteFrame, pack


class SlowFrame(Exception):
    """Raised when a frame, once begun, is not complete within the reader's timeout:
    a peer that sends a length and then nothing (or a byte now and then) must not hold
    a partial frame, and the buffer behind it, for ever."""

    def __init__(self, timeout: float) -> None:
        super().__init__(f"frame not completed within {timeout:g} s of its first byte")
        self.timeout = timeout


class FrameReader:
    """Reads whole frames from a byte stream.

    Waiting for the first byte of a frame is unbounded (an idle peer is no harm); with
    ``frame_timeout`` set, the rest of the frame must then arrive within that many
    seconds. ``idle_since`` is the monotonic time the reader began waiting for a frame,
    or None while it is inside one.

    Why a buffer of its own: every receive is a pass of the event loop (anyio
    checkpoints on each), so the reader takes what the stream has, up to
    RECEIVE_BYTES: a frame that arrived whole (nearly all of them) costs one receive,
    and several frames sent together cost one between them.
    The length is still checked before the reader waits for the body, and it never
    takes more than RECEIVE_BYTES beyond the frame it is reading.
    """

    def __init__(
        self, stream: ByteReceiveStream, max_size: int, frame_timeout: float | None = None
    ) -> None:
        self._stream = BufferedByteReceiveStream(stream)
        self._raw = stream.extra(SocketAttribute.raw_socket, None)
        self._buffer = bytearray()
        self._max_size = max_size
        self._frame_timeout = frame_timeout
        self.idle_since: float | None = time.monotonic()

    async def read(self) -> bytes | None:
        """Return the next frame's body, or ``None`` at a clean end of stream.

        Raises FrameTooLarge, IncompleteFrame or SlowFrame.
        """
        self.idle_since = time.monotonic()
        if not self._buffer and not await self._receive():
            return None
        self.idle_since = None
        body = self._take()
        if body is not None:
            return body
        if self._frame_timeout is None:
            return await self._rest()
        try:
            with anyio.fail_after(self._frame_timeout):
                return await self._rest()
        except TimeoutError:
            raise SlowFrame(self._frame_timeout) from None

    def _take(self) -> bytes | None:
        """The first frame's body, taken out of the buffer, if it is all there."""
        if len(self._buffer) < HEADER.size:
            return None
        (size,) = HEADER.unpack_from(self._buffer)
        if size > self._max_size:
            raise FrameTooLarge(size, self._max_size)
        end = HEADER.size + size
        if len(self._buffer) < end:
            return None
        body = bytes(self._buffer[HEADER.size : end])
        del self._buffer[:end]
        return body

    async def _rest(self) -> bytes:
        while (body := self._take()) is None:
            missing = RECEIVE_BYTES
            if len(self._buffer) >= HEADER.size:  # the length is known (and allowed)
                missing = HEADER.size + HEADER.unpack_from(self._buffer)[0] - len(self._buffer)
            if not await self._receive(max(missing, RECEIVE_BYTES)):
                raise IncompleteFrame(f"stream ended inside a frame ({len(self._buffer)} bytes)")
        return body

    async def _receive(self, most: int = RECEIVE_BYTES) -> bool:
        """Add what the stream has, up to ``most`` bytes, to the buffer; False at the
        end of the stream."""
        if self._raw is not None:
            return await self._receive_raw(most)
        try:
            chunk = await self._stream.receive(most)
        except Exception as exc:
            if _is_end_of_stream(exc):
                return False
            raise
        self._buffer += chunk
        return True

    async def _receive_raw(self, most: int) -> bool:
        """``_receive`` on the raw socket of a socket stream.

        anyio's ``receive`` passes through the event loop before it tries the socket;
        here the socket is tried first, and waited for only when it has nothing
        (``wait_readable``), so a frame costs the wake-up alone."""
        assert self._raw is not None
        while True:
            try:
                chunk = self._raw.recv(most)
            except BlockingIOError:
                await anyio.wait_readable(self._raw)
                continue
            except OSError:
                return False  # reset by the peer: the end of its stream
            if not chunk:
                return False
            self._buffer += chunk
            return True


def _is_end_of_stream(exc: Exception) -> bool:
    return isinstance(exc, anyio.EndOfStream | anyio.IncompleteRead | anyio.BrokenResourceError)


async def write_frame(stream: ByteSendStream, body: bytes) -> None:
    await stream.send(pack(body))


class FrameWriter:
    """Writes whole frames to a byte stream, one after the other, never interleaved;
    with ``timeout`` set, each must be written within that many seconds (a peer that
    does not read holds the writer no longer).

    Why a send on the raw socket: writing through the stream costs a pass of the event
    loop (anyio checkpoints on every send), a cancel scope and a timer for the timeout,
    in the daemon and again in the client. A frame the socket's buffer takes whole
    (nearly all of them) is written at once, with no await between the test that no
    other frame is being written and the send; the rest of a larger frame, or a frame
    behind one still being written, goes through the stream under the lock and the
    timeout.
    """

    def __init__(self, stream: ByteSendStream, timeout: float | None = None) -> None:
        self._stream = stream
        self._raw = stream.extra(SocketAttribute.raw_socket, None)
        self._lock = anyio.Lock(fast_acquire=True)
        self._timeout = timeout

    async def write(self, body: bytes) -> None:
        """Write ``body`` as one frame. Raises TimeoutError past the timeout, and
        anyio's BrokenResourceError or ClosedResourceError when the peer is gone."""
        frame = pack(body)
        if self._raw is not None and not self._lock.locked():
            try:
                sent = self._raw.send(frame)
            except BlockingIOError:
                sent = 0
            except OSError as exc:
                raise anyio.BrokenResourceError(str(exc)) from exc
            if sent == len(frame):
                return
            frame = frame[sent:]
        async with self._lock:
            with anyio.fail_after(self._timeout) if self._timeout else contextlib.nullcontext():
                await self._stream.send(frame)
