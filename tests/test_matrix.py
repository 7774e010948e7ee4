"""Exact nearest-passage search over the in-memory vectors (daemon/semantic/matrix.py)."""

from __future__ import annotations

import numpy as np
from kbindex.daemon.semantic.matrix import Matrix


def unit(*values: float) -> np.ndarray:
    v = np.array(values, dtype=np.float32)
    return v / np.linalg.norm(v)


def rows(*vectors: np.ndarray) -> np.ndarray:
    return np.stack(vectors).astype(np.float16)


def test_files_come_best_first_each_with_its_best_passage() -> None:
    m = Matrix(3)
    m.put(1, [(1, 4), (6, 9)], rows(unit(0, 1, 0), unit(1, 0.1, 0)))
    m.put(2, [(1, 2)], rows(unit(1, 0.5, 0)))
    m.put(3, [(1, 2)], rows(unit(0, 0, 1)))
    found = m.search(unit(1, 0, 0), 10).nearest
    assert [p.file_id for p in found] == [1, 2, 3]
    assert (found[0].start, found[0].end) == (6, 9)  # the passage that matched
    assert found[0].score > found[1].score > found[2].score


def test_the_limit_counts_files_not_passages() -> None:
    m = Matrix(2)
    m.put(1, [(i, i) for i in range(1, 301)], rows(*[unit(1, 0.001 * i) for i in range(300)]))
    m.put(2, [(1, 1)], rows(unit(1, 1)))
    found = m.search(unit(1, 0), 2).nearest
    assert [p.file_id for p in found] == [1, 2]


def test_replacing_and_dropping_a_file_leaves_only_what_it_has_now() -> None:
    m = Matrix(2)
    m.put(1, [(1, 1)], rows(unit(1, 0)))
    m.put(2, [(1, 1)], rows(unit(0.9, 0.1)))
    m.put(1, [(5, 7)], rows(unit(0, 1)))  # edited: its old passage is gone
    found = m.search(unit(1, 0), 10).nearest
    assert [(p.file_id, p.start) for p in found] == [(2, 1), (1, 5)]
    m.drop(2)
    assert [p.file_id for p in m.search(unit(1, 0), 10).nearest] == [1]
    assert m.passages == 1


def test_only_allowed_files_are_ranked_before_the_limit_is_applied() -> None:
    m = Matrix(2)
    for file_id in range(1, 101):
        m.put(file_id, [(1, 1)], rows(unit(1, file_id / 1000)))
    found = m.search(unit(1, 0), 5, allowed=np.array([90, 95], dtype=np.int64)).nearest
    assert sorted(p.file_id for p in found) == [90, 95]


def test_many_files_across_growth_and_compaction_stay_searchable() -> None:
    m = Matrix(4)
    rng = np.random.default_rng(7)
    vectors = {i: unit(*rng.normal(size=4)) for i in range(5000)}
    for file_id, v in vectors.items():
        m.put(file_id, [(1, 1)], rows(v))
    for file_id in range(0, 5000, 2):
        m.drop(file_id)
    target = vectors[4001]
    (best,) = m.search(target, 1).nearest
    assert best.file_id == 4001
    assert m.passages == 2500


def test_named_files_get_their_own_best_passage_whatever_the_floor() -> None:
    m = Matrix(2)
    m.put(1, [(1, 1)], rows(unit(1, 0)))
    m.put(2, [(1, 2), (3, 4)], rows(unit(-1, 0.2), unit(0.2, 1)))
    m.put(3, [(1, 1)], rows(unit(0, 1)))
    ranking = m.search(unit(1, 0), 1, named=[2, 99], floor=0.5)
    assert [p.file_id for p in ranking.nearest] == [1]
    assert set(ranking.named) == {2}  # 99 has no passages
    assert (ranking.named[2].start, ranking.named[2].end) == (3, 4)
    assert 0 < ranking.named[2].score < 0.5


def test_only_files_at_or_above_the_floor_are_near_and_counted() -> None:
    m = Matrix(2)
    m.put(1, [(1, 1), (2, 2)], rows(unit(1, 0.1), unit(1, 0.2)))  # two passages above
    m.put(2, [(1, 1)], rows(unit(1, 1)))  # cosine 0.71
    m.put(3, [(1, 1)], rows(unit(0.2, 1)))  # cosine 0.2: below
    ranking = m.search(unit(1, 0), 10, floor=0.5)
    assert [p.file_id for p in ranking.nearest] == [1, 2]
    assert ranking.above == 2  # files, not passages
    assert m.search(unit(1, 0), 1, floor=0.5).above == 2  # not cut by the limit
    assert m.search(unit(1, 0), 10, np.array([3], dtype=np.int64), floor=0.5).above == 0
