"""``kbctl service install|uninstall|status``: kbindexd as a systemd user service.

The unit templates ship in ``ctl/units/`` (package data of ``kbindex.ctl``); ``systemd/``
in the source tree holds an identical copy for readers and packagers. ``install`` fills
in ExecStart= for the running installation, writes both units to
``$XDG_CONFIG_HOME/systemd/user/`` and enables the socket, so the daemon starts on the
first connection. What varies with the configuration and the manager (the state
directory, the sandbox, how a reload waits) is derived at install (``hardening``), and
an index an older unit kept elsewhere is moved to the state directory (``statedir``).
Where there is no ``systemctl`` or no reachable user manager
(containers, CI), the commands say so in one line and do the file work only.
"""

from __future__ import annotations

import argparse
import importlib.resources
import json
import os
import re
import shlex
import subprocess
import sys
import tomllib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kbindex.ctl import hardening, statedir

SERVICE = "kbindexd.service"
SOCKET = "kbindexd.socket"
UNITS = (SERVICE, SOCKET)
DAEMON_SCRIPT = "kbindexd"
DAEMON_MODULE = "kbindex.daemon.app"
COMMAND_TIMEOUT_SECONDS = 60

Runner = Callable[[Sequence[str]], subprocess.CompletedProcess[str]]
"""Runs one command and returns its result; tests pass their own."""

# Words that need no quoting in an ExecStart= line (systemd.service(5), "Command lines").
_BARE_WORD = re.compile(r"[A-Za-z0-9_./=:,+-][A-Za-z0-9_./=:,+@-]*")


class ServiceError(Exception):
    """A problem the user must fix (a bad root, an unreadable config file)."""


