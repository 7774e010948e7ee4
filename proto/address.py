"""Where the daemon's socket lives, and whether a socket there can be trusted; shared by
the daemon, kbctl and the MCP front end.

Every process must agree on one path without talking to each other first. Order: an
explicit argument, then ``$KBINDEX_SOCKET``, then ``$XDG_RUNTIME_DIR/kbindex/``, then
``/run/user/$UID/kbindex/`` when that runtime directory exists and is the user's (MCP
hosts start front ends with a minimal environment that lacks XDG_RUNTIME_DIR, while
the systemd user service serves there), then a private ``/tmp/kbindex-$UID/``.

Trust: a socket is only as trustworthy as the directory holding it. Another local user
can create ``/tmp/kbindex-$UID/`` first, or a socket path can point into a shared
directory, and serve a socket of their own there: a client would send them every query
and show their text as the user's notes. So the daemon serves, and a client connects,
only where the directory belongs to the user (or root) and nobody else can write to it;
the client then checks the server's uid too (``proto.client``).

Paths are strings (os.path), not pathlib: kbctl imports this module for every search,
and pathlib's own imports (urllib.parse, ipaddress) are a fair part of its start-up.
"""

from __future__ import annotations

import os
import pwd
import stat
from collections.abc import Mapping

SOCKET_ENV = "KBINDEX_SOCKET"
SOCKET_NAME = "kbindex.sock"
RUN_USER = "/run/user"
"""Where systemd-logind puts each user's runtime directory (``$XDG_RUNTIME_DIR``)."""


class UntrustedSocket(Exception):
    """The socket's directory, or the process serving it, is not the user's own."""


def default_socket_path(
    environ: Mapping[str, str] | None = None, *, run_user: str | os.PathLike[str] = RUN_USER
) -> str:
    env = os.environ if environ is None else environ
    explicit = env.get(SOCKET_ENV)
    if explicit:
        return os.path.expanduser(explicit)
    runtime = env.get("XDG_RUNTIME_DIR")
    if runtime:
        return os.path.join(runtime, "kbindex", SOCKET_NAME)
    uid = os.getuid()
    mine = os.path.join(run_user, str(uid))
    try:
        if os.stat(mine).st_uid == uid:
            return os.path.join(mine, "kbindex", SOCKET_NAME)
    except OSError:
        pass
    return os.path.join("/tmp", f"kbindex-{uid}", SOCKET_NAME)


def resolve_socket_path(explicit: str | os.PathLike[str] | None = None) -> str:
    if explicit:
        return os.path.expanduser(os.fspath(explicit))
    return default_socket_path()


def owner_name(uid: int) -> str:
    """``name (uid N)``, or ``uid N`` for a uid without an account."""
    try:
        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except KeyError:
        return f"uid {uid}"


def _root_uids() -> tuple[int, ...]:
    """The uids root's files show as: 0, and the overflow uid where this process's user
    namespace does not map root. A systemd user service runs in such a namespace from
    systemd 253 on (its sandbox's implicit ``PrivateUsers=``): every file that is not the
    user's, root's ``/`` and ``/home`` included, then shows as owned by "nobody". Another
    user's files show so too there; the mode bits, which are checked whoever the owner
    is, still tell whether anyone else may write."""
    # Bytes, not text: no codec is looked up (a process that dropped to another uid
    # may no longer read the interpreter's library to import one).
    try:
        with open("/proc/self/uid_map", "rb") as mapping:
            ranges = [tuple(map(int, line.split())) for line in mapping if line.strip()]
        with open("/proc/sys/kernel/overflowuid", "rb") as overflow:
            nobody = int(overflow.read())
    except (OSError, ValueError):
        return (0,)
    mapped = any(inside <= 0 < inside + count for inside, _, count in ranges)
    return (0,) if mapped else (0, nobody)


def foreign(st: os.stat_result, *, sticky: bool = False) -> str | None:
    """Why a directory with this ``stat`` could be another user's to change: it belongs
    to someone other than the user or root, or its group or others may write to it
    (unless ``sticky`` allows a sticky one, as /tmp: others may add their own entries
    there but not rename or remove the user's). None when it is the user's alone."""
    mode = stat.S_IMODE(st.st_mode)
    if st.st_uid != os.getuid() and st.st_uid not in _root_uids():
        return f"belongs to {owner_name(st.st_uid)}, not to you"
    if mode & 0o022 and not (sticky and mode & stat.S_ISVTX):
        return f"is writable by {'others' if mode & 0o002 else 'its group'} (mode {mode:o})"
    return None


def check_private_dir(path: str | os.PathLike[str]) -> None:
    """Raise UntrustedSocket unless ``path`` is a directory of the user (or root) that no
    one else can write to. Symbolic links are followed: what counts is the directory the
    socket is really in. The advice fits the directory: a shared one such as /tmp is
    left as it is (the socket goes elsewhere), only the user's own is to be made private."""
    st = os.stat(path)
    if not stat.S_ISDIR(st.st_mode):
        raise UntrustedSocket(f"{path} is not a directory")
    mode = stat.S_IMODE(st.st_mode)
    elsewhere = (
        f"put the socket in a directory only you can write to, with --socket PATH or "
        f"${SOCKET_ENV} (kbindexd makes a missing directory with mode 700), or set "
        f"XDG_RUNTIME_DIR"
    )
    if st.st_uid not in (os.getuid(), 0):
        raise UntrustedSocket(
            f"the socket directory {path} belongs to {owner_name(st.st_uid)}, not to you, "
            f"so a socket in it could be theirs. Do not use it: {elsewhere}."
        )
    if not mode & 0o022:
        return
    writers = "others" if mode & 0o002 else "its group"
    if st.st_uid == os.getuid() and not mode & stat.S_ISVTX:
        raise UntrustedSocket(
            f"the socket directory {path} is writable by {writers} (mode {mode:o}), so a "
            f"socket in it could be anyone's. It is yours: make it private with "
            f"chmod go-w {path}, or {elsewhere}."
        )
    # Sticky or root's: a directory shared on purpose (/tmp, /var/tmp, /dev/shm). Its
    # mode is right for what it is; changing or removing it would break the system.
    raise UntrustedSocket(
        f"the socket directory {path} is shared (writable by {writers}, mode {mode:o}), so "
        f"a socket in it could be anyone's. Leave {path} as it is and {elsewhere}."
    )
