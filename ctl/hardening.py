"""The service's sandbox, derived from the configuration ``kbctl service install`` finds.

The unit denies the daemon all it does not need; what it needs depends on the
configuration, so these lines are written per installation rather than fixed in the
template: the state directory and the writable roots are the only places it may write
(``ProtectSystem=strict`` makes the rest read-only, from systemd 253 on where the
mount-namespace options take effect for user units); TCP is allowed only for a
PostgreSQL index reached over TCP; ``/tmp`` is the service's own (``PrivateTmp=``)
unless a root or the state directory lives there, where a private one would hide them.
A configuration changed later can need more: the daemon then says that its sandbox
denied something (``daemon/sandbox.py``), and installing again derives the lines anew.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import platformdirs
from kbindex.proto.dsn import over_tcp

TMP_DIRS: Final = (Path("/tmp"), Path("/var/tmp"))
NOTIFY_RELOAD_VERSION: Final = 253
"""The first systemd with ``Type=notify-reload``."""


@dataclass(frozen=True)
class Needs:
    """What the daemon needs from its sandbox under one configuration."""

    state_dir: Path
    roots: tuple[Path, ...]
    writable: tuple[Path, ...]
    tcp: bool

    @property
    def private_tmp(self) -> bool:
        return not any(
            p.is_relative_to(tmp) for p in (self.state_dir, *self.roots) for tmp in TMP_DIRS
        )


def needs(values: Mapping[str, Any], config: Path, roots: Sequence[Path]) -> Needs:
    """From the config file's ``values`` (relative paths are relative to ``config``'s
    folder, as the daemon reads them) and the roots the service indexes."""
    base = config.parent
    raw_state = values.get("state_dir")
    if isinstance(raw_state, str) and raw_state:
        state_dir = _absolute(raw_state, base)
    else:
        # Where the daemon's default is: $XDG_STATE_HOME/kbindex (platformdirs).
        state_dir = Path(platformdirs.user_state_dir("kbindex"))
    tables = values.get("root")
    writable = []
    if isinstance(tables, dict):
        for name, table in tables.items():
            if isinstance(table, dict) and table.get("writable") is True:
                path = _absolute(name, base)
                writable.append(Path(os.path.realpath(path)))
    tcp = values.get("backend") == "postgres" and over_tcp(str(values.get("dsn") or ""))
    return Needs(state_dir, tuple(roots), tuple(sorted(set(writable))), tcp)


def sandbox_lines(needs: Needs) -> list[str]:
    # "-": a directory that is missing is left out rather than failing the start, so
    # the daemon can say what is wrong (a root that does not exist) in its status.
    writable = ["%t/kbindex", needs.state_dir, *needs.writable]
    lines = ["ReadWritePaths=" + " ".join(path_word(f"-{p}") for p in writable)]
    if needs.private_tmp:
        # A private, writable /tmp: SQLite puts large temporary files there, and /tmp
        # would be read-only under ProtectSystem=strict.
        lines.append("PrivateTmp=yes")
    else:
        # A root or the state lives in /tmp: the real one, writable as for SQLite's
        # temporary files, where a private one would hide them.
        lines.append("PrivateTmp=no")
        lines.append("ReadWritePaths=/tmp /var/tmp")
    families = "AF_UNIX AF_INET AF_INET6" if needs.tcp else "AF_UNIX"
    lines.append(f"RestrictAddressFamilies={families}")
    return lines


def reload_lines(version: int | None, kbctl: Sequence[str]) -> list[str]:
    """How ``systemctl --user reload`` waits for the new configuration to be in force:
    ``Type=notify-reload`` (systemd sends SIGHUP and waits for RELOADING=1, then
    READY=1) where the manager has it; elsewhere ``kbctl reload``, which answers once
    it is in force (a ``kill -HUP`` returns before the daemon has even read it)."""
    if version is not None and version >= NOTIFY_RELOAD_VERSION:
        return ["Type=notify-reload"]
    return [
        "Type=notify",
        "ExecReload=" + " ".join([*kbctl, "--socket=%t/kbindex/kbindex.sock", "reload"]),
    ]


def path_word(path: str) -> str:
    """A path in a space-separated unit setting, quoted where needed; % escaped."""
    escaped = path if path.startswith("-%t/") else path.replace("%", "%%")
    if any(c in escaped for c in " \"\\'") or not escaped:
        return '"' + escaped.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return escaped


def _absolute(raw: str, base: Path) -> Path:
    path = Path(raw).expanduser()
    return Path(os.path.normpath(path if path.is_absolute() else base / path))
