"""Daemon settings, resolved in one place into one frozen object.

Order of precedence for every setting: command-line flag, then environment variable,
then the TOML config file, then the default. Every value is validated here, at startup,
with one clear message per bad value: the daemon fails fast rather than half-running.

Each setting is declared once, in ``OPTIONS`` (key, flag, variable, converter, help):
the parser, the lookups and the config file's known keys come from there.
"""

from __future__ import annotations

import argparse
import os
import re
import socket
import stat
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import pathspec
import platformdirs
from kbindex.daemon import root_changes, sandbox
from kbindex.daemon.extracting import extractor, formats
from kbindex.daemon.indexing.kinds import DEFAULT_BOOSTS, BadKinds, Kinds, ranking_boosts
from kbindex.proto.address import SOCKET_ENV, default_socket_path, foreign, owner_name

ALL_TEXT = "*"
"""``included_extensions = ["*"]``: every file that looks like text, whatever its name."""

DEFAULT_INCLUDED = (".txt", ".md", ".rst")
LOG_LEVELS = ("debug", "info", "warning", "error")
WATCH_MODES = ("auto", "poll", "off")
"""``auto``: inotify events, falling back to polling when inotify fails; ``poll``: a
cheap list+stat reconcile every ``poll_interval_seconds`` (network filesystems, where
inotify sees no changes made on other machines); ``off``: only the periodic scan
(status says so), for scripted runs that refresh explicitly."""
SEMANTIC_MODES = ("auto", "off")
"""``auto``: search by meaning where the ``semantic`` extra is installed; ``off``: never
(nothing of it is loaded)."""
ROOT_KEYS = frozenset(
    {
        "include",
        "exclude",
        "watch",
        "writable",
        "semantic",
        "name",
        "description",
        "kinds",
        "folders",
    }
)


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
    writable: bool = False
    """Whether clients may create, edit, move and delete notes here (``serving.notes``)."""
    semantic: str | None = None
    """``auto`` or ``off``; None: the global ``semantic`` setting."""
    name: str = ""
    """The root's name as a scope of queries ("": its folder's name)."""
    description: str = ""
    """What the root holds, returned with its hits."""
    kinds: tuple[tuple[str, tuple[str, ...]], ...] = ()
    """Kind rules put before the defaults (``indexing.kinds``): kind, patterns."""
    folders: tuple[tuple[str, str], ...] = ()
    """Descriptions of folders of the root (folder relative to it, description): the
    deepest one holding a hit is returned with it, in place of ``description``."""


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
    """Where ``roots`` came from: ``arguments``, ``environment`` or ``config``; for the
    first two, with the changes made at run time laid over them (root_changes.py)."""
    roots_kept: tuple[str, ...] = field(default=(), compare=False)
    """What those changes did to the given roots: ``/x added``, ``/y removed``."""
    roots_left_out: tuple[str, ...] = field(default=(), compare=False)
    """Roots added at run time that cannot be roots now, each with the reason."""
    semantic: str = "auto"
    semantic_max_file_mb: float = 1.0
    """Larger files are searched by words only: embedding is the costly part."""
    extract_seconds: float = 30.0
    """CPU time a worker may spend on one document (its wall-clock deadline is twice
    that), ``extracting.workers``."""
    extract_memory_mb: float = 1024.0
    """The address space of a worker that reads documents."""
    extract_cache_mb: float = 512.0
    """The bound of the cache of documents' text in the state directory."""
    max_document_size_mb: float = 100.0
    """The size cap of documents (``extracting.formats.size_cap``): a manual's
    PDF is often larger than a text file ever is, and its text is capped on its own
    (``max_file_size_mb`` of characters)."""
    backend: str = "sqlite"
    """Where the index lives: ``sqlite`` (a file in ``state_dir``) or ``postgres``."""
    dsn: str = field(default="", repr=False)
    """The PostgreSQL connection string (``backend = "postgres"``); it may hold a
    password, so it is never shown (``repr=False``, status shows the server only)."""
    machine: str = ""
    """This machine's name in a shared index: its rows are keyed by it."""
    pg_timeout_seconds: float = 60.0
    """A write to a shared index running longer is cancelled; the daemon stops waiting
    for a server that does not answer 5 s after that (reads: 5 s, then 5 s)."""
    pg_lease_seconds: float = 30.0
    """How long this daemon's hold on its machine name lasts unless renewed (a heartbeat
    every sixth of it): a frozen or vanished daemon's machine is behind after half of
    it, gone after all of it, and another daemon may take the name then."""
    recency_half_life: float = 0.0
    """``recency_half_life`` of the config file, in seconds: every search prefers recent
    files with this half-life (``plan.Plan.recency``); 0, the default: none, unless a
    query asks (``Search.recent``)."""
    kind_boosts: tuple[tuple[str, float], ...] | None = None
    """``[kind_boosts]`` of the config file: how much each kind counts in ranking (None:
    ``kinds.DEFAULT_BOOSTS``)."""

    def options_for(self, root: Path) -> RootOptions:
        for options in self.root_options:
            if options.path == root:
                return options
        return RootOptions(path=root)

    def watch_mode(self, root: Path) -> str:
        return self.options_for(root).watch or self.watch

    def writable(self, root: Path) -> bool:
        return self.options_for(root).writable

    def embeds(self, root: Path) -> bool:
        """Whether files of ``root`` are to be searched by meaning too."""
        return (self.options_for(root).semantic or self.semantic) != "off"

    @property
    def max_file_bytes(self) -> int:
        return int(self.max_file_size_mb * 1024 * 1024)

    @property
    def max_document_bytes(self) -> int:
        return int(self.max_document_size_mb * 1024 * 1024)

    @property
    def db_path(self) -> Path:
        return self.state_dir / "index.sqlite3"

    @property
    def roots_record(self) -> Path:
        """Where roots changed at run time are recorded when they were given on the
        command line or in the environment (root_changes.py)."""
        return self.state_dir / root_changes.RECORD_NAME

    @property
    def roots_origin(self) -> str:
        """Where the roots were given, for messages."""
        if self.roots_source == "arguments":
            return "the command line"
        if self.roots_source == "environment":
            return "KBINDEX_ROOTS"
        return str(self.config_path or default_config_path())


