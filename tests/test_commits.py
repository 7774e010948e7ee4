"""Committed writes are announced (``index.Commits``): a real index written by a real
indexer over real files wakes whoever waits, at the commit, with no polling."""

from __future__ import annotations

import threading
from pathlib import Path

import anyio
import pytest
from conftest import write
from kbindex.daemon.health import Progress
from kbindex.daemon.index.commits import Commits
from kbindex.daemon.indexing.indexer import Indexer

pytestmark = pytest.mark.anyio


@pytest.fixture
def indexer(indexer: Indexer) -> Indexer:
    """conftest's, over a root that holds one note."""
    write(indexer.roots.paths[0] / "a.md", "alpha\n")
    return indexer


class Waiter:
    """A task waiting for a commit, and the count it woke with."""

    def __init__(self, commits: Commits) -> None:
        self.commits = commits
        self.since = commits.count
        self.woke = anyio.Event()
        self.count: int | None = None

    async def run(self) -> None:
        self.count = await self.commits.changed(self.since)
        self.woke.set()


async def test_a_refresh_that_writes_wakes_a_waiter_at_its_commit(indexer: Indexer) -> None:
    await indexer.refresh()
    waiter = Waiter(indexer.commits)
    async with anyio.create_task_group() as tg:
        tg.start_soon(waiter.run)
        await anyio.wait_all_tasks_blocked()
        assert not waiter.woke.is_set()  # nothing committed yet: it waits
        write(indexer.roots.paths[0] / "b.md", "beta\n")
        await indexer.refresh()
        # Woken by the commit itself: once the loop runs what is ready, with no timer.
        await anyio.wait_all_tasks_blocked()
        assert waiter.woke.is_set()
    assert waiter.count is not None and waiter.count > waiter.since
    assert indexer.index.stats().counts.indexed == 2


async def test_a_refresh_that_finds_nothing_changed_announces_nothing(indexer: Indexer) -> None:
    await indexer.refresh()
    before = indexer.commits.count
    await indexer.refresh()
    assert indexer.commits.count == before  # status keeps its counts; no pass of embedding


async def test_a_removed_file_and_a_moved_one_are_announced(indexer: Indexer) -> None:
    await indexer.refresh()
    root = indexer.roots.paths[0]
    before = indexer.commits.count
    (root / "a.md").rename(root / "c.md")
    await indexer.move(
        indexer.roots.resolve(str(root / "a.md")), indexer.roots.resolve(str(root / "c.md"))
    )
    assert indexer.commits.count > before
    moved = indexer.commits.count
    (root / "c.md").unlink()
    await indexer.refresh()
    assert indexer.commits.count > moved
    assert indexer.index.stats().counts.indexed == 0


async def test_a_commit_in_another_thread_wakes_a_waiter_in_the_loop() -> None:
    """The writer commits in a worker thread: the wake-up crosses to the event loop."""
    commits = Commits()
    waiter = Waiter(commits)
    async with anyio.create_task_group() as tg:
        tg.start_soon(waiter.run)
        await anyio.wait_all_tasks_blocked()
        thread = threading.Thread(target=commits.committed)
        thread.start()
        with anyio.fail_after(5):
            await waiter.woke.wait()
        await anyio.to_thread.run_sync(thread.join)
    assert waiter.count == 1 == commits.count


async def test_a_commit_before_the_wait_is_not_missed() -> None:
    commits = Commits()
    since = commits.count
    commits.committed()
    with anyio.fail_after(0):
        assert await commits.changed(since) == 1


async def test_a_refresh_ends_after_its_batch_once_the_daemon_stops(
    indexer: Indexer, tmp_path: Path
) -> None:
    # What a SIGTERM does to a refresh a client waits for: the batch being written is
    # committed, the rest is left for the next start, and the answer says so.
    root = tmp_path / "root"
    for i in range(3000):
        write(root / f"d{i % 30}" / f"f{i}.md", f"text number {i} " * 20)

    async def stop_once_written(progress: Progress) -> None:
        if progress.phase == "indexing" and progress.done:
            indexer.stop()

    outcome = await indexer.refresh(full=True, on_progress=stop_once_written)
    assert outcome.interrupted
    assert 0 < outcome.changed < 3001
    assert indexer.index.stats().counts.indexed == outcome.changed
