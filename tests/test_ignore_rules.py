"""Ignore rules (daemon/indexing/ignore.py) over real directory trees, through the scanner's walk
and through ``explain``, the answer ``kbctl why`` gives."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from conftest import write
from grep_helpers import needs_rg
from ignore_trees import build_worlds, no_git_above, rg_listing
from kbindex.daemon.indexing.ignore import IgnoreRules
from kbindex.daemon.indexing.scanner import Walk, walk
from kbindex.daemon.settings import RootOptions


def rules(root: Path, **options: tuple[str, ...]) -> IgnoreRules:
    return IgnoreRules(
        included_extensions=frozenset({".md", ".txt"}),
        excluded_extensions=frozenset(),
        exclude_globs=options.pop("globs", ()),
        root_options=[RootOptions(path=root, **options)],  # type: ignore[arg-type]
    )


def listed(result: Walk) -> set[str]:
    """The paths a walk listed."""
    return {s[0] for s in result.stamps}


def walked(root: Path, r: IgnoreRules, start: Path | None = None) -> list[str]:
    result = walk(root, start or root, r)
    return sorted(s[0][len(result.root) + 1 :] for s in result.stamps)


def test_nested_gitignore_with_negation_and_kbignore_precedence(tmp_path: Path) -> None:
    root = tmp_path
    (root / ".git").mkdir()  # .gitignore applies in a git work tree
    write(root / ".gitignore", "# comment\n\n*.txt\nbuild/\n")
    write(root / "keep.md", "x")
    write(root / "drop.txt", "x")
    write(root / "build" / "out.md", "x")
    write(root / "docs" / ".gitignore", "!important.txt\n")
    write(root / "docs" / "important.txt", "x")
    write(root / "docs" / "other.txt", "x")
    write(root / "docs" / "secret.md", "x")
    write(root / "docs" / ".kbignore", "secret.md\n")
    write(root / "docs" / "deep" / "important.txt", "x")
    r = rules(root)
    assert walked(root, r) == [
        "docs/deep/important.txt",  # the negation in docs/.gitignore applies below it too
        "docs/important.txt",
        "keep.md",
    ]
    assert r.explain(str(root), str(root / "drop.txt")) == (
        f'pattern "*.txt" in {root}/.gitignore line 3'
    )
    assert r.explain(str(root), str(root / "build" / "out.md")) == (
        f'pattern "build/" in {root}/.gitignore line 4'
    )
    assert r.explain(str(root), str(root / "docs" / "secret.md")) == (
        f'pattern "secret.md" in {root}/docs/.kbignore line 1'
    )
    assert r.explain(str(root), str(root / "docs" / "important.txt")) is None


def test_config_excludes_cannot_be_negated_and_include_restricts(tmp_path: Path) -> None:
    root = tmp_path
    (root / ".git").mkdir()  # .gitignore applies in a git work tree
    write(root / ".gitignore", "!*.md\n")
    write(root / "drafts" / "a.md", "x")
    write(root / "notes" / "b.md", "x")
    write(root / "notes" / "c.txt", "x")
    write(root / "d.md", "x")
    r = rules(root, globs=("drafts/",), include=("notes/",))
    assert walked(root, r) == ["notes/b.md", "notes/c.txt"]
    assert r.explain(str(root), str(root / "drafts" / "a.md")) == (
        'pattern "drafts/" in exclude_globs in the config'
    )
    assert "include patterns" in (r.explain(str(root), str(root / "d.md")) or "")
    r2 = rules(root, exclude=("*.txt",))
    assert r2.explain(str(root), str(root / "notes" / "c.txt")) == (
        f'pattern "*.txt" in [root."{root}"] exclude in the config'
    )


def test_edited_gitignore_takes_effect_at_the_next_walk(tmp_path: Path) -> None:
    root = tmp_path
    (root / ".git").mkdir()  # .gitignore applies in a git work tree
    write(root / "a.md", "x")
    write(root / "b.md", "x")
    r = rules(root)
    assert walked(root, r) == ["a.md", "b.md"]
    ignore = write(root / ".gitignore", "a.md\n")
    assert walked(root, r) == ["b.md"]
    ignore.write_text("b.md\n")  # same size: the cache key includes mtime/ctime/inode
    assert walked(root, r) == ["a.md"]
    ignore.unlink()
    assert walked(root, r) == ["a.md", "b.md"]


def test_a_scope_inside_an_ignored_directory_yields_nothing(tmp_path: Path) -> None:
    """Refreshing such a scope then removes what the index held there."""
    root = tmp_path
    (root / ".git").mkdir()  # .gitignore applies in a git work tree
    write(root / ".gitignore", "private/\n")
    write(root / "private" / "sub" / "x.md", "x")
    write(root / "node_modules" / "pkg" / "y.md", "x")
    r = rules(root)
    for start in (root / "private" / "sub", root / "private" / "sub" / "x.md"):
        result = walk(root, start, r)
        assert result.stamps == set()
        assert result.ignored.startswith('pattern "private/"')
    assert walk(root, root / "node_modules" / "pkg", r).ignored == "built-in ignore: node_modules/"


def test_quick_ignored_only_looks_below_the_root(tmp_path: Path) -> None:
    root = tmp_path / ".cache" / "notes"  # a root may itself live under an ignored name
    r = IgnoreRules(
        included_extensions=None,
        excluded_extensions=frozenset(),
        private_dirs=(tmp_path, root / "state"),  # a socket directory above the root
    )
    assert r.quick_ignored(str(root), str(root / "state" / "index.sqlite3"), is_dir=False)
    assert not r.quick_ignored(str(root), str(root / "a.md"), is_dir=False)
    assert r.quick_ignored(str(root), str(root / ".git" / "index"), is_dir=False)
    assert r.quick_ignored(str(root), str(root / "node_modules"), is_dir=True)
    assert not r.quick_ignored(str(root), str(root / "node_modules"), is_dir=False)


def test_bad_patterns_are_skipped_not_fatal(tmp_path: Path) -> None:
    root = tmp_path
    (root / ".git").mkdir()  # .gitignore applies in a git work tree
    write(root / ".gitignore", "!\n\\\n*.txt\n")
    write(root / "a.txt", "x")
    write(root / "b.md", "x")
    assert walked(root, rules(root)) == ["b.md"]


def test_ignore_and_rgignore_apply_without_git(tmp_path: Path) -> None:
    root = tmp_path / "root"
    no_git_above(root.parent)
    write(root / ".gitignore", "*.md\n")  # outside a work tree: not applied
    write(root / ".ignore", "*.txt\nlogs/\n")
    write(root / ".rgignore", "# kept after all\n!keep.txt\n")
    write(root / "a.md", "x")
    write(root / "drop.txt", "x")
    write(root / "keep.txt", "x")
    write(root / "logs" / "today.md", "x")
    r = rules(root)
    assert walked(root, r) == ["a.md", "keep.txt"]
    assert r.explain(str(root), str(root / "drop.txt")) == (
        f'pattern "*.txt" in {root}/.ignore line 1'
    )
    assert r.explain(str(root), str(root / "logs" / "today.md")) == (
        f'pattern "logs/" in {root}/.ignore line 2'
    )
    assert r.explain(str(root), str(root / "keep.txt")) is None


def test_rgignore_over_ignore_over_gitignore_whatever_the_depth(tmp_path: Path) -> None:
    """ripgrep's precedence (GUIDE.md "Automatic filtering", crates/ignore/src/dir.rs
    ``matched_ignore``): a kind of file beats the kinds below it, at any depth; within
    one kind, the deepest file with a matching pattern decides. .kbignore is above all."""
    root = tmp_path
    (root / ".git").mkdir()
    write(root / ".gitignore", "build/\n*.txt\n")
    write(root / ".ignore", "!build/\n!notes.txt\n")  # re-includes what .gitignore drops
    write(root / "build" / "out.md", "x")
    write(root / "build" / "trace.txt", "x")  # "!build/" is about build/, not its files
    write(root / "docs" / ".gitignore", "*.txt\n")
    write(root / "docs" / "notes.txt", "x")  # the root's .ignore beats the deeper .gitignore
    write(root / "docs" / "other.txt", "x")
    write(root / "docs" / ".ignore", "x.md\ny.md\n")
    write(root / "docs" / ".rgignore", "!x.md\nz.md\n")
    write(root / "docs" / "x.md", "x")  # .rgignore beats .ignore in one directory
    write(root / "docs" / "y.md", "x")
    write(root / "docs" / "z.md", "x")
    write(root / ".kbignore", "!z.md\n")  # .kbignore beats a deeper .rgignore
    write(root / "docs" / "deep" / ".ignore", "!y.md\n")
    write(root / "docs" / "deep" / "y.md", "x")  # the deepest .ignore decides
    r = rules(root)
    assert walked(root, r) == [
        "build/out.md",
        "docs/deep/y.md",
        "docs/notes.txt",
        "docs/x.md",
        "docs/z.md",
    ]
    assert r.explain(str(root), str(root / "docs" / "other.txt")) == (
        f'pattern "*.txt" in {root}/docs/.gitignore line 1'
    )
    assert r.explain(str(root), str(root / "docs" / "y.md")) == (
        f'pattern "y.md" in {root}/docs/.ignore line 2'
    )
    assert r.explain(str(root), str(root / "build" / "trace.txt")) == (
        f'pattern "*.txt" in {root}/.gitignore line 2'
    )


def test_a_nested_repository_stops_the_outer_gitignores(tmp_path: Path) -> None:
    """As git (a nested repository is a work tree of its own) and ripgrep (dir.rs test
    ``stops_at_git_dir``): the outer .gitignore files stop at the inner repository's
    top, .ignore files go on; a .gitignore in no work tree is never applied."""
    top = tmp_path / "top"
    no_git_above(top)
    write(top / ".gitignore", "*.md\n")  # no work tree here: never applied
    write(top / "loose" / ".gitignore", "*.md\n")
    write(top / "loose" / "a.md", "x")
    outer = top / "outer"
    (outer / ".git").mkdir(parents=True)
    write(outer / ".gitignore", "*.txt\nvendor/\n")
    write(outer / ".ignore", "secret.md\n")
    write(outer / "a.txt", "x")
    write(outer / "b.md", "x")
    inner = outer / "lib" / "inner"
    write(inner / ".git", "gitdir: ../../.git/modules/inner\n")  # a submodule's .git file
    write(inner / ".gitignore", "drop.md\n")
    write(inner / "a.txt", "x")
    write(inner / "vendor" / "v.md", "x")
    write(inner / "drop.md", "x")
    write(inner / "secret.md", "x")
    write(inner / "deep" / "c.txt", "x")
    r = rules(top)
    assert walked(top, r) == [
        "loose/a.md",
        "outer/b.md",
        "outer/lib/inner/a.txt",
        "outer/lib/inner/deep/c.txt",
        "outer/lib/inner/vendor/v.md",
    ]
    assert r.explain(str(top), str(inner / "secret.md")) == (
        f'pattern "secret.md" in {outer}/.ignore line 1'
    )
    assert r.explain(str(top), str(inner / "drop.md")) == (
        f'pattern "drop.md" in {inner}/.gitignore line 1'
    )
    assert r.explain(str(top), str(outer / "a.txt")) == (
        f'pattern "*.txt" in {outer}/.gitignore line 1'
    )
    # A walk of one scope (what an event brings) answers as the walk of the root.
    assert sorted(listed(walk(top, inner, r))) == [
        str(inner / "a.txt"),
        str(inner / "deep" / "c.txt"),
        str(inner / "vendor" / "v.md"),
    ]
    assert listed(walk(top, inner / "deep" / "c.txt", r))
    # A root inside the nested repository: the outer .git above it makes it a work tree.
    assert walked(inner, rules(inner)) == ["a.txt", "deep/c.txt", "secret.md", "vendor/v.md"]


def test_edited_ignore_and_rgignore_take_effect_at_the_next_walk(tmp_path: Path) -> None:
    root = tmp_path
    write(root / "a.md", "x")
    write(root / "b.md", "x")
    r = rules(root)
    ignore = write(root / ".ignore", "a.md\n")
    assert walked(root, r) == ["b.md"]
    rgignore = write(root / ".rgignore", "!a.md\nb.md\n")
    assert walked(root, r) == ["a.md"]
    rgignore.unlink()
    ignore.write_text("b.md\n")
    assert walked(root, r) == ["a.md"]


@pytest.mark.parametrize("seed", range(6))
def test_every_scope_answers_as_the_walk_of_the_root(tmp_path: Path, seed: int) -> None:
    """The event path (a walk of one file or directory, its chain from ``context``) and
    ``kbctl why`` (``explain``) give the scan's answer for every path of a generated tree."""
    root = tmp_path / "root"
    build_worlds(root, seed, 8)
    r = IgnoreRules(included_extensions=None, excluded_extensions=frozenset())
    whole = listed(walk(root, root, r))
    for directory, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if d != ".git"]
        for name in names:
            path = os.path.join(directory, name)
            alone = listed(walk(root, Path(path), r))
            assert alone == ({path} & whole), path
            assert (r.explain(str(root), path) is None) == (path in whole), path
        below = {p for p in whole if p.startswith(directory + os.sep)}
        assert listed(walk(root, Path(directory), r)) == below, directory


@pytest.mark.slow  # an rg process per tree
@needs_rg
@pytest.mark.parametrize("seed", range(10))
def test_the_walk_lists_what_ripgrep_lists(tmp_path: Path, seed: int) -> None:
    root = tmp_path / "root"
    no_git_above(root.parent)
    build_worlds(root, seed, 10)
    r = IgnoreRules(included_extensions=None, excluded_extensions=frozenset())
    assert sorted(listed(walk(root, root, r))) == rg_listing(root)
