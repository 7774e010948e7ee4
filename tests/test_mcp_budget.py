"""What an agent pays for: every answer of kbindex-mcp stays small, however large the index.

A real kbindex-mcp (spawned over stdio) against a real kbindexd on real files.
"""

from __future__ import annotations

import json
import re

import mcp_types as types
import pytest
from conftest import Daemon, write
from kbindex.mcpfront.results import BUDGET
from mcp_helpers import mcp_stdio, response_size, structured, text

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


async def test_resource_read_is_bounded_and_says_how_to_read_on(daemon: Daemon) -> None:
    row = "The heron waits by the sluice gate for the evening tide to turn. " * 2
    lines = [f"{n:05} {row}" for n in range(1, 11_001)]
    big = write(daemon.root / "logs" / "big.md", "\n".join(lines) + "\n")
    assert big.stat().st_size > 1_400_000
    await daemon.refresh()
    async with mcp_stdio(daemon.socket) as client:
        result = await client.read_resource("kbindex://file" + str(big))
        content = result.contents[0]
        assert isinstance(content, types.TextResourceContents)
        # The read_file tool's budget (12 000 characters), plus the one-line hint.
        assert len(content.text) < 12_500, len(content.text)
        body, hint = content.text.rsplit("\n", 1)
        shown = body.split("\n")
        assert shown == lines[: len(shown)]
        assert len(shown) > 50
        match = re.search(r'read_file\(path=("[^"]+"), start_line=(\d+)\)', hint)
        assert match, hint
        assert json.loads(match[1]) == str(big)
        assert int(match[2]) == len(shown) + 1
        assert f"of {len(lines)}" in hint
        assert content.meta is not None
        assert content.meta["truncated"] is True
        assert content.meta["next_start_line"] == len(shown) + 1

        # Following the hint continues exactly where the resource stopped.
        more = await client.call_tool(
            "read_file", {"path": json.loads(match[1]), "start_line": int(match[2])}
        )
        assert structured(more)["text"].split("\n")[0] == lines[len(shown)]

        # A file that fits comes back whole, with no hint.
        write(daemon.root / "small.md", "# Small\n\nheron\n")
        await daemon.refresh()
        small = (await client.read_resource(f"kbindex://file{daemon.root}/small.md")).contents[0]
        assert isinstance(small, types.TextResourceContents)
        assert small.text == "# Small\n\nheron"


async def test_find_files_on_a_large_tree_is_bounded_and_compact(daemon: Daemon) -> None:
    for n in range(3000):
        write(daemon.root / "archive" / f"box{n % 30:02}" / f"letter{n:05}.txt", f"{n}\n")
    write(daemon.root / "readme.md", "# Archive\n")
    await daemon.refresh()
    async with mcp_stdio(daemon.socket) as client:
        listed = await client.call_tool("find_files", {"glob": "archive/*"})
        data = structured(listed)
        # The default limit is what comes back: it fits the budget, so it is honoured.
        assert data["returned"] == 50
        assert data["total"] == 3000
        assert data["truncated"] is True
        first = data["files"][0]
        assert first["path"] == str(daemon.root / "archive" / "box00" / "letter00000.txt")
        assert first["size"] == 2
        assert first["last_modified"].endswith("Z")
        shown = text(listed)
        # Compact: the folder once, then paths relative to it, a short line per file.
        assert shown.count(str(daemon.root)) == 1
        assert "\n  archive/box00/letter00000.txt  2 B  " in shown
        assert len(shown) < 60 * data["returned"], len(shown)
        assert "2950 more: narrow the glob" in shown
        assert response_size(listed) < BUDGET

        # However much is asked for, the answer stays within the budget and says so.
        most = await client.call_tool("find_files", {"glob": "*", "limit": 100_000})
        many = structured(most)
        assert many["total"] == 3001
        # The long paths of a test directory fill the budget before 200 files.
        assert 50 <= many["returned"] < 200, many["returned"]
        assert many["notes"][0] == "limit=100000 is above the maximum; used 200."
        assert "left out to keep this answer small" in many["notes"][1]
        assert len(text(most)) <= BUDGET
        assert len(json.dumps(most.structured_content, separators=(",", ":"))) <= BUDGET
        assert "raise limit" not in text(most)
