"""Whether the service's sandbox is why something failed, said so a user can act on it.

``kbctl service install`` derives the unit's hardening from the configuration of the
time: ``RestrictAddressFamilies=`` admits TCP only for a database reached over TCP,
``ReadWritePaths=`` lists the writable roots, ``PrivateTmp=`` is left off when a root
lives in /tmp. A configuration changed afterwards can need what the unit denies, and the
system calls then fail with errors that name no cause (EAFNOSUPPORT, EROFS, ENOENT):
the places that meet one ask here whether the sandbox explains it. Outside a service
(no ``INVOCATION_ID``, which systemd sets for every unit it starts) nothing does.
"""

from __future__ import annotations

import errno
import os
import socket
from pathlib import Path
from typing import Final

REINSTALL: Final = "run kbctl service install again"
_DENIED: Final = frozenset({errno.EAFNOSUPPORT, errno.EPERM, errno.EACCES})
_TMP: Final = (Path("/tmp"), Path("/var/tmp"))


def under_service() -> bool:
    return bool(os.environ.get("INVOCATION_ID"))


def tcp_denied() -> str:
    """Why TCP connections cannot be made here, or "" when they can."""
    try:
        socket.socket(socket.AF_INET, socket.SOCK_STREAM).close()
    except OSError as exc:
        if exc.errno in _DENIED:
            return f"the service's sandbox forbids TCP ({exc.strerror}): {REINSTALL}"
    return ""


def read_only_hint(error: OSError) -> str:
    """A hint for a write refused with EROFS inside the service, or ""."""
    if error.errno != errno.EROFS or not under_service():
        return ""
    return f"the service's sandbox keeps it read-only: {REINSTALL}"


def hidden_hint(path: Path) -> str:
    """A hint for a path in /tmp that does not exist for the service, or ""."""
    tmp = next((t for t in _TMP if path.is_relative_to(t)), None)
    if tmp is None or not under_service():
        return ""
    return f"the service may have a private {tmp}: {REINSTALL}"
