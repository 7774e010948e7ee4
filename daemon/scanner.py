"""Walking roots: what files exist now, with their size and mtime.

A walk only lists and stats (``os.scandir`` gives the type for free, one ``stat`` per
file gives size and ``mtime_ns``); it never opens a file. Comparing the result with
the index's metadata decides what must be read. Symlinked directories are not
followed (no loops, no duplicates); a symlinked file is indexed only when its target
lies inside the same root. FIFOs, sockets and devices are never opened.
"""

from __future__ import annotations

import logging
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from kbindex.daemon.ignore import IgnoreRules

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Seen:
    path: str
    root: str
    relpath: str
    size: int
    mtime_ns: int


@dataclass(slots=True)
class Walk:
    """The result of walking one scope (a root, a directory or a file)."""

    files: dict[str, Seen] = field(default_factory=dict)
    problems: list[tuple[str, str]] = field(default_factory=list)
    """(path, reason) for directories that could not be listed."""
    root_missing: bool = False


def walk(root: Path, start: Path, rules: IgnoreRules) -> Walk:
    """Walk ``start`` (``root`` itself or a path inside it) and stat every eligible file."""
    result = Walk()
    root_s = str(root)
    prefix_len = len(root_s) + 1
    try:
        st = os.stat(start, follow_symlinks=False)
    except FileNotFoundError:
        result.root_missing = start == root
        return result
    except OSError as exc:
        result.problems.append((str(start), exc.strerror or str(exc)))
        return result
    if not stat.S_ISDIR(st.st_mode):
        seen = _seen_file(root, str(start), start.name, st, rules, prefix_len)
        if seen is not None:
            result.files[seen.path] = seen
        return result

    stack = [str(start)]
    while stack:
        directory = stack.pop()
        try:
            entries = list(os.scandir(directory))
        except FileNotFoundError:
            continue
        except OSError as exc:
            result.problems.append((directory, exc.strerror or str(exc)))
            log.warning("cannot list %s: %s", directory, exc.strerror or exc)
            continue
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    if rules.ignored_dir(entry.path, entry.name) is None:
                        stack.append(entry.path)
                    continue
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue  # vanished between listing and stat
            seen = _seen_file(root, entry.path, entry.name, st, rules, prefix_len)
            if seen is not None:
                result.files[seen.path] = seen
    return result


def _seen_file(
    root: Path, path: str, name: str, st: os.stat_result, rules: IgnoreRules, prefix_len: int
) -> Seen | None:
    if rules.ignored_file(name) is not None:
        return None
    if not _storable(path):
        log.warning("skipping a file whose name is not valid UTF-8: %r", path)
        return None
    if stat.S_ISLNK(st.st_mode):
        target = os.path.realpath(path)
        if not (target + os.sep).startswith(str(root) + os.sep):
            return None
        try:
            st = os.stat(target)
        except OSError:
            return None
    if not stat.S_ISREG(st.st_mode):
        return None
    return Seen(path, str(root), path[prefix_len:], st.st_size, st.st_mtime_ns)


def _storable(path: str) -> bool:
    """Names that are not valid UTF-8 (surrogate-escaped by Python) cannot be stored as
    SQLite text; they are skipped with a warning rather than crashing a batch."""
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
