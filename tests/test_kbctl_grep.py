"""kbctl grep end to end: kbctl run as a process against a real kbindexd over real files,
its output compared with ripgrep's own (``rg --no-heading``) over the same files."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from conftest import Daemon, MakeDaemon, write
from grep_helpers import RG, needs_rg

pytestmark = [
    pytest.mark.slow,
    pytest.mark.anyio,
    needs_rg,
]


@pytest.fixture
async def code(make_daemon: MakeDaemon) -> AsyncIterator[Daemon]:
    """A daemon that indexes every text file, code included, as rg -uu reads them."""
    d = make_daemon()
    d.extra_args = ["--include-ext", "*"]
    await d.start()
    yield d
    d.stop()


def kbctl(daemon: Daemon, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """kbctl as a shell runs it in ``cwd`` (the relative paths it prints depend on it)."""
    return subprocess.run(
        [sys.executable, "-m", "kbindex.ctl.main", "--socket", str(daemon.socket), *args],
        capture_output=True,
        text=True,
        timeout=30,
        cwd=cwd,
    )


def rg(*args: str, cwd: Path) -> str:
    """What ripgrep prints for the same search: every file (-uu), in path order."""
    assert RG is not None
    command = [RG, "-uu", "--no-heading", "--line-number", "--sort", "path", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=30, cwd=cwd).stdout


def corpus(root: Path) -> None:
    write(
        root / "src" / "app.py",
        "import os\n\n\ndef main():\n    # TODO: parse the args\n    path = os.getcwd()\n"
        "    return path\n\n\n# TODO: tests\nMAIN_TODO = 'todo'\n",
    )
    write(
        root / "notes" / "plan.md",
        "# Plan\n\nTODO write the plan\nA todo list, todos and TODOs.\n\nsee a.b(c) here\n",
    )
    write(root / "notes" / "empty.txt", "nothing to find in here\n")


async def test_output_is_ripgreps(code: Daemon) -> None:
    daemon = code
    corpus(daemon.root)
    await daemon.refresh()
    root = daemon.root
    for args in (
        ["TODO"],
        ["-C", "1", "TODO"],
        ["-A", "2", "-B", "0", "TODO"],
        ["-i", "-w", "todo"],
        ["-F", "a.b("],
        ["-m", "1", "TODO"],
        ["-l", "todo"],
        ["def \\w+\\("],
    ):
        done = kbctl(daemon, "grep", *args, cwd=root)
        assert done.returncode == 0, (args, done.stderr)
        assert done.stdout == rg(*args, cwd=root), args
        assert done.stderr == "", args
    scoped = kbctl(daemon, "grep", "--path", "notes", "TODO", cwd=root)
    assert scoped.stdout == rg("TODO", "notes", cwd=root)
    assert scoped.stdout.startswith("notes/plan.md:3:TODO write the plan\n")
    # From a folder inside the root, paths are relative to it, as rg shows them.
    inside = kbctl(daemon, "grep", "-w", "os", cwd=root / "src")
    assert inside.stdout == rg("-w", "os", cwd=root / "src")
    assert inside.stdout.startswith("app.py:1:import os\n")
    # From elsewhere, absolute; either form is a PATH kbctl read takes.
    elsewhere = root.parent / "elsewhere"
    elsewhere.mkdir()
    outside = kbctl(daemon, "grep", "-w", "os", cwd=elsewhere)
    assert outside.stdout.startswith(f"{root}/src/app.py:1:import os\n")
    shown = kbctl(daemon, "grep", "-l", "MAIN_TODO", cwd=root).stdout.strip()
    read = kbctl(daemon, "read", shown, "--start", "11", cwd=root)
    assert read.stdout.strip() == "11| MAIN_TODO = 'todo'"


async def test_exit_status_and_errors(code: Daemon, sockdir: Path) -> None:
    daemon = code
    corpus(daemon.root)
    await daemon.refresh()
    here = daemon.root
    nothing = kbctl(daemon, "grep", "zanzibar", cwd=here)
    assert (nothing.returncode, nothing.stdout, nothing.stderr) == (1, "", "")

    bad = kbctl(daemon, "grep", "(", cwd=here)
    assert bad.returncode == 2
    assert bad.stdout == ""
    assert bad.stderr.startswith("kbctl: ") and bad.stderr.count("\n") == 1, bad.stderr
    assert "[bad_pattern]" in bad.stderr and "group" in bad.stderr.lower(), bad.stderr

    usage = kbctl(daemon, "grep", "-C", "99", "TODO", cwd=here)
    assert usage.returncode == 2
    assert "-C/--context: 99 is not from 0 to 20" in usage.stderr

    # No daemon: grep exits 2 (1 would read as "no match"), search still exits 1.
    gone = sockdir / "nobody.sock"
    for command, status in ((["grep", "TODO"], 2), (["search", "TODO"], 1)):
        done = subprocess.run(
            [sys.executable, "-m", "kbindex.ctl.main", "--socket", str(gone), *command],
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert done.returncode == status, command
        assert "kbindexd is not running" in done.stderr


async def test_json_and_a_limit(code: Daemon) -> None:
    daemon = code
    corpus(daemon.root)
    await daemon.refresh()
    app = str(daemon.root / "src" / "app.py")
    done = kbctl(daemon, "grep", "--json", "-C", "1", "TODO: tests", cwd=daemon.root)
    assert done.returncode == 0, done.stderr
    reply = json.loads(done.stdout)
    assert reply["lines"] == [
        {"path": app, "line": 9, "text": "", "match": False, "column": 0},
        {"path": app, "line": 10, "text": "# TODO: tests", "match": True, "column": 3},
        {"path": app, "line": 11, "text": "MAIN_TODO = 'todo'", "match": False, "column": 0},
    ]
    assert (reply["total"], reply["files"], reply["truncated"]) == (1, 1, False)
    assert "id" not in reply and "type" not in reply

    every = rg("-i", "todo", cwd=daemon.root).splitlines()
    assert len(every) == 5
    limited = kbctl(daemon, "grep", "-i", "todo", "--limit", "2", cwd=daemon.root)
    assert limited.returncode == 0
    assert limited.stdout.splitlines() == every[:2]
    assert limited.stderr == (
        "kbctl: showing 2 of 5 matching lines; use --limit (up to 1,000) or narrow with --path\n"
    )

    # A pattern without a literal reads every file, and says so.
    scan = kbctl(daemon, "grep", "^.$", cwd=daemon.root)
    assert scan.returncode == 1
    assert "the pattern has no literal the index can use, so all 3 files were read" in scan.stderr
