"""Questions rank only the documents of their essential words first (``essential``):
the list must be the one ranking every match gives, and the bound that decides it must
hold for FTS5's own scores. Real documents written through the store, searched through
its reader pool, as the daemon does."""

from __future__ import annotations

import random

import pytest
from conftest import note
from kbindex.daemon.backends.sqlite import essential, frequency, searcher
from kbindex.daemon.backends.sqlite.render import match
from kbindex.daemon.backends.sqlite.store import Store
from kbindex.daemon.index.values import Batch
from kbindex.daemon.searching.query import to_plan

VOCABULARY = [f"w{i:03}x" for i in range(300)]


def zipf_corpus(seed: int, documents: int) -> dict[str, str]:
    """Documents of words drawn with Zipf-like weights (a few words in most documents,
    most words in few), of varied lengths, about half of them about one rarer word they
    repeat: what bm25 ranks."""
    rng = random.Random(seed)
    weights = [1.0 / (rank + 1) for rank in range(len(VOCABULARY))]
    docs = {}
    for i in range(documents):
        words = rng.choices(VOCABULARY, weights, k=rng.randint(3, 60))
        if rng.random() < 0.5:
            words += [rng.choice(VOCABULARY[100:300])] * rng.randint(2, 8)
        rng.shuffle(words)
        docs[f"d{i:04}.md"] = " ".join(words)
    return docs


def find(store: Store, question: str, limit: int) -> tuple[list[tuple[int, float]], int, str]:
    with store.reader() as conn:
        return searcher.rank(conn, to_plan(question, limit=limit))


def test_ranking_the_essential_documents_first_gives_the_whole_rankings_list(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    store.apply(Batch([note(name, text) for name, text in zipf_corpus(7, 1500).items()]))
    decided: list[bool] = []
    real_decides = essential.Split.decides

    def counted(self: essential.Split, last_score: float) -> bool:
        decided.append(real_decides(self, last_score))
        return decided[-1]

    rng = random.Random(11)
    cases = []
    for _ in range(60):
        words = rng.sample(VOCABULARY[5:15], rng.randint(1, 3))
        words += rng.sample(VOCABULARY[100:300], rng.randint(1, 2))
        cases.append((" ".join(words) + " or", rng.choice((1, 3, 5, 10))))
    for question, limit in cases:
        monkeypatch.setattr(essential, "split", lambda *a: None)
        whole = find(store, question, limit)
        monkeypatch.undo()
        monkeypatch.setattr(essential.Split, "decides", counted)
        first = find(store, question, limit)
        monkeypatch.undo()
        assert first[2] == whole[2] == "any", question
        assert first == whole, (question, limit)
    # Both ways were taken: lists the essential documents decided, and lists where
    # the bound was too high and the whole expression was ranked.
    assert decided.count(True) >= 10 and decided.count(False) >= 3, decided


def test_the_bound_is_the_most_fts5_gives_the_other_words(store: Store) -> None:
    """No document holding none of the essential words scores above the bound, and one
    that repeats a left-out word 400 times (FTS5's score nears ``idf * (k1 + 1)`` as the
    count grows) comes within a few percent of it: a bound too low by 5% fails here."""
    docs = zipf_corpus(3, 400)
    docs["many.md"] = " ".join(["w013x"] * 400)
    store.apply(Batch([note(name, text) for name, text in docs.items()]))
    question = "w150x w013x or"
    compiled = match(to_plan(question))
    assert compiled.alternatives is not None
    weights = ", ".join(str(w) for w in searcher.BM25_WEIGHTS)
    with store.reader() as conn:
        held = frequency.held(conn, compiled.alternatives)
        split = essential.split(compiled.alternatives.items, held, 5)
        assert split is not None and split.essential == '"w150x"'
        scored = dict(
            conn.execute(
                f"SELECT f.relpath, -bm25(docs, {weights}) FROM docs"
                " JOIN files f ON f.id = docs.rowid WHERE docs MATCH ?"
                " AND docs.rowid NOT IN (SELECT rowid FROM docs WHERE docs MATCH ?)",
                ('"w150x" OR "w013x"', split.essential),
            ).fetchall()
        )
    assert len(scored) > 50
    assert max(scored.values()) == scored["many.md"] < split.bound
    assert scored["many.md"] > 0.95 * split.bound


def test_a_prefix_term_or_a_single_word_takes_no_split(store: Store) -> None:
    store.apply(Batch([note(name, text) for name, text in zipf_corpus(5, 100).items()]))
    with store.reader() as conn:
        for question in ("w000x w001x w002x w003x w05*", "w000x"):
            compiled = match(to_plan(question + " or"))
            assert compiled.alternatives is not None
            held = frequency.held(conn, compiled.alternatives)
            assert essential.split(compiled.alternatives.items, held, 10) is None
