"""Walking roots: what files exist now, with what their ``stat`` says of them.

A walk only lists and stats (``os.scandir`` gives the type for free, one ``stat`` per
file gives size and ``mtime_ns``); it never opens a file. Comparing the result with
the index's metadata decides what must be read. Symlinks are never followed, to
files or directories: no loops, no way out of a root, and no duplicate results (a
target inside a root is indexed at its real path). FIFOs, sockets and devices are
listed (so that they are recorded as skipped, with a reason ``why`` shows) but never
opened: textfile.load decides by ``lstat``.

A name that is not valid UTF-8 cannot be stored as SQLite text or sent to a client, so
the file is listed under its display path (the bad bytes shown as ``\\xNN``, see
``textfile.display_path``; ``textfile.real_path`` maps it back).
"""

from __future__ import annotations

import logging
import os
import stat
from array import array
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from kbindex.daemon.index.values import Seen as Seen
from kbindex.daemon.index.values import Stamp as Stamp
from kbindex.daemon.indexing.ignore import WRITING_MARK, Chain, IgnoreRules
from kbindex.daemon.indexing.textfile import display_path, real_path

log = logging.getLogger(__name__)


class Pending:
    """The files a refresh reads, in path order, without an object per file: their
    paths, the index of their root, and their stamps' numbers in one array. The list
    lives as long as the refresh, so on a first index it sits under every batch, and an
    object per file would be several times its size. A ``Seen`` is made for a
    file as its batch is read."""

    __slots__ = ("_numbers", "_outsized", "_paths", "_root_of", "roots")

    def __init__(self, found: dict[str, tuple[Stamp, int]], roots: list[str]) -> None:
        """``found``: each file's stamp and the index of its root in ``roots``."""
        self.roots = roots
        self._paths = sorted(found)
        self._root_of = array("I")
        self._numbers = array("q")
        self._outsized: dict[int, Stamp] = {}
        """Stamps with a number past 64 signed bits (a time set centuries ahead), by
        position; their cells in ``_numbers`` hold zeros."""
        for i, path in enumerate(self._paths):
            stamp, root = found[path]
            self._root_of.append(root)
            try:
                numbers = array("q", stamp[1:])
            except OverflowError:
                self._outsized[i] = stamp
                numbers = array("q", bytes(40))
            self._numbers.extend(numbers)

    def __len__(self) -> int:
        return len(self._paths)

    def __iter__(self) -> Iterator[Seen]:
        roots, numbers, outsized = self.roots, self._numbers, self._outsized
        for i, (path, root) in enumerate(zip(self._paths, self._root_of, strict=True)):
            stamp = outsized.get(i)
            values = numbers[i * 5 : i * 5 + 5] if stamp is None else stamp[1:]
            yield Seen(path, roots[root], *values)

    def count_in(self, root: str) -> int:
        """Files of the root ``root``."""
        if root not in self.roots:
            return 0
        return self._root_of.count(self.roots.index(root))


_INO_MASK: Final = 0x7FFF_FFFF_FFFF_FFFF
"""An inode number can use all 64 bits; SQLite keeps signed ones."""


@dataclass(slots=True)
class Walk:
    """The result of walking one scope (a root, a directory or a file)."""

    root: str
    stamps: set[Stamp] = field(default_factory=set)
    """Every eligible file, listed and stat-ed; only those not in ``known`` when the
    walk was given it."""
    matched: int = 0
    """Files listed whose stamp was in ``known`` (taken out of it, not kept)."""
    problems: list[tuple[str, str]] = field(default_factory=list)
    """(path, reason) for directories that could not be listed."""
    root_missing: bool = False
    ignored: str = ""
    """Why the scope itself is ignored (then ``stamps`` is empty)."""
    ignored_by: dict[str, int] = field(default_factory=dict)
    """Files and directories the walk met and skipped by an ignore rule, counted by
    the reason (the rule and where it is written): what status warns about when a
    root's rules skip nearly everything."""

    @property
    def listed(self) -> int:
        """Files listed: kept in ``stamps`` or matched."""
        return len(self.stamps) + self.matched


def walk(
    root: Path,
    start: Path,
    rules: IgnoreRules,
    memo: dict[str, Chain | str] | None = None,
    known: set[Stamp] | None = None,
) -> Walk:
    """Walk ``start`` (``root`` itself or a path inside it) and stat every eligible file.
    ``memo`` caches the ignore rules of directories between the scopes of one refresh.
    A directory ``start`` is a real path (``Roots`` resolves them), so every directory
    met below it, never through a symlink, is one too.

    ``known`` (what the index holds, ``Index.known``): a file whose stamp is in it is
    unchanged, taken out of it and only counted; what is left in ``known`` afterwards
    are the rows of files changed or gone. Compared as each file is listed, while its
    stamp is fresh in the CPU's cache: compared as two sets afterwards, every stamp
    would be fetched from memory again."""
    result = Walk(str(root))
    if not os.path.lexists(start):  # a scope named as the index shows it: the name on disk
        start = Path(real_path(str(start)))
    before = len(known) if known is not None else 0
    _walk(result, start, rules, memo, known)
    if known is not None:
        result.matched = before - len(known)
    return result


