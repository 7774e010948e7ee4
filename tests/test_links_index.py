"""Links and backlinks answered from the index, and recent changes (issue 41), through a
real daemon over real notes that are edited, moved and deleted."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pytest
from kbindex.proto.errors import DaemonError
from kbindex.proto.messages import NoteReply, WriteNote
from mcp_helpers import mcp_stdio, text

from tests.conftest import MakeDaemon, with_writable_root, write

pytestmark = pytest.mark.anyio


def _links(reply: object) -> list[tuple[str, int, bool]]:
    return [(x.target, x.line, x.broken) for x in reply.links]  # type: ignore[attr-defined]


def _sources(reply: object) -> list[tuple[str, int]]:
    return [(x.source, x.line) for x in reply.links]  # type: ignore[attr-defined]


@pytest.mark.slow
@pytest.mark.backends
async def test_links_and_backlinks_follow_edits_moves_and_deletes(make_daemon: MakeDaemon) -> None:
    d = make_daemon()
    r = d.root
    write(r / "hub.md", "# Hub\nSee [the plan](projects/plan.md) and [[Meeting]].\n[[ghost]]\n")
    write(r / "projects" / "plan.md", "# Plan\nBack to [hub](../hub.md), [site](https://x.org).\n")
    write(r / "notes" / "Meeting.md", "# Meeting\nAbout [[plan]].\n```\n[[not a link]]\n```\n")
    write(r / "img" / "chart.png", b"\x89PNG\r\n\x1a\n\x00\x00binary")
    write(r / "gallery.md", "![chart](img/chart.png)\n")
    await d.start()
    hub, plan, meeting = str(r / "hub.md"), str(r / "projects/plan.md"), str(r / "notes/Meeting.md")
    async with d.client() as c:
        out = await c.links(hub)
        assert _links(out) == [(plan, 2, False), (meeting, 2, False), (f"{r}/ghost.md", 3, True)]
        assert out.broken == 1
        assert _sources(await c.links(plan, backlinks=True)) == [(hub, 2), (meeting, 2)]
        assert _sources(await c.links(hub, backlinks=True)) == [(plan, 2)]
        # A link to a file the index skips (binary) is not broken.
        assert _links(await c.links(str(r / "gallery.md"))) == [
            (str(r / "img/chart.png"), 1, False)
        ]

    # An edit: the hub no longer links the plan.
    write(r / "hub.md", "# Hub\nOnly [[Meeting]] now.\n")
    await d.refresh()
    async with d.client() as c:
        assert _sources(await c.links(plan, backlinks=True)) == [(meeting, 2)]
        assert _links(await c.links(hub)) == [(meeting, 2, False)]

    # A move: backlinks by name follow the note; its own relative links are read again
    # from its new folder.
    os.makedirs(r / "archive")
    os.rename(r / "projects" / "plan.md", r / "archive" / "plan.md")
    await d.refresh()
    moved = str(r / "archive/plan.md")
    async with d.client() as c:
        assert _sources(await c.links(moved, backlinks=True)) == [(meeting, 2)]
        assert _links(await c.links(moved)) == [(hub, 2, False)]
        assert _links(await c.links(meeting)) == [(moved, 2, False)]

    # A delete: links to it are broken, its own links gone.
    (r / "notes" / "Meeting.md").unlink()
    await d.refresh()
    async with d.client() as c:
        assert _links(await c.links(hub)) == [(f"{r}/Meeting.md", 2, True)]
        with pytest.raises(DaemonError, match="not in the index"):
            await c.links(meeting)


@pytest.mark.slow
@pytest.mark.backends
async def test_a_limited_answer_names_the_first_files_and_counts_them_all(
    make_daemon: MakeDaemon,
) -> None:
    """What read_file's trailer asks for: a note many notes link to (each several times)
    answers with the first link of each of the first few of them, and how many there
    are; the same request without a limit (kbctl links, find_files) gets every link."""
    d = make_daemon()
    r = d.root
    write(
        r / "hub.md",
        "# Hub\nFrom [[Spoke 00]] to [[Spoke 11]]: "
        + " ".join(f"[[Spoke {i:02}]]" for i in range(12))
        + "\n[[nowhere]]\n",
    )
    # A second note named hub: [[hub]] leads to the shorter path, not to it.
    write(r / "old" / "hub.md", "# Old hub\n")
    for i in range(20):
        write(
            r / "spokes" / f"Spoke {i:02}.md",
            f"# Spoke {i}\nTo [[hub]].\nAgain [hub](../hub.md).\n",
        )
    write(r / "elsewhere.md", "[[old/hub]]\n")
    await d.start()
    hub, old = str(r / "hub.md"), str(r / "old" / "hub.md")
    spokes = [str(r / "spokes" / f"Spoke {i:02}.md") for i in range(20)]
    async with d.client() as c:
        every = await c.links(hub, backlinks=True)
        assert _sources(every) == [(s, line) for s in spokes for line in (2, 3)]
        assert every.files == 20
        first = await c.links(hub, backlinks=True, limit=8)
        assert _sources(first) == [(s, 2) for s in spokes[:8]] and first.files == 20
        assert _sources(await c.links(hub, backlinks=True, limit=30)) == [(s, 2) for s in spokes]
        both = await c.links(old, backlinks=True, limit=8)
        assert _sources(both) == [(str(r / "elsewhere.md"), 1)] and both.files == 1
        # Its own links: the first of each file they lead to, the broken one counted.
        out = await c.links(hub, limit=8)
        in_order = [spokes[i] for i in (0, 11, 1, 2, 3, 4, 5, 6)]
        assert _links(out) == [(s, 2, False) for s in in_order] and out.files == 13
        assert len((await c.links(hub)).links) == 15
        with pytest.raises(DaemonError, match="limit must be between 1 and 1000"):
            await c.links(hub, limit=0)
    listed = d.kbctl("links", "--backlinks", hub)
    assert listed.returncode == 0 and len(listed.stdout.splitlines()) == 40


@pytest.mark.slow
@pytest.mark.backends
async def test_recent_changes_newest_first_with_notes_written_through_the_daemon(
    make_daemon: MakeDaemon, tmp_path: Path
) -> None:
    d = with_writable_root(make_daemon, tmp_path)
    notes = d.roots[0]
    old = write(notes / "old.md", "# Old\n")
    os.utime(old, (time.time() - 30 * 86400,) * 2)
    write(notes / "fresh.md", "# Fresh\n")
    write(notes / "code.py", "x = 1\n")
    d.extra_args += ["--include-ext", "*"]
    await d.start()
    async with d.client() as c:
        note = WriteNote(path=str(notes / "by-agent.md"), content="# Agent\n")
        await c.request(note, NoteReply)
        recent = await c.find_files(str(notes), modified="7d", newest=True)
        names = [Path(f.path).name for f in recent.files]
        assert names[0] == "by-agent.md" and set(names) == {"by-agent.md", "fresh.md", "code.py"}
        assert [f.note for f in recent.files] == [True, False, False]
        docs = await c.find_files(str(notes), modified="7d", newest=True, kind=["doc"])
        assert {Path(f.path).name for f in docs.files} == {"by-agent.md", "fresh.md"}
    result = d.kbctl("recent", "60d", "--path", str(notes))
    assert result.returncode == 0, result.stderr
    # An agent sees it too: find_files with a modified span is kbctl's recent.
    async with mcp_stdio(d.socket) as client:
        listed = text(
            await client.call_tool("find_files", {"glob": str(notes), "where": "modified:7d"})
        )
    assert re.search(r"^  by-agent\.md  .*  \(written through kbindex\)$", listed, re.M), listed
    assert re.search(r"^  fresh\.md  \S+ B  [\d-]+$", listed, re.M), listed
    # A shared index names the machine first (MACHINE:/path).
    lines = [re.sub(r"^[\w.-]+:/", "/", line) for line in result.stdout.splitlines()]
    assert lines[0].startswith(str(notes / "by-agent.md")) and lines[0].endswith("(note)")
    assert lines[-1].startswith(str(old))
