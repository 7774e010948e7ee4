"""Where the daemon's socket lives, shared by the daemon, kbctl and the MCP front end.

Trigger: every process must agree on one path without talking to each other first.
Order: an explicit argument, then ``$KBINDEX_SOCKET``, then
``$XDG_RUNTIME_DIR/kbindex/kbindex.sock``, then a private ``/tmp/kbindex-$UID/`` directory
(the runtime dir is per-user and 0700 already; /tmp is shared, so the daemon creates that
directory with mode 0700 and refuses one owned by someone else).
"""

from __future__ import annotations

import os
from pathlib import Path

SOCKET_ENV = "KBINDEX_SOCKET"
SOCKET_NAME = "kbindex.sock"


def default_socket_path(environ: os._Environ[str] | dict[str, str] | None = None) -> Path:
    env = os.environ if environ is None else environ
    explicit = env.get(SOCKET_ENV)
    if explicit:
        return Path(explicit).expanduser()
    runtime = env.get("XDG_RUNTIME_DIR")
    if runtime:
        return Path(runtime) / "kbindex" / SOCKET_NAME
    return Path("/tmp") / f"kbindex-{os.getuid()}" / SOCKET_NAME


def resolve_socket_path(explicit: str | os.PathLike[str] | None = None) -> Path:
    if explicit:
        return Path(explicit).expanduser()
    return default_socket_path()
