""".gitignore files apply only inside a git work tree, as in git and ripgrep; .kbignore
and the config apply everywhere; and a root whose rules skip nearly everything says so
in status, doctor and the MCP status.

A real kbindexd on a real socket over real files; kbctl runs as a process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import Daemon, MakeDaemon, write
from kbindex.mcpfront import results
from watch_helpers import until_paths

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

# What Debian's linux-source tarball ships at its top: a rule for its packagers.
PACKAGING_GITIGNORE = "*.o\n/*\n!/debian/\n"


def kbctl(daemon: Daemon, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kbindex.ctl.main", "--socket", str(daemon.socket), *args],
        capture_output=True,
        text=True,
        timeout=30,
    )


def no_git_above(path: Path) -> None:
    """The tests' premise: the temporary directory is not inside a git work tree."""
    for directory in (path, *path.parents):
        assert not os.path.lexists(directory / ".git"), f"{directory} holds a .git"


def kernel_like(root: Path) -> None:
    write(root / ".gitignore", PACKAGING_GITIGNORE)
    write(root / "README.md", "top zebraword\n")
    write(root / "Documentation" / "intro.md", "docs zebraword\n")
    write(root / "Documentation" / ".gitignore", "*.txt\n")
    write(root / "Documentation" / "notes.txt", "generated zebraword\n")
    write(root / "debian" / "rules.md", "packaging zebraword\n")


async def test_a_gitignore_outside_a_work_tree_is_not_applied(make_daemon: MakeDaemon) -> None:
    d = make_daemon()
    no_git_above(d.root)
    kernel_like(d.root)
    await d.start()
    async with d.client() as c:
        await until_paths(
            c,
            "zebraword",
            ["Documentation/intro.md", "Documentation/notes.txt", "README.md", "debian/rules.md"],
        )
        assert (await c.status()).roots[0].warning == ""
        # An edit to a .gitignore outside a work tree changes nothing either.
        write(d.root / "debian" / ".gitignore", "rules.md\n")
        await d.refresh()
        assert (await c.why("debian/rules.md")).indexed


async def test_a_git_directory_above_the_root_makes_its_gitignores_apply(
    make_daemon: MakeDaemon, tmp_path: Path
) -> None:
    """Two copies of one tree, one of them inside a git work tree: only there are its
    .gitignore files applied."""
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    in_repo = repo / "linux"
    plain = tmp_path / "plain" / "linux"
    no_git_above(plain)
    kernel_like(in_repo)
    kernel_like(plain)
    d = make_daemon(in_repo, plain)
    await d.start()
    async with d.client() as c:
        reply = await c.search("zebraword", limit=100)
        got = sorted(os.path.relpath(h.path, tmp_path) for h in reply.hits)
        assert got == [
            "plain/linux/Documentation/intro.md",
            "plain/linux/Documentation/notes.txt",
            "plain/linux/README.md",
            "plain/linux/debian/rules.md",
            "repo/linux/debian/rules.md",
        ]
        why = await c.why(str(in_repo / "README.md"))
        assert why.reason == f'ignored: pattern "/*" in {in_repo}/.gitignore line 2'


async def test_a_git_directory_inside_the_root_scopes_gitignores_to_that_tree(
    make_daemon: MakeDaemon,
) -> None:
    d = make_daemon()
    root = d.root
    write(root / ".gitignore", "*.md\n")  # outside any work tree: not applied
    write(root / "loose.md", "loose quillword\n")
    project = root / "project"
    (project / ".git").mkdir(parents=True)
    write(project / "kept.md", "kept quillword\n")
    write(project / "sub" / ".gitignore", "draft.md\n")  # deep in the work tree: applied
    write(project / "sub" / "draft.md", "draft quillword\n")
    write(project / "sub" / "final.md", "final quillword\n")
    await d.start()
    async with d.client() as c:
        await until_paths(c, "quillword", ["loose.md", "project/kept.md", "project/sub/final.md"])
        why = await c.why("project/sub/draft.md")
        assert why.reason == f'ignored: pattern "draft.md" in {project}/sub/.gitignore line 1'


async def test_a_git_directory_made_later_takes_effect_at_the_next_scan(
    daemon: Daemon,
) -> None:
    root = daemon.root
    write(root / ".gitignore", "a.md\n")
    write(root / "a.md", "alpha plumword\n")
    write(root / "b.md", "bravo plumword\n")
    async with daemon.client() as c:
        await until_paths(c, "plumword", ["a.md", "b.md"])
        (root / ".git").mkdir()  # git init: its events are not routed, the scan sees it
        await daemon.refresh()
        await until_paths(c, "plumword", ["b.md"])


async def test_kbignore_applies_without_git(make_daemon: MakeDaemon) -> None:
    d = make_daemon()
    no_git_above(d.root)
    write(d.root / ".gitignore", "*.md\n")  # not applied: no work tree
    write(d.root / "notes" / ".kbignore", "private.md\n")
    write(d.root / "notes" / "private.md", "private figword\n")
    write(d.root / "notes" / "public.md", "public figword\n")
    await d.start()
    async with d.client() as c:
        await until_paths(c, "figword", ["notes/public.md"])
        why = await c.why("notes/private.md")
        assert why.reason == f'ignored: pattern "private.md" in {d.root}/notes/.kbignore line 1'


async def test_a_root_whose_rules_skip_everything_warns_with_the_rule(
    make_daemon: MakeDaemon,
) -> None:
    d = make_daemon()
    kbignore = write(d.root / ".kbignore", "# everything, by mistake\n*\n")
    for n in range(12):
        write(d.root / f"note{n}.md", f"note {n} pearword\n")
    write(d.root / "sub" / "deep.md", "deep pearword\n")
    await d.start()
    rule = f'pattern "*" in {kbignore} line 2'
    async with d.client() as c:
        status = await c.status()
        assert status.indexed_files == 0
        warning = status.roots[0].warning
        # 12 notes and sub/ by the rule; the .kbignore itself by its (lacking) extension.
        assert warning == (
            "ignore rules skipped 14 files and directories and kept 0 files in the last "
            f"scan; 13 by {rule}"
        )
        assert results.status(status)[0]["roots"][0]["warning"] == warning  # MCP
        assert f"Warning: {warning}" in results.status(status)[1]
    shown = kbctl(d, "status")
    assert f"WARNING: {warning}" in shown.stdout
    assert json.loads(kbctl(d, "status", "--json").stdout)["roots"][0]["warning"] == warning
    doctor = kbctl(d, "doctor")
    assert f"warn  root {d.root}: {warning}" in doctor.stdout

    # Fixed, the next scan takes the warning back.
    kbignore.write_text("sub/\n")
    await d.refresh()
    async with d.client() as c:
        status = await c.status()
        assert status.indexed_files == 12 and status.roots[0].warning == ""
    assert "WARNING" not in kbctl(d, "status").stdout
    assert str(kbignore) not in kbctl(d, "doctor").stdout
