"""How ``hybrid`` fuses the word ranking and the vector ranking (daemon/semantic/hybrid.py),
on a real index and a real matrix whose vectors the test chooses (no model: what the
fusion does with given similarities is the point)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import note
from kbindex.daemon.backends.sqlite.index import SqliteIndex as Store
from kbindex.daemon.index.values import Batch, Hit, SearchResult
from kbindex.daemon.searching.query import to_plan
from kbindex.daemon.semantic import hybrid
from kbindex.daemon.semantic.matrix import Matrix

QUERY = np.array([1.0, 0.0], dtype=np.float32)


def ids(store: Store) -> dict[str, int]:
    with store.reader() as conn:
        return dict(conn.execute("SELECT relpath, id FROM files"))


def vector(cosine: float) -> np.ndarray:
    return np.array([[cosine, np.sqrt(1 - cosine**2)]], dtype=np.float16)


def result(store: Store, matrix: Matrix, query: str, *, words: bool = True) -> SearchResult:
    return hybrid.search(
        store,
        to_plan(query),
        lambda k, allowed, named, floor: matrix.search(QUERY, k, allowed, named, floor),
        words=words,
    )


def hits(store: Store, matrix: Matrix, query: str, *, words: bool = True) -> list[Hit]:
    return result(store, matrix, query, words=words).hits


def run(store: Store, matrix: Matrix, query: str, *, words: bool = True) -> list[str]:
    return [h.relpath for h in hits(store, matrix, query, words=words)]


def test_meaning_lifts_a_file_the_words_rank_lower(store: Store) -> None:
    store.apply(
        Batch(
            [
                note("a.md", "lantern lantern lantern festival"),
                note("b.md", "lantern and other things of the evening"),
                note("c.md", "nothing in common with the query"),
            ]
        )
    )
    found = ids(store)
    matrix = Matrix(2)
    for name, cosine in (("a.md", 0.1), ("b.md", 0.9), ("c.md", 0.2)):
        matrix.put(found[name], [(1, 1)], vector(cosine))
    assert run(store, matrix, "lantern", words=False) == ["b.md"]  # the others are far
    # Words alone put a.md first; its meaning is far from the query, b.md's is close.
    assert run(store, matrix, "lantern")[:2] == ["b.md", "a.md"]


def test_a_file_without_passages_is_ranked_by_its_words_alone(store: Store) -> None:
    store.apply(
        Batch(
            [
                note("big.md", "lantern lantern lantern lantern festival"),
                note("small.md", "a lantern"),
                note("far.md", "unrelated text"),
            ]
        )
    )
    found = ids(store)
    matrix = Matrix(2)
    # big.md has no passages (too large to embed, or not embedded yet).
    matrix.put(found["small.md"], [(1, 1)], vector(0.5))
    matrix.put(found["far.md"], [(1, 1)], vector(0.0))
    assert run(store, matrix, "lantern") == ["big.md", "small.md"]


def test_a_hit_by_meaning_alone_points_at_its_passage(store: Store, tmp_path: Path) -> None:
    text = "# Lamps\n\nintro line\n\nthe glowing paper lights of the night market\n"
    store.apply(Batch([note("lamps.md", text, tmp_path), note("other.md", "lantern", tmp_path)]))
    found = ids(store)
    matrix = Matrix(2)
    rows = np.concatenate([vector(0.1), vector(0.95)])
    matrix.put(found["lamps.md"], [(1, 3), (5, 5)], rows)
    matrix.put(found["other.md"], [(1, 1)], vector(0.2))
    lamps = next(h for h in hits(store, matrix, "lantern") if h.relpath == "lamps.md")
    assert lamps.line == 5
    assert "glowing paper lights" in lamps.snippet


def test_a_query_nothing_matches_by_words_or_meaning_answers_nothing(store: Store) -> None:
    store.apply(Batch([note(f"{i}.md", f"ordinary text number {i}") for i in range(5)]))
    matrix = Matrix(2)
    for i, file_id in enumerate(ids(store).values()):
        # The nearest passage is close to the floor, never above it: the best of nothing.
        matrix.put(file_id, [(1, 1)], vector(hybrid.FLOOR - 0.01 - i / 100))
    for words in (True, False):
        found = result(store, matrix, "quuxplorator", words=words)
        assert (found.hits, found.total) == ([], 0)


def test_scores_say_how_near_not_how_near_compared_with_the_rest(store: Store) -> None:
    store.apply(Batch([note("a.md", "first text"), note("b.md", "second text")]))
    found = ids(store)
    matrix = Matrix(2)
    matrix.put(found["a.md"], [(1, 1)], vector(0.5))
    matrix.put(found["b.md"], [(1, 1)], vector(0.4))
    by_meaning = hits(store, matrix, "unrelated words", words=False)
    assert [h.relpath for h in by_meaning] == ["a.md", "b.md"]
    assert [h.score for h in by_meaning] == pytest.approx([0.5, 0.4], abs=5e-3)  # int8 rows
    # Fused, a hit by meaning alone has only the similarity's share: the best of two
    # middling passages is not scored as if it matched well (min-max gave it 0.7).
    fused = hits(store, matrix, "unrelated words")
    assert [h.score for h in fused] == pytest.approx(
        [hybrid.ALPHA * 0.5, hybrid.ALPHA * 0.4], abs=5e-3
    )


def test_the_total_counts_matches_by_words_or_meaning_each_once(store: Store) -> None:
    store.apply(
        Batch(
            [
                note("words.md", "lantern festival"),
                note("both.md", "a lantern"),
                note("meaning.md", "paper lights"),
                note("far.md", "tax forms"),
            ]
        )
    )
    found = ids(store)
    matrix = Matrix(2)
    for name, cosine in (("words.md", 0.1), ("both.md", 0.8), ("meaning.md", 0.7), ("far.md", 0.1)):
        matrix.put(found[name], [(1, 1)], vector(cosine))
    answer = result(store, matrix, "lantern")
    assert sorted(h.relpath for h in answer.hits) == ["both.md", "meaning.md", "words.md"]
    assert answer.total == 3
    assert result(store, matrix, "lantern", words=False).total == 2
