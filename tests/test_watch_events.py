"""Live updates through a real daemon: every kind of file event, asserted through search
results and status. The daemon's periodic scan is set to an hour (conftest), so what
changes here is the watcher's doing."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import anyio
import pytest
from conftest import Daemon, MakeDaemon, write
from watch_helpers import settled, until_paths, until_status

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


@pytest.mark.backends
async def test_create_modify_delete_within_a_second_and_honest_status(daemon: Daemon) -> None:
    async with daemon.client() as c:
        f = write(daemon.root / "notes" / "a.md", "the first quasarline\n")
        assert await until_paths(c, "quasarline", ["notes/a.md"]) < 1.0
        f.write_text("now about a nebulaform instead\n")
        assert await until_paths(c, "nebulaform", ["notes/a.md"]) < 1.0
        assert await until_paths(c, "quasarline", []) < 1.0
        f.unlink()
        assert await until_paths(c, "nebulaform", []) < 1.0

        status = await settled(c)
        assert status.watch == "live"
        assert status.roots[0].state == "live" and status.roots[0].watch == "live"
        assert status.last_event_at is not None and status.roots[0].last_event_at is not None
        assert status.lag is not None and status.lag.samples >= 3
        assert status.lag.max_seconds is not None and status.lag.max_seconds < 1.0
        reconcile = status.roots[0].last_reconcile
        assert reconcile is not None and reconcile.files_seen == 0  # the startup scan
        fresh = (await c.search("anything")).freshness
        assert fresh is not None and fresh.watch == "live" and fresh.pending == 0


async def test_a_file_written_fifty_times_in_a_burst_is_read_once(daemon: Daemon) -> None:
    async with daemon.client() as c:
        before = (await settled(c)).files_read
        f = daemon.root / "busy.md"
        for i in range(50):
            f.write_text(f"version {i} of the hummingbyte\n")
            await anyio.sleep(0.002)
        await until_paths(c, "49", ["busy.md"])
        status = await settled(c)
        assert status.files_read - before == 1
        assert await until_paths(c, "hummingbyte", ["busy.md"]) < 0.5


@pytest.mark.backends
async def test_directory_rename_moves_documents_without_reading_them(daemon: Daemon) -> None:
    count = 500
    for i in range(count):
        write(daemon.root / "proj" / f"sub{i % 10}" / f"n{i}.md", f"note {i} about gravelwing\n")
    async with daemon.client() as c:
        await until_status(c, lambda s: s.indexed_files == count and s.pending == 0)
        before = await settled(c)
        (daemon.root / "proj").rename(daemon.root / "renamed")
        hits = await c.search("gravelwing", limit=100)
        await until_status(c, lambda s: s.files_moved - before.files_moved == count)
        after = await settled(c)
        assert after.files_read == before.files_read, "a rename must not re-read contents"
        assert after.indexed_files == count
        await until_paths(c, "n7", ["renamed/sub7/n7.md"])
        hits = await c.search("gravelwing", limit=100)
        assert all(h.relpath.startswith("renamed/") for h in hits.hits)
        # The relative path is indexed (the FTS name column) and moved with the row.
        files = await c.find_files("proj/*")
        assert files.total == 0


@pytest.mark.backends
async def test_file_rename_and_atomic_save(daemon: Daemon) -> None:
    async with daemon.client() as c:
        f = write(daemon.root / "doc.md", "draft one of the saveword\n")
        await until_paths(c, "saveword", ["doc.md"])
        for i, temp_name in enumerate((".doc.md.swp", "doc.md.tmp.md", "doc.md~")):
            tmp = write(daemon.root / temp_name, f"final {i} saveword revision{i}\n")
            os.replace(tmp, f)  # write a temp file, rename it over the original
            await until_paths(c, f"revision{i}", ["doc.md"])
        await until_paths(c, "saveword", ["doc.md"])
        f.rename(daemon.root / "renamed.md")
        await until_paths(c, "saveword", ["renamed.md"])
        status = await settled(c)
        assert status.indexed_files == 1


async def test_moves_into_and_out_of_the_root(make_daemon: MakeDaemon, tmp_path: Path) -> None:
    d = make_daemon()
    outside = tmp_path / "outside"
    write(outside / "in.md", "arrives from outside: ferrocanto\n")
    write(outside / "tree" / "a" / "b.md", "a whole tree of ferrocanto\n")
    await d.start()
    async with d.client() as c:
        (outside / "in.md").rename(d.root / "in.md")
        (outside / "tree").rename(d.root / "tree")
        await until_paths(c, "ferrocanto", ["in.md", "tree/a/b.md"])
        (d.root / "in.md").rename(outside / "gone.md")
        (d.root / "tree").rename(outside / "tree2")
        await until_paths(c, "ferrocanto", [])
        # Moved to a name that is never indexed: leaves the index like a deletion.
        write(d.root / "x.md", "extension change ferrocanto\n")
        await until_paths(c, "ferrocanto", ["x.md"])
        (d.root / "x.md").rename(d.root / "x.md.bak")
        await until_paths(c, "ferrocanto", [])
        assert (await settled(c)).indexed_files == 0


async def test_files_deleted_right_after_creation_leave_no_trace(daemon: Daemon) -> None:
    async with daemon.client() as c:
        before = await settled(c)
        for i in range(200):
            f = write(daemon.root / "tmp" / f"{i}.md", f"ephemeral {i}\n")
            f.unlink()
        shutil.rmtree(daemon.root / "tmp")
        status = await settled(c)
        assert status.indexed_files == 0
        assert status.errors_encountered == before.errors_encountered


async def test_a_burst_of_thousands_of_files_settles(daemon: Daemon) -> None:
    """3,000 files (over the queue's per-root cap, so the burst collapses into a
    rescan of the root), then their deletion."""
    count = 3000
    for i in range(count):
        write(daemon.root / "burst" / f"d{i % 30}" / f"f{i}.txt", f"burst file {i} tokenword\n")
    async with daemon.client() as c:
        await until_status(c, lambda s: s.indexed_files == count and s.pending == 0, timeout=30)
        assert (await c.search("f1234")).hits[0].relpath == "burst/d4/f1234.txt"
        shutil.rmtree(daemon.root / "burst")
        await until_status(c, lambda s: s.indexed_files == 0 and s.pending == 0, timeout=30)


async def test_gitignore_edits_take_effect(daemon: Daemon) -> None:
    root = daemon.root
    (root / ".git").mkdir()  # .gitignore applies in a git work tree
    write(root / "a.md", "alpha lumenword\n")
    write(root / "b.md", "bravo lumenword\n")
    write(root / "sub" / "c.md", "charlie lumenword\n")
    async with daemon.client() as c:
        await until_paths(c, "lumenword", ["a.md", "b.md", "sub/c.md"])
        ignore = write(root / ".gitignore", "a.md\n")
        await until_paths(c, "lumenword", ["b.md", "sub/c.md"])
        why = await c.why(str(root / "a.md"))
        assert not why.indexed
        assert why.reason == f'ignored: pattern "a.md" in {root}/.gitignore line 1'
        ignore.write_text("*.md\n!a.md\n")
        await until_paths(c, "lumenword", ["a.md"])
        write(root / "sub" / ".kbignore", "!c.md\n")
        await until_paths(c, "lumenword", ["a.md", "sub/c.md"])
        # An editor's atomic save of the .gitignore itself.
        tmp = write(root / ".gitignore.new", "sub/\n")
        os.replace(tmp, ignore)
        await until_paths(c, "lumenword", ["a.md", "b.md"])
        ignore.unlink()
        await until_paths(c, "lumenword", ["a.md", "b.md", "sub/c.md"])


async def test_changes_made_while_stopped_appear_after_restart(make_daemon: MakeDaemon) -> None:
    d = make_daemon()
    write(d.root / "keep.md", "kept mossword\n")
    write(d.root / "edit.md", "old mossword\n")
    write(d.root / "drop.md", "dropped mossword\n")
    write(d.root / "dir" / "x.md", "moved mossword\n")
    await d.start()
    async with d.client() as c:
        await until_paths(c, "mossword", ["dir/x.md", "drop.md", "edit.md", "keep.md"])
    d.stop()
    (d.root / "edit.md").write_text("new mossword edited\n")
    (d.root / "drop.md").unlink()
    (d.root / "dir").rename(d.root / "dir2")
    write(d.root / "added.md", "added mossword\n")
    await d.start()
    async with d.client() as c:
        await until_paths(c, "mossword", ["added.md", "dir2/x.md", "edit.md", "keep.md"])
        await until_paths(c, "edited", ["edit.md"])


async def test_root_deleted_and_recreated_is_watched_again(daemon: Daemon) -> None:
    root = daemon.root
    write(root / "a.md", "before the flood: arkword\n")
    async with daemon.client() as c:
        await until_paths(c, "arkword", ["a.md"])
        shutil.rmtree(root)
        status = await until_status(c, lambda s: s.roots[0].state == "missing")
        assert status.indexed_files == 0
        root.mkdir()
        write(root / "b.md", "after the flood: arkword\n")
        await until_paths(c, "arkword", ["b.md"], timeout=10)
        await until_status(c, lambda s: s.roots[0].state == "live")
        write(root / "c.md", "and the next one: arkword\n")
        await until_paths(c, "arkword", ["b.md", "c.md"])
