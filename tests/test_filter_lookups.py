"""What a search's filters admit, looked up before its statements run (``sqlite.filters``):
the ids a tag, field or date admits, and the stretch of ids a root holds, which bounds
what FTS5 reads. Every answer must be the one a check of each match gives: here on a
large collection beside a small one whose files were not indexed together (their ids
interleave with the large one's), and, for front matter values, against SQLite's own
comparison without regard to case."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kbindex.daemon.backends.sqlite.filters import condition
from kbindex.daemon.engine import sqlite
from kbindex.daemon.index.plan import DateRange, Filters
from kbindex.daemon.index.values import Batch
from kbindex.daemon.searching import hits as searching
from kbindex.daemon.searching.query import to_plan

from tests.conftest import Store, note

BIG = "---\ntags: [general]\nstatus: done\ncreated: 2023-03-01\n---\n# Launch {i}\n{words}\n"
SMALL = (
    "---\ntags: [team]\nstatus: {status}\ncreated: 2024-05-01\n---\n# Notes {i}\n"
    + "filler words " * 60
    + "launch\n"
)
STATUSES = ["draft", "Draft", "DRAFT", "drafted", "dRaFt", "done"]
YEAR_2024 = DateRange(1_704_067_200.0, 1_735_689_600.0, "created")


def _indexed(store: Store, tmp_path: Path) -> tuple[Path, Path]:
    """300 notes in ``big`` that rank above every one of the 15 in ``small``, indexed in
    turns (small, big, small, big, small), so that neither root is one stretch of ids."""
    big, small = tmp_path / "big", tmp_path / "small"
    turns = [(small, range(0, 6)), (big, range(0, 150)), (small, range(6, 12))]
    turns += [(big, range(150, 300)), (small, range(12, 15))]
    for root, numbers in turns:
        batch = []
        for i in numbers:
            if root == big:
                text = BIG.format(i=i, words="launch " * (4 + i % 3))
            else:
                text = SMALL.format(i=i, status=STATUSES[i % len(STATUSES)])
            batch.append(note(f"n{i:03}.md", text, root))
        store.apply(Batch(batch))
    return big, small


@pytest.mark.slow
def test_a_small_collection_filtered_fills_its_top_k_inside_a_large_index(
    store: Store, tmp_path: Path
) -> None:
    big, small = _indexed(store, tmp_path)
    plan = to_plan("launch", limit=10)
    everything = searching.search(store, plan)
    assert {h.root for h in everything.hits} == {str(big)} and everything.total == 315

    def found(filters: Filters, question: str = "launch") -> tuple[set[str], int]:
        result = searching.search(store, replace(to_plan(question, limit=10), filters=filters))
        return {f"{Path(h.root).name}/{h.relpath}" for h in result.hits}, result.total

    small_notes = {f"small/n{i:03}.md" for i in range(15)}
    for filters in (
        Filters(tags=("team",)),
        Filters(roots=(str(small),)),
        Filters(dated=(YEAR_2024,)),
        Filters(roots=(str(small),), tags=("team",), dated=(YEAR_2024,)),
    ):
        hits, total = found(filters)
        assert len(hits) == 10 and hits <= small_notes and total == 15, filters
    # Front matter values equal but for case: draft, Draft, DRAFT and dRaFt, not drafted.
    drafts = {f"small/n{i:03}.md" for i in range(15) if STATUSES[i % 6].lower() == "draft"}
    hits, total = found(Filters(fields=(("status", "DRAFT"),)))
    assert len(hits) == 10 and hits <= drafts and total == len(drafts) == 11
    # A word of the small notes only: few matches, each checked by a lookup of its rows.
    hits, total = found(Filters(fields=(("status", "DRAFT"),)), "filler")
    assert len(hits) == 10 and hits <= drafts and total == 11
    hits, total = found(Filters(dated=(YEAR_2024,), tags=("team",)), "filler")
    assert len(hits) == 10 and hits <= small_notes and total == 15
    assert found(Filters(dated=(DateRange(1.6e9, 1.65e9),)), "filler") == (set(), 0)
    # Nothing admitted: a tag of the small root within the large one, a year of no note.
    assert found(Filters(roots=(str(big),), tags=("team",))) == (set(), 0)
    assert found(Filters(dated=(DateRange(1.6e9, 1.65e9),))) == (set(), 0)
    # A question whose every word no filtered note holds falls back to any word, still
    # within the filters.
    hits, total = found(Filters(roots=(str(small),), dated=(YEAR_2024,)), "launch nowhere")
    assert len(hits) == 10 and hits <= small_notes and total == 15


VALUES = st.text(alphabet="dDrRaAfFtT -_é1Éß", max_size=9)


@settings(max_examples=300, deadline=None)
@given(stored=st.lists(VALUES, max_size=30), asked=VALUES)
def test_a_field_value_matches_what_sqlite_s_nocase_does(stored: list[str], asked: str) -> None:
    """The lookup of a front matter value by ranges of its index admits exactly the
    files whose value SQLite's NOCASE collation (ASCII letters only) holds equal."""
    conn = sqlite.connect(":memory:")
    conn.executescript(
        "CREATE TABLE files(id INTEGER PRIMARY KEY);"
        "CREATE TABLE fields(file INTEGER, source TEXT, key TEXT, value TEXT, number REAL);"
        "CREATE INDEX fields_value ON fields(source, key, value, file);"
    )
    for i, value in enumerate(stored):
        conn.execute("INSERT INTO files(id) VALUES (?)", (i,))
        conn.execute("INSERT INTO fields VALUES (?, 'meta', 'status', ?, NULL)", (i, value))
    cond, params = condition(Filters(fields=(("status", asked),)))
    admitted = {i for (i,) in conn.execute(f"SELECT f.id FROM files f WHERE {cond}", params)}
    equal = "SELECT file FROM fields WHERE key = 'status' AND value = ? COLLATE NOCASE"
    assert admitted == {i for (i,) in conn.execute(equal, (asked,))}
