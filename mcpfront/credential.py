"""The HTTP front end's bearer token: made once, kept in a file only the user can read.

Loopback is every local user's, so ``kbindex-mcp --http`` serves only requests that carry
``Authorization: Bearer <token>``. The token is 32 random bytes (``secrets``), kept in
``mcp-http.token`` beside the daemon's socket in the user's runtime directory
(``$XDG_RUNTIME_DIR/kbindex/``, else ``/run/user/$UID/kbindex/``, else
``/tmp/kbindex-$UID/``): a directory that must be the user's and writable by no one
else, on tmpfs, so the token never reaches a disk or a backup. It is reused for as long
as the file exists (a restarted server keeps working with the hosts configured for it)
and made anew when the runtime directory is emptied (a reboot) or on ``--new-token``.

Every step works on a handle of the directory that was checked, never on the path again
(``dir_fd``), and never follows a symbolic link: another user who could swap a link in
where the directory or the file goes (``/tmp/kbindex-$UID`` can be made by anyone) would
otherwise receive the token or hand us one of theirs.
"""

from __future__ import annotations

import contextlib
import errno
import hmac
import os
import re
import secrets
import shlex
import stat
from collections.abc import Mapping
from typing import Final

from kbindex.proto.address import SOCKET_ENV, default_socket_path, foreign

TOKEN_NAME: Final = "mcp-http.token"
TOKEN_BYTES: Final = 32
_TOKEN_SHAPE: Final = re.compile(r"[A-Za-z0-9_-]{32,256}")
_READ_MOST: Final = 1024


class UnsafeTokenFile(Exception):
    """The token's directory or file is not the user's own private one; the message says
    what is wrong and what to do."""


def default_token_path(environ: Mapping[str, str] | None = None) -> str:
    """``mcp-http.token`` in the runtime directory the daemon's socket defaults to.

    ``$KBINDEX_SOCKET`` is left out: a socket moved elsewhere (a shared project folder)
    says nothing about where a secret may be kept."""
    env = dict(os.environ if environ is None else environ)
    env.pop(SOCKET_ENV, None)
    return os.path.join(os.path.dirname(default_socket_path(env)), TOKEN_NAME)


class Credential:
    """The token a request must carry, and where it lives (for the messages)."""

    def __init__(self, token: str, path: str) -> None:
        self.path = path
        self._expected = token.encode("ascii")

    def print_command(self) -> str:
        """The command that prints this token (for the messages that point to it)."""
        if self.path == default_token_path():
            return "kbindex-mcp --print-token"
        return f"kbindex-mcp --print-token --token-file {shlex.quote(self.path)}"

    def reveal(self) -> str:
        """The token itself (for ``--print-token``)."""
        return self._expected.decode("ascii")

    def accepts(self, authorization: bytes | None) -> bool:
        """Whether an ``Authorization`` header value carries the token.

        ``hmac.compare_digest``: the time taken does not depend on how much of a guess
        is right, so the token cannot be found a byte at a time."""
        if not authorization:
            return False
        scheme, _, given = authorization.strip().partition(b" ")
        if scheme.lower() != b"bearer":
            return False
        return hmac.compare_digest(given.strip(), self._expected)


def load(path: str | None = None) -> Credential:
    """The token at ``path`` (default: ``default_token_path()``), made if there is none."""
    path = path or default_token_path()
    directory, name = _split(path)
    dir_fd = _open_private_dir(directory)
    try:
        token = _read(dir_fd, name, path)
        if token is None:
            token = _install(dir_fd, name, _new_token(), replace=False, path=path)
    finally:
        os.close(dir_fd)
    return Credential(token, os.path.join(directory, name))


def renew(path: str | None = None) -> Credential:
    """Replace the token at ``path`` with a new one (the old one stops working once the
    server is restarted)."""
    path = path or default_token_path()
    directory, name = _split(path)
    dir_fd = _open_private_dir(directory)
    try:
        if _read(dir_fd, name, path) is None:
            token = _install(dir_fd, name, _new_token(), replace=False, path=path)
        else:
            token = _install(dir_fd, name, _new_token(), replace=True, path=path)
    finally:
        os.close(dir_fd)
    return Credential(token, os.path.join(directory, name))


def _new_token() -> str:
    return secrets.token_urlsafe(TOKEN_BYTES)


def _split(path: str) -> tuple[str, str]:
    directory, name = os.path.split(os.path.abspath(os.path.expanduser(path)))
    return directory, name


def _open_private_dir(directory: str) -> int:
    """A handle of ``directory`` (made 0700 if missing), checked to be the user's (or
    root's) and writable by no one else; a symbolic link in its place is refused."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(directory, flags)
    except FileNotFoundError:
        try:
            os.mkdir(directory, 0o700)
        except FileExistsError:
            pass  # made meanwhile: checked below like any other
        except FileNotFoundError:
            raise UnsafeTokenFile(
                f"cannot keep the token in {directory}: its parent does not exist"
            ) from None
        fd = os.open(directory, flags)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise UnsafeTokenFile(
                f"{directory} is a symbolic link or not a directory; the token is kept only "
                f"in a real directory of yours (remove it, or choose --token-file elsewhere)"
            ) from None
        raise
    problem = foreign(os.fstat(fd))
    if problem:
        os.close(fd)
        raise UnsafeTokenFile(
            f"the token directory {directory} {problem}, so the token could be read or "
            f"replaced there. Remove that directory if you did not make it, or choose "
            f"another place with --token-file."
        )
    return fd


def _read(dir_fd: int, name: str, path: str) -> str | None:
    """The token in ``name``, None if there is no such file."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(name, flags, dir_fd=dir_fd)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UnsafeTokenFile(f"{path} is a symbolic link; remove it") from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid():
            raise UnsafeTokenFile(f"{path} is not a plain file of yours; remove it")
        if stat.S_IMODE(st.st_mode) & 0o077:
            raise UnsafeTokenFile(
                f"{path} can be read by others (mode {stat.S_IMODE(st.st_mode):o}), so the "
                f"token may be known; make a new one with: kbindex-mcp --new-token"
            )
        text = os.read(fd, _READ_MOST).decode("ascii", "replace").strip()
    finally:
        os.close(fd)
    if not _TOKEN_SHAPE.fullmatch(text):
        raise UnsafeTokenFile(
            f"{path} does not hold a kbindex token; remove it or run: kbindex-mcp --new-token"
        )
    return text


def _install(dir_fd: int, name: str, token: str, *, replace: bool, path: str) -> str:
    """Write ``token`` whole under a temporary name, then give it ``name``; the token
    that ``name`` holds afterwards.

    Whole before it is visible: a reader never sees half a token. Without ``replace``
    the name is taken with link(), which fails if another process made the file
    meanwhile; its token is the one kept then, so every process agrees."""
    temporary = f".{name}.{os.getpid()}.{secrets.token_hex(4)}"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(temporary, flags, 0o600, dir_fd=dir_fd)
    try:
        os.write(fd, f"{token}\n".encode("ascii"))
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        if replace:
            os.rename(temporary, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
            return token
        try:
            os.link(temporary, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd, follow_symlinks=False)
        except FileExistsError:
            kept = _read(dir_fd, name, path)
            if kept is None:  # made and removed meanwhile: try once more
                os.link(
                    temporary, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd, follow_symlinks=False
                )
                return token
            return kept
        return token
    finally:
        with contextlib.suppress(FileNotFoundError):  # renamed into place
            os.unlink(temporary, dir_fd=dir_fd)
