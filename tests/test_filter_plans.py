"""How a filtered search is run must not change its answers: the same documents, scores,
order, total and mode as the search over the whole index, kept to what the filters
admit.

Two plans are checked here (``sqlite.filters``, ``sqlite.searcher``):

- A filter that admits few files is searched stretch by stretch of their ids
  (``filters.Admitted``): FTS5 reads only those parts of each doclist, and the
  stretches' lists are merged.
- A statement that checks a front matter value or date against the list of ids it
  admits is ranked and counted in one pass, without the essential items' split.

On an index whose folders were written in turns (each folder of each root is several
stretches of ids, as files added over time are), for path filters (a folder, a glob, an
absolute path), roots, tags, front matter values and dates, alone and together, with
and without kind boosts: against the same search that reads every doclist whole (no
listing complete), and against the unfiltered ranking kept to the notes the filters
admit, by what the notes themselves say.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kbindex.daemon.backends.sqlite import filters, searcher
from kbindex.daemon.index.plan import NO_FILTERS, DateRange, Filters, PathFilter
from kbindex.daemon.index.values import Batch
from kbindex.daemon.searching.query import to_plan

from tests.conftest import Store, note, reading

WORDS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel"]
FOLDERS = ["f0", "f1", "f10", "f2", "f2-old"]
"""``f1`` beside ``f10`` and ``f2`` beside ``f2-old``: names a folder's range of names
holds without being under it."""
ROUNDS = 4
STATUSES = ["draft", "Draft", "done", "drafted"]
DAY = 86_400.0
EPOCH = 1_699_920_000.0
"""Midnight (UTC): note n was created ``n % 30`` days after."""


@dataclass(frozen=True)
class Note:
    root: str
    relpath: str
    words: frozenset[str]
    tags: frozenset[str]
    status: str
    created: float


@dataclass(frozen=True)
class Indexed:
    store: Store
    roots: tuple[str, str]
    notes: dict[int, Note]
    """By the id of its files row."""


def _text(n: int) -> tuple[str, Note]:
    """Note ``n``'s text: a few of ``WORDS``, some repeated (bm25 then tells the notes
    apart), tags (one of them rare), a status and a created date; and what it says
    (its root and path left blank)."""
    words = [w for i, w in enumerate(WORDS) if (n * (i + 3)) % (i + 2) == 0]
    words += [WORDS[n % len(WORDS)]] * (1 + n % 3)
    tags = {f"t{n % 3}"} | ({"rare"} if n % 11 == 0 else set())
    status = STATUSES[n % len(STATUSES)]
    created = EPOCH + (n % 30) * DAY
    day = time.strftime("%Y-%m-%d", time.gmtime(created))
    front = f"---\ntags: [{', '.join(sorted(tags))}]\nstatus: {status}\ncreated: {day}\n---\n"
    said = Note("", "", frozenset(words), frozenset(tags), status, created)
    return front + " ".join(words) + "\n", said


@pytest.fixture(scope="module")
def indexed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Indexed]:
    """Two roots of five folders each, written in ``ROUNDS`` turns of three notes per
    folder: a folder's notes are a stretch of ids in each turn."""
    tmp = tmp_path_factory.mktemp("stretches")
    roots = (str(tmp / "a"), str(tmp / "b"))
    store = Store(tmp / "index.sqlite3", reading(tmp))
    store.open()
    n = 0
    said: dict[str, Note] = {}
    for _ in range(ROUNDS):
        for root in roots:
            for folder in FOLDERS:
                batch = []
                for _ in range(3):
                    text, what = _text(n)
                    relpath = f"{folder}/n{n:03}.md"
                    batch.append(note(relpath, text, Path(root)))
                    said[f"{root}/{relpath}"] = replace(what, root=root, relpath=relpath)
                    n += 1
                store.apply(Batch(batch))
    listed = store.files(None, None, NO_FILTERS).files
    notes = {f.id: said[f.path] for f in listed if f.path in said}
    assert len(notes) == n
    try:
        yield Indexed(store, roots, notes)
    finally:
        store.close()


def _admits(given: Filters, note_: Note) -> bool:
    """Whether a note passes ``given`` (path, roots, tags), by the notes alone."""
    path = given.path
    if path is not None:
        where = f"{note_.root}/{note_.relpath}" if path.absolute else note_.relpath
        if path.glob:
            glob = path.glob.replace("*", "")
            assert path.glob == glob + "*", "only globs with one '*' at the end here"
            if not where.startswith(glob):
                return False
        elif not (where == path.stem or where.startswith(path.stem + "/")):
            return False
    if given.roots and note_.root not in given.roots:
        return False
    if any(note_.status.lower() != value.lower() for _, value in given.fields):
        return False
    for span in given.dated:
        assert span.after is not None and span.before is not None
        if not span.after <= note_.created < span.before:
            return False
    return set(given.tags) <= note_.tags