def default_config_path() -> Path:
    return Path(platformdirs.user_config_dir("kbindex")) / "config.toml"


@dataclass(frozen=True)
class Given:
    """A setting's raw value as found (None: given nowhere), for its converter."""

    key: str
    value: Any
    env: Mapping[str, str]
    config_dir: Path
    from_file: bool

    @property
    def base(self) -> Path:
        """What a relative path is relative to: where it was written (the working
        directory for a flag or an environment variable, the config file's folder)."""
        return self.config_dir if self.from_file else Path.cwd()


@dataclass(frozen=True)
class Option:
    """One setting: its config-file key (also its Settings field), flag, environment
    variable and converter (raw value to typed value, or the default when given nowhere;
    raises SettingsError). The rest is the flag's argparse help."""

    key: str
    flag: str
    env: str
    convert: Callable[[Given], Any]
    metavar: str | None = None
    help: str | None = None
    repeatable: bool = False
    cli_type: Callable[[str], Any] | None = None
    choices: tuple[str, ...] = ()


def _state_dir(given: Given) -> Path:
    if given.value is None:
        return Path(platformdirs.user_state_dir("kbindex"))
    return _path(given.value, given.base)


def _socket_path(given: Given) -> Path:
    if given.value is None:
        return Path(default_socket_path(dict(given.env)))
    return _path(given.value, given.base)


def _included(given: Given) -> frozenset[str] | None:
    return _extensions(given.value, given.key, DEFAULT_INCLUDED + _document_extensions())


