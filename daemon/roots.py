"""The configured roots, and the one place that decides whether a path lies inside them.

Every path a client names (read_file, refresh, why) goes through ``Roots.resolve``:
symlinks are resolved first and the real path must lie inside a root's real path, so
``..``, absolute paths elsewhere and links pointing out are all refused the same way.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

MAX_PATH_CHARS = 4096


class OutsideRoots(Exception):
    """The path does not lie inside any configured root."""


class InvalidPath(Exception):
    """The path cannot name a file at all (empty, NUL byte, too long)."""


@dataclass(frozen=True, slots=True)
class Located:
    root: Path
    path: Path
    relpath: str


class Roots:
    def __init__(self, roots: tuple[Path, ...]) -> None:
        # Roots are stored resolved, so a real path can be compared by prefix.
        self.paths = tuple(Path(os.path.realpath(r)) for r in roots)

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(self.paths)

    def add(self, root: Path) -> None:
        """A root added at runtime (already validated). ``paths`` is replaced, never
        mutated, so a task iterating the old tuple is not disturbed."""
        self.paths = (*self.paths, Path(os.path.realpath(root)))

    def remove(self, root: Path) -> None:
        self.paths = tuple(p for p in self.paths if p != root)

    def locate(self, path: Path) -> Located | None:
        """The root holding an already-real absolute ``path``, without touching the disk."""
        for root in self.paths:
            if path == root or path.is_relative_to(root):
                return Located(root, path, path.relative_to(root).as_posix())
        return None

    def resolve(self, user_path: str) -> Located:
        """Resolve a client-given path (absolute, or relative to a root) to a real path
        inside a root. Raises InvalidPath or OutsideRoots."""
        if not user_path or "\x00" in user_path or len(user_path) > MAX_PATH_CHARS:
            raise InvalidPath("path is empty, too long or contains a NUL byte")
        if not self.paths:
            raise OutsideRoots(f"{user_path}: no roots are indexed (add one: kbctl roots add PATH)")
        candidate = Path(user_path).expanduser()
        if candidate.is_absolute():
            candidates = [candidate]
        else:
            candidates = [root / candidate for root in self.paths]
            # Prefer the root where the file exists; otherwise the first root decides.
            existing = [c for c in candidates if os.path.lexists(c)]
            candidates = existing or candidates[:1]
        real = Path(os.path.realpath(candidates[0]))
        located = self.locate(real)
        if located is None:
            raise OutsideRoots(f"{user_path} is outside the indexed roots")
        return located
