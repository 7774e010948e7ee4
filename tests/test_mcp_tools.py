"""kbindex-mcp end to end: the SDK's client spawns the front end over stdio, the front end
talks to a real kbindexd on a real socket over real files."""

from __future__ import annotations

from pathlib import Path

import mcp_types as types
import pytest
from conftest import Daemon, write
from mcp.shared.exceptions import MCPError
from mcp_helpers import corpus, mcp_stdio, response_size, structured, text

pytestmark = pytest.mark.anyio

TOOLS = {"search", "grep", "get_index_stats", "refresh_index", "read_file", "find_files"}


@pytest.mark.parametrize("mode", [pytest.param("legacy", marks=pytest.mark.slow), "auto"])
@pytest.mark.backends
async def test_every_tool_and_the_resource_template(daemon: Daemon, mode: str) -> None:
    root = daemon.root
    corpus(root)
    await daemon.refresh()
    async with mcp_stdio(daemon.socket, mode=mode) as client:
        assert client.protocol_version == ("2025-11-25" if mode == "legacy" else "2026-07-28")
        listed = {t.name: t for t in (await client.list_tools()).tools}
        assert set(listed) == TOOLS
        for tool in listed.values():
            assert tool.description
            assert len(tool.description) > 80
            assert tool.input_schema["type"] == "object"
            assert tool.output_schema is not None
            assert tool.annotations is not None
            assert tool.annotations.read_only_hint is (tool.name != "refresh_index")
            assert tool.annotations.destructive_hint is False
        limit = listed["search"].input_schema["properties"]["limit"]
        assert (limit["minimum"], limit["maximum"]) == (1, 100)

        # search: path, line of the best match, snippet, freshness
        found = structured(await client.call_tool("search", {"query": "picks"}))
        first = found["results"][0]
        assert first["relpath"] == "docs/scheduler.md"
        assert first["path"] == str(root / "docs" / "scheduler.md")
        assert first["line"] == 5
        assert "⟦picks⟧" in first["snippet"]
        assert first["last_modified"].endswith("Z")
        assert found["freshness"]["last_scan"] is not None
        assert found["truncated"] is False
        assert found["total_hits"] == found["returned"] == 1
        result = await client.call_tool("search", {"query": "picks"})
        assert f"{first['path']}:5" in text(result)

        # integers as strings, total_hits beyond the limit, a path filter
        two = structured(await client.call_tool("search", {"query": "queue", "limit": "1"}))
        assert two["returned"] == 1
        assert two["total_hits"] == 2
        assert two["truncated"] is True
        scoped = structured(
            await client.call_tool("search", {"query": "dispatcher", "path_glob": "notes/"})
        )
        assert [r["relpath"] for r in scoped["results"]] == ["notes/todo.txt"]
        none = structured(
            await client.call_tool("search", {"query": "dispatcher", "path_glob": "docs/*"})
        )
        assert none["results"] == []

        stats = structured(await client.call_tool("get_index_stats", {}))
        assert stats["indexed_files"] == 4
        assert [r["path"] for r in stats["roots"]] == [str(root)]
        assert stats["last_scan"] is not None
        assert stats["errors_encountered"] == 0

        files = structured(await client.call_tool("find_files", {"glob": "docs/*", "limit": 10}))
        docs = root / "docs"
        assert [f["path"] for f in files["files"]] == [
            str(docs / "queue.md"),
            str(docs / "scheduler.md"),
        ]
        assert files["files"][0]["size"] == (root / "docs" / "queue.md").stat().st_size
        assert files["total"] == 2
        assert files["truncated"] is False

        read = await client.call_tool(
            "read_file", {"path": "docs/scheduler.md", "start_line": 5, "end_line": "5"}
        )
        data = structured(read)
        assert data["text"] == "The scheduler picks the next task from the queue."
        assert (data["start_line"], data["end_line"], data["total_lines"]) == (5, 5, 5)
        assert data["truncated"] is False
        assert data["next_start_line"] is None
        assert "5| The scheduler picks" in text(read)

        # refresh with progress: a file written now is searchable afterwards
        write(root / "docs" / "fresh.md", "a quokka arrived\n")
        seen: list[tuple[float, float | None]] = []

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            seen.append((progress, total))

        refreshed = structured(
            await client.call_tool("refresh_index", {}, progress_callback=on_progress)
        )
        assert refreshed["success"] is True
        assert refreshed["files_changed"] == 1
        assert seen, "no progress notification arrived"
        values = [v for v, _ in seen]
        assert values == sorted(set(values)), "progress must strictly increase"
        hit = structured(await client.call_tool("search", {"query": "quokka"}))
        assert [r["relpath"] for r in hit["results"]] == ["docs/fresh.md"]
        one = structured(await client.call_tool("refresh_index", {"filepath": "docs/fresh.md"}))
        assert one["files_processed"] == 1
        assert one["scope"] == "docs/fresh.md"

        # the resource template, with the URI taken from a result
        templates = (await client.list_resource_templates()).resource_templates
        assert [t.uri_template for t in templates] == ["kbindex://file/{+path}"]
        assert (await client.list_resources()).resources == []
        odd = structured(await client.call_tool("search", {"query": "zebrafish"}))["results"][0]
        assert odd["uri"] == "kbindex://file" + str(root / "a%20b" / "sp%C3%A4ce.md")
        contents = (await client.read_resource(odd["uri"])).contents
        assert len(contents) == 1
        assert isinstance(contents[0], types.TextResourceContents)
        assert contents[0].mime_type == "text/markdown"
        assert contents[0].text == "# Unicode\n\nzebrafish appear here"
        txt = (await client.read_resource(f"kbindex://file{root}/notes/todo.txt")).contents[0]
        assert txt.mime_type == "text/plain"


