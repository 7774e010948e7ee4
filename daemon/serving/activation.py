"""Socket activation: serve the listening socket systemd opened for us (``kbindexd.socket``).

The socket unit owns ``%t/kbindex/kbindex.sock``; on the first connection (or
when the service is started while the socket unit is active) systemd starts the daemon
with the socket as fd 3 and ``LISTEN_FDS=1``, ``LISTEN_PID=<our pid>``. The daemon then
must not bind or unlink that path itself: the socket unit created it and removes it.
Implemented directly (the protocol is three environment variables) so there is no
libsystemd dependency.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import stat
from collections.abc import MutableMapping

logger = logging.getLogger(__name__)

SD_LISTEN_FDS_START = 3
"""The first passed file descriptor; systemd passes them as 3, 4, ..."""

LISTEN_ENV = ("LISTEN_FDS", "LISTEN_PID", "LISTEN_FDNAMES")


class ActivationError(Exception):
    """systemd passed something that is not a listening AF_UNIX stream socket."""


def inherited_socket(environ: MutableMapping[str, str] | None = None) -> socket.socket | None:
    """The listening socket passed by systemd, or None when not socket-activated.

    The variables are removed from ``environ`` (default ``os.environ``) in every case, as
    ``sd_listen_fds(unset_environment=1)`` does, so processes we spawn cannot mistake
    them for their own. The socket returned is non-blocking and close-on-exec.
    Raises ActivationError when fd 3 is missing or is not a listening AF_UNIX
    SOCK_STREAM socket (a misconfigured socket unit, such as ``ListenDatagram=``).
    """
    env: MutableMapping[str, str] = os.environ if environ is None else environ
    raw_pid = env.get("LISTEN_PID")
    raw_fds = env.get("LISTEN_FDS")
    names = env.get("LISTEN_FDNAMES")
    for name in LISTEN_ENV:
        env.pop(name, None)

    if not raw_pid or not raw_fds:
        return None
    try:
        pid = int(raw_pid)
        count = int(raw_fds)
    except ValueError:
        logger.warning(
            "ignoring malformed socket activation variables LISTEN_PID=%r LISTEN_FDS=%r",
            raw_pid,
            raw_fds,
        )
        return None
    if pid != os.getpid():
        # Inherited from a socket-activated parent: those fds are not meant for us.
        logger.debug("LISTEN_PID=%d is not our pid %d; not socket-activated", pid, os.getpid())
        return None
    if count < 1:
        return None

    # Every passed fd is ours now; none must leak into processes we start.
    for fd in range(SD_LISTEN_FDS_START, SD_LISTEN_FDS_START + count):
        with contextlib.suppress(OSError):  # a closed fd in the range: nothing to leak
            os.set_inheritable(fd, False)
    if count > 1:
        logger.warning(
            "systemd passed %d sockets (%s); serving only the first, fd %d",
            count,
            names or "unnamed",
            SD_LISTEN_FDS_START,
        )

    sock = _listening_unix_socket(SD_LISTEN_FDS_START)
    sock.setblocking(False)
    logger.info("socket-activated: serving inherited socket %s", sock.getsockname() or "?")
    return sock


def _listening_unix_socket(fd: int) -> socket.socket:
    where = f"socket activation: fd {fd} passed by systemd (LISTEN_FDS)"
    try:
        mode = os.fstat(fd).st_mode
    except OSError as exc:
        raise ActivationError(f"{where} is not open: {exc.strerror}") from None
    if not stat.S_ISSOCK(mode):
        raise ActivationError(f"{where} is not a socket; check the ListenStream= of the unit")
    sock = socket.socket(fileno=fd)
    problem = None
    if sock.family != socket.AF_UNIX:
        problem = f"is a {sock.family.name} socket, expected AF_UNIX"
    elif sock.type != socket.SOCK_STREAM:
        problem = f"is a {sock.type.name} socket, expected SOCK_STREAM (use ListenStream=)"
    elif not sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN):
        problem = "is not listening"
    if problem is not None:
        # Leave the fd open: it is systemd's, and closing it would not fix anything.
        sock.detach()
        raise ActivationError(f"{where} {problem}")
    return sock
