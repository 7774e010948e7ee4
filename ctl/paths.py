"""What a path typed at kbctl means: the one rule every command that takes a file uses.

A relative path that exists relative to the shell's working directory is made absolute
from there (the daemon runs elsewhere and cannot know it). Otherwise it is passed on as
given, and the daemon resolves it against the roots, as it does for MCP clients, which
have no working directory. Absolute paths are only normalised.
"""

from __future__ import annotations

import os


def given(path: str) -> str:
    """``path`` as kbctl sends it to the daemon (used as an argparse ``type``)."""
    if os.path.isabs(path) or os.path.lexists(path):
        return os.path.abspath(path)
    return path
