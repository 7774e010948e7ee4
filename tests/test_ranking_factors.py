"""A ranking with factors (kind boosts) ranks by bm25 times each document's factor, in
full: the SQLite searcher first looks among the best documents by bm25 alone and takes
that list only where a bound proves it is the whole ranking's (``_Query._bounded``).
The oracle here is independent of it: every match's bm25 from a ranking without
factors, times its kind's factor read from the files table, sorted."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import note, reading
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kbindex.daemon.backends.sqlite import searcher
from kbindex.daemon.backends.sqlite.store import Store
from kbindex.daemon.index.values import Batch
from kbindex.daemon.searching.query import to_plan

BOOSTS = (("changelog", 0.6), ("generated", 0.5), ("test", 0.9))
KINDS = ("code", "doc", "changelog", "generated", "test")


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    tmp = tmp_path_factory.mktemp("factors")
    s = Store(tmp / "index.sqlite3", reading(tmp))
    s.open()
    try:
        yield s
    finally:
        s.close()


Ranked = tuple[list[float], set[int]]
"""A ranking's scores, best first, and the documents that score better than its last
(those ties cannot move)."""


def _kept(pairs: list[tuple[int, float]]) -> Ranked:
    scores = [round(score, 9) for _, score in pairs]
    return scores, {i for i, score in pairs if scores and round(score, 9) > scores[-1]}


def _oracle(s: Store, query: str, limit: int, boosts: dict[str, float]) -> Ranked:
    with s.reader() as conn:
        plain = replace(to_plan(query, mode="any"), limit=100_000)
        ranked, _, _ = searcher.rank(conn, plain)
        kind = dict(conn.execute("SELECT id, kind FROM files").fetchall())
    scored = sorted(
        ((i, score * boosts.get(kind[i], 1.0)) for i, score in ranked), key=lambda p: -p[1]
    )
    return _kept(scored[:limit])


def _ranked(s: Store, query: str, limit: int, boosts: tuple[tuple[str, float], ...]) -> Ranked:
    with s.reader() as conn:
        plan = replace(to_plan(query, mode="any"), limit=limit, boosts=boosts)
        ranked, _, _ = searcher.rank(conn, plan)
    return _kept(ranked)


DOCS = st.lists(
    st.tuples(
        st.sampled_from(KINDS),
        st.lists(st.sampled_from(["ant", "bee", "cat", "dog", "eel"]), min_size=1, max_size=12).map(
            " ".join
        ),
    ),
    min_size=1,
    max_size=120,
)
"""Indexes of up to 120 documents of a few words, each of a kind."""
EXAMPLES = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def _fill(s: Store, docs: list[tuple[str, str]]) -> None:
    """The index holds ``docs`` (kind, text) alone."""
    s.apply(Batch([], [f"/r/d{i}.txt" for i in range(300)]))
    s.apply(Batch([note(f"d{i}.txt", text)._replace(kind=k) for i, (k, text) in enumerate(docs)]))


@EXAMPLES
@given(
    docs=DOCS,
    query=st.sampled_from(["ant", "bee", "eel"]),
    limit=st.sampled_from([1, 3, 10]),
)
def test_a_boosted_ranking_is_bm25_times_each_kinds_factor(
    store: Store, docs: list[tuple[str, str]], query: str, limit: int
) -> None:
    _fill(store, docs)
    assert _ranked(store, query, limit, BOOSTS) == _oracle(store, query, limit, dict(BOOSTS))


@EXAMPLES
@given(
    docs=DOCS,
    query=st.sampled_from(["bee cat", "dog eel ant", '"ant bee" cat']),
    limit=st.sampled_from([1, 3, 10]),
)
def test_the_bound_changes_no_list_of_several_words(
    store: Store, docs: list[tuple[str, str]], query: str, limit: int
) -> None:
    # Several words bring the ranking's own rules (common words left out, essential
    # words first): the list must be the one ranking every match with its factor gives.
    _fill(store, docs)
    bounded = _ranked(store, query, limit, BOOSTS)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(searcher._Query, "_bounded", lambda *_: None)
        assert bounded == _ranked(store, query, limit, BOOSTS)


def test_a_top_full_of_lowered_documents_is_ranked_in_full(store: Store) -> None:
    # The best 60 by bm25 are all changelogs (factor 0.6); code files a word longer
    # follow them by bm25 but lead once the factor counts: the window of the best by
    # bm25 alone cannot decide, and the whole ranking puts the code files first.
    docs = [("changelog", "ant ant ant")] * 60 + [("code", "ant ant ant bee")] * 40
    _fill(store, docs)
    for limit in (1, 3, 10):
        assert _ranked(store, "ant", limit, BOOSTS) == _oracle(store, "ant", limit, dict(BOOSTS))
    with store.reader() as conn:
        plan = replace(to_plan("ant", mode="any"), limit=10, boosts=BOOSTS)
        best = [i for i, _ in searcher.rank(conn, plan)[0]]
        kinds = dict(conn.execute("SELECT id, kind FROM files").fetchall())
    assert {kinds[i] for i in best} == {"code"}
    # ...and with no factor the ranking is bm25's own.
    assert _ranked(store, "ant", 10, ()) == _oracle(store, "ant", 10, {})


def test_a_window_that_decides_gives_the_whole_rankings_list(store: Store) -> None:
    docs = [("code", "ant " + "x " * n) for n in range(150)] + [("changelog", "ant")] * 5
    _fill(store, docs)
    for limit in (1, 3, 10):
        assert _ranked(store, "ant", limit, BOOSTS) == _oracle(store, "ant", limit, dict(BOOSTS))


def test_a_small_index_path_fits_the_window(tmp_path: Path) -> None:
    s = Store(tmp_path / "index.sqlite3", reading(tmp_path))
    s.open()
    try:
        _fill(s, [("generated", "ant"), ("code", "ant bee"), ("doc", "bee")])
        assert _ranked(s, "ant", 10, BOOSTS) == _oracle(s, "ant", 10, dict(BOOSTS))
    finally:
        s.close()
