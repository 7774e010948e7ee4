"""``kbctl search`` starts fast because it imports only what a search needs.

A CLI started once per query pays its imports every time, and most of its time goes on
them (bench/cli_startup.py). What a search does not need (an event loop, the MCP SDK,
the systemd unit code, the daemon) must stay out of the process. A behaviour test, not a
timed one: kbctl runs for real against a real daemon, then lists what it imported.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest
from conftest import Daemon, write

pytestmark = [pytest.mark.slow, pytest.mark.anyio]

NOT_FOR_A_SEARCH = (
    "anyio",  # the blocking client needs no event loop
    "asyncio",
    "mcp",  # the MCP front end's SDK
    "pydantic",
    "subprocess",  # kbctl service: systemctl, the unit files, the config file
    "tomllib",
    "importlib.resources",
    "kbindex.ctl.doctor",
    "kbindex.ctl.service",
    "kbindex.proto.client",
    "kbindex.daemon",  # nothing of the daemon, no SQLite
    "sqlite3",
    "sqlean",
    "watchdog",
    "platformdirs",
    "pathlib",  # the socket's path is a string: pathlib brings urllib.parse and ipaddress
    "urllib",
    "ipaddress",
)

# Runs kbctl's entry point as the console script does, then prints the modules it loaded
# (stderr, so kbctl's own output stays on stdout).
RUN_AND_LIST = """
import json, sys
from kbindex.ctl.main import main
code = main(sys.argv[1:])
sys.stdout.flush()
print(json.dumps(sorted(sys.modules)), file=sys.stderr)
sys.exit(code)
"""


def kbctl_modules(daemon: Daemon, *args: str) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    done = subprocess.run(
        [sys.executable, "-c", RUN_AND_LIST, "--socket", str(daemon.socket), *args],
        capture_output=True,
        text=True,
        timeout=30,
    )
    modules = set(json.loads(done.stderr.splitlines()[-1]))
    return done, modules


def loaded(modules: set[str], name: str) -> bool:
    return name in modules or any(m.startswith(name + ".") for m in modules)


async def test_search_imports_nothing_a_search_does_not_need(daemon: Daemon) -> None:
    write(daemon.root / "notes" / "ocelot.md", "The ocelot sleeps in the archive.\n")
    await daemon.refresh()
    done, modules = kbctl_modules(daemon, "search", "ocelot")
    assert done.returncode == 0, done.stderr
    assert "ocelot.md:1" in done.stdout
    assert [name for name in NOT_FOR_A_SEARCH if loaded(modules, name)] == []


@pytest.mark.skipif(shutil.which("rg") is None, reason="ripgrep (rg) is not installed")
async def test_grep_imports_no_more_than_a_search(daemon: Daemon) -> None:
    write(daemon.root / "notes" / "ocelot.md", "The ocelot sleeps in the archive.\n")
    await daemon.refresh()
    done, modules = kbctl_modules(daemon, "grep", "-C", "1", "ocelot")
    assert done.returncode == 0, done.stderr
    assert "ocelot.md:1:The ocelot sleeps" in done.stdout
    assert [name for name in NOT_FOR_A_SEARCH if loaded(modules, name)] == []


async def test_the_other_daemon_commands_import_no_event_loop_either(daemon: Daemon) -> None:
    write(daemon.root / "a.md", "alpha\n")
    await daemon.refresh()
    for args in (["status"], ["files"], ["read", "a.md"], ["why", "a.md"], ["roots"]):
        done, modules = kbctl_modules(daemon, *args)
        assert done.returncode == 0, (args, done.stderr)
        assert not loaded(modules, "anyio") and not loaded(modules, "mcp"), args
    done, modules = kbctl_modules(daemon, "reindex", "--wait", "a.md")
    assert done.returncode == 0 and "done: 1 files checked" in done.stdout, done.stderr
    assert not loaded(modules, "anyio")
