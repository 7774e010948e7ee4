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

import pathspec
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
        "exclude_globs",
        "watch",
        "poll_interval_seconds",
        "frame_timeout_seconds",
        "root",
    }
)
LOG_LEVELS = ("debug", "info", "warning", "error")
WATCH_MODES = ("auto", "poll", "off")
"""``auto``: inotify events, falling back to polling when inotify fails; ``poll``: a
cheap list+stat reconcile every ``poll_interval_seconds`` (network filesystems, where
inotify sees no changes made on other machines); ``off``: only the periodic scan
(status says so), for scripted runs that refresh explicitly."""
ROOT_KEYS = frozenset({"include", "exclude", "watch"})


class SettingsError(Exception):
    """A configuration value is missing or invalid; the message names it and says why."""


@dataclass(frozen=True)
class RootOptions:
    """Per-root settings from a ``[root."PATH"]`` table of the config file."""

    path: Path
    include: tuple[str, ...] = ()
    """Gitignore-style patterns; when given, only files matching one are indexed."""
    exclude: tuple[str, ...] = ()
    """Gitignore-style patterns of files and directories never indexed."""
    watch: str | None = None
    """``auto``, ``poll`` or ``off``; None: the global ``watch`` setting."""


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
    exclude_globs: tuple[str, ...] = ()
    """Gitignore-style patterns excluded in every root."""
    watch: str = "auto"
    poll_interval_seconds: float = 3.0
    frame_timeout_seconds: float = 10.0
    """How long a client may take to send a frame it has begun, or to take a reply."""
    root_options: tuple[RootOptions, ...] = ()
    roots_source: str = "config"
    """Where ``roots`` came from: ``arguments``, ``environment`` or ``config``."""

    def options_for(self, root: Path) -> RootOptions:
        for options in self.root_options:
            if options.path == root:
                return options
        return RootOptions(path=root)

    def watch_mode(self, root: Path) -> str:
        return self.options_for(root).watch or self.watch

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
    parser.add_argument("--log-level", type=str.lower, choices=LOG_LEVELS)
    parser.add_argument(
        "--exclude-glob",
        action="append",
        metavar="PATTERN",
        help="gitignore-style pattern to skip in every root (repeatable)",
    )
    parser.add_argument(
        "--watch",
        choices=WATCH_MODES,
        help="auto: react to inotify events; poll: re-check every --poll-interval seconds; "
        "off: only the periodic scan",
    )
    parser.add_argument("--poll-interval", type=float, metavar="SECONDS")
    parser.add_argument(
        "--frame-timeout",
        type=float,
        metavar="SECONDS",
        help="close a connection that takes longer to send a frame or take a reply",
    )


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
        roots_source = "arguments"
    elif env.get("KBINDEX_ROOTS"):
        roots_raw = [r for r in env["KBINDEX_ROOTS"].split(os.pathsep) if r]
        roots_base = Path.cwd()
        roots_source = "environment"
    else:
        roots_raw = file_values.get("roots")
        roots_base = base
        roots_source = "config"
    roots = _roots(roots_raw, roots_base)

    def pick_path(flag: Any, env_name: str, key: str) -> Path | None:
        # A relative path is relative to where it was written: the working directory
        # for a flag or an environment variable, the config file's folder for the file.
        if flag is not None or env.get(env_name):
            return _path(pick(flag, env_name, key), Path.cwd())
        raw = file_values.get(key)
        return None if raw is None else _path(raw, base)

    state_dir = pick_path(args.state_dir, "KBINDEX_STATE_DIR", "state_dir") or Path(
        platformdirs.user_state_dir("kbindex")
    )
    socket_path = pick_path(args.socket, SOCKET_ENV, "socket_path") or default_socket_path(
        dict(env)
    )

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
    exclude_raw = pick(args.exclude_glob, "KBINDEX_EXCLUDE_GLOBS", "exclude_globs")
    if isinstance(exclude_raw, str):
        exclude_raw = [part for part in exclude_raw.split(",") if part.strip()]
    exclude_globs = _globs(exclude_raw, "exclude_globs")
    watch = _watch_mode(pick(args.watch, "KBINDEX_WATCH", "watch"), "watch") or "auto"
    poll_interval = _number(
        pick(args.poll_interval, "KBINDEX_POLL_INTERVAL", "poll_interval_seconds"),
        "poll_interval_seconds",
        3.0,
        minimum=0.2,
    )
    frame_timeout = _number(
        pick(args.frame_timeout, "KBINDEX_FRAME_TIMEOUT", "frame_timeout_seconds"),
        "frame_timeout_seconds",
        10.0,
        minimum=0.1,
    )
    root_options = _root_options(
        file_values.get("root"), base, roots if roots_source == "config" else None
    )

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
        exclude_globs=exclude_globs,
        watch=watch,
        poll_interval_seconds=poll_interval,
        frame_timeout_seconds=frame_timeout,
        root_options=root_options,
        roots_source=roots_source,
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


