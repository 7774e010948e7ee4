"""An ``any`` query ranks only the matches that can reach its list, and lists exactly
what ranking every match lists (``daemon/bounds.py``).

These tests write real documents through the store and search them through its reader
pool, as the daemon does. The reference ranking is the same searcher with the bound
switched off (``bounds.pruning`` returning None): the one thing replaced, so that both
paths run on the same index.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Callable

import pytest
from conftest import note
from kbindex.daemon import bounds, frequency, searcher
from kbindex.daemon.query import Alternatives, BadQuery, compile_query
from kbindex.daemon.store import Store

WORDS = [f"w{i:03d}x" for i in range(150)]


def corpus(rng: random.Random, documents: int) -> dict[str, str]:
    """Documents of Zipf-distributed words, of lengths from a line to a page, some with
    their words in the title too (weights differ by column)."""
    weights = [1 / (rank + 1) for rank in range(len(WORDS))]
    docs = {}
    for i in range(documents):
        body = " ".join(rng.choices(WORDS, weights, k=rng.randint(3, 80)))
        title = f"# {' '.join(rng.sample(WORDS, 2))}\n" if i % 5 == 0 else ""
        docs[f"d{i:03d}.md"] = title + body
    return docs


def listed(
    store: Store, query: str, limit: int, mode: str = "any"
) -> tuple[list[tuple[str, float]], int, str]:
    """(path, score) best first, total_hits, and how the list was ranked: "whole"
    (every match), "bounded" (by the first way ``bounds`` offered), "bounded later"
    (a wider one), "fell back" (every match, after trying), "parts N" (in the first N
    of ``bounds.parts``)."""
    ranked: list[str] = []
    with store.reader() as conn:

        def trace(sql: str) -> None:
            if "bm25(" in sql:
                ranked.append(sql)

        conn.set_trace_callback(trace)
        try:
            result = searcher.search(conn, compile_query(query, mode), limit, None)
        finally:
            conn.set_trace_callback(None)
    bounded = "+d.rowid IN (SELECT rowid FROM docs WHERE" in ranked[-1]
    if bounded:
        way = "bounded" if len(ranked) == 1 else "bounded later"
    elif '" AND "' in ranked[0]:  # an ``any`` query's parts: "a AND b", "a NOT b", ...
        way = f"parts {len(ranked)}"
    else:
        way = "whole" if len(ranked) == 1 else "fell back"
    return [(h.relpath, h.score) for h in result.hits], result.total, way


def test_the_list_is_the_one_ranking_every_match_gives(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = random.Random(7)
    store.apply([note(n, t) for n, t in corpus(rng, 300).items()], [])
    queries = [
        (" ".join(rng.sample(WORDS, rng.randint(2, 5))), rng.choice([1, 3, 10, 30]))
        for _ in range(150)
    ]
    pruned = [listed(store, q, limit) for q, limit in queries]
    off: Callable[..., tuple[()]] = lambda *_: ()  # noqa: E731
    monkeypatch.setattr(bounds, "pruning", off)
    monkeypatch.setattr(bounds, "parts", off)
    everything = [listed(store, q, limit) for q, limit in queries]
    for (query, limit), (hits, total, _), (expected, expected_total, _) in zip(
        queries, pruned, everything, strict=True
    ):
        assert (hits, total) == (expected, expected_total), (query, limit)
    # Every path was taken: a bound held for most queries, by the first way offered
    # (the pairs, for three words and more) or a wider one, or in the first or second
    # of two words' parts; some fell back to ranking every match, or every part.
    ways = Counter(way for _, _, way in pruned)
    held = ("bounded", "bounded later", "parts 1", "parts 2")
    assert sum(ways[way] for way in held) > len(queries) // 2, ways
    assert all(ways[way] > 0 for way in (*held, "fell back", "parts 3")), ways


def test_a_prefix_lists_what_ranking_all_its_words_lists(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    # "w01*" stands for ten words (w010x to w019x), the first the most common; "w1*"
    # for fifty, more than a prefix is bounded for.
    rng = random.Random(11)
    store.apply([note(n, t) for n, t in corpus(rng, 300).items()], [])
    queries = [(f"w{d:02d}*", limit) for d in range(15) for limit in (1, 3, 10, 30)]
    queries += [("w1*", 10), ("w0*", 10)]
    pruned = [listed(store, q, limit, "auto") for q, limit in queries]
    off: Callable[..., tuple[()]] = lambda *_: ()  # noqa: E731
    monkeypatch.setattr(bounds, "pruning_words", off)
    for (query, limit), (hits, total, _) in zip(queries, pruned, strict=True):
        assert (hits, total) == listed(store, query, limit, "auto")[:2], (query, limit)
    ways = Counter(way for _, _, way in pruned)
    assert ways["bounded"] > len(queries) // 2 and ways["fell back"] > 0, ways
    assert listed(store, "w1*", 10, "auto")[2] == "whole"


def documents(*texts: tuple[str, int]) -> dict[str, str]:
    """Each text as that many documents, named after its first word."""
    return {f"{text.split()[0]}{i}.md": text for text, n in texts for i in range(n)}


THREE_WORDS = documents(("alpha", 8), ("beta", 4), ("gamma", 2), ("filler", 26))
"""Three words held by 8, 4 and 2 of 40 documents."""


def census_of(store: Store, docs: dict[str, str], items: tuple[str, ...]) -> frequency.Census:
    """``docs`` written, and the census of ``items`` among them."""
    store.apply([note(n, t) for n, t in docs.items()], [])
    with store.reader() as conn:
        return frequency.census(conn, Alternatives(items))


def test_the_bound_is_bm25s_ceiling_for_the_most_common_item(store: Store) -> None:
    docs = documents(("alpha common", 6), ("beta common", 3), ("filler text", 11))
    counted = census_of(store, docs, ('"alpha"', '"beta"', '"alpha"'))
    (pruning,) = bounds.pruning(('"alpha"', '"beta"', '"alpha"'), counted, 3)
    assert pruning.candidates == '"beta"'
    # "alpha" is in 6 of 20 documents and typed twice: two phrases, each below
    # idf * (k1 + 1).
    assert pruning.bound == pytest.approx(2 * 2.2 * math.log((20 - 6 + 0.5) / (6 + 0.5)))
    # A column filter has shares this module does not bound: nothing is left out.
    assert bounds.pruning(('"alpha"', '{grams}: "beta"'), counted, 3) == ()


def test_with_three_words_the_documents_holding_two_come_first(store: Store) -> None:
    docs, items = THREE_WORDS, ('"alpha"', '"beta"', '"gamma"')
    pairs, weakest = bounds.pruning(items, census_of(store, docs, items), 6)
    assert pairs.candidates == (
        '("alpha" AND "beta") OR ("alpha" AND "gamma") OR ("beta" AND "gamma")'
    )
    # A document holding one word scores below that word's ceiling: the highest is
    # the rarest word's, "gamma" (2 of 40 documents).
    assert pairs.bound == pytest.approx(2.2 * math.log((40 - 2 + 0.5) / (2 + 0.5)))
    assert weakest.candidates == '"beta" OR "gamma"'


def test_two_words_are_ranked_in_three_parts_the_likeliest_first(store: Store) -> None:
    docs = documents(("alpha", 8), ("beta", 2), ("filler", 30))
    items = ('"alpha"', '"beta"', '"filler"')
    counted = census_of(store, docs, items)
    both, rarer, other = bounds.parts(items[:2], counted)
    assert both.match == '"alpha" AND "beta"'
    assert (rarer.match, other.match) == ('"beta" NOT "alpha"', '"alpha" NOT "beta"')

    def ceiling(holding: int) -> float:
        return 2.2 * math.log((40 - holding + 0.5) / (holding + 0.5))

    # Past both: one word only, below its ceiling; past the rarer: "alpha" only.
    assert both.rest == pytest.approx(ceiling(2)) and rarer.rest == pytest.approx(ceiling(8))
    assert other.rest == 0
    # Three words, a word typed twice, a column filter: ranked otherwise.
    for others in (items, ('"alpha"', '"alpha"'), ('"alpha"', '{title}: "beta"')):
        assert bounds.parts(others, counted) == ()


def test_a_way_whose_candidates_cannot_fill_the_list_is_not_tried(store: Store) -> None:
    # Its bound never holds (fewer than ``limit`` rows): trying it only costs time.
    docs, items = THREE_WORDS, ('"alpha"', '"beta"', '"gamma"')
    counted = census_of(store, docs, items)
    # Held by two words: at most 4 + 2 + 2 documents; "beta" or "gamma": 6.
    assert len(bounds.pruning(items, counted, 6)) == 2
    ((pairs,),) = {bounds.pruning(items, counted, limit) for limit in (7, 8)}
    assert "AND" in pairs.candidates
    assert bounds.pruning(items, counted, 9) == ()
    # A prefix's words: the other words' documents as written.
    held = {'"alpha"': 8, '"alphas"': 1, '"alphabet"': 1}
    (prefix,) = bounds.pruning_words(held, 40, 2)
    assert prefix.candidates == '"alphas" OR "alphabet"'
    assert bounds.pruning_words(held, 40, 3) == ()


def test_a_search_leaves_no_read_transaction_open_even_when_it_fails(store: Store) -> None:
    # A search reads in one transaction; one left open on a pooled connection would
    # keep the writer's log from ever being copied back (it would grow without end).
    store.apply([note("a.md", "alpha beta gamma delta")], [])
    with store.reader() as conn:
        searcher.search(conn, compile_query("alpha beta gamma delta", "any"), 10, None)
        assert not conn.in_transaction
        with pytest.raises(BadQuery):
            searcher.search(conn, compile_query("alpha AND AND", "raw"), 10, None)
        assert not conn.in_transaction


def test_a_search_past_its_deadline_fails_clearly_and_leaves_its_connection_usable(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The read transaction must end however the search does. (A deadline of zero
    # stands in for a pathological query, which this index is too small to hold.)
    store.apply([note(f"{i}.md", f"alpha beta {i}") for i in range(2000)], [])
    with store.reader() as conn:
        monkeypatch.setattr(searcher, "QUERY_DEADLINE_SECONDS", 0.0)
        with pytest.raises(BadQuery, match="took too long"):
            searcher.search(conn, compile_query("alpha beta gamma delta", "any"), 10, None)
        assert not conn.in_transaction
        monkeypatch.undo()
        result = searcher.search(conn, compile_query("alpha beta gamma delta", "any"), 10, None)
        assert result.total == 2000
