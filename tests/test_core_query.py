"""Query compilation (pure) checked against a real FTS5 table, and search behaviour."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from conftest import Daemon, write
from hypothesis import given, settings
from hypothesis import strategies as st
from kbindex.daemon.backends.sqlite import schema, searcher
from kbindex.daemon.backends.sqlite.documents import entry, insert
from kbindex.daemon.engine import sqlite
from kbindex.daemon.indexing.documents import prepare
from kbindex.daemon.indexing.textfile import Loaded, decode
from kbindex.daemon.searching.query import BadQuery, parse, to_plan


@pytest.fixture(scope="module")
def fts() -> Iterator[sqlite.Connection]:
    """The full-text tables as the store's migrations create them, with two documents."""
    conn = sqlite.connect(":memory:", isolation_level=None)
    schema.create(conn)
    for rowid, (name, text) in enumerate(
        [("a.md", "# Alpha\nthe quick brown fox"), ("b.md", "lazy dogs AND cats")], start=1
    ):
        loaded = decode(text.encode(), len(text), 0)
        assert isinstance(loaded, Loaded)
        doc = prepare(name, loaded)
        insert(conn, [entry(rowid, doc)])
    yield conn
    conn.close()


@pytest.mark.slow
@settings(max_examples=400, deadline=None)
@given(st.text(max_size=200), st.sampled_from(["auto", "all", "any"]))
def test_no_text_input_raises(fts: sqlite.Connection, query: str, mode: str) -> None:
    # The whole read path: prefix terms resolved, the ranked query and the count.
    searcher.search(fts, to_plan(query, mode, limit=1))


@pytest.mark.parametrize(
    "query",
    ['"', '""', "-", "*", "AND", "OR NOT", "NEAR(", "a:b", "(((", '"unterminated', "^x", "-*"],
)
def test_operator_soup_is_data(fts: sqlite.Connection, query: str) -> None:
    searcher.search(fts, to_plan(query, limit=1))


def test_parse_understands_forgiving_syntax() -> None:
    terms = parse('alpha "quick brown" -dogs pre* -"two words"')
    assert [(t.text, t.phrase, t.prefix, t.negated) for t in terms] == [
        ("alpha", False, False, False),
        ("quick brown", True, False, False),
        ("dogs", False, False, True),
        ("pre", False, True, False),
        ("two words", True, False, True),
    ]


def test_modes() -> None:
    assert to_plan("two words").mode == "all"
    assert to_plan("how does the scheduler pick tasks").mode == "any"
    assert to_plan('"phrase here" and more words').mode == "all"
    assert to_plan("-only -negatives").empty
    with pytest.raises(BadQuery):
        to_plan("x", "bogus")
    with pytest.raises(BadQuery):
        to_plan("x" * 5000)


@pytest.mark.anyio
@pytest.mark.backends
async def test_phrase_exclusion_prefix_and_fallback(daemon: Daemon) -> None:
    write(daemon.root / "a.md", "the quick brown fox jumps\n")
    write(daemon.root / "b.md", "brown paper and a quick note\n")
    write(daemon.root / "c.md", "deprecation warnings everywhere\n")
    await daemon.refresh()
    assert await daemon.search_paths('"quick brown"') == ["a.md"]
    assert sorted(await daemon.search_paths("quick brown")) == ["a.md", "b.md"]
    assert await daemon.search_paths("quick -fox") == ["b.md"]
    assert await daemon.search_paths("deprecat*") == ["c.md"]
    # No document has both words: "all" finds nothing, so the search falls back to "any".
    async with daemon.client() as c:
        reply = await c.search("fox paper")
    assert reply.mode == "any" and len(reply.hits) == 2


@pytest.mark.anyio
@pytest.mark.backends
async def test_ranking_title_and_name_beat_body(daemon: Daemon) -> None:
    write(daemon.root / "misc.md", "# Misc\n\n" + "filler text " * 20 + "kubernetes once\n")
    write(daemon.root / "guide.md", "# Kubernetes guide\n\n" + "filler text " * 20 + "\n")
    write(daemon.root / "kubernetes.txt", "filler text " * 20 + "\n")
    await daemon.refresh()
    paths = await daemon.search_paths("kubernetes")
    assert paths[-1] == "misc.md"
    assert set(paths[:2]) == {"guide.md", "kubernetes.txt"}


