"""Routing watchdog events to the change queue, in the observer threads.

The threads do almost nothing: find the root a path is under, drop paths that can never
be indexed (under ``.git/``, the wrong extension), put the rest in the change queue
(daemon/watching/changes.py), which wakes the event loop. All indexing happens in the daemon's
own tasks.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from kbindex.daemon.health import FileEvent, Health
from kbindex.daemon.indexing.ignore import IgnoreRules
from kbindex.daemon.watching.changes import Changes
from watchdog.events import DirMovedEvent, FileMovedEvent, FileSystemEvent


class EventRouter:
    def __init__(self, rules: IgnoreRules, changes: Changes, health: Health) -> None:
        self.rules = rules
        self.changes = changes
        self.health = health
        self._prefixes: tuple[tuple[str, str], ...] = ()

    def set_roots(self, roots: Iterable[str]) -> None:
        """Replaced as a whole: the observer threads read it without a lock."""
        self._prefixes = tuple((root, root + os.sep) for root in roots)

    def route(self, root: str, event: FileSystemEvent) -> None:
        """An event from ``root``'s observer: filter, queue, nothing else."""
        src = os.fsdecode(event.src_path)
        is_dir = event.is_directory
        if isinstance(event, FileMovedEvent | DirMovedEvent):
            dest = os.fsdecode(event.dest_path)
            src_root = self._root_of(src, is_dir)
            dest_root = self._root_of(dest, is_dir)
            if src_root is not None and dest_root is not None:
                self.changes.add_move(src_root, src, dest_root, dest, is_dir=is_dir)
            elif src_root is not None:
                self.changes.add(src_root, src)  # moved out (or to an ignored name)
            elif dest_root is not None:
                self.changes.add(dest_root, dest)  # moved in (or from an ignored name)
            queued = src_root is not None or dest_root is not None
            if not is_dir:
                queued = self._pattern_file(src) | self._pattern_file(dest) or queued
        else:
            src_root = self._root_of(src, is_dir)
            if src_root is not None:
                self.changes.add(src_root, src)
            queued = src_root is not None or (not is_dir and self._pattern_file(src))
        if queued:
            self.health.record(FileEvent(root))

    def _pattern_file(self, path: str) -> bool:
        """A pattern file (.gitignore, .ignore, .rgignore, .kbignore) changed: queue its
        directory, so that newly ignored files leave the index and newly un-ignored ones
        enter it. The walk of that directory decides whether a .gitignore applies (inside
        a git work tree only, and not across a nested repository's top); a ``.git``
        made or removed is under a built-in ignored name, so it takes effect at the next
        scan."""
        if not self.rules.is_pattern_file(os.path.basename(path)):
            return False
        directory = os.path.dirname(path)
        root = self._root_of(directory, True)
        if root is None:
            return False
        self.changes.add(root, directory)
        return True

    def _root_of(self, path: str, is_dir: bool) -> str | None:
        """The root holding ``path``, or None when it is outside them or can never be
        indexed (cheap rules only; the walk applies the rest)."""
        for root, prefix in self._prefixes:
            if path == root or path.startswith(prefix):
                break
        else:
            return None
        if self.rules.quick_ignored(root, path, is_dir=is_dir):
            return None
        if not is_dir and path != root and self.rules.ignored_file(os.path.basename(path)):
            return None
        return root
