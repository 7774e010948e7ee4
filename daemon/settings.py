"""Daemon settings, resolved in one place into one frozen object.

Order of precedence for every setting: command-line flag, then environment variable,
then the TOML config file, then the default. Every value is validated here, at startup,
with one clear message per bad value: the daemon fails fast rather than half-running.
"""

from __future__ import annotations

import argparse
import os
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import platformdirs
from kbindex.proto.address import SOCKET_ENV, default_socket_path

ALL_TEXT = "*"
"""``included_extensions = ["*"]``: every file that looks like text, whatever its name."""

DEFAULT_INCLUDED = (".txt", ".md", ".rst")
KNOWN_KEYS = frozenset(
    {
        "roots",
        "state_dir",
        "socket_path",
        "included_extensions",
        "excluded_extensions",
        "scan_interval_seconds",
        "max_file_size_mb",
        "log_level",
    }
)
LOG_LEVELS = ("debug", "info", "warning", "error")


class SettingsError(Exception):
    """A configuration value is missing or invalid; the message names it and says why."""


@dataclass(frozen=True)
class Settings:
    roots: tuple[Path, ...]
    state_dir: Path
    socket_path: Path
    included_extensions: frozenset[str] | None
    """Lower-case extensions with a leading dot; None means every text file."""
    excluded_extensions: frozenset[str] = frozenset()
    scan_interval_seconds: float = 300.0
    max_file_size_mb: float = 10.0
    log_level: str = "info"
    config_path: Path | None = None
    cli_roots: tuple[Path, ...] = field(default=(), compare=False)

    @property
    def max_file_bytes(self) -> int:
        return int(self.max_file_size_mb * 1024 * 1024)

    @property
    def db_path(self) -> Path:
        return self.state_dir / "index.sqlite3"


def default_config_path() -> Path:
    return Path(platformdirs.user_config_dir("kbindex")) / "config.toml"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("roots", nargs="*", metavar="ROOT", help="directories to index")
    parser.add_argument("--config", metavar="FILE", help="TOML config file")
    parser.add_argument("--state-dir", metavar="DIR", help="where the index lives")
    parser.add_argument("--socket", metavar="PATH", help="Unix socket to serve on")
    parser.add_argument(
        "--include-ext",
        action="append",
        metavar="EXT",
        help="extension to index (repeatable); '*' for every text file",
    )
    parser.add_argument(
        "--exclude-ext", action="append", metavar="EXT", help="extension to skip (repeatable)"
    )
    parser.add_argument("--scan-interval", type=float, metavar="SECONDS")
    parser.add_argument("--max-file-size-mb", type=float, metavar="MB")
    parser.add_argument("--log-level", choices=LOG_LEVELS)


def load(args: argparse.Namespace, environ: Mapping[str, str] | None = None) -> Settings:
    """Resolve flags, environment, config file and defaults into Settings."""
    env = os.environ if environ is None else environ
    explicit_config = args.config or env.get("KBINDEX_CONFIG")
    config_path = Path(explicit_config).expanduser() if explicit_config else default_config_path()
    file_values = _read_config(config_path, required=bool(explicit_config))
    base = config_path.parent

    def pick(flag: Any, env_name: str, key: str) -> Any:
        if flag is not None:
            return flag
        if env.get(env_name):
            return env[env_name]
        return file_values.get(key)

    roots_raw: Sequence[str] | None
    if args.roots:
        roots_raw = args.roots
        roots_base = Path.cwd()
    elif env.get("KBINDEX_ROOTS"):
        roots_raw = [r for r in env["KBINDEX_ROOTS"].split(os.pathsep) if r]
        roots_base = Path.cwd()
    else:
        roots_raw = file_values.get("roots")
        roots_base = base
    roots = _roots(roots_raw, roots_base, config_path)

    state_raw = pick(args.state_dir, "KBINDEX_STATE_DIR", "state_dir")
    state_dir = (
        _path(state_raw, base) if state_raw else Path(platformdirs.user_state_dir("kbindex"))
    )
    socket_raw = pick(args.socket, SOCKET_ENV, "socket_path")
    socket_path = _path(socket_raw, base) if socket_raw else default_socket_path(dict(env))

    include_raw = pick(args.include_ext, "KBINDEX_INCLUDED_EXTENSIONS", "included_extensions")
    exclude_raw = pick(args.exclude_ext, "KBINDEX_EXCLUDED_EXTENSIONS", "excluded_extensions")
    included = _extensions(include_raw, "included_extensions", DEFAULT_INCLUDED)
    excluded = _extensions(exclude_raw, "excluded_extensions", ()) or frozenset()

    interval = _number(
        pick(args.scan_interval, "KBINDEX_SCAN_INTERVAL", "scan_interval_seconds"),
        "scan_interval_seconds",
        300.0,
        minimum=1.0,
    )
    max_mb = _number(
        pick(args.max_file_size_mb, "KBINDEX_MAX_FILE_SIZE_MB", "max_file_size_mb"),
        "max_file_size_mb",
        10.0,
        minimum=0.001,
    )
    level = str(pick(args.log_level, "KBINDEX_LOG_LEVEL", "log_level") or "info").lower()
    if level not in LOG_LEVELS:
        raise SettingsError(f"log_level must be one of {', '.join(LOG_LEVELS)}, not {level!r}")

    return Settings(
        roots=roots,
        state_dir=state_dir,
        socket_path=socket_path,
        included_extensions=included,
        excluded_extensions=excluded,
        scan_interval_seconds=interval,
        max_file_size_mb=max_mb,
        log_level=level,
        config_path=config_path if config_path.exists() else None,
        cli_roots=tuple(Path(r) for r in args.roots or ()),
    )