def _roots(raw: Sequence[str] | None, base: Path) -> tuple[Path, ...]:
    # No roots is a state the daemon runs in (and status shows): removing the last root
    # writes roots = [], and a config the daemon wrote must be one it starts with.
    if raw is None:
        return ()
    if isinstance(raw, str) or not isinstance(raw, Sequence):
        raise SettingsError(f"roots must be a list of directories, not {raw!r}")
    roots: list[Path] = []
    for item in raw:
        resolved = check_root(_path(item, base), ())
        if resolved not in roots:
            roots.append(resolved)
    for a in roots:
        for b in roots:
            if a != b and b.is_relative_to(a):
                raise SettingsError(f"root {b} lies inside root {a}; list only {a}")
    return tuple(roots)


def check_root(path: Path, others: Sequence[Path]) -> Path:
    """The resolved ``path`` if it can be a root beside ``others`` (already resolved);
    raises SettingsError saying why not. Used at startup and by ``kbctl roots add``."""
    if not path.exists():
        raise SettingsError(f"root {path} does not exist")
    if not path.is_dir():
        raise SettingsError(f"root {path} is not a directory")
    resolved = path.resolve()
    for other in others:
        if resolved == other:
            raise SettingsError(f"{resolved} is already a root")
        if resolved.is_relative_to(other):
            raise SettingsError(f"{resolved} lies inside root {other}")
        if other.is_relative_to(resolved):
            raise SettingsError(f"root {other} lies inside {resolved}; remove it first")
    return resolved


def _globs(raw: Any, key: str) -> tuple[str, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list) or not all(isinstance(x, str) for x in raw):
        raise SettingsError(f'{key} must be a list of gitignore-style patterns like ["*.log"]')
    patterns = tuple(x.strip() for x in raw if x.strip())
    for pattern in patterns:
        try:
            pathspec.GitIgnoreSpec.from_lines([pattern])
        except ValueError as exc:
            raise SettingsError(f"{key}: {pattern!r} is not a valid pattern: {exc}") from None
    return patterns


def _watch_mode(raw: Any, key: str) -> str | None:
    if raw is None:
        return None
    if raw not in WATCH_MODES:
        raise SettingsError(f"{key} must be one of {', '.join(WATCH_MODES)}, not {raw!r}")
    return str(raw)


def _root_options(
    raw: Any, base: Path, config_roots: tuple[Path, ...] | None
) -> tuple[RootOptions, ...]:
    """``[root."PATH"]`` tables. A table naming a path that is not a root is an error
    when the roots come from the same file (a typo would otherwise be silently ignored)."""
    if raw is None:
        return ()
    if not isinstance(raw, dict):
        raise SettingsError('root must be tables like [root."~/notes"] with include/exclude/watch')
    options: list[RootOptions] = []
    for name, table in raw.items():
        where = f"[root.{name!r}]"
        if not isinstance(table, dict):
            raise SettingsError(f"{where} must be a table")
        unknown = sorted(set(table) - ROOT_KEYS)
        if unknown:
            known = ", ".join(sorted(ROOT_KEYS))
            raise SettingsError(f"{where}: unknown key(s) {', '.join(unknown)}; known: {known}")
        path = _path(name, base)
        resolved = path.resolve() if path.exists() else path
        if config_roots is not None and resolved not in config_roots:
            raise SettingsError(f"{where} names {resolved}, which is not one of the roots")
        options.append(
            RootOptions(
                path=resolved,
                include=_globs(table.get("include"), f"{where} include"),
                exclude=_globs(table.get("exclude"), f"{where} exclude"),
                watch=_watch_mode(table.get("watch"), f"{where} watch"),
            )
        )
    return tuple(options)


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
