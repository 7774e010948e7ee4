"""One daemon per socket and per index: lock files, the private socket and state
directories, and stale socket files.

Two daemons on one socket or one database would fight over both. The lock
is an ``flock`` held for the daemon's life, so it is released by the kernel when the
process dies, however it dies: a socket file that exists while nobody holds the lock
was left by a dead daemon and is removed.
"""

from __future__ import annotations

import errno
import fcntl
import logging
import os
import stat
from pathlib import Path
from types import TracebackType

from kbindex.proto.address import UntrustedSocket, check_private_dir, foreign, owner_name

log = logging.getLogger(__name__)


class AlreadyRunning(Exception):
    """Another kbindexd holds the lock for this socket or state directory."""


class UnsafeDirectory(Exception):
    """The socket's directory is owned by someone else or open to other users."""


def ensure_private_dir(path: Path) -> None:
    """Create ``path`` with mode 0700, or check that an existing one is the user's and
    writable by no one else.

    Why refuse a shared directory (such as /tmp) rather than warn: clients refuse to
    talk to a socket there (``proto.address``), and anyone who can write to it can
    replace the socket or plant links where the lock files go.
    """
    if not path.exists():
        path.mkdir(parents=True, mode=0o700)
        return
    try:
        check_private_dir(path)
    except UntrustedSocket as exc:
        raise UnsafeDirectory(str(exc)) from None


class UnsafeStateDirectory(Exception):
    """The state directory, or one above it, is another user's or open to others."""


def check_state_dir(path: Path) -> None:
    """Raise UnsafeStateDirectory unless the state directory is the user's (or root's)
    and no one else can write to it, nor change the way to it.

    Why: it holds the index of the user's files. Another user who owns it, or may write
    to it, can read what the daemon writes there or put files of their own in its place;
    one who may write to a directory above it (unless that one is sticky, as /tmp) can
    rename the state directory and put their own there. Symbolic links on the way must
    be the user's too. Unlike the socket directory, refused with exit status 2: a
    restart cannot help."""
    given = os.path.abspath(path)
    real = os.path.realpath(given)
    # The directory itself, then the directories above both the path as given and the
    # real one, and any link on the way (the given path itself included), top down.
    above = {os.path.dirname(p) for p in _lineage(given) | _lineage(real)} - {real}
    if given != real:
        above.add(given)
    for step in [real, *sorted(above, key=len)]:
        st = os.stat(step) if step == real else os.lstat(step)
        if stat.S_ISLNK(st.st_mode):
            problem = None
            if st.st_uid not in (os.getuid(), 0):
                problem = f"is a symbolic link of {owner_name(st.st_uid)}"
        else:
            problem = foreign(st, sticky=step != real)
        if problem is None:
            continue
        mine = st.st_uid in (os.getuid(), 0) and not stat.S_ISLNK(st.st_mode)
        fix = (
            f"chmod go-w {step}"
            if mine
            else "choose a directory of your own (--state-dir or $KBINDEX_STATE_DIR)"
        )
        raise UnsafeStateDirectory(
            f"refusing the state directory {given}: {step} {problem}, so another user"
            f" could read or replace the index of your files; {fix}"
        )


def _lineage(path: str) -> set[str]:
    """``path`` and every directory above it."""
    found = {path}
    while (parent := os.path.dirname(path)) != path:
        found.add(parent)
        path = parent
    return found


class _FileLock:
    def __init__(self, path: Path, what: str) -> None:
        self.path = path
        self.what = what
        self.fd: int | None = None

    def acquire(self) -> None:
        # O_NOFOLLOW and the checks below: the pid is written only into a plain file of
        # the user's, never through a link planted where the lock file goes.
        try:
            fd = os.open(
                self.path,
                os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK,
                0o600,
            )
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise UnsafeDirectory(
                    f"{self.path} is a symbolic link; remove it (kbindexd never follows one)"
                ) from None
            raise
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid() or st.st_nlink != 1:
            os.close(fd)
            raise UnsafeDirectory(
                f"{self.path} is not a plain file of yours; remove it and start again"
            )
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno in (errno.EWOULDBLOCK, errno.EACCES):
                holder = self.path.read_text(encoding="ascii", errors="replace").strip()
                raise AlreadyRunning(
                    f"another kbindexd (pid {holder or '?'}) is already using {self.what}"
                ) from None
            raise
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self.fd = fd

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


class Instance:
    """Context manager holding both locks and clearing a stale socket file."""

    def __init__(self, socket_path: Path, state_dir: Path, *, owns_socket: bool = True) -> None:
        self.socket_path = socket_path
        self.owns_socket = owns_socket
        self._locks = [
            _FileLock(socket_path.with_name(socket_path.name + ".lock"), f"socket {socket_path}"),
            _FileLock(state_dir / "kbindexd.lock", f"state directory {state_dir}"),
        ]
        self.state_dir = state_dir

    def __enter__(self) -> Instance:
        ensure_private_dir(self.socket_path.parent)
        self.state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        check_state_dir(self.state_dir)
        acquired: list[_FileLock] = []
        try:
            for lock in self._locks:
                lock.acquire()
                acquired.append(lock)
        except BaseException:
            for lock in acquired:
                lock.release()
            raise
        if self.owns_socket and os.path.lexists(self.socket_path):
            log.warning("removing stale socket %s left by a daemon that died", self.socket_path)
            os.unlink(self.socket_path)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        for lock in self._locks:
            lock.release()