def _document_extensions() -> tuple[str, ...]:
    """The extensions of the documents kbindex[documents] reads, where it is installed:
    installing the extra is asking for them."""
    kinds = extractor.installed()
    return tuple(ext for ext, kind in formats.KINDS.items() if kind in kinds)


def _excluded(given: Given) -> frozenset[str]:
    return _extensions(given.value, given.key, ()) or Settings.excluded_extensions


def _log_level(given: Given) -> str:
    level = str(given.value or Settings.log_level).lower()
    if level not in LOG_LEVELS:
        raise SettingsError(f"log_level must be one of {', '.join(LOG_LEVELS)}, not {level!r}")
    return level


def _exclude_globs(given: Given) -> tuple[str, ...]:
    raw = given.value
    if isinstance(raw, str):
        raw = [part for part in raw.split(",") if part.strip()]
    return _globs(raw, given.key)


def _watch(given: Given) -> str:
    return _one_of(WATCH_MODES, given.value, given.key) or Settings.watch


def _semantic(given: Given) -> str:
    return _one_of(SEMANTIC_MODES, given.value, given.key) or Settings.semantic


def _backend(given: Given) -> Any:
    """As given: ``load`` checks it against the backends ``add_arguments`` was told of."""
    return Settings.backend if given.value is None else given.value


def _text(given: Given) -> str:
    raw = given.value
    if raw is None:
        return ""
    if not isinstance(raw, str):
        raise SettingsError(f"{given.key} must be a string, not {raw!r}")
    return raw.strip()


def _machine(given: Given) -> str:
    return _text(given) or socket.gethostname()


def _number(default: float, *, minimum: float) -> Callable[[Given], float]:
    def convert(given: Given) -> float:
        raw, key = given.value, given.key
        if raw is None:
            return default
        try:
            value = float(raw)
        except (TypeError, ValueError):
            raise SettingsError(f"{key} must be a number, not {raw!r}") from None
        if not value >= minimum or value == float("inf"):
            raise SettingsError(f"{key} must be at least {minimum}, not {raw!r}")
        return value

    return convert


