"""``Health`` has one owner: the indexer's reader threads, watchdog's observer threads
and the event loop send it events, and what status reads of it is whole."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterator

import pytest
from kbindex.daemon.health import (
    Applied,
    FileEvent,
    Health,
    Problem,
    RootRemoved,
    Watched,
)
from kbindex.daemon.serving import replies

THREADS = 4
EVENTS = 5000


@pytest.fixture
def busy_switching() -> Iterator[None]:
    """Threads switch after every few bytecodes, not every 5 ms: a read that is not safe
    against a writer in another thread fails here at once rather than once a week."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        yield
    finally:
        sys.setswitchinterval(before)


def in_threads(*work: Callable[[], None]) -> None:
    failures: list[BaseException] = []

    def run(fn: Callable[[], None]) -> None:
        try:
            fn()
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=run, args=(fn,)) for fn in work]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []


@pytest.mark.slow
def test_events_from_other_threads_are_all_seen_and_status_reads_stay_whole(
    busy_switching: None,
) -> None:
    """Problems recorded by reader threads while status lists the recent ones and the
    freshness of a search: before, the list was a deque appended to from the threads and
    iterated by status (``deque mutated during iteration``), and counts were ``+=``."""
    health = Health()
    health.record(Watched("/r", "live", ""))
    done = threading.Event()

    def reader_thread(n: int) -> Callable[[], None]:
        def record() -> None:
            for i in range(EVENTS):
                health.record(Problem(f"/r/{n}/{i}.md", "unreadable"))
                health.record(FileEvent("/r"))
                health.record(Applied(0.01))

        return record

    def status() -> None:
        while not done.is_set():
            replies.problems(health)
            replies.freshness(health)
            replies.root_status("/r", health.root("/r"), 0, 0)

    writers = [reader_thread(n) for n in range(THREADS)]

    def write_then_stop() -> None:
        try:
            in_threads(*writers)
        finally:
            done.set()

    in_threads(write_then_stop, status)
    assert health.errors_encountered == THREADS * EVENTS
    assert len(health.recent_errors) == 20
    assert health.lag().samples == min(THREADS * EVENTS, 4096)
    assert health.root("/r").last_event_at is not None
    assert health.last_event_at == health.root("/r").last_event_at


def test_an_event_for_a_root_removed_meanwhile_leaves_no_trace() -> None:
    """An observer thread's last event can arrive after its root was removed."""
    health = Health()
    health.record(Watched("/r", "live", ""))
    health.record(RootRemoved("/r"))
    thread = threading.Thread(target=health.record, args=(FileEvent("/r"),))
    thread.start()
    thread.join()
    assert health.watch_state() == ""
    assert health.last_event_at is None
    assert health.root("/r").last_event_at is None


def test_what_status_reads_cannot_change_health() -> None:
    health = Health()
    health.record(Watched("/r", "polling", "set to poll", 2.0))
    seen = health.root("/r")
    with pytest.raises(AttributeError):
        seen.watch = "live"  # type: ignore[misc]
    with pytest.raises(AttributeError):
        health.index_error = "x"  # type: ignore[misc]
    assert health.root("/r").watch == "polling"
    assert health.root("/elsewhere").watch == ""
    assert health.watch_state() == "polling"  # reading another root added nothing