def _walk(
    result: Walk,
    start: Path,
    rules: IgnoreRules,
    memo: dict[str, Chain | str] | None,
    known: set[Stamp] | None,
) -> None:
    root_s = result.root
    matching = bool(known)  # an empty index (a first scan) matches nothing
    remove = (known if known is not None else set()).remove
    add = result.stamps.add
    try:
        st = os.stat(start, follow_symlinks=False)
    except FileNotFoundError:
        result.root_missing = str(start) == root_s
        return
    except OSError as exc:
        result.problems.append((display_path(str(start)), exc.strerror or str(exc)))
        return
    is_dir = stat.S_ISDIR(st.st_mode)
    context = rules.context(root_s, str(start) if is_dir else str(start.parent), memo)
    if isinstance(context, str):
        result.ignored = context
        return
    if not is_dir:
        reason = rules.ignored_file(start.name, str(start), context)
        found = _stamp(str(start), st) if reason is None else None
        if found is not None and known is not None and found in known:
            known.remove(found)
        elif found is not None:
            add(found)
        return

    # (directory, chain, entered): a directory's marker files are looked for, and its
    # own pattern files added to the chain, once it is listed, so no extra stat is
    # spent on directories without them.
    stack: list[tuple[str, Chain, bool]] = [(str(start), context, True)]
    ignored_by = result.ignored_by
    while stack:
        directory, chain, entered = stack.pop()
        try:
            entries = list(os.scandir(directory))
        except FileNotFoundError:
            continue
        except OSError as exc:
            result.problems.append((display_path(directory), exc.strerror or str(exc)))
            log.warning("cannot list %r: %s", display_path(directory), exc.strerror or exc)
            continue
        if not entered:
            names = {e.name for e in entries}
            reason = rules.marked(directory, names)
            if reason is not None:
                ignored_by[reason] = ignored_by.get(reason, 0) + 1
                continue
            chain = rules.enter(chain, directory, names)
        # Most directories of a tree have no rule that could skip one of their files
        # by more than its name: then the rules are not asked about each file.
        by_name = rules.name_decides(chain)
        plain_dir = directory.isascii()
        for entry in entries:
            name = entry.name
            try:
                if entry.is_dir(follow_symlinks=False):
                    reason = rules.ignored_dir(entry.path, name, chain, walking=True)
                    if reason is None:
                        stack.append((entry.path, chain, False))
                    else:
                        ignored_by[reason] = ignored_by.get(reason, 0) + 1
                    continue
                # Decided before the stat: an ignored file costs no system call.
                if not by_name or WRITING_MARK in name:
                    reason = rules.ignored_file(name, entry.path, chain)
                    if reason is not None:
                        ignored_by[reason] = ignored_by.get(reason, 0) + 1
                        continue
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue  # vanished between listing and stat
            if stat.S_ISREG(st.st_mode) and plain_dir and name.isascii():
                # The usual file, inlined: an ASCII name is its own display path.
                ino = st.st_ino & _INO_MASK
                found = (entry.path, st.st_size, st.st_mtime_ns, st.st_ctime_ns, ino, st.st_dev)
            else:
                found_or_none = _stamp(entry.path, st)
                if found_or_none is None:
                    continue
                found = found_or_none
            if matching:
                try:
                    remove(found)
                    continue
                except KeyError:
                    pass
            add(found)


def _stamp(path: str, st: os.stat_result) -> Stamp | None:
    """The file at ``path`` as listed, or None for a symlink or a directory; the
    caller has applied the ignore rules."""
    if stat.S_ISLNK(st.st_mode) or stat.S_ISDIR(st.st_mode):
        return None  # never followed; a directory given as a file scope is not a file
    shown = display_path(path)
    # display_path returns a valid name itself; a file really named like the escaped
    # form wins over the one whose name needed escaping.
    if shown is not path and os.path.lexists(shown):
        log.warning(
            "skipping %r: its name is not valid UTF-8 and its escaped form names another file",
            shown,
        )
        return None
    # FIFOs, sockets and devices are listed with size 0 and recorded as skipped by
    # textfile.load, which never opens them.
    size = st.st_size if stat.S_ISREG(st.st_mode) else 0
    return (shown, size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino & _INO_MASK, st.st_dev)
