"""Which directories and files a scan passes over, decided in one place.

Built-in rules skip version-control and dependency/build directories (they hold
generated or vendored text that drowns real notes), directories marked as caches
(``CACHEDIR.TAG``) or virtualenvs (``pyvenv.cfg``), and the daemon's own state and
socket directories when they lie inside a root. Files are filtered by extension.
Each rule returns a short reason so ``kbctl why`` can explain it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Final

IGNORED_DIR_NAMES: Final = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        ".bzr",
        "_darcs",
        ".jj",
        "node_modules",
        "bower_components",
        "__pycache__",
        ".venv",
        "venv",
        ".tox",
        ".nox",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
        ".hypothesis",
        ".gradle",
        ".terraform",
        ".next",
        ".nuxt",
        ".parcel-cache",
        ".cache",
        ".direnv",
        ".eggs",
        ".idea",
        ".vscode",
        ".Trash",
        ".Trash-1000",
    }
)
MARKER_FILES: Final = ("CACHEDIR.TAG", "pyvenv.cfg")


class IgnoreRules:
    def __init__(
        self,
        *,
        included_extensions: frozenset[str] | None,
        excluded_extensions: frozenset[str],
        private_dirs: tuple[Path, ...] = (),
    ) -> None:
        self.included = included_extensions
        self.excluded = excluded_extensions
        self.private_dirs = frozenset(os.path.realpath(d) for d in private_dirs)

    def ignored_dir(self, path: str, name: str) -> str | None:
        """Why directory ``path`` (named ``name``) is not walked, or None."""
        if name in IGNORED_DIR_NAMES or name.endswith(".egg-info"):
            return f"built-in ignore: {name}/"
        if path in self.private_dirs or os.path.realpath(path) in self.private_dirs:
            return "the daemon's own state or socket directory"
        for marker in MARKER_FILES:
            if os.path.exists(os.path.join(path, marker)):
                return f"contains {marker}"
        return None

    def ignored_file(self, name: str) -> str | None:
        """Why a file named ``name`` is not indexed, or None."""
        ext = os.path.splitext(name)[1].lower()
        if ext in self.excluded:
            return f"extension {ext} is in excluded_extensions"
        if self.included is not None and ext not in self.included:
            return f"extension {ext or '(none)'} is not in included_extensions"
        return None