@pytest.mark.anyio
@pytest.mark.backends
async def test_results_have_line_snippet_and_bounds(daemon: Daemon) -> None:
    body = "".join(f"line {i} of filler\n" for i in range(1, 40)) + "the needle is here\n"
    write(daemon.root / "long.txt", body + "x " * 5000)
    for i in range(15):
        write(daemon.root / f"many{i}.txt", "needle\n")
    await daemon.refresh()
    async with daemon.client() as c:
        reply = await c.search("needle", path="long.txt")
        many = await c.search("needle", limit=5)
        # many1.txt and many10..14.txt: the count past the limit honours the filter.
        filtered = await c.search("needle", limit=5, path="many1*")
    hit = reply.hits[0]
    assert hit.line == 40
    assert "⟦needle⟧" in hit.snippet and len(hit.snippet) <= 420
    assert hit.size == (daemon.root / "long.txt").stat().st_size
    assert many.total_hits == 16 and len(many.hits) == 5 and many.truncated
    assert filtered.total_hits == 6 and len(filtered.hits) == 5 and filtered.truncated
    assert many.freshness is not None and many.freshness.last_scan_at is not None


@pytest.mark.anyio
async def test_a_snippet_is_read_from_the_file_as_it_is_now(daemon: Daemon) -> None:
    """The index keeps no text: a hit's snippet comes from the file. Edited since it
    was indexed (no watcher here to see it), the hit shows the line as it is now; a
    file deleted since is still a hit, with no snippet, and the search does not fail."""
    daemon.extra_args = ["--watch", "off"]
    daemon.stop()
    write(daemon.root / "edited.md", "needle in the first version\n")
    write(daemon.root / "deleted.md", "needle in a file about to go\n")
    await daemon.start()
    write(daemon.root / "edited.md", "a new first line\nthe needle moved down\n")
    (daemon.root / "deleted.md").unlink()
    async with daemon.client() as c:
        hits = {h.relpath: h for h in (await c.search("needle")).hits}
    assert set(hits) == {"edited.md", "deleted.md"}
    assert (hits["edited.md"].line, hits["edited.md"].snippet) == (2, "the ⟦needle⟧ moved down")
    assert hits["deleted.md"].snippet == ""


@pytest.mark.anyio
@pytest.mark.backends
async def test_path_filters(daemon: Daemon) -> None:
    write(daemon.root / "docs" / "a.md", "needle\n")
    write(daemon.root / "docs" / "deep" / "b.md", "needle\n")
    write(daemon.root / "docsx" / "c.md", "needle\n")
    write(daemon.root / "notes" / "d.txt", "needle\n")
    await daemon.refresh()

    async def paths(filter_: str) -> list[str]:
        return sorted(await daemon.search_paths("needle", path=filter_))

    assert await paths("docs/") == ["docs/a.md", "docs/deep/b.md"]
    assert await paths("docs") == ["docs/a.md", "docs/deep/b.md"]
    assert await paths("**/*.md") == ["docs/a.md", "docs/deep/b.md", "docsx/c.md"]
    assert await paths("*.txt") == ["notes/d.txt"]
    assert await paths(f"{daemon.root}/notes") == ["notes/d.txt"]
    assert await paths("nowhere/") == []


@pytest.mark.anyio
@pytest.mark.backends
async def test_short_words_and_stop_words_are_words_like_any_other(daemon: Daemon) -> None:
    write(daemon.root / "a.md", "a non issue\n")
    write(daemon.root / "b.md", "as non issue\n")
    write(daemon.root / "c.md", "the quick fox\n")
    write(daemon.root / "d.md", "quick thinking\n")
    await daemon.refresh()
    # Not stemmed together ("as" is not "a"), and a phrase keeps its stop words.
    assert await daemon.search_paths('"as non"') == ["b.md"]
    assert await daemon.search_paths('"a non"') == ["a.md"]
    assert await daemon.search_paths('"the quick"') == ["c.md"]
    assert await daemon.search_paths('"as non"', mode="raw") == ["b.md"]


@pytest.mark.anyio
@pytest.mark.backends
async def test_a_prefix_ranks_by_every_word_it_stands_for(daemon: Daemon) -> None:
    """A prefix ranks as the words it stands for (SQLite's), not its stem alone: on
    PostgreSQL the stem's own postings ("zorbl") once ranked a file of one such word,
    short, above one of four."""
    write(daemon.root / "many.txt", "zorblax zorblax zorblax zorbling " + "filler " * 30)
    write(daemon.root / "one.txt", "zorbling and more\n")
    await daemon.refresh()
    assert await daemon.search_paths("zorbl*") == ["many.txt", "one.txt"]
