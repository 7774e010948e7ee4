"""The change queue (daemon/watching/changes.py) on a fake clock: debounce, coalescing, backoff,
the burst cap and move ordering, without threads or files."""

from __future__ import annotations

import itertools

import pytest
from kbindex.daemon.watching import changes as changes_mod
from kbindex.daemon.watching.changes import Changes

ROOT = "/r"


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


def test_a_path_written_many_times_is_taken_once_after_it_goes_quiet(clock: Clock) -> None:
    q = Changes(clock=clock)
    for _ in range(50):
        q.add(ROOT, "/r/a.md")
        clock.now += 0.01
    assert not q.take(), "still changing: not due yet"
    clock.now += changes_mod.QUIET_SECONDS
    batch = q.take()
    assert [p for _, p, _ in batch.paths] == ["/r/a.md"]
    assert batch.paths[0][2] == 100.0, "lag is measured from the first event"
    assert q.depth() == 0 and not q.take()


def test_a_path_that_never_goes_quiet_is_taken_within_the_max_delay(clock: Clock) -> None:
    q = Changes(clock=clock)
    start = clock.now
    taken_at: list[float] = []
    while clock.now - start < 40:
        q.add(ROOT, "/r/log.txt")
        if q.take():
            taken_at.append(clock.now - start)
        clock.now += 0.05
    assert taken_at[0] == pytest.approx(changes_mod.MAX_DELAY_SECONDS, abs=0.06)
    gaps = [b - a for a, b in itertools.pairwise(taken_at)]
    assert gaps == sorted(gaps), "a hot path backs off: 1, 2, 4 ... seconds"
    assert max(gaps) <= changes_mod.BACKOFF_MAX_SECONDS + 0.1
    assert len(taken_at) < 10, "40 s of continuous writes cost a handful of reads"


def test_events_under_a_pending_directory_are_absorbed(clock: Clock) -> None:
    q = Changes(clock=clock)
    q.add(ROOT, "/r/new")
    for i in range(100):
        q.add(ROOT, f"/r/new/sub/{i}.md")
    assert q.depth() == 1
    clock.now += 1
    assert [p for _, p, _ in q.take().paths] == ["/r/new"]


def test_a_burst_over_the_cap_collapses_into_one_root_rescan(clock: Clock) -> None:
    q = Changes(root_cap=100, clock=clock)
    q.add("/other", "/other/x.md")
    for i in range(1000):
        q.add(ROOT, f"/r/{i}.md")
    assert q.depth() == 2, "one rescan of /r, plus /other's path: memory stays bounded"
    assert q.depth_of(ROOT) == 1
    clock.now += 1
    batch = q.take()
    assert batch.rescans == [(ROOT, 100.0)]
    assert [p for _, p, _ in batch.paths] == ["/other/x.md"]


def test_moves_are_due_at_once_in_order_and_both_ends_are_refreshed(clock: Clock) -> None:
    q = Changes(clock=clock)
    q.add_move(ROOT, "/r/a", ROOT, "/r/b", is_dir=True)
    q.add_move(ROOT, "/r/b", ROOT, "/r/c", is_dir=True)
    batch = q.take()
    assert [(m.src, m.dest) for m in batch.moves] == [("/r/a", "/r/b"), ("/r/b", "/r/c")]
    assert not batch.paths
    clock.now += 1
    assert sorted(p for _, p, _ in q.take().paths) == ["/r/a", "/r/b", "/r/c"]


def test_take_is_bounded_and_reports_the_next_due_time(clock: Clock) -> None:
    q = Changes(clock=clock)
    for i in range(25):
        q.add(ROOT, f"/r/{i}.md")
    clock.now += 1
    assert len(q.take(limit=10).paths) == 10
    assert len(q.take(limit=10).paths) == 10
    assert len(q.take(limit=10).paths) == 5
    q.add(ROOT, "/r/late.md")
    batch = q.take()
    assert not batch and batch.next_due == pytest.approx(clock.now + changes_mod.QUIET_SECONDS)


def test_pending_questions_and_forgetting_a_root(clock: Clock) -> None:
    q = Changes(clock=clock)
    q.add(ROOT, "/r/dir")
    assert q.is_pending(ROOT, "/r/dir/file.md")
    assert not q.is_pending(ROOT, "/r/other.md")
    q.rescan(ROOT, urgent=False)
    assert q.is_pending(ROOT, "/r/other.md")
    q.forget_root(ROOT)
    assert q.depth() == 0


def test_the_backoff_memory_stays_bounded(clock: Clock) -> None:
    q = Changes(clock=clock)
    for i in range(3 * changes_mod.RECENT_CAP):
        q.add(ROOT, f"/r/{i}.md")
        clock.now += 0.2
        q.take()
    assert len(q._recent) <= changes_mod.RECENT_CAP


def test_a_taken_batch_stays_pending_for_grep_until_it_is_applied(clock: Clock) -> None:
    """grep reads every pending path whatever the index says; a path taken for indexing
    but not yet written is in neither, so it stays pending until ``applied``."""
    q = Changes(clock=clock)
    q.add("/r", "/r/a.md")
    q.add_move("/r", "/r/old.md", "/r", "/r/new.md", is_dir=False)
    clock.now += 10
    batch = q.take()
    assert batch.paths and batch.moves
    assert set(q.pending()) == {("/r", "/r/a.md"), ("/r", "/r/old.md"), ("/r", "/r/new.md")}
    q.applied()
    assert q.pending() == []
