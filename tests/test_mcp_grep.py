"""The MCP grep tool end to end: the SDK's client spawns kbindex-mcp over stdio, which asks
a real kbindexd over real files; lines are checked against ripgrep's own output."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from conftest import Daemon, MakeDaemon, write
from grep_helpers import RG, needs_rg
from kbindex.daemon.grep.ripgrep import RIPGREP_ENV
from kbindex.mcpfront.results import BUDGET
from mcp_helpers import corpus, mcp_stdio, response_size, structured, text

pytestmark = [pytest.mark.slow, pytest.mark.anyio]


def rg_lines(root: Path, *args: str) -> list[tuple[str, int, str]]:
    """(absolute path, line, text) of every line ``rg -uu`` prints for the same search."""
    assert RG is not None
    command = [RG, "-uu", "--no-heading", "--line-number", "--sort", "path", *args, "--", "."]
    out = subprocess.run(command, capture_output=True, text=True, timeout=30, cwd=root).stdout
    found = []
    for row in out.splitlines():
        path, line, body = row.split(":", 2)
        found.append((str(root / path.removeprefix("./")), int(line), body))
    return found


def lines_of(data: dict[str, object]) -> list[tuple[str, int, str]]:
    files = data["files"]
    assert isinstance(files, list)
    return [(f["path"], g["line"], g["text"]) for f in files for g in f["lines"] if g["match"]]


@needs_rg
async def test_grep_tool_answers_as_rg_does(daemon: Daemon) -> None:
    root = daemon.root
    corpus(root)
    write(root / "notes" / "queue-log.md", "Queue\nthe queue.\nqueued\n(queue)\n")
    await daemon.refresh()
    async with mcp_stdio(daemon.socket) as client:
        tool = {t.name: t for t in (await client.list_tools()).tools}["grep"]
        assert tool.annotations is not None and tool.annotations.read_only_hint is True
        assert tool.output_schema is not None

        result = await client.call_tool("grep", {"pattern": "queue"})
        data = structured(result)
        assert lines_of(data) == rg_lines(root, "queue")
        assert [f["path"] for f in data["files"]] == [
            str(root / "docs" / "queue.md"),
            str(root / "docs" / "scheduler.md"),
            str(root / "notes" / "queue-log.md"),
        ]
        assert (data["returned"], data["total"], data["truncated"]) == (5, 5, False)
        assert data["complete"] is True and data["scanned_all"] is False
        # Text: rg's path:line:text, the root once, paths relative to it.
        shown = text(result).splitlines()
        assert shown[0] == "5 matching line(s) in 3 file(s) for 'queue', showing 5:"
        assert shown[1] == f"{root}/"
        assert shown[2] == "  docs/queue.md:3:A queue holds tasks in order."
        assert "  notes/queue-log.md:4:(queue)" in shown
        # That relative path is what read_file takes.
        read = structured(await client.call_tool("read_file", {"path": "docs/queue.md"}))
        assert read["text"].split("\n")[2] == "A queue holds tasks in order."

        flags = (
            ({"pattern": "queue", "case_sensitive": False, "word": True}, ["-i", "-w", "queue"]),
            ({"pattern": "(queue)", "fixed_strings": "true"}, ["-F", "(queue)"]),
            ({"pattern": "^[Qq]ueue(d|\\.)?$"}, ["^[Qq]ueue(d|\\.)?$"]),
            ({"pattern": " queue"}, [" queue"]),  # the space is part of the pattern
            ({"pattern": "queue", "path_glob": "docs/"}, ["queue", "-g", "docs/**"]),
        )
        for arguments, rg_args in flags:
            data = structured(await client.call_tool("grep", arguments))
            assert lines_of(data) == rg_lines(root, *rg_args), arguments
            assert data["returned"] > 0, arguments

        # Context: lines around each match, marked, with rg's separators in the text.
        around = await client.call_tool("grep", {"pattern": "picks", "context": 1})
        lines = structured(around)["files"][0]["lines"]
        assert [(g["line"], g["match"]) for g in lines] == [(4, False), (5, True)]
        assert text(around).splitlines()[2:4] == [
            "  docs/scheduler.md-4-",
            "  docs/scheduler.md:5:The scheduler picks the next task from the queue.",
        ]
        two = text(await client.call_tool("grep", {"pattern": "^# ", "context": 1}))
        assert "\n  --\n" in two

        nothing = await client.call_tool("grep", {"pattern": "zanzibar"})
        assert structured(nothing)["files"] == [] and structured(nothing)["total"] == 0
        assert text(nothing).startswith("No lines match 'zanzibar'")


@needs_rg
async def test_bad_patterns_and_limits(daemon: Daemon) -> None:
    for n in range(40):
        write(
            daemon.root / "logs" / f"day{n:02}.md",
            "".join(f"ERROR {i} " * 20 + "\n" for i in range(30)),
        )
    await daemon.refresh()
    async with mcp_stdio(daemon.socket) as client:
        bad = await client.call_tool("grep", {"pattern": "("})
        assert bad.is_error
        message = text(bad)
        assert "\n" not in message and len(message) < 400, message
        assert "not a valid regex" in message and "fixed_strings=true" in message
        missing = await client.call_tool("grep", {})
        assert missing.is_error and "pattern" in text(missing)
        flag = await client.call_tool("grep", {"pattern": "x", "word": "maybe"})
        assert flag.is_error and "'word' must be true or false" in text(flag)

        few = await client.call_tool("grep", {"pattern": "ERROR", "limit": 3})
        data = structured(few)
        assert (data["returned"], data["total"], data["truncated"]) == (3, 1200, True)
        assert "raise limit (max 1000)" in text(few)

        # 1,000 lines of 180 characters do not fit: as many as fit, and a note.
        most = await client.call_tool("grep", {"pattern": "ERROR", "limit": 5000})
        data = structured(most)
        assert data["notes"][0] == "limit=5000 is above the maximum; used 1000."
        assert 20 < data["returned"] < 100, data["returned"]
        assert data["truncated"] is True and data["total"] == 1200
        assert "left out to keep this answer small" in data["notes"][1]
        assert len(text(most)) <= BUDGET
        assert len(json.dumps(most.structured_content, separators=(",", ":"))) <= BUDGET
        assert response_size(most) < 2 * BUDGET
        assert "raise limit" not in text(most)


async def test_without_ripgrep_grep_is_a_clear_tool_error(make_daemon: MakeDaemon) -> None:
    # No ripgrep where the daemon looks, for real: its PATH holds no rg, and
    # KBINDEX_RG (which comes before the package's rg) names a missing file.
    d = make_daemon()
    missing = d.base / "no-such-bin"
    d.extra_env = {"PATH": str(missing), RIPGREP_ENV: str(missing / "rg")}
    await d.start()
    write(d.root / "a.md", "alpha\n")
    await d.refresh()
    async with mcp_stdio(d.socket) as client:
        failed = await client.call_tool("grep", {"pattern": "alpha"})
        assert failed.is_error
        assert "ripgrep" in text(failed) and "use search instead" in text(failed)
        assert structured(await client.call_tool("search", {"query": "alpha"}))["returned"] == 1
    done = d.kbctl("grep", "alpha")
    assert done.returncode == 2
    assert "[unavailable]" in done.stderr and "ripgrep" in done.stderr
