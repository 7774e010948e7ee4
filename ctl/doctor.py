"""kbctl doctor: check what goes wrong in practice, and say how to fix each thing.

Each check prints one line (ok / warn / FAIL) and, for anything not ok, the concrete
fix. The exit code is 1 when any check fails, so scripts can use it.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from kbindex.ctl import render as shown
from kbindex.ctl import service
from kbindex.proto.address import resolve_socket_path
from kbindex.proto.client import Client, DaemonError, DaemonUnavailable
from kbindex.proto.messages import PROTOCOL_VERSION, CheckReply, StatusReply

WAL_WARN_BYTES: Final = 256 << 20
INOTIFY_WATCHES: Final = Path("/proc/sys/fs/inotify/max_user_watches")
DIR_COUNT_LIMIT: Final = 2_000_000
# Directories the daemon never watches (kept in step with daemon/indexing/ignore.py's list,
# without importing the daemon into the CLI).
SKIPPED_DIRS: Final = frozenset(
    {".git", ".hg", ".svn", "node_modules", "__pycache__", ".venv", "venv", ".tox",
     ".mypy_cache", ".pytest_cache", ".ruff_cache", ".cache"}
)  # fmt: skip


@dataclass(frozen=True)
class Finding:
    level: str  # "ok" | "warn" | "FAIL" | "info"
    what: str
    fix: str = ""


async def diagnose(socket: str | None) -> list[Finding]:
    findings: list[Finding] = []
    path = resolve_socket_path(socket)
    try:
        async with Client.connect(path, client_name="kbctl doctor") as client:
            server = client.server.server if client.server else "kbindexd"
            findings.append(Finding("ok", f"daemon reachable on {path} ({server})"))
            findings.append(Finding("ok", f"protocol version {PROTOCOL_VERSION} matches"))
            status = await client.status()
            try:
                check: CheckReply | str = await client.check()
            except DaemonError as exc:
                if exc.code != "unavailable":
                    raise
                check = exc.message
    except DaemonUnavailable:
        findings.append(
            Finding(
                "FAIL",
                f"no daemon answers on {path}",
                "start it: kbindexd ~/notes  (or: kbctl service install --root ~/notes)",
            )
        )
        findings.extend(_units())
        return findings
    except DaemonError as exc:
        fix = "install the same kbindex version for kbctl and kbindexd, then restart it"
        findings.append(Finding("FAIL", exc.message, fix if exc.code == "version_mismatch" else ""))
        return findings
    findings.extend(_index(check, status))
    findings.extend(_config(status))
    findings.extend(_roots(status))
    findings.extend(_inotify(status))
    findings.extend(_units())
    return findings


def _index(check: CheckReply | str, status: StatusReply) -> Iterator[Finding]:
    backend = status.backend
    if isinstance(check, str):
        yield Finding("FAIL", check, "check that the server runs and the dsn (KBINDEX_DSN)")
        return
    if backend is not None and backend.name == "postgres":
        if check.integrity != "ok":
            yield Finding(
                "FAIL",
                f"shared index: {check.integrity}",
                "ask the database's owner to CREATE EXTENSION what is missing",
            )
            return
        machines = len(backend.machines)
        yield Finding(
            "ok",
            f"shared index reachable, its schema and extensions in place: {backend.server},"
            f" this machine {backend.machine!r}, {machines} machine(s) indexed",
        )
        return
    if check.integrity == "ok":
        yield Finding("ok", "index integrity (PRAGMA quick_check, full-text indexes included)")
    else:
        yield Finding(
            "FAIL",
            f"index integrity: {check.integrity}",
            "restart kbindexd: it moves a damaged index aside and rebuilds it from the files",
        )
    wal_mb = check.wal_bytes / (1 << 20)
    if check.wal_bytes > WAL_WARN_BYTES:
        yield Finding(
            "warn",
            f"write-ahead log is {wal_mb:,.0f} MB",
            "a long-lived reader blocks checkpoints; restart the MCP clients or kbindexd",
        )
    else:
        yield Finding("ok", f"write-ahead log {wal_mb:,.1f} MB")


def _config(status: StatusReply) -> Iterator[Finding]:
    # Only a refusal is reported: the file itself is the daemon's to validate, and
    # doctor does not read it, so it claims nothing when the last reload went through.
    if status.unconfigured:
        yield Finding(
            "FAIL",
            f"the daemon refused its configuration and indexes nothing: {status.config_error}",
            "fix the config file, then reload: systemctl --user reload kbindexd (or kbctl reload)",
        )
    elif status.config_error:
        yield Finding(
            "FAIL",
            f"the daemon refused its last configuration reload: {status.config_error}",
            "fix the config file, then reload: systemctl --user reload kbindexd "
            "(or kill -HUP the kbindexd pid); until then it runs on the previous one",
        )


def _roots(status: StatusReply) -> Iterator[Finding]:
    if not status.roots:
        yield Finding("warn", "no roots are indexed", "add one: kbctl roots add PATH")
    for root in status.roots:
        readable = os.access(root.path, os.R_OK | os.X_OK)
        if not readable or root.state in ("missing", "unreadable", "error"):
            detail = root.detail or ("not readable" if not readable else root.state)
            yield Finding(
                "FAIL",
                f"root {root.path}: {detail}",
                "check that it exists and that you can list it (ls -ld)",
            )
        elif root.state in ("degraded", "polling"):
            yield Finding("warn", f"root {root.path}: {root.state}: {root.detail}", _inotify_fix())
        else:
            yield Finding("ok", f"root {root.path} readable ({root.files:,} files, {root.state})")
        if root.warning:
            yield Finding(
                "warn",
                f"root {root.path}: {root.warning}",
                "kbctl why PATH names the rule for one file; edit or remove that rule",
            )


def _count_dirs(roots: list[str]) -> int:
    count = 0
    for root in roots:
        for _dirpath, dirnames, _files in os.walk(root):
            dirnames[:] = [d for d in dirnames if d not in SKIPPED_DIRS]
            count += 1
            if count > DIR_COUNT_LIMIT:
                return count
    return count


def _inotify_fix() -> str:
    return (
        "sudo sysctl fs.inotify.max_user_watches=524288, and to keep it: "
        "echo fs.inotify.max_user_watches=524288 | sudo tee /etc/sysctl.d/90-kbindex.conf"
    )


def _inotify(status: StatusReply) -> Iterator[Finding]:
    try:
        limit = int(INOTIFY_WATCHES.read_text().strip())
    except (OSError, ValueError):
        yield Finding("info", "inotify limits unknown on this system")
        return
    dirs = _count_dirs([r.path for r in status.roots])
    # Other programs (editors, IDEs, sync tools) use watches too: leave them headroom.
    if dirs > limit:
        yield Finding(
            "FAIL", f"{dirs:,} directories to watch, inotify allows {limit:,}", _inotify_fix()
        )
    elif dirs > limit // 2:
        yield Finding("warn", f"{dirs:,} directories to watch of {limit:,} allowed", _inotify_fix())
    else:
        yield Finding("ok", f"inotify: {dirs:,} directories to watch, limit {limit:,}")


def _units() -> Iterator[Finding]:
    problems = service.installed_units_in_sync()
    if not problems:
        yield Finding("ok", "systemd user units installed and in sync")
        return
    if any("not installed" in p for p in problems):
        yield Finding(
            "info",
            "not installed as a systemd user service",
            "optional: kbctl service install --root PATH",
        )
        return
    for problem in problems:
        yield Finding("warn", problem, "kbctl service install  (rewrites the units)")


def render(findings: list[Finding]) -> str:
    lines: list[str] = []
    for f in findings:
        lines.append(f"{f.level:<4}  {f.what}")
        if f.fix and f.level != "ok":
            lines.append(f"      fix: {f.fix}")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    import anyio

    findings = anyio.run(diagnose, args.socket)
    if sys.stdout.isatty():  # root paths and errors the daemon sent: made safe to show
        findings = [
            Finding(f.level, shown.terminal(f.what), shown.terminal(f.fix)) for f in findings
        ]
    sys.stdout.write(render(findings) + "\n")
    return 1 if any(f.level == "FAIL" for f in findings) else 0