def _read_config(path: Path, *, required: bool) -> dict[str, Any]:
    if not path.exists():
        if required:
            raise SettingsError(f"config file {path} does not exist")
        return {}
    try:
        values = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise SettingsError(f"cannot read config file {path}: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise SettingsError(f"config file {path} is not valid TOML: {exc}") from None
    unknown = sorted(set(values) - KNOWN_KEYS)
    if unknown:
        raise SettingsError(
            f"config file {path}: unknown setting(s) {', '.join(unknown)}; "
            f"known: {', '.join(sorted(KNOWN_KEYS))}"
        )
    return values


def _path(raw: Any, base: Path) -> Path:
    if not isinstance(raw, str | os.PathLike) or not str(raw):
        raise SettingsError(f"expected a path, got {raw!r}")
    path = Path(raw).expanduser()
    return path if path.is_absolute() else (base / path)


def _roots(raw: Sequence[str] | None, base: Path, config_path: Path) -> tuple[Path, ...]:
    if not raw:
        raise SettingsError(
            "no roots to index: give them as arguments (kbindexd ~/notes ~/docs) "
            f"or as roots = [...] in {config_path}"
        )
    if isinstance(raw, str) or not isinstance(raw, Sequence):
        raise SettingsError(f"roots must be a list of directories, not {raw!r}")
    roots: list[Path] = []
    for item in raw:
        path = _path(item, base)
        if not path.exists():
            raise SettingsError(f"root {path} does not exist")
        if not path.is_dir():
            raise SettingsError(f"root {path} is not a directory")
        resolved = path.resolve()
        if resolved not in roots:
            roots.append(resolved)
    for a in roots:
        for b in roots:
            if a != b and b.is_relative_to(a):
                raise SettingsError(f"root {b} lies inside root {a}; list only {a}")
    return tuple(roots)


def _extensions(raw: Any, key: str, default: Sequence[str]) -> frozenset[str] | None:
    if raw is None:
        items: Sequence[str] = default
    elif isinstance(raw, str):
        items = [part for part in raw.split(",")]
    elif isinstance(raw, list) and all(isinstance(x, str) for x in raw):
        items = raw
    else:
        raise SettingsError(f'{key} must be a list of extensions like [".md", ".txt"]')
    cleaned = [x.strip().lower() for x in items if x.strip()]
    if ALL_TEXT in cleaned:
        if key == "excluded_extensions":
            raise SettingsError("excluded_extensions cannot be '*'")
        return None
    for ext in cleaned:
        if "/" in ext or ext in (".", ""):
            raise SettingsError(f"{key}: {ext!r} is not a file extension")
    return frozenset(x if x.startswith(".") else f".{x}" for x in cleaned)


def _number(raw: Any, key: str, default: float, *, minimum: float) -> float:
    if raw is None:
        return default
    try:
        value = float(raw)
    except (TypeError, ValueError):
        raise SettingsError(f"{key} must be a number, not {raw!r}") from None
    if not value >= minimum or value == float("inf"):
        raise SettingsError(f"{key} must be at least {minimum}, not {raw!r}")
    return value
