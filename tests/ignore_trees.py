"""Generated trees of .gitignore, .ignore and .rgignore files and nested git repositories,
and what ripgrep lists in them: the oracle for kbindex's ignore rules.

``rg_listing`` runs ``rg --files`` with the flags that make ripgrep honour ignore files
the way kbindex does:

- ``--hidden``: kbindex indexes dotfiles (it skips only its built-in directories, and
  the trees hold none of those names);
- ``--no-ignore-parent``: kbindex reads no pattern file above a root (it only looks
  for a ``.git`` there, as ripgrep still does with this flag);
- ``--no-ignore-global``, ``--no-ignore-exclude``: kbindex reads neither git's
  ``core.excludesFile`` nor ``.git/info/exclude``;
- ``--no-config``: no ``RIPGREP_CONFIG_PATH`` of the machine changes the answer.

``.gitignore`` keeps ripgrep's default (``--no-require-git`` not given): it applies
inside a git work tree only. ripgrep has no flag for another file name, so the trees
hold no ``.kbignore`` (the unit tests cover it).
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
from pathlib import Path

from conftest import write

RG = shutil.which("rg")
RG_FLAGS = (
    "--files",
    "--null",
    "--hidden",
    "--no-ignore-parent",
    "--no-ignore-global",
    "--no-ignore-exclude",
    "--no-config",
)
FILES = ("a.md", "b.md", "c.txt", "note.txt", ".hidden.md")
DIRS = ("d1", "d2", "src")
PATTERNS = (
    "*.txt",
    "!*.txt",
    "a.md",
    "!a.md",
    "/b.md",
    "!b.md",
    "*.md",
    "!note.txt",
    "d1/",
    "!d1/",
    "/d2",
    "src",
    "d2/*.md",
    "**/c.txt",
    ".hidden.md",
    "# a comment",
)
PATTERN_FILES = (".gitignore", ".ignore", ".rgignore")


def build(directory: Path, rng: random.Random, depth: int = 0) -> None:
    """A random directory: some files, some pattern files, maybe a ``.git`` (a directory,
    or a file as in a linked worktree or a submodule), and up to two subdirectories."""
    for name in rng.sample(FILES, rng.randint(1, len(FILES))):
        write(directory / name, f"{directory.name} {name}\n")
    for name in PATTERN_FILES:
        if rng.random() < 0.4:
            write(directory / name, "\n".join(rng.sample(PATTERNS, rng.randint(1, 3))) + "\n")
    if rng.random() < 0.3:
        if rng.random() < 0.7:
            (directory / ".git").mkdir()
        else:
            write(directory / ".git", "gitdir: ../elsewhere/.git/worktrees/x\n")
    if depth < 3:
        for name in rng.sample(DIRS, rng.randint(0, 2)):
            build(directory / name, rng, depth + 1)


def build_worlds(root: Path, seed: int, count: int) -> None:
    """``count`` independent trees ``w0``, ``w1``, ... under ``root`` (which has no
    ``.git``, nor any above it: see ``no_git_above``)."""
    rng = random.Random(seed)
    for n in range(count):
        build(root / f"w{n}", rng)


def no_git_above(path: Path) -> None:
    """The tests' premise: the temporary directory is not inside a git work tree."""
    for directory in (path, *path.parents):
        assert not os.path.lexists(directory / ".git"), f"{directory} holds a .git"


def rg_listing(root: Path) -> list[str]:
    """The files ripgrep lists under ``root`` (absolute, sorted)."""
    assert RG is not None
    done = subprocess.run([RG, *RG_FLAGS, str(root)], capture_output=True, timeout=60)
    assert done.returncode in (0, 1), done.stderr.decode(errors="replace")
    return sorted(os.fsdecode(p) for p in done.stdout.split(b"\0") if p)