# Every setting but ``roots`` (a positional argument, ``os.pathsep``-separated in the
# environment, and its origin is kept) and ``root`` (tables, config file only). The
# order is the order of the flags in --help and of the checks. A default the Settings
# class declares is taken from there, so it is written once.
OPTIONS: Final = (
    Option("state_dir", "--state-dir", "KBINDEX_STATE_DIR", _state_dir,
           metavar="DIR", help="where the index lives"),
    Option("socket_path", "--socket", SOCKET_ENV, _socket_path,
           metavar="PATH", help="Unix socket to serve on"),
    Option("included_extensions", "--include-ext", "KBINDEX_INCLUDED_EXTENSIONS", _included,
           metavar="EXT", help="extension to index (repeatable); '*' for every text file",
           repeatable=True),
    Option("excluded_extensions", "--exclude-ext", "KBINDEX_EXCLUDED_EXTENSIONS", _excluded,
           metavar="EXT", help="extension to skip (repeatable)", repeatable=True),
    Option("scan_interval_seconds", "--scan-interval", "KBINDEX_SCAN_INTERVAL",
           _number(Settings.scan_interval_seconds, minimum=1.0),
           metavar="SECONDS", cli_type=float),
    Option("max_file_size_mb", "--max-file-size-mb", "KBINDEX_MAX_FILE_SIZE_MB",
           _number(Settings.max_file_size_mb, minimum=0.001),
           metavar="MB", cli_type=float),
    Option("log_level", "--log-level", "KBINDEX_LOG_LEVEL", _log_level,
           cli_type=str.lower, choices=LOG_LEVELS),
    Option("exclude_globs", "--exclude-glob", "KBINDEX_EXCLUDE_GLOBS", _exclude_globs,
           metavar="PATTERN", help="gitignore-style pattern to skip in every root (repeatable)",
           repeatable=True),
    Option("watch", "--watch", "KBINDEX_WATCH", _watch,
           help="auto: react to inotify events; poll: re-check every --poll-interval seconds; "
           "off: only the periodic scan", choices=WATCH_MODES),
    Option("poll_interval_seconds", "--poll-interval", "KBINDEX_POLL_INTERVAL",
           _number(Settings.poll_interval_seconds, minimum=0.2),
           metavar="SECONDS", cli_type=float),
    Option("semantic", "--semantic", "KBINDEX_SEMANTIC", _semantic,
           help="auto: search by meaning too where kbindex[semantic] is installed; off: never",
           choices=SEMANTIC_MODES),
    Option("semantic_max_file_mb", "--semantic-max-file-mb", "KBINDEX_SEMANTIC_MAX_FILE_MB",
           _number(Settings.semantic_max_file_mb, minimum=0.0),
           metavar="MB", cli_type=float, help="larger files are searched by words only"),
    Option("extract_seconds", "--extract-seconds", "KBINDEX_EXTRACT_SECONDS",
           _number(Settings.extract_seconds, minimum=0.1), metavar="SECONDS", cli_type=float,
           help="CPU time to read one document (kbindex[documents]); twice that in all"),
    Option("extract_memory_mb", "--extract-memory-mb", "KBINDEX_EXTRACT_MEMORY_MB",
           _number(Settings.extract_memory_mb, minimum=64.0), metavar="MB", cli_type=float,
           help="memory of the process that reads a document"),
    Option("extract_cache_mb", "--extract-cache-mb", "KBINDEX_EXTRACT_CACHE_MB",
           _number(Settings.extract_cache_mb, minimum=0.0), metavar="MB", cli_type=float,
           help="bound of the cache of documents' text in the state directory"),
    Option("max_document_size_mb", "--max-document-size-mb", "KBINDEX_MAX_DOCUMENT_SIZE_MB",
           _number(Settings.max_document_size_mb, minimum=0.001), metavar="MB", cli_type=float,
           help="size cap of documents (PDF, Office, EPUB): --max-file-size-mb is for text"),
    Option("backend", "--backend", "KBINDEX_BACKEND", _backend,
           help="sqlite: an index file in --state-dir; postgres: a shared PostgreSQL database"),
    Option("dsn", "--dsn", "KBINDEX_DSN", _text, metavar="URL",
           help="PostgreSQL connection string for --backend postgres (better given in "
           "KBINDEX_DSN or the config file: a flag is visible to other users)"),
    Option("machine", "--machine", "KBINDEX_MACHINE", _machine, metavar="NAME",
           help="this machine's name in a shared index (default: the host name)"),
    Option("pg_timeout_seconds", "--pg-timeout", "KBINDEX_PG_TIMEOUT",
           _number(Settings.pg_timeout_seconds, minimum=1.0), metavar="SECONDS", cli_type=float,
           help="cancel a write to a shared index that runs longer"),
    Option("pg_lease_seconds", "--pg-lease", "KBINDEX_PG_LEASE",
           _number(Settings.pg_lease_seconds, minimum=6.0), metavar="SECONDS", cli_type=float,
           help="a frozen daemon's machine in a shared index is behind after half of this,"
           " gone after all of it"),
    Option("frame_timeout_seconds", "--frame-timeout", "KBINDEX_FRAME_TIMEOUT",
           _number(Settings.frame_timeout_seconds, minimum=0.1),
           metavar="SECONDS", cli_type=float,
           help="close a connection that takes longer to send a frame or take a reply"),
)  # fmt: skip
KNOWN_KEYS: Final = frozenset(
    {"roots", "root", "kind_boosts", "recency_half_life", *(option.key for option in OPTIONS)}
)


