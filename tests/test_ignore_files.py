""".ignore and .rgignore files as ripgrep reads them, nested git repositories, and
ripgrep as the oracle for the whole file set.

A real kbindexd on a real socket over real files; kbctl runs as a process.
"""

from __future__ import annotations

import anyio
import pytest
from conftest import Daemon, MakeDaemon, write
from grep_helpers import needs_rg
from ignore_trees import build_worlds, no_git_above, rg_listing
from kbindex.proto.messages import FindFiles, FindFilesReply
from watch_helpers import until_paths

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


async def test_ignore_and_rgignore_apply_without_git_and_why_names_them(
    make_daemon: MakeDaemon,
) -> None:
    d = make_daemon()
    no_git_above(d.root)
    write(d.root / ".gitignore", "*.md\n")  # no work tree: not applied
    write(d.root / ".ignore", "drafts/\n*.txt\n")
    rgignore = write(d.root / "notes" / ".rgignore", "# ripgrep's own\n!todo.txt\nold.md\n")
    write(d.root / "readme.md", "readme kiwiword\n")
    write(d.root / "drafts" / "a.md", "draft kiwiword\n")
    write(d.root / "notes" / "log.txt", "log kiwiword\n")
    write(d.root / "notes" / "todo.txt", "todo kiwiword\n")
    write(d.root / "notes" / "old.md", "old kiwiword\n")
    await d.start()
    async with d.client() as c:
        await until_paths(c, "kiwiword", ["notes/todo.txt", "readme.md"])
        why = await c.why("notes/old.md")
        assert why.reason == f'ignored: pattern "old.md" in {rgignore} line 3'
        why = await c.why("drafts/a.md")
        assert why.reason == f'ignored: pattern "drafts/" in {d.root}/.ignore line 1'
    shown = d.kbctl("why", str(d.root / "notes" / "log.txt"))
    assert f'pattern "*.txt" in {d.root}/.ignore line 2' in shown.stdout, shown


async def test_a_nested_repository_is_not_under_the_outer_gitignores(
    make_daemon: MakeDaemon,
) -> None:
    d = make_daemon()
    outer = d.root
    (outer / ".git").mkdir()
    write(outer / ".gitignore", "*.txt\nbuild/\n")
    write(outer / ".ignore", "secret.md\n")  # .ignore files cross into the inner one
    write(outer / "a.txt", "outer text limeword\n")
    inner = outer / "vendor" / "lib"
    (inner / ".git").mkdir(parents=True)
    write(inner / "b.txt", "inner text limeword\n")
    write(inner / "build" / "c.md", "inner build limeword\n")
    write(inner / "secret.md", "inner secret limeword\n")
    write(inner / ".gitignore", "d.md\n")
    write(inner / "d.md", "inner ignored limeword\n")
    await d.start()
    async with d.client() as c:
        await until_paths(c, "limeword", ["vendor/lib/b.txt", "vendor/lib/build/c.md"])
        why = await c.why("vendor/lib/d.md")
        assert why.reason == f'ignored: pattern "d.md" in {inner}/.gitignore line 1'
        assert (await c.why("vendor/lib/b.txt")).indexed
        # The inner repository's .git removed: it is part of the outer work tree again.
        (inner / ".git").rmdir()
        await d.refresh()
        await until_paths(c, "limeword", [])


async def test_edits_to_ignore_and_rgignore_take_effect_through_the_watcher(
    daemon: Daemon,
) -> None:
    root = daemon.root
    write(root / "a.md", "alpha pearlword\n")
    write(root / "sub" / "b.md", "bravo pearlword\n")
    write(root / "sub" / "c.md", "charlie pearlword\n")
    async with daemon.client() as c:
        await until_paths(c, "pearlword", ["a.md", "sub/b.md", "sub/c.md"])
        ignore = write(root / ".ignore", "sub/*.md\n")
        await until_paths(c, "pearlword", ["a.md"])
        rgignore = write(root / "sub" / ".rgignore", "!c.md\n")
        await until_paths(c, "pearlword", ["a.md", "sub/c.md"])
        ignore.write_text("a.md\n")
        await until_paths(c, "pearlword", ["sub/b.md", "sub/c.md"])
        rgignore.write_text("*.md\n")
        await until_paths(c, "pearlword", [])
        rgignore.unlink()
        ignore.unlink()
        await until_paths(c, "pearlword", ["a.md", "sub/b.md", "sub/c.md"])


@needs_rg
async def test_the_daemon_indexes_what_ripgrep_lists(make_daemon: MakeDaemon) -> None:
    """Generated trees of .gitignore/.ignore/.rgignore files and nested repositories
    (``ignore_trees``, which explains the rg flags); every file has an extension, so
    ``--include-ext '*'`` leaves the decision to the ignore rules."""
    d = make_daemon()
    no_git_above(d.root)
    build_worlds(d.root, seed=17, count=30)
    d.extra_args = ["--include-ext", "*", "--watch", "off"]
    await d.start()
    async with d.client() as c:
        reply = await c.request(FindFiles(glob="*", limit=1000), FindFilesReply)
    assert not reply.truncated
    expected = await anyio.to_thread.run_sync(rg_listing, d.root)
    assert len(expected) > 200
    assert sorted(f.path for f in reply.files) == expected
