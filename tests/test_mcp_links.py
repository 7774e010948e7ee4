"""Links and backlinks through MCP (``mcpfront.links``): read_file's answer names a
note's links and the notes that link to it, and find_files lists them all with
``where="links:PATH"`` or ``"linked-from:PATH"``. A real kbindex-mcp (the SDK's client
over stdio) against a real kbindexd on real notes."""

from __future__ import annotations

import pytest
from kbindex.mcpfront.links import SHOWN
from mcp_helpers import mcp_stdio, structured, text

from tests.conftest import MakeDaemon, write

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

HUB = """# Hub
See [the plan](projects/plan.md) and [[Ideas]].
A link to [nothing](gone.md), and [the web](https://example.com).
"""


async def test_read_file_names_links_and_backlinks_and_find_files_lists_them(
    make_daemon: MakeDaemon,
) -> None:
    d = make_daemon()
    write(d.root / "hub.md", HUB)
    write(d.root / "projects" / "plan.md", "# Plan\nBack to the [hub](../hub.md).\n")
    write(d.root / "Ideas.md", "# Ideas\nnothing links out\n")
    many = SHOWN + 3
    for i in range(many):
        write(d.root / "daily" / f"day{i:02}.md", f"# Day {i}\nWorked on [[Ideas]] today.\n")
    await d.start()
    async with mcp_stdio(d.socket) as client:
        hub = await client.call_tool("read_file", {"path": "hub.md"})
        assert "links to: projects/plan.md, Ideas.md, gone.md (broken)" in text(hub)
        assert "linked from: projects/plan.md:2" in text(hub)
        assert any(n.startswith("links to:") for n in structured(hub)["notes"])

        # More backlinks than the answer names: it says how to list them all.
        ideas = text(await client.call_tool("read_file", {"path": "Ideas.md"}))
        assert "links to" not in ideas
        assert "linked from: daily/day00.md:2, daily/day01.md:2" in ideas
        term = f"linked-from:{d.root / 'Ideas.md'}"
        assert f'(+{many + 1 - SHOWN} more: find_files(where="{term}"))' in ideas
        listed = structured(await client.call_tool("find_files", {"where": term}))
        paths = [f["path"] for f in listed["files"]]
        assert paths[0] == str(d.root / "daily" / "day00.md") and len(paths) == many + 1
        assert str(d.root / "hub.md") in paths and listed["total"] == many + 1
        # A limit lists the first files, counts them all and names the limit as the cause.
        first = await client.call_tool("find_files", {"where": term, "limit": 3})
        assert [f["path"] for f in structured(first)["files"]] == paths[:3]
        assert structured(first)["total"] == many + 1 and structured(first)["truncated"]
        assert f"{many - 2} more file(s): raise limit" in text(first), text(first)
        assert "to keep this answer small" not in text(first)

        out = await client.call_tool("find_files", {"where": "links:hub.md"})
        assert [f["path"] for f in structured(out)["files"]] == [
            str(d.root / "projects" / "plan.md"),
            str(d.root / "Ideas.md"),
            str(d.root / "gone.md"),
        ]
        assert "1 broken link(s)" in text(out) and "gone.md (broken)" in text(out)

        # Reading on does not repeat them; a file with no links gets no such line.
        later = text(await client.call_tool("read_file", {"path": "hub.md", "start_line": 2}))
        assert "links to" not in later and "linked from" not in later
        write(d.root / "plain.md", "# Plain\nno links\n")
        await d.refresh()
        plain = text(await client.call_tool("read_file", {"path": "plain.md"}))
        assert "links to" not in plain and "linked from" not in plain

        # The terms belong to find_files, alone, and need a path.
        for tool, args, why in [
            ("search", {"query": "plan", "where": "links:hub.md"}, "find_files only"),
            ("find_files", {"where": "links:hub.md kind:doc"}, "goes alone"),
            ("find_files", {"where": "linked-from:nope.md"}, "not in the index"),
        ]:
            bad = await client.call_tool(tool, args)
            assert bad.is_error and why in text(bad), text(bad)
