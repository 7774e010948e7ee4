"""Roots added and removed at run time by a daemon whose roots were given on its command
line or in KBINDEX_ROOTS: recorded in the state directory, laid over the given roots at
every start and reload.

Why not the config file, as for a daemon that takes its roots from there: the command
line and the environment override the config file's roots, so a root written there
vanished at the next reload, and a daemon cannot rewrite its own command line. The
record is a layer over what was given, as a systemd drop-in is over a unit: a root
added stays until it is removed, a root removed stays out (even when the command line
names it again) until it is added. settings.py lays it over the given roots.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kbindex.daemon import config_file

RECORD_NAME = "roots.json"
"""The record's file name in the state directory."""

ABOUT = (
    "Roots changed with kbctl roots add|remove, laid over the roots given on kbindexd's "
    "command line or in KBINDEX_ROOTS. Written by kbindexd; change it with kbctl."
)


class RecordError(Exception):
    """The record cannot be read: the message names the file and says what to do."""


@dataclass(frozen=True)
class RootChanges:
    """The record: roots added and roots removed, each resolved, the two disjoint."""

    added: tuple[Path, ...] = ()
    removed: tuple[Path, ...] = ()

    def adding(self, root: Path) -> RootChanges:
        added = self.added if root in self.added else (*self.added, root)
        return RootChanges(added, tuple(r for r in self.removed if r != root))

    def removing(self, root: Path) -> RootChanges:
        removed = self.removed if root in self.removed else (*self.removed, root)
        return RootChanges(tuple(r for r in self.added if r != root), removed)


def read(path: Path) -> RootChanges:
    """The record at ``path``; none there is an empty one. Raises RecordError."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return RootChanges()
    except (OSError, UnicodeDecodeError) as exc:
        raise RecordError(f"cannot read {path}: {exc}") from None
    try:
        values = json.loads(text)
        added, removed = _paths(values, "added"), _paths(values, "removed")
    except (ValueError, TypeError):
        raise RecordError(
            f"{path} is not a record of roots kbindexd wrote; delete it to start from the "
            "roots given (the changes made with kbctl roots add|remove are then forgotten)"
        ) from None
    return RootChanges(added, tuple(r for r in removed if r not in added))


def write(path: Path, changes: RootChanges) -> None:
    """Replace the record atomically; raises config_file.ConfigError."""
    values = {
        "about": ABOUT,
        "added": [str(r) for r in changes.added],
        "removed": [str(r) for r in changes.removed],
    }
    config_file.replace(path, json.dumps(values, indent=2, ensure_ascii=False) + "\n")


def record_add(path: Path, root: Path) -> str:
    """Record ``root`` as added; returns what was done, for the reply."""
    write(path, read_for_change(path).adding(root))
    return f"added {root} (recorded in {path}, kept at reloads and restarts)"


def record_remove(path: Path, root: Path) -> str:
    write(path, read_for_change(path).removing(root))
    return f"removed {root} (recorded in {path}, kept at reloads and restarts)"


def read_for_change(path: Path) -> RootChanges:
    """``read``, with its error as the config_file.ConfigError a change reports."""
    try:
        return read(path)
    except RecordError as exc:
        raise config_file.ConfigError(str(exc)) from None


def _paths(values: Any, key: str) -> tuple[Path, ...]:
    raw = values.get(key, [])
    if not isinstance(raw, list) or not all(isinstance(x, str) and os.path.isabs(x) for x in raw):
        raise ValueError(key)
    return tuple(Path(x) for x in raw)
