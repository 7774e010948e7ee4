"""The service's state directory, one on every systemd version, and an index an older
unit left in another one.

Units before this one passed ``--state-dir=%S/kbindex``, and ``%S`` of a user unit is
``$XDG_CONFIG_HOME`` on systemd 252 (the index landed beside ``config.toml``) but
``$XDG_STATE_HOME`` from 254 on. Now the unit names the directory whole: the config
file's ``state_dir``, else ``$XDG_STATE_HOME/kbindex``, as for a daemon started by hand.

An index found in the old place is moved, not used where it is: the README and every
other way of starting the daemon look in the state directory, a backup of the config
folder should not carry a large index, and a move within one file system is a rename
(an index of gigabytes moves at once, and nothing is rebuilt). It is moved only when
the new place holds no index, and only while the service is stopped (the caller stops
it), so no daemon has the files open.
"""

from __future__ import annotations

import shutil
from pathlib import Path

INDEX_FILES = ("index.sqlite3", "vectors.sqlite3")
"""The state a daemon keeps; each may have ``-wal`` and ``-shm`` beside it."""


def old_index(config_home: Path, state_dir: Path) -> Path | None:
    """The directory an older unit's daemon kept its index in, when it is not
    ``state_dir`` and ``state_dir`` has none; else None."""
    old = config_home / "kbindex"
    if old.resolve() == state_dir.resolve() or (state_dir / INDEX_FILES[0]).exists():
        return None
    return old if (old / INDEX_FILES[0]).is_file() else None


def move_index(old: Path, new: Path) -> list[str]:
    """Move the index files from ``old`` to ``new`` (created 0700); their names."""
    new.mkdir(mode=0o700, parents=True, exist_ok=True)
    moved = []
    for entry in sorted(old.iterdir()):
        if any(entry.name.startswith(name) for name in INDEX_FILES) and entry.is_file():
            shutil.move(entry, new / entry.name)  # a rename within one file system
            moved.append(entry.name)
    return moved
