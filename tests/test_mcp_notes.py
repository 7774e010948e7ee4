"""The note tools, resources and subscriptions of kbindex-mcp end to end: the SDK's client
spawns kbindex-mcp over stdio, which asks a real kbindexd over a writable root (and a
read-only one) of real files."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from conftest import Daemon, MakeDaemon, with_writable_root, write
from kbindex.mcpfront.resources import LISTED_NOTES
from kbindex.mcpfront.results import file_uri
from mcp.client.subscriptions import ResourceUpdated
from mcp.shared.exceptions import MCPDeprecationWarning
from mcp_helpers import http_front_end, mcp_http, mcp_stdio, structured, text

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

READING = {"search", "grep", "get_index_stats", "refresh_index", "read_file", "find_files"}
NOTE_TOOLS = {"write_note", "edit_note", "append_note", "move_note", "delete_note"}


@pytest.fixture
async def notes(make_daemon: MakeDaemon, tmp_path: Path) -> AsyncIterator[Daemon]:
    d = with_writable_root(make_daemon, tmp_path, "--max-file-size-mb", "0.5")
    await d.start()
    yield d
    d.stop()


def refusal(result: types.CallToolResult) -> str:
    """The one sentence of a tool error."""
    assert result.is_error, text(result)
    message = text(result)
    assert "\n" not in message and "Traceback" not in message
    assert len(message) < 400, message
    return message


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_each_note_tool_and_read_your_writes(notes: Daemon, mode: str) -> None:
    root = notes.root
    async with mcp_stdio(notes.socket, mode=mode) as client:
        listed = {t.name: t for t in (await client.list_tools()).tools}
        assert set(listed) == READING | NOTE_TOOLS
        for name in NOTE_TOOLS:
            hints = listed[name].annotations
            assert hints is not None
            assert hints.read_only_hint is False
            assert hints.destructive_hint is (name != "append_note")
            assert hints.idempotent_hint is (name in ("write_note", "move_note", "delete_note"))
            assert hints.open_world_hint is False
            assert listed[name].output_schema is not None
            assert set(listed[name].output_schema["properties"]) >= {
                "path", "hash", "lines", "size", "created",
            }  # fmt: skip

        # write: created, indexed by the time it answers, a search at once finds it
        made = await client.call_tool(
            "write_note", {"path": "ideas/zebra.md", "content": "zebrafish regrow fins\n"}
        )
        data = structured(made)
        assert data["path"] == str(root / "ideas" / "zebra.md")
        assert (data["lines"], data["size"], data["created"]) == (1, 22, True)
        assert len(data["hash"]) == 16
        assert text(made) == (
            f"Created {root}/ideas/zebra.md: 1 line(s), 22 B, hash {data['hash']}; searchable now."
        )
        found = structured(await client.call_tool("search", {"query": "zebrafish"}))
        assert [r["relpath"] for r in found["results"]] == ["ideas/zebra.md"]
        assert (root / "ideas" / "zebra.md").read_text() == "zebrafish regrow fins\n"

        # a title heads a Markdown note without one; replacing says so
        titled = structured(
            await client.call_tool(
                "write_note",
                {
                    "path": "ideas/zebra.md",
                    "content": "they regrow hearts too\n",
                    "title": "Zebrafish",
                    "if_match": data["hash"],
                },
            )
        )
        assert titled["created"] is False and titled["lines"] == 3
        assert (root / "ideas" / "zebra.md").read_text() == (
            "# Zebrafish\n\nthey regrow hearts too\n"
        )

        # edit: exactly one occurrence
        edited = await client.call_tool(
            "edit_note",
            {"path": "ideas/zebra.md", "old_text": "hearts", "new_text": "hearts and fins"},
        )
        assert structured(edited)["hash"] != titled["hash"]
        assert text(edited).startswith(f"Edited {root}/ideas/zebra.md: 3 line(s)")
        hit = structured(await client.call_tool("search", {"query": "hearts fins"}))
        assert hit["results"][0]["relpath"] == "ideas/zebra.md"

        # append: creates, then adds on a line of its own; text kept exactly as sent
        first = structured(
            await client.call_tool("append_note", {"path": "log.md", "text": "  indented"})
        )
        assert first["created"] is True
        await client.call_tool("append_note", {"path": "log.md", "text": "second entry\n"})
        assert (root / "log.md").read_text() == "  indented\nsecond entry\n"

        # move, then delete; the index follows each at once
        moved = await client.call_tool("move_note", {"src": "log.md", "dst": "archive/log.md"})
        assert structured(moved)["path"] == str(root / "archive" / "log.md")
        assert text(moved).startswith(f"Moved log.md to {root}/archive/log.md (2 line(s)")
        found = structured(await client.call_tool("search", {"query": "second entry"}))
        assert [r["relpath"] for r in found["results"]] == ["archive/log.md"]
        gone = await client.call_tool("delete_note", {"path": "archive/log.md"})
        assert structured(gone)["hash"] == ""
        assert text(gone) == f"Deleted {root}/archive/log.md."
        assert not (root / "archive" / "log.md").exists()
        found = structured(await client.call_tool("search", {"query": "second entry"}))
        assert found["results"] == []

        # get_index_stats marks the writable root
        stats = structured(await client.call_tool("get_index_stats", {}))
        assert [(r["path"], r["writable"]) for r in stats["roots"]] == [
            (str(root), True),
            (str(notes.roots[1]), False),
        ]


async def test_every_refusal_is_a_tool_error_that_keeps_its_code(
    notes: Daemon, tmp_path: Path
) -> None:
    root, readonly = notes.root, notes.roots[1]
    write(root / "twice.md", "alpha\nbeta\nalpha\n")
    write(root / "taken.md", "taken\n")
    (root / "folder").mkdir()
    (tmp_path / "outside").mkdir()
    await notes.refresh()
    cases: list[tuple[str, dict[str, Any], str, str]] = [
        ("write_note", {"path": str(readonly / "manual.md"), "content": "x"}, "EROFS",
         "read-only"),
        ("write_note", {"path": "../outside/x.md", "content": "x"}, "EACCES", "outside"),
        ("edit_note", {"path": "absent.md", "old_text": "a", "new_text": "b"}, "ENOENT",
         "does not exist"),
        ("move_note", {"src": "twice.md", "dst": "taken.md"}, "EEXIST", "overwrite=true"),
        ("write_note", {"path": "folder", "content": "x"}, "EISDIR", "directory"),
        ("edit_note", {"path": "twice.md", "old_text": "alpha", "new_text": "x"}, "EINVAL",
         "occurs 2 times"),
        ("write_note", {"path": "big.md", "content": "x" * 600_000}, "EFBIG", "cap"),
        ("write_note", {"path": "nul.md", "content": "a\x00b"}, "EILSEQ", "NUL"),
        ("delete_note", {"path": "taken.md", "if_match": "0" * 16}, "ECONFLICT",
         "if_match set to its new hash"),
        # Larger than one request carries: refused before it is sent, the same way.
        ("write_note", {"path": "huge.md", "content": "y" * 2_000_000}, "EFBIG",
         "append_note"),
    ]  # fmt: skip
    async with mcp_stdio(notes.socket) as client:
        for name, arguments, code, words in cases:
            message = refusal(await client.call_tool(name, arguments))
            assert message.startswith(f"{code}: "), (name, message)
            assert words in message, (name, message)
        # The front end and its connection survive the oversized request.
        assert structured(await client.call_tool("search", {"query": "taken"}))["returned"] == 1
        missing = refusal(await client.call_tool("write_note", {"path": "x.md"}))
        assert "'content' is required" in missing
        empty = refusal(
            await client.call_tool("edit_note", {"path": "t.md", "old_text": "", "new_text": "x"})
        )
        assert "old_text" in empty
    assert (readonly / "manual.md").read_text() == "# Manual\nread only text\n"
    assert sorted(p.name for p in root.iterdir()) == ["folder", "taken.md", "twice.md"]
    assert list((tmp_path / "outside").iterdir()) == []


async def test_two_clients_editing_with_if_match_one_wins_one_conflicts(notes: Daemon) -> None:
    async with mcp_stdio(notes.socket) as a, mcp_stdio(notes.socket) as b:
        base = structured(
            await a.call_tool("write_note", {"path": "shared.md", "content": "status: draft\n"})
        )
        outcomes: dict[str, types.CallToolResult] = {}

        async def edit(client: Any, word: str) -> None:
            outcomes[word] = await client.call_tool(
                "edit_note",
                {
                    "path": "shared.md",
                    "old_text": "draft",
                    "new_text": word,
                    "if_match": base["hash"],
                },
            )

        async with anyio.create_task_group() as tg:
            tg.start_soon(edit, a, "approved")
            tg.start_soon(edit, b, "rejected")
        won = [w for w, r in outcomes.items() if not r.is_error]
        lost = [w for w, r in outcomes.items() if r.is_error]
        assert len(won) == 1 and len(lost) == 1
        winner = structured(outcomes[won[0]])
        message = refusal(outcomes[lost[0]])
        assert message.startswith("ECONFLICT: ")
        assert winner["hash"] in message  # the hash to read again from
        assert (notes.root / "shared.md").read_text() == f"status: {won[0]}\n"
        # The loser re-reads and applies its change on top: nothing is lost.
        loser = b if lost[0] == "rejected" else a
        again = await loser.call_tool(
            "edit_note",
            {
                "path": "shared.md",
                "old_text": won[0],
                "new_text": f"{won[0]}, then {lost[0]}",
                "if_match": winner["hash"],
            },
        )
        assert not again.is_error, text(again)
    assert (notes.root / "shared.md").read_text() == f"status: {won[0]}, then {lost[0]}\n"


async def test_note_tools_are_listed_only_with_a_writable_root(daemon: Daemon) -> None:
    async with mcp_stdio(daemon.socket) as client:
        assert {t.name for t in (await client.list_tools()).tools} == READING
        # Called anyway, the daemon refuses, and says how to allow it.
        message = refusal(await client.call_tool("write_note", {"path": "a.md", "content": "x"}))
        assert message.startswith("EROFS: no root is writable")
        assert (await client.list_resources()).resources == []
    assert list(daemon.root.iterdir()) == []


async def test_the_note_tools_appear_once_the_daemon_answers(
    make_daemon: MakeDaemon, tmp_path: Path
) -> None:
    notes = with_writable_root(make_daemon, tmp_path)
    async with mcp_stdio(notes.socket) as client:
        # Not running: the list is the one without a daemon, the tools that read.
        assert {t.name for t in (await client.list_tools()).tools} == READING
        await notes.start()
        assert {t.name for t in (await client.list_tools()).tools} == READING | NOTE_TOOLS


async def test_writes_work_across_a_daemon_restart(notes: Daemon) -> None:
    async with mcp_stdio(notes.socket) as client:
        await client.call_tool("append_note", {"path": "j.md", "text": "one"})
        notes.stop()
        await notes.start()
        # The held connection is stale: the append was never sent on it, so it is sent
        # on a new one, once.
        again = await client.call_tool("append_note", {"path": "j.md", "text": "two"})
        assert not again.is_error, text(again)
    assert (notes.root / "j.md").read_text() == "one\ntwo"


async def test_the_notes_of_writable_roots_are_listed_as_resources(notes: Daemon) -> None:
    for n in range(LISTED_NOTES + 5):
        write(notes.root / "many" / f"n{n:03}.md", f"note {n}\n")
    write(notes.root / "a.txt", "first by path\n")
    await notes.refresh()
    async with mcp_stdio(notes.socket) as client:
        listed = (await client.list_resources()).resources
        assert len(listed) == LISTED_NOTES
        assert listed[0].uri == file_uri(str(notes.root / "a.txt"))
        assert listed[0].name == "a.txt"
        assert listed[0].mime_type == "text/plain"
        assert listed[1].name == "many/n000.md" and listed[1].mime_type == "text/markdown"
        assert all(str(r.uri).startswith(file_uri(str(notes.root)) + "/") for r in listed)
        # The read-only root is not listed; its files are still read through the template.
        manual = file_uri(str(notes.roots[1] / "manual.md"))
        assert manual not in {r.uri for r in listed}
        contents = (await client.read_resource(listed[1].uri)).contents[0]
        assert isinstance(contents, types.TextResourceContents)
        assert contents.text == "note 0"


async def test_a_subscriber_hears_of_another_clients_write_handshake_era(notes: Daemon) -> None:
    followed = notes.root / "shared.md"
    other = notes.root / "other.md"
    uri = file_uri(str(followed))
    heard: list[str] = []
    arrived = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            heard.append(str(message.params.uri))
            arrived.set()

    async with (
        mcp_stdio(notes.socket, mode="legacy", message_handler=on_message) as reader,
        mcp_stdio(notes.socket) as writer,
    ):
        assert reader.server_capabilities.resources is not None
        assert reader.server_capabilities.resources.subscribe is True
        # The SDK marks the handshake-era request deprecated (2026-07-28 replaced it):
        # it is still what most clients send.
        with pytest.warns(MCPDeprecationWarning):
            await reader.subscribe_resource(uri)
        await writer.call_tool("write_note", {"path": "other.md", "content": "unrelated\n"})
        await writer.call_tool("write_note", {"path": "shared.md", "content": "v1\n"})
        with anyio.fail_after(10):
            await arrived.wait()
        assert heard == [uri]
        assert (await reader.read_resource(uri)).contents[0].text == "v1"  # type: ignore[union-attr]
        # A move away from the followed path is a change to it too.
        arrived = anyio.Event()
        await writer.call_tool("move_note", {"src": "shared.md", "dst": "moved.md"})
        with anyio.fail_after(10):
            await arrived.wait()
        assert heard == [uri, uri]
        # Unsubscribed: nothing more.
        with pytest.warns(MCPDeprecationWarning):
            await reader.unsubscribe_resource(uri)
        await writer.call_tool("write_note", {"path": "shared.md", "content": "v2\n"})
        await writer.call_tool("write_note", {"path": "other.md", "content": "still\n"})
        await anyio.sleep(1.0)
        assert heard == [uri, uri]
    assert other.exists()


async def test_a_listener_hears_of_another_clients_write_2026(notes: Daemon) -> None:
    uri = file_uri(str(notes.root / "shared.md"))
    async with mcp_stdio(notes.socket) as reader, mcp_stdio(notes.socket) as writer:
        assert reader.protocol_version == "2026-07-28"
        async with reader.listen(resource_subscriptions=[uri]) as events:
            await writer.call_tool("append_note", {"path": "shared.md", "text": "hello"})
            with anyio.fail_after(10):
                event = await anext(aiter(events))
            assert event == ResourceUpdated(uri=uri)
            # The daemon restarts: its changes from before are forgotten, so every
            # followed URI is told to read again.
            notes.stop()
            await notes.start()
            with anyio.fail_after(20):
                event = await anext(aiter(events))
            assert event == ResourceUpdated(uri=uri)


async def test_one_http_front_end_tells_each_of_its_subscribers(notes: Daemon) -> None:
    """Many sessions, one front end (--http): each subscriber of either era is told, on
    its own session; a subscriber that has left keeps no one else from being told."""
    uri = file_uri(str(notes.root / "shared.md"))
    told = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            assert str(message.params.uri) == uri
            told.set()

    async with http_front_end(notes.socket) as front:
        url, token = front.url, front.token
        async with mcp_http(url, token, mode="legacy") as gone:
            with pytest.warns(MCPDeprecationWarning):
                await gone.subscribe_resource(uri)
        async with (
            mcp_http(url, token, mode="legacy", message_handler=on_message) as old,
            mcp_http(url, token) as new,
            mcp_http(url, token) as writer,
        ):
            with pytest.warns(MCPDeprecationWarning):
                await old.subscribe_resource(uri)
            async with new.listen(resource_subscriptions=[uri]) as events:
                await writer.call_tool("write_note", {"path": "shared.md", "content": "x\n"})
                with anyio.fail_after(10):
                    assert await anext(aiter(events)) == ResourceUpdated(uri=uri)
                    await told.wait()
