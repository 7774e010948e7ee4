"""Questions rank only the documents of their essential words first (``essential``):
the list must be the one ranking every match gives, and the bound that decides it must
hold for FTS5's own scores. Real documents written through the store, searched through
its reader pool, as the daemon does."""

from __future__ import annotations

import random

import pytest
from conftest import note
from kbindex.daemon.searching import essential, frequency, searcher
from kbindex.daemon.searching.query import compile_query
from kbindex.daemon.storage.store import Store

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


def find(store: Store, question: str, limit: int) -> searcher.Found:
    with store.reader() as conn:
        return searcher.find(conn, compile_query(question), limit, None)


def test_ranking_the_essential_documents_first_gives_the_whole_rankings_list(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    store.apply([note(name, text) for name, text in zipf_corpus(7, 1500).items()], [])
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


def test_no_document_of_the_other_words_alone_scores_above_the_bound(store: Store) -> None:
    store.apply([note(name, text) for name, text in zipf_corpus(3, 400).items()], [])
    question = " ".join(VOCABULARY[i] for i in (13, 15, 17, 150)) + " or"
    compiled = compile_query(question)
    assert compiled.alternatives is not None
    items = compiled.alternatives.items
    with store.reader() as conn:
        held = frequency.held(conn, compiled.alternatives)
        split = essential.split(items, held, 10)
        assert split is not None
        # The documents holding none of the essential words, scored by FTS5 on the
        # whole expression: each below the bound, the most common ones near it.
        weights = ", ".join(str(w) for w in searcher.BM25_WEIGHTS)
        scores = [
            -score
            for (score,) in conn.execute(
                f"SELECT bm25(docs, {weights}) FROM docs WHERE docs MATCH ?"
                " AND rowid NOT IN (SELECT rowid FROM docs WHERE docs MATCH ?)",
                (" OR ".join(f'"{w}"' for w in question.split()[:-1]), split.essential),
            )
        ]
    assert len(scores) > 50
    assert max(scores) < split.bound
    assert max(scores) > split.bound / 4


def test_a_prefix_term_or_a_single_word_takes_no_split(store: Store) -> None:
    store.apply([note(name, text) for name, text in zipf_corpus(5, 100).items()], [])
    with store.reader() as conn:
        for question in ("w000x w001x w002x w003x w05*", "w000x"):
            compiled = compile_query(question + " or")
            assert compiled.alternatives is not None
            held = frequency.held(conn, compiled.alternatives)
            assert essential.split(compiled.alternatives.items, held, 10) is None
