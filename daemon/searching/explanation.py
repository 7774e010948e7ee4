"""Why a path inside a root is or is not in the index: one answer for ``why`` and ``read_file``.

Why one function: ``kbctl why`` and reading a file that is not indexed must give the
same reason (too large, binary, ignored by which rule), and each new reason is then
written once.
"""

from __future__ import annotations

import os

from kbindex.daemon.indexing import textfile
from kbindex.daemon.indexing.ignore import IgnoreRules
from kbindex.daemon.roots import Located
from kbindex.daemon.watching.changes import Changes

FileState = tuple[str | None, str | None] | None
"""What the index holds for a path: None (no row), or (skip reason, detail); the
reason is None for a file that is indexed."""


def explain(
    rules: IgnoreRules, changes: Changes | None, located: Located, state: FileState
) -> str | None:
    """Why ``located`` is not indexed, in a few words, or None when it is. Reads the
    disk (ignore files, lstat): call it from a worker thread."""
    path = str(located.path)
    reason = rules.explain(str(located.root), path)
    if reason is not None:
        return reason if reason == "it is a directory" else f"ignored: {reason}"
    if state is not None:
        skipped, detail = state
        return None if skipped is None else f"skipped: {skipped} ({detail})"
    try:
        os.lstat(textfile.real_path(path))
    except FileNotFoundError:
        return "does not exist"
    except OSError as exc:
        return f"cannot be looked at: {exc.strerror} (a directory above it is unreadable)"
    if changes is not None and changes.is_pending(str(located.root), path):
        return "not indexed yet: a change to it is queued and will be indexed shortly"
    return "not indexed yet (waiting for the next scan)"