def add_arguments(parser: argparse.ArgumentParser, backends: Sequence[str]) -> None:
    """The daemon's flags; ``backends``: the names ``--backend`` takes (the composition
    root's ``backends.BACKENDS``), which ``load`` checks a setting from anywhere against."""
    parser.set_defaults(backends=tuple(backends))
    parser.add_argument("roots", nargs="*", metavar="ROOT", help="directories to index")
    parser.add_argument("--config", metavar="FILE", help="TOML config file")
    parser.add_argument(
        "--no-roots",
        action="store_true",
        help="index nothing, whatever the config lists: serve searches of a shared index",
    )
    for option in OPTIONS:
        kwargs: dict[str, Any] = {"dest": option.key, "metavar": option.metavar}
        if option.repeatable:
            kwargs["action"] = "append"
        if option.cli_type is not None:
            kwargs["type"] = option.cli_type
        if option.choices:
            kwargs["choices"] = option.choices
        if option.key == "backend":
            kwargs["choices"] = backends
        parser.add_argument(option.flag, help=option.help, **kwargs)


def load(args: argparse.Namespace, environ: Mapping[str, str] | None = None) -> Settings:
    """Resolve flags, environment, config file and defaults into Settings."""
    env = os.environ if environ is None else environ
    explicit_config = args.config or env.get("KBINDEX_CONFIG")
    config_path = Path(explicit_config).expanduser() if explicit_config else default_config_path()
    file_values = _read_config(config_path, required=bool(explicit_config))
    if file_values.get("dsn"):
        _check_dsn_file(config_path, str(file_values["dsn"]))
    base = config_path.parent

    roots_raw: Sequence[str] | None
    no_roots = getattr(args, "no_roots", False)
    if no_roots and args.roots:
        raise SettingsError("--no-roots and roots given: choose one")
    if no_roots:
        roots_raw, roots_base, roots_source = None, Path.cwd(), "arguments"
    elif args.roots:
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

    values: dict[str, Any] = {}
    for option in OPTIONS:
        flag = getattr(args, option.key)
        if flag is not None:
            given = Given(option.key, flag, env, base, from_file=False)
        elif env.get(option.env):
            given = Given(option.key, env[option.env], env, base, from_file=False)
        else:
            given = Given(option.key, file_values.get(option.key), env, base, from_file=True)
        values[option.key] = option.convert(given)
        if option.key == "backend":
            values["backend"] = _one_of(args.backends, values["backend"], "backend")
    root_options = _root_options(
        file_values.get("root"), base, roots if roots_source == "config" else None
    )
    if values["backend"] == "postgres" and not values["dsn"]:
        raise SettingsError(
            "backend postgres needs a connection string: --dsn, KBINDEX_DSN or dsn in the"
            " config file"
        )
    if no_roots and values["backend"] != "postgres":
        raise SettingsError("--no-roots serves a shared index: use it with --backend postgres")
    kept: tuple[str, ...] = ()
    left_out: tuple[str, ...] = ()
    if roots_source != "config":
        record = values["state_dir"] / root_changes.RECORD_NAME
        roots, kept, left_out = _with_changes(roots, record)

    return Settings(
        roots=roots,
        roots_kept=kept,
        roots_left_out=left_out,
        config_path=config_path if config_path.exists() else None,
        cli_roots=tuple(Path(r) for r in args.roots or ()),
        root_options=root_options,
        roots_source=roots_source,
        kind_boosts=_kind_boosts(file_values.get("kind_boosts")),
        recency_half_life=_half_life(file_values.get("recency_half_life")),
        **values,
    )


_PASSWORD: Final = re.compile(r"(?:^|\s)password\s*=|^[a-z]+://[^/@?#]*:[^/@?#]*@", re.I)
"""A password in a connection string: ``password=`` or ``scheme://user:secret@``."""


