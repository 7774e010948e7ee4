"""grep is never staler than search: it sees every write, edit, rename and delete as
soon as search does, and a change still waiting in the watcher's queue is already
visible to grep (pending paths are always read, whatever the index says).

Changes are made to real files and reach the daemon through its real watcher.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from conftest import Daemon, wait_for, write
from grep_helpers import Case, grep, needs_rg

pytestmark = [pytest.mark.slow, pytest.mark.anyio, needs_rg]


async def _grep_files(d: Daemon, pattern: str) -> list[str]:
    reply = await grep(d, Case(pattern))
    return sorted({os.path.relpath(ln.path, d.root) for ln in reply.lines})


async def _search_files(d: Daemon, word: str) -> list[str]:
    return sorted(await d.search_paths(word))


async def _once_search_sees(d: Daemon, word: str, files: list[str]) -> None:
    """Wait until search answers ``files`` for ``word``; grep must answer the same at
    once."""

    async def searched() -> bool:
        return await _search_files(d, word) == files

    await wait_for(searched)
    assert await _grep_files(d, word) == files


@pytest.mark.backends
async def test_grep_sees_writes_edits_renames_and_deletes_when_search_does(
    daemon: Daemon,
) -> None:
    root = daemon.root
    write(root / "notes" / "a.md", "the first zebrafish\n")
    await _once_search_sees(daemon, "zebrafish", ["notes/a.md"])

    write(root / "notes" / "a.md", "the first axolotl\n")
    await _once_search_sees(daemon, "axolotl", ["notes/a.md"])
    assert await _grep_files(daemon, "zebrafish") == []

    write(root / "b.md", "another zebrafish\n")
    await _once_search_sees(daemon, "zebrafish", ["b.md"])

    os.rename(root / "notes" / "a.md", root / "notes" / "c.md")
    await _once_search_sees(daemon, "axolotl", ["notes/c.md"])

    os.rename(root / "notes", root / "moved notes")
    await _once_search_sees(daemon, "axolotl", ["moved notes/c.md"])

    (root / "b.md").unlink()
    await _once_search_sees(daemon, "zebrafish", [])

    (root / "moved notes" / "c.md").unlink()
    await _once_search_sees(daemon, "axolotl", [])


async def _heat(d: Daemon, edited: Path, created: Path) -> None:
    """Make both paths hot: each change to them, read in quick succession, makes the
    watcher wait longer before the next read (1, 2, 4 s: ``changes.backoff``). Why:
    it holds the next change in the queue long enough to grep it there."""
    for i in range(5):
        write(edited, f"version{i} of the edited file\n")
        if i % 2:
            write(created, f"made{i}\n")
        elif i:
            created.unlink()

        async def indexed(i: int = i) -> bool:
            made = await _search_files(d, f"made{i if i % 2 else i - 1}")
            return await _search_files(d, f"version{i}") == [edited.name] and (
                made == ([created.name] if i % 2 else []) or i == 0
            )

        await wait_for(indexed)


@pytest.mark.backends
async def test_a_change_still_queued_is_already_visible_to_grep(daemon: Daemon) -> None:
    edited, created = daemon.root / "edited.md", daemon.root / "created.md"
    await _heat(daemon, edited, created)
    # The next changes to both paths now wait two seconds or more in the queue.
    write(edited, "version9 of the edited file\n")
    write(created, "made9\n")

    async def grep_sees_both() -> bool:
        return await _grep_files(daemon, "version9|made9") == ["created.md", "edited.md"]

    await wait_for(grep_sees_both)
    # A pattern with no trigram reads every file (on SQLite ripgrep walks the root, and
    # reads the files with a pending change by name): the same two.
    assert await _grep_files(daemon, "9") == ["created.md", "edited.md"]
    assert await _search_files(daemon, "version9") == []
    assert await _search_files(daemon, "made9") == []
    assert await _grep_files(daemon, "version4") == []  # the indexed text is gone too
    assert await _search_files(daemon, "version4") == ["edited.md"]

    edited.unlink()
    created.unlink()

    async def grep_sees_none() -> bool:
        return await _grep_files(daemon, "version9|made9") == []

    await wait_for(grep_sees_none)
    assert await _grep_files(daemon, "9") == []
    assert await _search_files(daemon, "version4") == ["edited.md"]
