"""What a path typed at kbctl means: the one rule every command that takes a file uses.

A relative path that exists relative to the shell's working directory is made absolute
from there (the daemon runs elsewhere and cannot know it). Otherwise it is passed on as
given, and the daemon resolves it against the roots, as it does for MCP clients, which
have no working directory. Absolute paths are only normalised.

A name that is not UTF-8 reaches kbctl with its bytes as surrogates (Python's
surrogateescape); the protocol's strings are UTF-8, so such bytes travel as ``\\xNN``,
the form in which the daemon names those files everywhere (``wire``), and which it
turns back into the bytes on disk. So a name kbctl prints can be given to it again,
and so can the real name.
"""

from __future__ import annotations

import os


def wire(text: str) -> str:
    """``text`` as the protocol can carry it: bytes that are not UTF-8 (surrogates) as
    ``\\xNN``, as the daemon's ``textfile.display_path`` writes them."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return os.fsencode(text).decode("utf-8", "backslashreplace")
    return text


def given(path: str) -> str:
    """``path`` as kbctl sends it to the daemon (used as an argparse ``type``)."""
    if os.path.isabs(path) or os.path.lexists(path):
        return wire(os.path.abspath(path))
    return wire(path)


def directory(path: str) -> str:
    """A root's directory for ``roots add|remove``: always from the working directory."""
    return wire(os.path.abspath(path))