def _check_dsn_file(path: Path, dsn: str) -> None:
    """Refuse a config file that holds a connection string when another user could
    change it, or the way to it (as the state directory: ``instance.check_state_dir``),
    or could read it while the string holds a password. Why: whoever changes the
    string chooses the server the daemon sends every indexed document to."""
    given = os.path.abspath(path)
    real = os.path.realpath(given)
    steps = [real, *sorted({str(p) for p in Path(real).parents}, key=len, reverse=True)]
    if given != real:
        steps += [str(p) for p in (Path(given), *Path(given).parents) if p.is_symlink()]
    for step in steps:
        st = os.lstat(step)
        if stat.S_ISLNK(st.st_mode):
            problem = (
                None
                if st.st_uid in (os.getuid(), 0)
                else f"is a symbolic link of {owner_name(st.st_uid)}"
            )
        else:
            problem = foreign(st, sticky=step != real)
        if problem is not None:
            fix = f"chmod go-w {step}" if "writable" in problem else "move it somewhere of yours"
            raise SettingsError(
                f"refusing the config file {given}: {step} {problem}, so another user could"
                f" change the PostgreSQL server kbindexd sends your documents to; {fix}"
            )
    mode = stat.S_IMODE(os.stat(real).st_mode)
    if mode & 0o044 and _PASSWORD.search(dsn.strip()):
        raise SettingsError(
            f"refusing the config file {given}: it is readable by others (mode {mode:o}) and"
            f" its dsn holds a password; chmod go-r {given}, or keep the password in"
            " ~/.pgpass"
        )


def _half_life(raw: Any) -> float:
    """``recency_half_life``: a length of time (``"90d"``), or ``"off"``."""
    if raw is None or raw == "off":
        return 0.0
    try:
        return half_life(str(raw), "recency_half_life")
    except ValueError as exc:
        raise SettingsError(f'{exc}, or "off"') from None


_HALF_LIFE: Final = re.compile(
    r"^(\d{1,6})\s*(h|hours?|d|days?|w|weeks?|mo|months?|y|years?)$", re.I
)
_HALF_LIFE_UNITS: Final = {
    "h": 3600,
    "d": 86400,
    "w": 7 * 86400,
    "mo": 30 * 86400,
    "y": 365 * 86400,
}


def half_life(text: str, what: str) -> float:
    """``text`` as a half-life in seconds (``90d``, ``2 weeks``, ``1y``), for the setting
    and for a query's ``recent``; ValueError naming ``what`` when it is not one."""
    found = _HALF_LIFE.match(text.strip())
    if found is None or int(found.group(1)) == 0:
        raise ValueError(f"{what} {text!r} is not a length of time: give one like 90d, '2 weeks'")
    unit = found.group(2).lower()
    return float(int(found.group(1)) * _HALF_LIFE_UNITS["mo" if unit.startswith("mo") else unit[0]])


def _kind_boosts(raw: Any) -> tuple[tuple[str, float], ...] | None:
    """``[kind_boosts]``: kind = factor, over the defaults."""
    if raw is None:
        return None
    if not isinstance(raw, dict) or not all(
        isinstance(v, int | float) and not isinstance(v, bool) for v in raw.values()
    ):
        raise SettingsError("kind_boosts must be a table of kind = number, like changelog = 0.6")
    boosts = {**DEFAULT_BOOSTS, **{str(k): float(v) for k, v in raw.items()}}
    try:
        ranking_boosts(boosts)
    except BadKinds as exc:
        raise SettingsError(f"kind_boosts: {exc}") from None
    return tuple(boosts.items())


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


def _with_changes(
    given: tuple[Path, ...], record: Path
) -> tuple[tuple[Path, ...], tuple[str, ...], tuple[str, ...]]:
    """The given roots with the ones changed at run time laid over them: the roots, what
    the record changed, and recorded roots left out (deleted since, or now inside a
    given root: a warning, not a daemon that no longer starts)."""
    try:
        changes = root_changes.read(record)
    except root_changes.RecordError as exc:
        raise SettingsError(str(exc)) from None
    roots = [r for r in given if r not in changes.removed]
    kept: list[str] = []
    left_out: list[str] = []
    for root in changes.added:
        if root in roots:
            continue
        try:
            roots.append(check_root(root, roots))
        except SettingsError as exc:
            left_out.append(f"{root}, added with kbctl roots add, is left out: {exc}")
            continue
        kept.append(f"{root} added")
    kept += [f"{r} removed" for r in given if r in changes.removed]
    return tuple(roots), tuple(kept), tuple(left_out)


