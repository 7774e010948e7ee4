"""What kbindex's clients raise, and the checks both clients make before they send a byte.

Shared by the async ``Client`` (client.py: kbindex-mcp, doctor, tests) and the blocking
one (blocking.py: kbctl), so both refuse the same sockets with the same words.
"""

from __future__ import annotations

import os
import socket
import struct

from kbindex.proto.address import UntrustedSocket, check_private_dir, owner_name
from kbindex.proto.messages import ErrorReply, Reply


class ClientError(Exception):
    """Base class of everything a client raises."""


class DaemonUnavailable(ClientError):
    """Raised when nothing answers on the socket (daemon not running, wrong path)."""

    def __init__(self, socket_path: str, cause: str) -> None:
        super().__init__(
            f"kbindexd is not running (no answer on {socket_path}: {cause}). "
            "Start it with: kbindexd PATH  (or: systemctl --user start kbindexd.socket)"
        )
        self.socket_path = socket_path


class UntrustedDaemon(ClientError):
    """The socket is in a directory others control, or another user's process serves it.

    Nothing was sent: talking to it would hand that user every query and show their
    text as the user's own."""


class ConnectionLost(ClientError):
    """Raised for requests in flight when the daemon closes the connection."""


class NotSent(ConnectionLost):
    """The connection was lost before the request was written: the daemon never saw it,
    so sending it again cannot do it twice (a note written, a line appended)."""


class RequestTooLarge(ClientError):
    """A request larger than the daemon reads (``framing.MAX_REQUEST_BYTES``): refused
    before a byte is sent, since the daemon would end the connection (and every other
    request on it) over it."""

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(
            f"the request is {size:,} bytes, over the {limit // 1024:,} KiB one request can carry"
        )
        self.size = size
        self.limit = limit


class DaemonError(ClientError):
    """The daemon answered with an error reply."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def check_socket_dir(path: str) -> None:
    """Raise UntrustedDaemon unless the directory holding the socket ``path`` is the
    user's own (``address.check_private_dir``), DaemonUnavailable if it is not there."""
    try:
        check_private_dir(os.path.dirname(path) or ".")
    except FileNotFoundError:
        raise DaemonUnavailable(path, "no such directory") from None
    except UntrustedSocket as exc:
        raise UntrustedDaemon(str(exc)) from None
    except OSError as exc:
        raise DaemonUnavailable(path, exc.strerror or type(exc).__name__) from None


def check_server(raw: socket.socket, path: str) -> None:
    """Raise UntrustedDaemon unless the process serving ``path`` runs as this user or
    root (root can read all of the user's files anyway). The directory check came first;
    this one catches a socket moved or bound there by someone else all the same."""
    creds = raw.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    _pid, uid, _gid = struct.unpack("3i", creds)
    if uid not in (os.getuid(), 0):
        raise UntrustedDaemon(
            f"the socket {path} is served by {owner_name(uid)}, not by you: it is not your "
            f"kbindexd, so nothing was sent to it. Stop using that socket path (--socket or "
            f"$KBINDEX_SOCKET), or remove it if it should be yours."
        )


def checked(item: Reply | ClientError) -> Reply:
    """``item`` if it is an answer; the error to raise otherwise."""
    if isinstance(item, ClientError):
        raise item
    if isinstance(item, ErrorReply):
        raise DaemonError(item.code, item.message)
    return item
