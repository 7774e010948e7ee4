"""A search reads in one transaction, and ends it however the search ends: a read
transaction left open on a pooled connection would keep the writer's log from ever being
copied back (it would grow without end)."""

from __future__ import annotations

import pytest
from conftest import note
from kbindex.daemon.backends.sqlite import searcher
from kbindex.daemon.backends.sqlite.store import Store
from kbindex.daemon.index.values import Batch
from kbindex.daemon.searching.query import BadQuery, to_plan


def test_a_search_leaves_no_read_transaction_open_even_when_it_fails(store: Store) -> None:
    # A search reads in one transaction; one left open on a pooled connection would
    # keep the writer's log from ever being copied back (it would grow without end).
    store.apply(Batch([note("a.md", "alpha beta gamma delta")]))
    with store.reader() as conn:
        searcher.search(conn, to_plan("alpha beta gamma delta", "any", limit=10))
        assert not conn.in_transaction
        with pytest.raises(BadQuery):
            searcher.search(conn, to_plan("alpha AND AND", "raw", limit=10))
        assert not conn.in_transaction


def test_a_search_past_its_deadline_fails_clearly_and_leaves_its_connection_usable(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The read transaction must end however the search does. (A deadline of zero
    # stands in for a pathological query, which this index is too small to hold.)
    store.apply(Batch([note(f"{i}.md", f"alpha beta {i}") for i in range(2000)]))
    with store.reader() as conn:
        monkeypatch.setattr(searcher, "QUERY_DEADLINE_SECONDS", 0.0)
        with pytest.raises(BadQuery, match="took too long"):
            searcher.search(conn, to_plan("alpha beta gamma delta", "any", limit=10))
        assert not conn.in_transaction
        monkeypatch.undo()
        result = searcher.search(conn, to_plan("alpha beta gamma delta", "any", limit=10))
        assert result.total == 2000
