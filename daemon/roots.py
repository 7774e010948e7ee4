"""The configured roots, and the one place that decides whether a path lies inside them.

Every path a client names (read_file, refresh, why) goes through ``Roots.resolve``:
symlinks are resolved first and the real path must lie inside a root's real path, so
``..``, absolute paths elsewhere and links pointing out are all refused the same way.

Every file the daemon reads for a client passes here too, whatever the index says:
the index only suggests files (a shared database holds rows anyone who may write it
planted), the roots decide. ``inside`` checks a name (``textfile.load`` asks it before
it opens a file and again of the kernel's name for the file it opened: snippets,
passages, read_file); ``readable`` checks the files named to ripgrep, which opens
them itself.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from kbindex.daemon.indexing.textfile import display_path, real_path

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

    def _prefixes(self) -> tuple[str, ...]:
        return tuple(os.path.join(str(root), "") for root in self.paths)

    def inside(self, path: str) -> bool:
        """Whether ``path`` names something inside a root: absolute, written as the
        kernel writes it (no ``..``, ``.`` or doubled ``/``) and under a root's real
        path. Only the name is looked at, never the disk."""
        return path.startswith(self._prefixes()) and os.path.normpath(path) == path

    def readable(self, paths: Iterable[str]) -> list[str]:
        """The display paths (``textfile.display_path``) among ``paths`` that name a
        regular file inside a root with no symbolic link on the way: what ripgrep may
        be given. It opens what it is named itself, following links and reading FIFOs
        and directories, so each is checked here first (an ``lstat`` per file and one
        per directory). A link swapped in after this check, by someone who may write
        inside a root, is not caught."""
        prefixes = self._prefixes()
        plain = {str(root): True for root in self.paths}
        kept = []
        for shown in paths:
            path = real_path(shown)
            if not path.startswith(prefixes) or os.path.normpath(path) != path:
                continue
            if _plain_dir(os.path.dirname(path), plain) and _regular(path):
                kept.append(shown)
        return kept

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
            existing = [c for c in candidates if _on_disk(str(c))]
            candidates = existing or candidates[:1]
        # A name that is not UTF-8 comes as the daemon shows it (``display_path``): its
        # links are resolved on the name on disk, and the answer is shown again.
        target = str(candidates[0])
        real = Path(display_path(os.path.realpath(_on_disk(target) or target)))
        located = self.locate(real)
        if located is None:
            raise OutsideRoots(f"{user_path} is outside the indexed roots")
        return located


def _on_disk(shown: str) -> str:
    """The name on disk of a path as the daemon shows it (a file really named so
    wins), or "" when neither exists."""
    for name in (shown, real_path(shown)):
        if os.path.lexists(name):
            return name
    return ""


def _plain_dir(directory: str, known: dict[str, bool]) -> bool:
    """Whether ``directory`` is a directory reached from a root (a key of ``known``,
    which holds every answer so far) through directories only, never a link."""
    chain = []
    while directory not in known:
        chain.append(directory)
        directory = os.path.dirname(directory)
    plain = known[directory]
    for below in reversed(chain):
        plain = plain and _is(below, stat.S_ISDIR)
        known[below] = plain
    return plain


def _regular(path: str) -> bool:
    return _is(path, stat.S_ISREG)


def _is(path: str, kind: Callable[[int], bool]) -> bool:
    """Whether ``path`` itself (not what a link points to) is of this ``kind``."""
    try:
        return kind(os.lstat(path).st_mode)
    except OSError:
        return False
