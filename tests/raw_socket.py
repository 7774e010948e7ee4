"""A plain blocking socket speaking frames by hand, as a broken or hostile client
would: for the protocol and hostile-input tests."""

from __future__ import annotations

import socket
import struct

import msgspec
from kbindex.proto import framing
from kbindex.proto.messages import AnyReply

_decoder = msgspec.msgpack.Decoder(AnyReply)


class RawConnection:
    def __init__(self, path: object, timeout: float = 10.0) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        self.sock.connect(str(path))

    def __enter__(self) -> RawConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.sock.close()

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def send(self, message: object) -> None:
        self.send_raw(framing.pack(msgspec.msgpack.encode(message)))

    def recv(self) -> object | None:
        """The next reply, or None when the daemon closed the connection."""
        header = self._exactly(4)
        if header is None:
            return None
        (size,) = struct.unpack(">I", header)
        body = self._exactly(size)
        assert body is not None, "the daemon closed the connection mid-frame"
        return _decoder.decode(body)

    def _exactly(self, n: int) -> bytes | None:
        data = b""
        while len(data) < n:
            try:
                chunk = self.sock.recv(n - len(data))
            except ConnectionResetError:
                chunk = b""
            if not chunk:
                return None
            data += chunk
        return data

    def replies_until_close(self) -> list[object]:
        """Stop sending and read every reply up to the daemon's end of the connection."""
        self.sock.shutdown(socket.SHUT_WR)
        replies = []
        while (reply := self.recv()) is not None:
            replies.append(reply)
        return replies

    def closed_by_peer(self) -> bool:
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True

    def close(self) -> None:
        self.sock.close()