def _one_sentence(result: types.CallToolResult) -> str:
    assert result.is_error, text(result)
    message = text(result)
    assert "Traceback" not in message
    assert "\n" not in message
    assert len(message) < 400, message
    return message


@pytest.mark.slow
async def test_errors_become_one_sentence_tool_errors(daemon: Daemon) -> None:
    corpus(daemon.root)
    await daemon.refresh()
    async with mcp_stdio(daemon.socket) as client:
        outside = _one_sentence(await client.call_tool("read_file", {"path": "/etc/passwd"}))
        assert "outside the folders" in outside
        climbing = await client.call_tool("read_file", {"path": "docs/../../../../etc/passwd"})
        assert "outside the folders" in _one_sentence(climbing)
        missing = _one_sentence(await client.call_tool("read_file", {"path": "docs/nope.md"}))
        assert "find_files" in missing
        for bad in ("abc", 0, -3, 2.5, True, [5]):
            message = _one_sentence(await client.call_tool("search", {"query": "x", "limit": bad}))
            assert "limit" in message
            assert "from 1 to 100" in message
        assert "query" in _one_sentence(await client.call_tool("search", {}))
        assert "query" in _one_sentence(await client.call_tool("search", {"query": "  "}))
        backwards = await client.call_tool(
            "read_file", {"path": "docs/queue.md", "start_line": 3, "end_line": 1}
        )
        assert "end_line" in _one_sentence(backwards)
        assert "Unknown tool" in _one_sentence(await client.call_tool("delete_everything", {}))
        # An FTS5-looking query is data, not syntax: no error, just no match.
        odd = await client.call_tool("search", {"query": 'NEAR("a" OR -) * ^'})
        assert not odd.is_error

        with pytest.raises(MCPError) as outside_resource:
            await client.read_resource("kbindex://file/etc/passwd")
        assert "outside the folders" in outside_resource.value.error.message
        with pytest.raises(MCPError):
            await client.read_resource("file:///etc/passwd")

        # Lenient, with a note: unknown arguments are ignored, a large limit is clamped.
        lenient = await client.call_tool(
            "search", {"query": "queue", "limit": 500, "max_results": 3}
        )
        data = structured(lenient)
        assert data["returned"] == 2
        assert any("max_results" in n for n in data["notes"])
        assert any("used 100" in n for n in data["notes"])
        assert "Ignored unknown argument(s): max_results" in text(lenient)
        nulls = await client.call_tool("read_file", {"path": "docs/queue.md", "start_line": None})
        assert structured(nulls)["start_line"] == 1
        # "a few lines before line 3" computed as a negative number still reads from the top
        early = structured(
            await client.call_tool("read_file", {"path": "docs/queue.md", "start_line": "-7"})
        )
        assert early["start_line"] == 1
        assert early["notes"] == ["start_line=-7 is below 1; used 1."]


