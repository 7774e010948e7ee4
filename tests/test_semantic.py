"""Search by meaning, end to end: a real daemon with the real model of the ``semantic``
extra (installed by .ci/run; no network is used), real files written, edited, moved
and deleted."""

from __future__ import annotations

import os
from contextlib import closing
from pathlib import Path

import anyio
import pytest
from conftest import Backend, Daemon, MakeDaemon, reading, wait_for, with_writable_root, write
from kbindex.ctl import render
from kbindex.daemon.backends.sqlite.index import SqliteIndex
from kbindex.daemon.engine import sqlite
from kbindex.daemon.health import Health, Scanned
from kbindex.daemon.index.commits import Commits
from kbindex.daemon.indexing.ignore import IgnoreRules
from kbindex.daemon.indexing.indexer import Indexer
from kbindex.daemon.roots import Roots
from kbindex.daemon.semantic import embedder as embedder_module
from kbindex.daemon.semantic.embedder import Embedder
from kbindex.daemon.semantic.encoder import Encoder
from kbindex.daemon.semantic.vectors import VectorFile
from kbindex.proto.errors import DaemonError
from kbindex.proto.messages import NoteReply, SemanticStatus, StatusReply, WriteNote
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
CATS = """# Our cats

Milo and Luna are two tabby cats from the shelter. Milo sleeps on the radiator and
Luna hunts moths at night; both get their vaccines every spring.
"""
BACKUP = """# Backups

The home folder is archived every night with tar into /mnt/backup, and archives
older than thirty days are deleted.
"""
HEADINGS = "# Sorting the table view\n\n## Drawing grid rows lazily\n"
"""Headings with nothing under them: close to PARAPHRASE in words, and no passage."""


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
    # The one file that means it, and only it: the bread is no match by any measure.
    assert [h.relpath for h in hybrid.hits] == ["table.md"]
    assert [h.relpath for h in meaning.hits] == ["table.md"]
    assert (hybrid.total_hits, hybrid.truncated) == (1, False)
    assert (meaning.total_hits, meaning.truncated) == (1, False)
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
async def test_a_path_filter_applies_to_search_by_meaning(make_daemon: MakeDaemon) -> None:
    d = semantic_daemon(make_daemon)
    for i in range(12):
        write(d.root / "ui" / f"table{i}.md", GRID.replace("table view", f"table view {i}"))
    write(d.root / "kitchen" / "bread.md", BREAD)
    write(d.root / "kitchen" / "table.md", GRID.replace("table view", "recipe table"))
    await d.start()
    await embedded(d, 14)
    # The nearest are under ui/; under kitchen/ the table matches, the bread does not.
    assert await d.search_paths(PARAPHRASE, mode="semantic", path="kitchen/", limit=3) == [
        "kitchen/table.md"
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


@pytest.mark.backends
async def test_a_word_that_exists_nowhere_answers_no_matches(make_daemon: MakeDaemon) -> None:
    d = semantic_daemon(make_daemon)
    notes = {"table.md": GRID, "bread.md": BREAD, "cats.md": CATS, "backup.md": BACKUP}
    for name, content in notes.items():
        write(d.root / name, content)
    await d.start()
    await embedded(d, 4)
    async with d.client() as c:
        for mode in ("auto", "hybrid", "semantic"):
            reply = await c.search("quuxplorator", mode=mode)
            assert (reply.hits, reply.total_hits, reply.truncated) == ([], 0, False), mode
        # A word that one file holds finds that file, not every file near it in topic.
        tar = await c.search("tar")
    assert tar.mode == "hybrid"
    assert [h.relpath for h in tar.hits] == ["backup.md"]
    assert tar.total_hits == 1
    result = d.kbctl("search", "quuxplorator")
    assert (result.returncode, result.stdout.strip()) == (0, "no matches")
    async with mcp_stdio(d.socket) as client:
        answer = await client.call_tool("search", {"query": "quuxplorator"})
    data = structured(answer)
    assert (data["results"], data["total_hits"], data["truncated"]) == ([], 0, False)
    assert "raise" not in text(answer)


async def test_headings_with_nothing_under_them_are_never_returned(
    make_daemon: MakeDaemon,
) -> None:
    d = semantic_daemon(make_daemon)
    write(d.root / "table.md", GRID)
    write(d.root / "headings.md", HEADINGS)
    await d.start()
    s = await embedded(d, 2)
    assert s.passages == 2  # table.md's two; headings.md has none
    assert await d.search_paths(PARAPHRASE, mode="semantic") == ["table.md"]
    d.stop()
    # A vector file from before the rule, as rule 1 left it: headings.md has a passage
    # (here with the vector of table.md's nearest one), and no rule is recorded.
    with closing(sqlite.connect(d.state_dir / "vectors.sqlite3")) as conn, conn:
        ((table_id, key),) = conn.execute("SELECT file_id, key FROM spans WHERE seq = 0")
        ((headings_id,),) = conn.execute(
            "SELECT file_id FROM embedded WHERE file_id != ?", (table_id,)
        )
        conn.execute("INSERT INTO spans VALUES (?, 0, 1, 3, ?)", (headings_id, key))
        conn.execute("DELETE FROM meta WHERE key = 'chunks'")
    await d.start()
    after = await embedded(d, 2)
    assert after.passages == 2
    assert after.embedded == 0  # cut again, nothing computed
    assert await d.search_paths(PARAPHRASE, mode="semantic") == ["table.md"]
    with closing(sqlite.connect(d.state_dir / "vectors.sqlite3")) as conn:
        spans = conn.execute("SELECT count(*) FROM spans WHERE file_id = ?", (headings_id,))
        assert spans.fetchone() == (0,)


async def test_a_note_written_a_moment_ago_is_said_to_wait_for_its_meaning(
    make_daemon: MakeDaemon, tmp_path: Path
) -> None:
    d = with_writable_root(make_daemon, tmp_path)
    d.extra_env["KBINDEX_SEMANTIC"] = "auto"
    write(d.root / "table.md", GRID)
    await d.start()
    await embedded(d, 2)  # table.md and the other root's manual.md
    # Long enough that embedding it takes seconds: the search comes before it is done.
    long = "\n\n".join(
        f"Lantern festival, day {i}: the paper lanterns of street {i} are lit at dusk."
        for i in range(80)
    )
    async with d.client() as c:
        await c.request(WriteNote(path="festival.md", content=long + "\n"), NoteReply)
        reply = await c.search("lantern festival", mode="hybrid")
        s = (await c.status()).semantic
    assert [h.relpath for h in reply.hits][:1] == ["festival.md"]  # by its words
    assert reply.notes == ["1 file(s) not embedded yet: found by words only"]
    assert s is not None
    assert s.backlog == 1
    shown = d.kbctl("status").stdout
    assert "1 file(s) to embed" in shown
    assert "0.0 passages/s" not in shown


async def test_the_embedder_takes_a_new_file_when_its_commit_is_announced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The daemon's own parts in one process: a real index written by a real indexer, the
    real model. Polling is taken out (an hour between looks, and between passes): only
    the indexer's announcement can start the pass that embeds the new file; before, the
    embedder found it only by polling ``Index.writes``."""
    monkeypatch.setattr(embedder_module, "POLL_SECONDS", 3600.0)
    monkeypatch.setattr(embedder_module, "PASS_EVERY_SECONDS", 3600.0)
    root = tmp_path / "root"
    write(root / "table.md", GRID)
    roots = Roots([root])
    index = SqliteIndex(tmp_path / "index.sqlite3", reading(*roots.paths))
    index.open()
    health, commits = Health(), Commits()
    rules = IgnoreRules(included_extensions=None, excluded_extensions=frozenset())
    indexer = Indexer(index, roots, rules, health, 1 << 20, commits=commits)
    vectors = VectorFile(tmp_path / "vectors.sqlite3")
    embedder = Embedder(index, commits, Encoder(), vectors, health, _anything, _on)
    try:
        await indexer.refresh()
        health.record(Scanned(0.0))
        async with anyio.create_task_group() as tg:
            tg.start_soon(embedder.run)

            async def embedded(files: int) -> bool:
                return embedder.files == files and embedder.progress.state == "ready"

            await wait_for(lambda: embedded(1), timeout=60)
            write(root / "bread.md", BREAD)
            await indexer.refresh()
            await wait_for(lambda: embedded(2), timeout=60)
            tg.cancel_scope.cancel()
    finally:
        index.close()


def _anything(root: str, size: int) -> bool:
    return True


def _on() -> bool:
    return True


def test_status_says_what_search_by_meaning_is_doing() -> None:
    def line(**given: object) -> str:
        fields = {"model": "m", "files": 3, "passages": 9, "size_mb": 0.1} | given
        return render._meaning(SemanticStatus(**fields))  # type: ignore[arg-type]

    assert line(state="waiting") == "meaning: waiting (the model loads after the first scan)"
    assert line(state="loading") == "meaning: loading the model"
    starting = line(state="embedding", backlog=40)
    assert starting.endswith("40 file(s) to embed, starting")
    going = line(state="embedding", backlog=40, rate=8.0, seconds_left=150.0)
    assert going.endswith("40 file(s) to embed at 8.0 passages/s, about 2 min left")
    assert line(state="ready") == "meaning: ready, m, 3 files / 9 passages, 0.1 MB"