@st.composite
def _filters(draw: st.DrawFn, roots: tuple[str, str]) -> Filters:
    folder = draw(st.sampled_from(FOLDERS))
    # Each filter is left out half the time: the plans without a files row are drawn.
    paths = [f"{folder}/", folder, f"{folder}*", f"{folder}/n0*", f"{roots[1]}/{folder}"]
    path = draw(st.one_of(st.none(), st.sampled_from(paths)))
    chosen_roots = draw(st.one_of(st.just(()), st.sampled_from([(roots[0],), (roots[1],), roots])))
    tags = draw(st.sampled_from([(), ("rare",), ("t1",), ("t2", "rare")]))
    fields = draw(st.sampled_from([(), (("status", "DRAFT"),), (("status", "done"),)]))
    first, days = draw(st.integers(0, 29)), draw(st.integers(1, 30))
    created = DateRange(EPOCH + first * DAY, EPOCH + (first + days) * DAY, "created")
    dated = draw(st.sampled_from([(), (created,)]))
    return Filters(
        path=PathFilter.parse(path), roots=chosen_roots, tags=tags, fields=fields, dated=dated
    )


@settings(max_examples=300, deadline=None)
@given(data=st.data())
@pytest.mark.slow
def test_a_filtered_search_gives_the_answers_of_the_whole_index_kept_to_what_it_admits(
    indexed: Indexed, data: st.DataObject
) -> None:
    given_filters = data.draw(_filters(indexed.roots))
    words = data.draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=3, unique=True))
    limit = data.draw(st.sampled_from([1, 3, 10]))
    asked = data.draw(st.sampled_from(["auto", "any"]))
    boosts = data.draw(st.sampled_from([(), (("doc", 0.5),)]))
    # Any spread of the stretches (SPREAD 1): the merge of many stretches is searched;
    # few matches (FEW_MATCHES 0): fields and dates are checked against their lists.
    spread = data.draw(st.sampled_from([filters.SPREAD, 1.0]))
    few = data.draw(st.sampled_from([searcher.FEW_MATCHES, 0]))
    plan = replace(
        to_plan(" ".join(words), asked, limit=limit), filters=given_filters, boosts=boosts
    )
    saved = filters.LISTED, filters.LISTED_FIELDS, filters.SPREAD, searcher.FEW_MATCHES
    try:
        filters.SPREAD, searcher.FEW_MATCHES = spread, few
        ranked, total, mode = indexed.store.rank(plan)
        # No listing is complete: every doclist is read whole.
        filters.LISTED = filters.LISTED_FIELDS = -1
        assert indexed.store.rank(plan) == (ranked, total, mode)
    finally:
        filters.LISTED, filters.LISTED_FIELDS, filters.SPREAD, searcher.FEW_MATCHES = saved
    admitted = {i for i, n in indexed.notes.items() if _admits(given_filters, n)}
    assert {i for i, _ in ranked} <= admitted
    holding = {i for i in admitted if set(words) <= indexed.notes[i].words}
    if holding and asked == "auto":
        # Every word held: the unfiltered ranking of them all, kept to the admitted.
        whole = replace(plan, filters=NO_FILTERS, limit=len(indexed.notes))
        everything, _, whole_mode = indexed.store.rank(whole)
        assert whole_mode == "all"
        kept = [(i, score) for i, score in everything if i in admitted]
        assert (ranked, total, mode) == (kept[:limit], len(holding), "all")
    elif not admitted:
        assert (ranked, total) == ([], 0)


def test_a_folder_written_in_turns_is_listed_as_its_stretches(indexed: Indexed) -> None:
    """The folder ``f1`` of both roots: one stretch of three ids per root and turn, and
    ``f10``'s notes, which its range of names holds, are not among them."""
    plan = replace(to_plan("alpha"), filters=Filters(path=PathFilter.parse("f1/")))
    with indexed.store.reader() as conn:
        conn.execute("BEGIN")
        try:
            sql, params, _ = filters.listings(plan.filters)[0]
            ids = sorted(json.loads(conn.execute(sql, params).fetchone()[0]))
            span = conn.execute(filters.SPAN).fetchone()
        finally:
            conn.execute("ROLLBACK")
    in_f1 = sorted(i for i, n in indexed.notes.items() if n.relpath.startswith("f1/"))
    assert ids == in_f1
    admitted = filters.Admitted.of([]).narrowed([ids], span)
    assert admitted.listed and len(admitted.stretches) == filters.STRETCHES
    assert all(any(a <= i <= b for a, b in admitted.stretches) for i in in_f1)