def check_root(path: Path, others: Sequence[Path]) -> Path:
    """The resolved ``path`` if it can be a root beside ``others`` (already resolved);
    raises SettingsError saying why not. Used at startup and by ``kbctl roots add``."""
    if not path.exists():
        hint = sandbox.hidden_hint(path)
        raise SettingsError(f"root {path} does not exist" + (f" ({hint})" if hint else ""))
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


def _one_of(choices: tuple[str, ...], raw: Any, key: str) -> str | None:
    """``raw`` when it is one of ``choices``; None when not given."""
    if raw is None:
        return None
    if raw not in choices:
        raise SettingsError(f"{key} must be one of {', '.join(choices)}, not {raw!r}")
    return str(raw)


def _root_options(
    raw: Any, base: Path, config_roots: tuple[Path, ...] | None
) -> tuple[RootOptions, ...]:
    """``[root."PATH"]`` tables. A table naming a path that is not a root is an error
    when the roots come from the same file (a typo would otherwise be silently ignored)."""
    if raw is None:
        return ()
    if not isinstance(raw, dict):
        raise SettingsError(
            'root must be tables like [root."~/notes"] with keys ' + ", ".join(sorted(ROOT_KEYS))
        )
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
                watch=_one_of(WATCH_MODES, table.get("watch"), f"{where} watch"),
                writable=_flag(table.get("writable", False), f"{where} writable"),
                semantic=_one_of(SEMANTIC_MODES, table.get("semantic"), f"{where} semantic"),
                name=_label(table.get("name"), f"{where} name"),
                description=_label(table.get("description"), f"{where} description"),
                kinds=_kinds(table.get("kinds"), f"{where} kinds"),
                folders=_folders(table.get("folders"), f"{where} folders"),
            )
        )
    names = [o.name for o in options if o.name]
    if len(names) != len(set(names)):
        raise SettingsError(f"two roots have the same name: {', '.join(sorted(names))}")
    return tuple(options)


def _label(raw: Any, key: str) -> str:
    if raw is None:
        return ""
    if not isinstance(raw, str) or len(raw) > 1000:
        raise SettingsError(f"{key} must be text (at most 1000 characters)")
    return raw.strip()


def _kinds(raw: Any, key: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """A root's ``kinds`` table: kind = [patterns], checked by ``kinds.Kinds``."""
    if raw is None:
        return ()
    if not isinstance(raw, dict):
        raise SettingsError(f'{key} must be a table like {{ generated = ["out/**"] }}')
    rules = tuple((str(kind), _globs(patterns, f"{key}.{kind}")) for kind, patterns in raw.items())
    try:
        Kinds(dict(rules))
    except BadKinds as exc:
        raise SettingsError(f"{key}: {exc}") from None
    return rules


def _folders(raw: Any, key: str) -> tuple[tuple[str, str], ...]:
    """A root's ``folders`` table: relative folder = description."""
    if raw is None:
        return ()
    if not isinstance(raw, dict):
        raise SettingsError(
            f'{key} must be a table like {{ "projects/alpha" = "The alpha project" }}'
        )
    found: dict[str, str] = {}
    for folder, text in raw.items():
        parts = [p for p in str(folder).strip().split("/") if p and p != "."]
        if not parts or ".." in parts or str(folder).startswith("/"):
            raise SettingsError(f"{key}: {folder!r} is not a folder relative to the root")
        found["/".join(parts)] = _label(text, f"{key}.{folder}")
    return tuple(found.items())


def _flag(raw: Any, key: str) -> bool:
    if not isinstance(raw, bool):
        raise SettingsError(f"{key} must be true or false, not {raw!r}")
    return raw


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
