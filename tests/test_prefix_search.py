"""Prefix queries: whole words as written, ranked on the stemmed index.

The stemmed index alone gets prefixes wrong both ways: ``deprecat*`` misses
"deprecation" (stemmed "deprec"), and a stem shared by two words ("univers") would let
``universi*`` find "universe". These tests write real documents through the store and
search them through its reader pool, as the daemon does.
"""

from __future__ import annotations

from conftest import note
from kbindex.daemon.backends.sqlite import prefixes, searcher
from kbindex.daemon.backends.sqlite.store import Store
from kbindex.daemon.index.plan import Filters, PathFilter
from kbindex.daemon.index.values import Batch
from kbindex.daemon.searching.query import to_plan


def add(store: Store, **docs: str) -> None:
    store.apply(Batch([note(f"{name}.md", text) for name, text in docs.items()]))


def found(store: Store, query: str, mode: str = "auto", limit: int = 100) -> list[str]:
    """Relative paths, best first."""
    with store.reader() as conn:
        result = searcher.search(conn, to_plan(query, mode, limit=limit))
    return [hit.relpath for hit in result.hits]


def test_a_prefix_finds_the_words_porter_stems_away_and_ranks_by_count(store: Store) -> None:
    add(
        store,
        once="deprecation notice for the old api, and some other words here",
        thrice="deprecated, deprecated and deprecate again in this one notice",
        unrelated="nothing to see in this note at all, just words",
    )
    assert found(store, "deprecat*") == ["thrice.md", "once.md"]
    assert found(store, "DEPRECAT*") == ["thrice.md", "once.md"]  # typed case is folded


def test_a_prefix_does_not_widen_to_words_that_share_a_stem(store: Store) -> None:
    # "universe" and "university" both stem to "univers".
    add(store, cosmos="the universe is wide", campus="the university campus is wide")
    assert found(store, "universi*") == ["campus.md"]
    assert found(store, "universi* wide") == ["campus.md"]
    # Excluded by the exact words too: the stem-mate stays.
    assert found(store, "wide -universi*") == ["cosmos.md"]
    assert found(store, "wide -universi*", mode="any") == ["cosmos.md"]


def test_a_phrase_prefix_keeps_word_order(store: Store) -> None:
    add(store, ordered="foo bartender", reversed="bartender foo", apart="foo and then bar")
    assert found(store, '"foo bart"*') == ["ordered.md"]
    assert found(store, "foo-bart*") == ["ordered.md"]  # an identifier is a phrase too


def test_accents_and_case_fold_as_the_index_folds_them(store: Store) -> None:
    add(store, cafe="Café Society meets weekly")
    assert found(store, "caf*") == ["cafe.md"]
    assert found(store, "CAFÉ*") == ["cafe.md"]
    assert prefixes.fold("Ærøskøbing Café") == "ærøskøbing cafe"  # no decomposition: kept


def test_a_prefix_of_more_words_than_it_expands_to_still_finds_them_all(store: Store) -> None:
    many = prefixes.MAX_WORDS + 10
    add(store, **{f"n{i}": f"zq{i:03d}word and filler" for i in range(many)})
    assert len(found(store, "zq*")) == many
    assert sorted(found(store, "zq07*")) == ["n70.md", "n71.md", "n72.md", "n73.md"]
    with store.reader() as conn:
        result = searcher.search(conn, to_plan("zq*", limit=10))
    assert result.total == many and len(result.hits) == 10


def test_a_prefix_no_word_starts_with_matches_nothing_and_falls_back(store: Store) -> None:
    add(store, a="alpha beta", b="beta gamma")
    assert found(store, "qqqq*") == []
    with store.reader() as conn:
        result = searcher.search(conn, to_plan("alpha qqqq*", limit=10))
    assert result.mode == "any" and [h.relpath for h in result.hits] == ["a.md"]


def test_a_prefix_counts_only_its_own_words_beyond_the_first_page(store: Store) -> None:
    # The count decides whether the exactness check may be skipped while ranking:
    # stem-mates ("universe") must be neither counted nor listed, with or without
    # a path filter, however many documents there are.
    add(
        store,
        **{f"campus{i:02d}": f"the university number {i}" for i in range(12)},
        **{f"cosmos{i}": "the universe universe universe" for i in range(5)},
    )
    with store.reader() as conn:
        result = searcher.search(conn, to_plan("universi*", limit=10))
        filtered = searcher.search(
            conn, to_plan("universi*", filters=Filters(PathFilter.parse("campus0*")))
        )
    assert result.total == 12 and len(result.hits) == 10
    assert all(hit.relpath.startswith("campus") for hit in result.hits)
    assert filtered.total == 10 and {h.relpath for h in filtered.hits} == {
        f"campus{i:02d}.md" for i in range(10)
    }


def test_a_prefix_is_counted_while_ranked_in_both_forms_of_the_ranking(store: Store) -> None:
    # A prefix's matches are counted in the ranking's own pass: the hits' ranking
    # (search) and the ids-only one (rank, used by hybrid) must give the same
    # documents, scores and total as each other, beyond one page and with none.
    add(
        store,
        **{f"lock{i:02d}": "spin_lock_irq " * (i % 4 + 1) + f"note {i}" for i in range(14)},
        other="spin_unlock and lock_irq, never the three in a row",
    )
    with store.reader() as conn:
        for query, total in (("spin_lock_irq*", 14), ("spin_lock_nothing*", 0)):
            plan = to_plan(query)
            result = searcher.search(conn, plan)
            ids, ranked_total, _ = searcher.rank(conn, plan)
            assert result.total == ranked_total == total
            assert len(result.hits) == len(ids) == min(total, 10)
            assert [h.score for h in result.hits] == [round(s, 4) for _, s in ids]
            assert all(h.relpath.startswith("lock") for h in result.hits)