@pytest.mark.slow
async def test_responses_stay_within_budget_whatever_the_file_sizes(daemon: Daemon) -> None:
    # Many matching files with long snippets, one large file, one giant single line.
    sentence = "The ocelot sleeps in the archive between long forgotten ledgers. " * 30
    for n in range(110):
        write(daemon.root / "many" / f"note{n:03}.md", f"# Note {n}\n\n{sentence}\n")
    line = "Lorem ipsum dolor sit amet, consectetur adipiscing elit. " * 18 + "\n"
    write(daemon.root / "big.md", "# Big\n" + line * 400)
    write(daemon.root / "minified.txt", "lorem," * 8_000 + "\nsecond line\n")
    write(daemon.root / "enormous.txt", "lorem," * 60_000 + "\nsecond line\n")
    await daemon.refresh()
    async with mcp_stdio(daemon.socket) as client:
        found = await client.call_tool("search", {"query": "ocelot ledgers", "limit": 100})
        data = structured(found)
        assert data["total_hits"] == 110
        assert data["truncated"] is True
        assert 10 <= data["returned"] < 100, data["returned"]
        assert response_size(found) < 26_000
        assert "left out to keep this answer small" in text(found)

        read = await client.call_tool("read_file", {"path": "big.md"})
        part = structured(read)
        assert part["truncated"] is True
        assert part["total_lines"] == 401
        assert response_size(read) < 26_000
        nxt = part["next_start_line"]
        assert nxt == part["end_line"] + 1
        assert f"continue with start_line={nxt}" in text(read)
        more = structured(
            await client.call_tool("read_file", {"path": "big.md", "start_line": nxt})
        )
        assert more["start_line"] == nxt

        long_line = await client.call_tool("read_file", {"path": "minified.txt"})
        cut = structured(long_line)
        assert cut["truncated"] is True
        assert cut["end_line"] == 1
        assert cut["next_start_line"] == 2
        assert cut["text"].startswith("lorem,lorem")
        assert response_size(long_line) < 26_000
        # Longer than the daemon returns at all: its start, cut, and a way forward.
        enormous = await client.call_tool("read_file", {"path": "enormous.txt"})
        skip = structured(enormous)
        assert skip["truncated"] is True
        assert skip["text"].startswith("lorem,lorem")
        assert response_size(enormous) < 26_000
        assert skip["next_start_line"] == 2
        assert "continue with start_line=2" in text(enormous)

        listed = await client.call_tool("find_files", {"glob": "*", "limit": 500})
        files = structured(listed)
        assert files["total"] == 113
        assert response_size(listed) < 26_000


def test_structured_results_validate_against_output_schemas(tmp_path: Path) -> None:
    """The client validates structuredContent against outputSchema on every call above;
    this checks the schemas themselves are valid JSON Schema."""
    from jsonschema import Draft202012Validator  # type: ignore[import-untyped]
    from kbindex.mcpfront.schemas import TOOLS as DEFINED

    for tool in DEFINED:
        Draft202012Validator.check_schema(tool.input_schema)
        assert tool.output_schema is not None
        Draft202012Validator.check_schema(tool.output_schema)