def run_command(argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
    """The default Runner: a subprocess whose output is captured, never raising."""
    try:
        return subprocess.run(
            list(argv), capture_output=True, text=True, timeout=COMMAND_TIMEOUT_SECONDS
        )
    except FileNotFoundError:
        return subprocess.CompletedProcess(list(argv), 127, "", f"{argv[0]}: command not found")
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(
            list(argv), 124, "", f"timed out after {COMMAND_TIMEOUT_SECONDS} s"
        )


def default_config_home() -> Path:
    # The XDG spec says a relative XDG_CONFIG_HOME is invalid and must be ignored.
    raw = os.environ.get("XDG_CONFIG_HOME", "")
    return Path(raw) if os.path.isabs(raw) else Path.home() / ".config"


def unit_dir(config_home: Path) -> Path:
    return config_home / "systemd" / "user"


def default_config_file(config_home: Path) -> Path:
    return config_home / "kbindex" / "config.toml"


def daemon_command() -> list[str]:
    """How this installation starts the daemon: its ``kbindexd`` script, else ``-m``."""
    # Not resolved: a venv's python is a symlink, and resolving it would leave the venv.
    python = Path(sys.executable).absolute()
    script = python.parent / DAEMON_SCRIPT
    if script.is_file() and os.access(script, os.X_OK):
        return [str(script)]
    return [str(python), "-m", DAEMON_MODULE]


def unit_template(name: str) -> str:
    resource = importlib.resources.files("kbindex.ctl").joinpath("units", name)
    if resource.is_file():
        return resource.read_text(encoding="utf-8")
    # An editable install links only the files it knew of; the source sits next to us.
    return (Path(__file__).resolve().parent / "units" / name).read_text(encoding="utf-8")


def exec_word(word: str) -> str:
    """One ExecStart= argument, quoted and escaped so systemd passes it through as is."""
    if any(ord(c) < 0x20 or c == "\x7f" for c in word):
        raise ServiceError(f"{word!r} contains a control character; it cannot go in a unit")
    try:
        word.encode("utf-8")
    except UnicodeEncodeError:
        raise ServiceError(f"{word!r} is not valid UTF-8; it cannot go in a unit") from None
    if _BARE_WORD.fullmatch(word):
        return word
    # % starts a specifier and $ a variable even inside quotes, so both are doubled.
    quoted = word.replace("\\", "\\\\").replace('"', '\\"')
    return '"' + quoted.replace("%", "%%").replace("$", "$$") + '"'


def exec_words(value: str) -> list[str]:
    """The inverse of exec_word for an ExecStart= value written by ``render_units``."""
    words = shlex.split(value, posix=True)
    if words:
        words[0] = words[0].lstrip("-@:+!")  # systemd's executable prefixes
    return [w.replace("%%", "%").replace("$$", "$") for w in words]


def kbctl_command(daemon: Sequence[str]) -> list[str]:
    """kbctl of the installation whose daemon command is ``daemon``."""
    if len(daemon) == 1:
        return [str(Path(daemon[0]).with_name("kbctl"))]
    return [daemon[0], "-m", "kbindex.ctl.main"]


def render_units(
    command: Sequence[str],
    args: Sequence[str],
    needs: hardening.Needs,
    version: int | None = None,
) -> dict[str, str]:
    """The two units for this installation (``command``), daemon arguments, sandbox
    ``needs`` and manager ``version`` (None: unknown, so what works on any)."""
    fields = {
        "@KBINDEXD@": " ".join(exec_word(w) for w in command),
        "@STATE_DIR@": exec_word(str(needs.state_dir)),
        "@RELOAD@": "\n".join(
            hardening.reload_lines(version, [exec_word(w) for w in kbctl_command(command)])
        ),
        "@SANDBOX@": "\n".join(hardening.sandbox_lines(needs)),
    }
    rendered_args = " ".join(exec_word(w) for w in args)
    units = {}
    for name in UNITS:
        text = unit_template(name).replace(" @ARGS@", f" {rendered_args}" if rendered_args else "")
        for field, value in fields.items():
            text = text.replace(field, value)
        units[name] = text
    return units


def install(
    roots: Sequence[str | os.PathLike[str]] = (),
    *,
    config_home: Path | None = None,
    config_path: Path | None = None,
    runner: Runner = run_command,
    print_only: bool = False,
) -> int:
    """Write the units (and roots into the config if it has none), then enable the socket."""
    home = config_home or default_config_home()
    config = config_path or default_config_file(home)
    try:
        plan = _plan(roots, config)
        command = daemon_command()
        render_units(command, plan.args, plan.needs)  # a path no unit can hold fails here
    except ServiceError as exc:
        print(f"kbctl service install: {exc}", file=sys.stderr)
        return 2
    problem, version = (None, None) if print_only else _manager(runner)
    units = render_units(command, plan.args, plan.needs, version)
    if print_only:
        for name, text in units.items():
            print(f"# {unit_dir(home) / name}\n{text}")
        return 0

    if plan.roots_to_write:
        _add_roots_to_config(config, plan.roots_to_write)
        print(f"wrote roots to {config}: {', '.join(map(str, plan.roots_to_write))}")
    target = unit_dir(home)
    target.mkdir(parents=True, exist_ok=True)
    # ReadWritePaths= can only open a directory that exists.
    plan.needs.state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    old = statedir.old_index(home, plan.needs.state_dir)
    if old is not None and not problem:
        # Its daemon has the files open: stopped first (the socket stays).
        _systemctl(runner, ["stop", SERVICE], quiet=True)
    for name, text in units.items():
        _write_atomically(target / name, text)
    if old is not None:
        moved = statedir.move_index(old, plan.needs.state_dir)
        print(f"moved the index from {old} to {plan.needs.state_dir}: {', '.join(moved)}")
    for note in plan.notes:
        print(f"note: {note}")

    if problem:
        print(f"{problem}: wrote {SERVICE} and {SOCKET} to {target} but enabled nothing")
        return 1
    for step in (["daemon-reload"], ["enable", "--now", SOCKET], ["try-restart", SERVICE]):
        if not _systemctl(runner, step):
            return 1
    print(
        f"installed {SERVICE} and {SOCKET} in {target}; the socket is listening and "
        "kbindexd starts on first use (logs: journalctl --user -u kbindexd)"
    )
    return 0


def uninstall(*, config_home: Path | None = None, runner: Runner = run_command) -> int:
    """Stop and disable the units, then remove them; the config and index stay."""
    target = unit_dir(config_home or default_config_home())
    problem = _manager_problem(runner)
    if not problem:
        # Either may fail when the units were never installed: nothing to stop then.
        _systemctl(runner, ["disable", "--now", SOCKET], quiet=True)
        _systemctl(runner, ["stop", SERVICE], quiet=True)
    removed = []
    for name in UNITS:
        path = target / name
        if path.exists() or path.is_symlink():
            path.unlink()
            removed.append(name)
    wants = target / "sockets.target.wants" / SOCKET
    if wants.is_symlink():  # left behind when disable could not run
        wants.unlink()
    if not problem:
        _systemctl(runner, ["daemon-reload"])
        _systemctl(runner, ["reset-failed", SERVICE, SOCKET], quiet=True)
    what = f"removed {' and '.join(removed)} from {target}" if removed else "nothing installed"
    prefix = f"{problem}; " if problem else ""
    print(f"{prefix}{what}; the config and the index are kept")
    return 0


def status(*, config_home: Path | None = None, runner: Runner = run_command) -> int:
    """What systemd says about the units, plus any mismatch with this installation."""
    home = config_home or default_config_home()
    problems = installed_units_in_sync(home)
    manager = _manager_problem(runner)
    code: int
    if manager:
        installed = [str(unit_dir(home) / n) for n in UNITS if (unit_dir(home) / n).exists()]
        where = ", ".join(installed) if installed else "no units installed"
        print(f"{manager}: cannot ask systemd; {where}")
        code = 1
    else:
        result = runner(
            ["systemctl", "--user", "status", "--no-pager", "--lines=10", SERVICE, SOCKET]
        )
        sys.stdout.write(result.stdout)
        sys.stderr.write(result.stderr)
        code = result.returncode
    for problem in problems:
        print(f"warning: {problem}")
    return code


def installed_units_in_sync(config_home: Path | None = None) -> list[str]:
    """Problems with the installed units: missing, outdated (for this kbindex version
    or for the configuration as it is now), or another installation's."""
    home = config_home or default_config_home()
    target = unit_dir(home)
    explicit = os.environ.get("KBINDEX_CONFIG")
    config = Path(explicit).expanduser().absolute() if explicit else default_config_file(home)
    try:
        plan = _plan((), config)
        expected = render_units(daemon_command(), plan.args, plan.needs)
    except ServiceError:
        expected = {}  # no roots, or a config file that does not parse: the daemon says so
    problems = []
    for name in UNITS:
        path = target / name
        try:
            installed = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            problems.append(f"{name} is not installed in {target} (run: kbctl service install)")
            continue
        except (OSError, UnicodeDecodeError) as exc:
            problems.append(f"cannot read {path}: {exc}")
            continue
        if name in expected and _comparable(installed) != _comparable(expected[name]):
            problems.append(
                f"{path} differs from what this kbindex version and configuration need "
                "(rerun kbctl service install)"
            )
        if name == SERVICE:
            problems.extend(_exec_start_problems(path, installed))
    return problems


def run(args: argparse.Namespace) -> int:
    """``kbctl service install|uninstall|status`` (the parser is kbctl's, in main.py)."""
    if args.service_command == "install":
        return _install_command(args)
    if args.service_command == "uninstall":
        return uninstall()
    return status()


def _install_command(args: argparse.Namespace) -> int:
    explicit = os.environ.get("KBINDEX_CONFIG")
    config = Path(explicit).expanduser().absolute() if explicit else None
    return install(args.root, config_path=config, print_only=args.print)


@dataclass(frozen=True)
class Plan:
    args: list[str]
    """The daemon's arguments after the socket and state directory."""
    roots_to_write: list[Path]
    """Roots to add to a config file that lists none."""
    notes: list[str]
    needs: hardening.Needs


def _plan(roots: Sequence[str | os.PathLike[str]], config: Path) -> Plan:
    """The daemon arguments, the roots to add to the config, notes for the user and
    what the sandbox must allow."""
    given = [_checked_root(r) for r in roots]
    values = _read_config(config)
    configured = values.get("roots")
    configured_roots = (
        [_config_root(r, config) for r in configured] if isinstance(configured, list) else []
    )
    notes = []
    if "socket_path" in values:
        notes.append(f"the service passes --socket, so socket_path in {config} does not apply")
    if os.environ.get("KBINDEX_SOCKET"):
        notes.append(
            "KBINDEX_SOCKET is set in this shell: kbctl will look there, not at the "
            "service's socket $XDG_RUNTIME_DIR/kbindex/kbindex.sock"
        )
    args = ["--config", str(config)]
    needs = hardening.needs(values, config, given or configured_roots)
    if not given:
        if not configured:
            raise ServiceError(
                f"no roots to index: rerun with --root DIR, or add roots = [...] to {config}"
            )
        return Plan(args, [], notes, needs)
    if not configured:
        return Plan(args, given, notes, needs)
    if set(configured_roots) == set(given):
        return Plan(args, [], notes, needs)
    notes.append(f"{config} lists other roots; the service indexes the --root ones instead")
    return Plan([*args, "--", *map(str, given)], [], notes, needs)


def _checked_root(raw: str | os.PathLike[str]) -> Path:
    path = Path(os.path.normpath(Path(raw).expanduser().absolute()))
    if not path.is_dir():
        raise ServiceError(f"root {path} is not a directory")
    return path


def _config_root(raw: Any, config: Path) -> Path:
    return Path(os.path.normpath(config.parent / Path(str(raw)).expanduser()))


def _read_config(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as exc:
        raise ServiceError(f"cannot read {path}: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ServiceError(f"{path} is not valid TOML: {exc}") from None


def _add_roots_to_config(path: Path, roots: Sequence[Path]) -> None:
    # JSON string syntax is valid TOML basic-string syntax for any encodable text.
    line = "roots = [" + ", ".join(json.dumps(str(r), ensure_ascii=False) for r in roots) + "]"
    old = path.read_text(encoding="utf-8") if path.exists() else ""
    # Top-level keys must come before any [table]; the start of the file always is.
    new = f"# added by kbctl service install\n{line}\n" + (f"\n{old}" if old else "")
    path.parent.mkdir(parents=True, exist_ok=True)
    _write_atomically(path, new)


def _write_atomically(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def _manager(runner: Runner) -> tuple[str | None, int | None]:
    """Why the user manager cannot be used (None when it answers), and its systemd
    version (``Version=252.39-1~deb12u2``: 252; None when unknown)."""
    result = runner(["systemctl", "--user", "show", "--property=Version"])
    if result.returncode == 127:
        return "systemctl not found", None
    if result.returncode != 0:
        detail = _first_line(result.stderr) or f"exit status {result.returncode}"
        return f"no systemd user manager reachable ({detail})", None
    match = re.search(r"Version=(\d+)", result.stdout)
    return None, int(match.group(1)) if match else None


def _manager_problem(runner: Runner) -> str | None:
    return _manager(runner)[0]


def _systemctl(runner: Runner, args: list[str], *, quiet: bool = False) -> bool:
    result = runner(["systemctl", "--user", *args])
    if result.returncode != 0 and not quiet:
        detail = _first_line(result.stderr) or f"exit status {result.returncode}"
        print(f"systemctl --user {' '.join(args)} failed: {detail}", file=sys.stderr)
    return result.returncode == 0


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


def _comparable(text: str) -> list[str]:
    """A unit's lines but those that vary with the manager's version or the roots given
    on the command line."""
    varying = ("ExecStart=", "ExecReload=", "Type=")
    return [line for line in text.splitlines() if not line.startswith(varying)]


def _exec_start_problems(path: Path, text: str) -> list[str]:
    lines = [line for line in text.splitlines() if line.startswith("ExecStart=")]
    if len(lines) != 1:
        return [f"{path} has {len(lines)} ExecStart= lines, expected one"]
    try:
        words = exec_words(lines[0].removeprefix("ExecStart="))
    except ValueError as exc:
        return [f"cannot parse ExecStart= in {path}: {exc}"]
    expected = daemon_command()
    if words[: len(expected)] == expected:
        return []
    started = " ".join(words[:3] if words[1:2] == ["-m"] else words[:1]) or "nothing"
    if words and not os.access(words[0], os.X_OK):
        return [f"{path} starts {started}, which is missing (rerun kbctl service install)"]
    return [
        f"{path} starts {started}, not this installation's {' '.join(expected)} "
        "(rerun kbctl service install to switch)"
    ]
