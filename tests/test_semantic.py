"""Search by meaning, end to end: a real daemon with the real model of the ``semantic``
extra (installed by .ci/run; no network is used), real files written, edited, moved
and deleted."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from conftest import Backend, Daemon, MakeDaemon, wait_for, write
from kbindex.proto.errors import DaemonError
from kbindex.proto.messages import SemanticStatus, StatusReply
from mcp_helpers import mcp_stdio, structured, text

pytestmark = [pytest.mark.anyio, pytest.mark.slow]
pytest.importorskip("onnxruntime", reason="the semantic extra is not installed")
pytest.importorskip("tokenizers", reason="the semantic extra is not installed")

GRID = """# The table view

The table view draws each line of data lazily: only the lines on screen are painted,
and scrolling reuses the painted line elements.

## Sorting

Clicking a column header orders the records by that column.
"""
BREAD = """# Bread

Knead the dough for ten minutes, let it rise for an hour, then bake at 220 degrees.
"""
PARAPHRASE = "grid rendering rows"
"""Shares no word with GRID (nor with its stems), but means what it says."""


def semantic_daemon(make_daemon: MakeDaemon, *roots: Path) -> Daemon:
    d = make_daemon(*roots)
    d.extra_env["KBINDEX_SEMANTIC"] = "auto"
    return d


async def status(d: Daemon) -> StatusReply:
    async with d.client() as c:
        return await c.status()


async def embedded(d: Daemon, files: int) -> SemanticStatus:
    """Wait until ``files`` files are embedded and nothing waits; the status then."""

    async def done() -> SemanticStatus | None:
        s = (await status(d)).semantic
        assert s is not None
        assert s.state != "unavailable", s.detail
        return s if s.state == "ready" and s.files == files and not s.backlog else None

    return await wait_for(done, timeout=60)


@pytest.mark.backends
async def test_hybrid_finds_a_paraphrase_that_words_miss(
    make_daemon: MakeDaemon, backend: Backend
) -> None:
    d = semantic_daemon(make_daemon)
    write(d.root / "table.md", GRID)
    write(d.root / "bread.md", BREAD)
    await d.start()
    await embedded(d, 2)
    assert await d.search_paths(PARAPHRASE, mode="words") == []
    async with d.client() as c:
        hybrid = await c.search(PARAPHRASE)
        meaning = await c.search(PARAPHRASE, mode="semantic")
    assert hybrid.mode == "hybrid"
    assert [h.relpath for h in hybrid.hits][:1] == ["table.md"]
    assert [h.relpath for h in meaning.hits][:1] == ["table.md"]
    # The hit points at the passage that matched, not at the file's first line.
    assert hybrid.hits[0].line == 3
    assert "draws each line" in hybrid.hits[0].snippet
    assert hybrid.notes == []
    # In a shared index each hit names its machine, by meaning as by words.
    assert {h.machine for h in [*hybrid.hits, *meaning.hits]} == {backend.machine}


async def test_an_edit_re_embeds_only_the_passage_that_changed(make_daemon: MakeDaemon) -> None:
    d = semantic_daemon(make_daemon)
    note = write(d.root / "table.md", GRID)
    await d.start()
    before = await embedded(d, 1)
    assert before.passages == 2
    assert before.embedded == 2
    write(note, GRID.replace("orders the records", "sorts the rows"))
    await d.refresh(str(note))

    async def re_embedded() -> SemanticStatus | None:
        s = (await status(d)).semantic
        assert s is not None
        return s if s.embedded > before.embedded and not s.backlog else None

    after = await wait_for(re_embedded, timeout=30)
    assert after.embedded == before.embedded + 1
    assert after.passages == 2
    hits = await d.search_paths("ordering entries by a column", mode="semantic")
    assert hits[:1] == ["table.md"]


@pytest.mark.backends
async def test_a_moved_file_is_found_at_its_new_path_without_embedding_again(
    make_daemon: MakeDaemon,
) -> None:
    d = semantic_daemon(make_daemon)
    write(d.root / "table.md", GRID)
    write(d.root / "bread.md", BREAD)
    await d.start()
    before = await embedded(d, 2)
    (d.root / "ui").mkdir()
    os.rename(d.root / "table.md", d.root / "ui" / "table.md")
    await d.refresh()

    async def moved() -> list[str] | None:
        found = await d.search_paths(PARAPHRASE, mode="semantic")
        return found if found[:1] == ["ui/table.md"] else None

    await wait_for(moved, timeout=30)
    after = await embedded(d, 2)
    assert after.embedded == before.embedded


async def test_a_deleted_file_leaves_the_results_and_its_vectors(make_daemon: MakeDaemon) -> None:
    d = semantic_daemon(make_daemon)
    write(d.root / "table.md", GRID)
    write(d.root / "bread.md", BREAD)
    await d.start()
    await embedded(d, 2)
    (d.root / "table.md").unlink()
    await d.refresh()
    after = await embedded(d, 1)
    assert after.passages == 1
    assert "table.md" not in await d.search_paths(PARAPHRASE, mode="semantic")


@pytest.mark.backends
async def test_a_path_filter_applies_before_the_nearest_are_cut(make_daemon: MakeDaemon) -> None:
    d = semantic_daemon(make_daemon)
    for i in range(12):
        write(d.root / "ui" / f"table{i}.md", GRID.replace("table view", f"table view {i}"))
    write(d.root / "kitchen" / "bread.md", BREAD)
    await d.start()
    await embedded(d, 13)
    assert await d.search_paths(PARAPHRASE, mode="semantic", path="kitchen/", limit=3) == [
        "kitchen/bread.md"
    ]


async def test_the_model_loads_after_the_first_scan_not_at_start_up(
    make_daemon: MakeDaemon,
) -> None:
    d = semantic_daemon(make_daemon)
    write(d.root / "table.md", GRID)
    await d.start()
    s = await embedded(d, 1)
    reply = await status(d)
    assert reply.last_scan_at is not None
    assert s.loaded_at is not None
    assert s.loaded_at >= reply.last_scan_at


async def test_without_the_model_search_answers_by_words_and_says_why(
    make_daemon: MakeDaemon, tmp_path: Path
) -> None:
    d = semantic_daemon(make_daemon)
    d.extra_env["KBINDEX_SEMANTIC_MODEL"] = str(tmp_path / "no-such-model")
    write(d.root / "table.md", GRID)
    await d.start()

    async def unavailable() -> SemanticStatus | None:
        s = (await status(d)).semantic
        assert s is not None
        return s if s.state == "unavailable" else None

    s = await wait_for(unavailable, timeout=30)
    assert "no-such-model" in s.detail
    async with d.client() as c:
        asked = await c.search("table view", mode="hybrid")
        default = await c.search("table view")
    assert asked.mode != "hybrid"
    assert [h.relpath for h in asked.hits] == ["table.md"]
    assert len(asked.notes) == 1
    assert "unavailable" in asked.notes[0]
    assert "no-such-model" in asked.notes[0]
    assert [h.relpath for h in default.hits] == ["table.md"]
    assert default.notes == []  # nobody asked for meaning: nothing to say
    result = d.kbctl("search", "table view", "--mode", "semantic")
    assert result.returncode == 0
    assert "answered by words" in result.stdout


async def test_semantic_off_loads_nothing_and_says_so(make_daemon: MakeDaemon) -> None:
    d = make_daemon()  # the test default: KBINDEX_SEMANTIC=off
    write(d.root / "table.md", GRID)
    await d.start()
    s = (await status(d)).semantic
    assert s is not None
    assert s.state == "off"
    assert not (d.state_dir / "vectors.sqlite3").exists()
    async with d.client() as c:
        reply = await c.search(PARAPHRASE, mode="semantic")
    assert reply.hits == []
    assert "off" in reply.notes[0]


async def test_a_root_with_semantic_off_is_searched_by_words_only(
    make_daemon: MakeDaemon, tmp_path: Path
) -> None:
    ui, private = tmp_path / "ui", tmp_path / "private"
    write(ui / "table.md", GRID)
    write(private / "table.md", GRID)
    config = tmp_path / "config.toml"
    config.write_text(f'[root."{private}"]\nsemantic = "off"\n')
    d = semantic_daemon(make_daemon, ui, private)
    d.extra_args = ["--config", str(config)]
    await d.start()
    await embedded(d, 1)
    async with d.client() as c:
        found = await c.search(PARAPHRASE, mode="semantic")
        words = await c.search("table view")
    assert [h.path for h in found.hits] == [str(ui / "table.md")]
    assert sorted(h.path for h in words.hits) == [str(private / "table.md"), str(ui / "table.md")]


async def test_an_unknown_mode_is_a_bad_query_naming_the_modes(make_daemon: MakeDaemon) -> None:
    d = semantic_daemon(make_daemon)
    await d.start()
    async with d.client() as c:
        with pytest.raises(DaemonError, match="hybrid, semantic") as raised:
            await c.search("table", mode="meaning")
        assert raised.value.code == "bad_query"
        assert (await c.ping()) is not None  # the daemon goes on serving


async def test_the_mcp_search_tool_takes_a_mode(make_daemon: MakeDaemon) -> None:
    d = semantic_daemon(make_daemon)
    write(d.root / "table.md", GRID)
    write(d.root / "bread.md", BREAD)
    await d.start()
    await embedded(d, 2)
    async with mcp_stdio(d.socket) as client:
        tool = {t.name: t for t in (await client.list_tools()).tools}["search"]
        assert tool.input_schema["properties"]["mode"]["enum"] == ["auto", "words", "semantic"]
        by_meaning = structured(await client.call_tool("search", {"query": PARAPHRASE}))
        by_words = structured(
            await client.call_tool("search", {"query": PARAPHRASE, "mode": "words"})
        )
        bad = await client.call_tool("search", {"query": PARAPHRASE, "mode": "vibes"})
        stats = structured(await client.call_tool("get_index_stats", {}))
    assert by_meaning["mode"] == "hybrid"
    assert by_meaning["results"][0]["relpath"] == "table.md"
    assert by_words["results"] == []
    assert bad.is_error
    assert "auto, words, semantic" in text(bad)
    assert stats["semantic"]["state"] == "ready"
    assert stats["semantic"]["files"] == 2


async def test_the_mcp_search_tool_passes_on_why_meaning_is_not_used(
    make_daemon: MakeDaemon,
) -> None:
    off = make_daemon()
    write(off.root / "table.md", GRID)
    await off.start()
    async with mcp_stdio(off.socket) as client:
        asked = await client.call_tool("search", {"query": "table view", "mode": "semantic"})
    data = structured(asked)
    assert [r["relpath"] for r in data["results"]] == ["table.md"]
    assert any("search by meaning is off" in n for n in data["notes"])
    assert "search by meaning is off" in text(asked)


async def test_a_damaged_vector_file_is_replaced_and_refilled(make_daemon: MakeDaemon) -> None:
    d = semantic_daemon(make_daemon)
    write(d.root / "table.md", GRID)
    d.state_dir.mkdir(parents=True)
    (d.state_dir / "vectors.sqlite3").write_bytes(b"not a database\x00" * 1000)
    await d.start()
    await embedded(d, 1)
    assert await d.search_paths(PARAPHRASE, mode="semantic") == ["table.md"]
