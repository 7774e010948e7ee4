"""One path-filter rule for search, grep and find_files, through the protocol, kbctl
and MCP: a folder or a glob, relative to a root (or to the folder holding it, when its
first folder is the root's own name) or absolute; a filter that matches no indexed file
says so in the reply.

A real kbindexd over two real roots, ``notes`` and ``docs``; kbctl and kbindex-mcp run
as processes.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import Daemon, MakeDaemon, write
from kbindex.proto.messages import Grep, GrepReply
from mcp_helpers import mcp_stdio, structured, text

pytestmark = pytest.mark.anyio


def two_roots(make_daemon: MakeDaemon, base: Path) -> Daemon:
    notes, docs = base / "notes", base / "docs"
    write(notes / "todo.md", "# Todo\n\nalpha in the notes\n")
    write(notes / "sub" / "deep.md", "alpha deeper in the notes\n")
    write(docs / "guide.md", "# Guide\n\nalpha in the docs\n")
    write(docs / "api" / "ref.md", "alpha in the reference\n")
    return make_daemon(notes, docs)


def kbctl(d: Daemon, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kbindex.ctl.main", "--socket", str(d.socket), *args],
        capture_output=True,
        text=True,
        timeout=30,
        cwd=cwd,
    )


@pytest.mark.backends
async def test_a_filter_means_the_same_to_search_grep_and_find_files(
    make_daemon: MakeDaemon, tmp_path: Path
) -> None:
    d = two_roots(make_daemon, tmp_path)
    d.extra_args = ["--watch", "off"]
    await d.start()
    notes = {str(tmp_path / "notes" / "todo.md"), str(tmp_path / "notes" / "sub" / "deep.md")}
    async with d.client() as c:
        for path in ("notes/", "notes", "./notes/", "notes/*.md", str(tmp_path / "notes")):
            searched = await c.search("alpha", path=path)
            assert {h.path for h in searched.hits} == notes, path
            assert searched.notes == [], path
            listed = await c.find_files(path)
            assert {f.path for f in listed.files} == notes, path
            grepped = await c.request(Grep(pattern="alpha", path=path), GrepReply)
            assert {g.path for g in grepped.lines} == notes, path
        # Relative to a root, as before: a folder inside one.
        inside = await c.search("alpha", path="api/")
        assert [h.relpath for h in inside.hits] == ["api/ref.md"]
        assert [f.relpath for f in (await c.find_files("sub/")).files] == ["sub/deep.md"]
        # A filter that names files but finds no hit is not a mistake: no note.
        assert (await c.search("nowhere", path="notes/")).notes == []


@pytest.mark.backends
async def test_a_filter_that_matches_no_file_says_so(
    make_daemon: MakeDaemon, tmp_path: Path
) -> None:
    d = two_roots(make_daemon, tmp_path)
    await d.start()
    async with d.client() as c:
        searched = await c.search("alpha", path="nowhere/")
        listed = await c.find_files("nowhere/*.md")
        grepped = await c.request(Grep(pattern="alpha", path="nowhere/"), GrepReply)
    for reply, raw in ((searched, "nowhere/"), (listed, "nowhere/*.md"), (grepped, "nowhere/")):
        assert len(reply.notes) == 1
        assert f"the path filter {raw!r} matches no indexed file or folder" in reply.notes[0]
        assert str(tmp_path / "notes") in reply.notes[0]  # the roots, to pick from


@pytest.mark.slow
async def test_kbctl_reads_a_filter_as_grep_does_from_anywhere(
    make_daemon: MakeDaemon, tmp_path: Path
) -> None:
    d = two_roots(make_daemon, tmp_path)
    await d.start()
    for cwd in (tmp_path, Path("/")):  # beside the root, and where no "notes" exists
        search = kbctl(d, "search", "alpha", "--path", "notes/", cwd=cwd)
        assert search.returncode == 0 and "todo.md" in search.stdout, search.stderr
        assert "guide.md" not in search.stdout
        grep = kbctl(d, "grep", "alpha", "--path", "notes/", cwd=cwd)
        assert grep.returncode == 0 and "todo.md" in grep.stdout, grep.stderr
        assert "guide.md" not in grep.stdout
        files = kbctl(d, "files", "notes/", cwd=cwd)
        assert "todo.md" in files.stdout and "guide.md" not in files.stdout
    none = kbctl(d, "search", "alpha", "--path", "nowhere/", cwd=tmp_path)
    assert "note: the path filter 'nowhere/' matches no indexed file" in none.stdout
    grep = kbctl(d, "grep", "alpha", "--path", "nowhere/", cwd=tmp_path)
    assert grep.returncode == 1 and "note: the path filter 'nowhere/'" in grep.stderr
    files = kbctl(d, "files", "nowhere/", cwd=tmp_path)
    assert "note: the path filter 'nowhere/'" in files.stderr


@pytest.mark.slow
async def test_mcp_path_glob_of_the_tool_description_finds_the_folder(
    make_daemon: MakeDaemon, tmp_path: Path
) -> None:
    d = two_roots(make_daemon, tmp_path)
    await d.start()
    async with mcp_stdio(d.socket) as client:
        searched = await client.call_tool("search", {"query": "alpha", "path_glob": "notes/"})
        grepped = await client.call_tool("grep", {"pattern": "alpha", "path_glob": "notes/"})
        listed = await client.call_tool("find_files", {"glob": "notes/"})
        missing = await client.call_tool("search", {"query": "alpha", "path_glob": "nowhere/"})
    assert {r["relpath"] for r in structured(searched)["results"]} == {"todo.md", "sub/deep.md"}
    assert "todo.md" in text(grepped) and "guide.md" not in text(grepped)
    assert structured(listed)["total"] == 2
    notes = structured(missing)["notes"]
    assert any("'nowhere/' matches no indexed file" in n for n in notes)
    assert "matches no indexed file" in text(missing)
