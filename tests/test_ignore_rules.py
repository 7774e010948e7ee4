"""Ignore rules (daemon/indexing/ignore.py) over real directory trees, through the scanner's walk
and through ``explain``, the answer ``kbctl why`` gives."""

from __future__ import annotations

from pathlib import Path

from conftest import write
from kbindex.daemon.indexing.ignore import IgnoreRules
from kbindex.daemon.indexing.scanner import walk
from kbindex.daemon.settings import RootOptions


def rules(root: Path, **options: tuple[str, ...]) -> IgnoreRules:
    return IgnoreRules(
        included_extensions=frozenset({".md", ".txt"}),
        excluded_extensions=frozenset(),
        exclude_globs=options.pop("globs", ()),
        root_options=[RootOptions(path=root, **options)],  # type: ignore[arg-type]
    )


def walked(root: Path, r: IgnoreRules, start: Path | None = None) -> list[str]:
    result = walk(root, start or root, r)
    return sorted(s.relpath for s in result.files.values())


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
        assert result.files == {}
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
