"""A question's words too common to choose documents by only widen it when needed.

In ``any`` mode a word held by more than ``frequency.COMMON_FRACTION`` of the documents
is left out when rarer words remain (the "common terms" rule), unless the rarer words
alone find fewer documents than asked for. These tests write real documents through
the store and search them through its reader pool, as the daemon does.
"""

from __future__ import annotations

from conftest import note
from kbindex.daemon.backends.sqlite import frequency, searcher
from kbindex.daemon.backends.sqlite.render import Alternatives
from kbindex.daemon.backends.sqlite.store import Store
from kbindex.daemon.index.values import Batch
from kbindex.daemon.searching.query import to_plan

QUESTION = "which notes mention kestrel and osprey?"
"""``any`` mode: four or more plain words. "notes" and "mention" are in every document."""


def add(store: Store, docs: dict[str, str]) -> None:
    store.apply(Batch([note(name, text) for name, text in docs.items()]))


def corpus(birds: int, plain: int) -> dict[str, str]:
    """``birds`` documents that mention a kestrel or an osprey, ``plain`` that do not;
    all of them hold the common words."""
    docs = {}
    for i in range(birds):
        bird = "kestrel" if i % 2 else "osprey"
        docs[f"bird{i:02}.md"] = f"field notes {i}: we mention the {bird} seen at dawn"
    for i in range(plain):
        docs[f"plain{i:02}.md"] = f"notes {i}: these notes mention notes and nothing else"
    return docs


def search(store: Store, query: str, limit: int) -> searcher.SearchResult:
    with store.reader() as conn:
        return searcher.search(conn, to_plan(query, limit=limit))


def test_common_words_are_left_out_when_the_rare_ones_fill_the_list(store: Store) -> None:
    add(store, corpus(birds=12, plain=28))
    result = search(store, QUESTION, limit=5)
    assert result.mode == "any"
    assert len(result.hits) == 5
    assert all(hit.relpath.startswith("bird") for hit in result.hits)
    # total_hits counts the documents the rarer words chose, not all 40.
    assert result.total == 12
    # Asked for more than the rare words find: the common words fill the rest.
    wide = search(store, QUESTION, limit=20)
    assert wide.total == 40
    assert [h.relpath[:4] for h in wide.hits] == ["bird"] * 12 + ["plai"] * 8


def test_nothing_is_left_out_when_every_word_is_common_or_none_is(store: Store) -> None:
    add(store, corpus(birds=12, plain=28))
    with store.reader() as conn:
        assert frequency.documents(conn) == 40
        common = Alternatives((('"notes"',), ('"mention"',)))
        assert frequency.selective(common, frequency.held(conn, common)) is None
        rare = Alternatives((('"kestrel"',), ('"osprey"',)))
        assert frequency.selective(rare, frequency.held(conn, rare)) is None
        both = Alternatives((('"notes"',), ('"kestrel"',), ('"mention"',), ('"osprey"',)))
        assert frequency.selective(both, frequency.held(conn, both)) == (
            ('"kestrel"',),
            ('"osprey"',),
        )
    result = search(store, "which notes mention these notes?", limit=5)
    assert result.total == 40


def test_the_cut_follows_the_share_of_documents(store: Store) -> None:
    # "osprey" is in 6 of 20 documents (30%: not above the fraction), "kestrel" in 6.
    add(store, corpus(birds=12, plain=8))
    with store.reader() as conn:
        alternatives = Alternatives((('"kestrel"',), ('"osprey"',), ('"notes"',)))
        assert frequency.selective(alternatives, frequency.held(conn, alternatives)) == (
            ('"kestrel"',),
            ('"osprey"',),
        )
    # One more bird note with "osprey" takes it past 30% of 21: now it is common too,
    # and only "kestrel" (6 of 21) chooses.
    add(store, {"bird99.md": "an osprey again"})
    with store.reader() as conn:
        assert frequency.selective(alternatives, frequency.held(conn, alternatives)) == (
            ('"kestrel"',),
        )


def test_a_prefix_term_is_kept_and_still_resolved(store: Store) -> None:
    add(store, corpus(birds=12, plain=28))
    result = search(store, "which notes mention kestr* or ospr*", limit=5)
    assert result.mode == "any"
    assert result.total == 12
    assert all(hit.relpath.startswith("bird") for hit in result.hits)
