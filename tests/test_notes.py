"""Writable notes through the protocol: a real daemon, a writable root and a read-only
one, real files. Each operation, each error, read-your-writes, if_match between two
clients, the watcher not reading a note twice, and SIGKILL in the middle of writes."""

from __future__ import annotations

import asyncio
import os
import signal
import stat
import subprocess
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
from conftest import Daemon, wait_for, write
from kbindex.proto.errors import DaemonError
from kbindex.proto.messages import (
    PROTOCOL_VERSION,
    AppendNote,
    DeleteNote,
    EditNote,
    Hello,
    HelloReply,
    MoveNote,
    NoteChanges,
    NoteChangesReply,
    NoteReply,
    ReadFile,
    ReadFileReply,
    Request,
    WriteNote,
)
from test_faults import Churn

pytestmark = pytest.mark.anyio


@pytest.fixture
async def notes(make_daemon: Callable[..., Daemon], tmp_path: Path) -> AsyncIterator[Daemon]:
    """A daemon over a writable root (``roots[0]``) and a read-only one (``roots[1]``)."""
    writable, readonly = tmp_path / "notes", tmp_path / "docs"
    writable.mkdir()
    readonly.mkdir()
    write(readonly / "manual.md", "# Manual\nread only text\n")
    config = tmp_path / "config.toml"
    config.write_text(f'[root."{writable}"]\nwritable = true\n')
    d = make_daemon(writable, readonly)
    d.extra_args = ["--config", str(config), "--max-file-size-mb", "0.5"]
    await d.start()
    yield d
    d.stop()


async def note(d: Daemon, request: Request) -> NoteReply:
    async with d.client() as c:
        return await c.request(request, NoteReply)


async def refused(d: Daemon, request: Request) -> DaemonError:
    with pytest.raises(DaemonError) as caught:
        await note(d, request)
    return caught.value


async def test_a_written_note_is_searchable_when_the_write_returns(notes: Daemon) -> None:
    reply = await note(notes, WriteNote(path="ideas/zebra.md", content="zebrafish regrow fins\n"))
    assert reply.created
    assert reply.lines == 1
    assert reply.path == str(notes.root / "ideas" / "zebra.md")
    assert (notes.root / "ideas" / "zebra.md").read_text() == "zebrafish regrow fins\n"
    assert await notes.search_paths("zebrafish") == ["ideas/zebra.md"]
    async with notes.client() as c:
        hello = await c.request(Hello(version=PROTOCOL_VERSION), HelloReply)
    assert "notes" in hello.capabilities


async def test_a_markdown_note_without_a_heading_gets_its_title(notes: Daemon) -> None:
    await note(notes, WriteNote(path="t.md", content="body text\n", title="Reading list"))
    assert (notes.root / "t.md").read_text() == "# Reading list\n\nbody text\n"
    await note(notes, WriteNote(path="u.md", content="# Own\nbody\n", title="Ignored"))
    assert (notes.root / "u.md").read_text() == "# Own\nbody\n"


async def test_edit_replaces_exactly_one_occurrence(notes: Daemon) -> None:
    first = await note(notes, WriteNote(path="e.md", content="alpha\nbeta\nalpha\n"))
    twice = await refused(notes, EditNote(path="e.md", old_text="alpha", new_text="gamma"))
    assert twice.code == "EINVAL"
    assert "occurs 2 times" in twice.message and "lines 1, 3" in twice.message
    missing = await refused(notes, EditNote(path="e.md", old_text="delta", new_text="x"))
    assert missing.code == "EINVAL" and "not in e.md" in missing.message
    done = await note(notes, EditNote(path="e.md", old_text="beta", new_text="omega"))
    assert done.hash != first.hash
    assert (notes.root / "e.md").read_text() == "alpha\nomega\nalpha\n"
    assert await notes.search_paths("omega") == ["e.md"]
    assert await notes.search_paths("beta") == []


async def test_append_adds_a_line_and_creates_the_note(notes: Daemon) -> None:
    made = await note(notes, AppendNote(path="log.md", text="first entry"))
    assert made.created
    await note(notes, AppendNote(path="log.md", text="second entry\n"))
    assert (notes.root / "log.md").read_text() == "first entry\nsecond entry\n"
    assert await notes.search_paths("second entry") == ["log.md"]


async def test_move_rekeys_the_note_and_refuses_to_overwrite(notes: Daemon) -> None:
    await note(notes, WriteNote(path="a.md", content="kangaroo facts\n"))
    await note(notes, WriteNote(path="b.md", content="wombat facts\n"))
    exists = await refused(notes, MoveNote(src="a.md", dst="b.md"))
    assert exists.code == "EEXIST"
    await note(notes, MoveNote(src="a.md", dst="sub/c.md"))
    assert not (notes.root / "a.md").exists()
    assert await notes.search_paths("kangaroo") == ["sub/c.md"]
    await note(notes, MoveNote(src="sub/c.md", dst="b.md", overwrite=True))
    assert await notes.search_paths("kangaroo") == ["b.md"]
    assert await notes.search_paths("wombat") == []


async def test_delete_removes_the_note_from_the_index(notes: Daemon) -> None:
    made = await note(notes, WriteNote(path="d.md", content="platypus\n"))
    stale = await refused(notes, DeleteNote(path="d.md", if_match="0" * 16))
    assert stale.code == "ECONFLICT"
    assert (notes.root / "d.md").exists()
    gone = await note(notes, DeleteNote(path="d.md", if_match=made.hash))
    assert gone.hash == ""
    assert not (notes.root / "d.md").exists()
    assert await notes.search_paths("platypus") == []
    assert (await refused(notes, DeleteNote(path="d.md"))).code == "ENOENT"


async def test_two_clients_editing_with_if_match_one_wins_and_nothing_is_lost(
    notes: Daemon,
) -> None:
    base = await note(notes, WriteNote(path="shared.md", content="status: draft\n"))

    async def edit(new: str) -> NoteReply | DaemonError:
        try:
            request = EditNote(path="shared.md", old_text="draft", new_text=new, if_match=base.hash)
            return await note(notes, request)
        except DaemonError as exc:
            return exc

    results = await asyncio.gather(edit("approved"), edit("rejected"))
    won = [r for r in results if isinstance(r, NoteReply)]
    lost = [r for r in results if isinstance(r, DaemonError)]
    assert len(won) == 1 and len(lost) == 1
    assert lost[0].code == "ECONFLICT" and won[0].hash in lost[0].message
    text = (notes.root / "shared.md").read_text()
    assert text in ("status: approved\n", "status: rejected\n")
    # The loser reads again and applies its change on top: nothing is lost.
    loser_word = "rejected" if "approved" in text else "approved"
    winner_word = "approved" if loser_word == "rejected" else "rejected"
    retry = EditNote(
        path="shared.md",
        old_text=winner_word,
        new_text=f"{winner_word}, then {loser_word}",
        if_match=won[0].hash,
    )
    await note(notes, retry)
    assert loser_word in (notes.root / "shared.md").read_text()


async def test_an_external_edit_in_the_same_second_is_seen_and_guards_if_match(
    notes: Daemon,
) -> None:
    made = await note(notes, WriteNote(path="ext.md", content="version one aardvark\n"))
    path = notes.root / "ext.md"
    st = path.stat()
    path.write_text("version two aardvark\n")  # same size, as an editor saving at once
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))  # even the same mtime
    conflict = await refused(
        notes, EditNote(path="ext.md", old_text="aardvark", new_text="x", if_match=made.hash)
    )
    assert conflict.code == "ECONFLICT"

    async def seen() -> bool:
        async with notes.client() as c:
            reply = await c.request(ReadFile(path=str(path)), ReadFileReply)
        return "version two" in reply.text and await notes.search_paths("two") == ["ext.md"]

    await wait_for(seen, timeout=10)


async def test_writes_keep_the_mode_of_an_existing_note(notes: Daemon) -> None:
    path = write(notes.root / "private.md", "secret\n")
    path.chmod(0o600)
    await notes.refresh()
    await note(notes, WriteNote(path="private.md", content="still secret\n"))
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert [p.name for p in notes.root.iterdir()] == ["private.md"]  # no temporary left


async def test_refusals_name_the_problem(notes: Daemon, tmp_path: Path) -> None:
    readonly = notes.roots[1]
    outside = tmp_path / "outside"
    outside.mkdir()
    (notes.root / "escape").symlink_to(outside)
    (notes.root / "folder").mkdir()
    cases = [
        (WriteNote(path=str(readonly / "manual.md"), content="x"), "EROFS"),
        (WriteNote(path=str(readonly / "new.md"), content="x"), "EROFS"),
        (WriteNote(path="../outside/x.md", content="x"), "EACCES"),
        (WriteNote(path="/etc/kbindex-test.md", content="x"), "EACCES"),
        (WriteNote(path="escape/x.md", content="x"), "EACCES"),
        (WriteNote(path="folder", content="x"), "EISDIR"),
        (WriteNote(path="big.md", content="x" * 600_000), "EFBIG"),
        (WriteNote(path="nul.md", content="a\x00b"), "EILSEQ"),
        (WriteNote(path="image.png", content="x"), "EINVAL"),
        (EditNote(path="absent.md", old_text="a", new_text="b"), "ENOENT"),
        (DeleteNote(path=str(readonly / "manual.md")), "EROFS"),
        (MoveNote(src=str(readonly / "manual.md"), dst="m.md"), "EROFS"),
    ]
    for request, code in cases:
        error = await refused(notes, request)
        assert error.code == code, (request, error.code, error.message)
        assert error.message and "\n" not in error.message
    assert list(outside.iterdir()) == []
    assert (readonly / "manual.md").read_text() == "# Manual\nread only text\n"
    assert not (notes.root / "big.md").exists()


@pytest.mark.slow
async def test_the_watcher_does_not_read_a_written_note_again(notes: Daemon) -> None:
    async with notes.client() as c:
        before = (await c.status()).files_read
    for i in range(5):
        await note(notes, WriteNote(path=f"w{i}.md", content=f"note number {i}\n"))
    await note(notes, EditNote(path="w0.md", old_text="number", new_text="count"))

    async def settled() -> bool:
        async with notes.client() as c:
            status = await c.status()
        return status.pending == 0 and status.last_event_at is not None

    await wait_for(settled, timeout=10)
    await asyncio.sleep(1.5)  # past the watcher's debounce: its events have been handled
    async with notes.client() as c:
        assert (await c.status()).files_read - before == 6


@pytest.mark.slow
async def test_sigkill_during_writes_leaves_old_or_new_content(notes: Daemon) -> None:
    """Large notes rewritten in a loop while the daemon is killed: after each kill the
    file holds one whole version, never a mix, and the restarted daemon indexes it."""
    path = notes.root / "big.md"
    versions = {f"{v}".encode() * 200_000 for v in "ABCDEFGH"}
    write(path, b"A" * 200_000)
    notes.stop()
    for round_ in range(4):
        await notes.start()

        async def writer() -> None:
            for v in "BCDEFGH":
                try:
                    await note(notes, WriteNote(path="big.md", content=v * 200_000))
                except Exception:
                    return

        task = asyncio.ensure_future(writer())
        await asyncio.sleep(0.05 + 0.03 * round_)
        notes.stop(signal.SIGKILL)
        task.cancel()
        assert path.read_bytes() in versions
    await notes.start()
    leftovers = [p.name for p in notes.root.iterdir() if p.name != "big.md"]
    letter = path.read_text()[0]
    async with notes.client() as c:
        reply = await c.request(ReadFile(path=str(path), end_line=1), ReadFileReply)
    assert letter in reply.text
    assert all(".kbindex-tmp-" in name for name in leftovers)
    assert await notes.search_paths("big") == ["big.md"]


async def test_note_changes_long_poll_wakes_on_a_write(notes: Daemon) -> None:
    async with notes.client() as c:
        start = await c.request(NoteChanges(), NoteChangesReply)
        assert start.paths == [] and not start.missed

        async def later() -> None:
            await asyncio.sleep(0.3)
            await note(notes, WriteNote(path="polled.md", content="hello\n"))

        task = asyncio.ensure_future(later())
        began = asyncio.get_running_loop().time()
        woke = await c.request(NoteChanges(since=start.cursor, wait_seconds=10), NoteChangesReply)
        assert asyncio.get_running_loop().time() - began < 5
        await task
        assert woke.paths == [str(notes.root / "polled.md")]
        assert woke.cursor > start.cursor and not woke.missed
        await note(notes, MoveNote(src="polled.md", dst="moved.md"))
        moved = await c.request(NoteChanges(since=woke.cursor), NoteChangesReply)
        assert set(moved.paths) == {str(notes.root / "polled.md"), str(notes.root / "moved.md")}
        quiet = await c.request(NoteChanges(since=moved.cursor, wait_seconds=0.2), NoteChangesReply)
        assert quiet.paths == [] and quiet.cursor == moved.cursor
        stale = await c.request(NoteChanges(since=1), NoteChangesReply)
        assert stale.missed


@pytest.mark.slow
async def test_a_note_written_while_the_index_disk_is_full_is_kept_and_indexed_later(
    make_daemon: Callable[..., Daemon], tmp_path: Path, small_disk: Path
) -> None:
    root = tmp_path / "notes"
    root.mkdir()
    config = tmp_path / "config.toml"
    config.write_text(f'[root."{root}"]\nwritable = true\n')
    d = make_daemon(root)
    d.state_dir = small_disk / "state"
    d.extra_args = ["--config", str(config), "--watch", "off"]
    await d.start()
    Churn(root, 3).create(600)  # about 2 MB of text: the index cannot fit in 1 MB
    async with d.client() as c:
        with pytest.raises(DaemonError):
            async for _ in c.refresh_wait():
                pass
    # Words enough that its index rows need more room than the failed batch left
    # allocated in the index's files (a short note can fit there, disk full or not).
    text = "narwhal sighting\n" + " ".join(f"tally{i}" for i in range(40_000))
    reply = await note(d, AppendNote(path="journal.md", text=text))
    assert reply.index_error  # written, not searchable yet: a success to not repeat
    assert (root / "journal.md").read_text() == text
    subprocess.run(["mount", "-o", "remount,size=64m", str(small_disk)], check=True)

    async def indexed() -> bool:
        return await d.search_paths("narwhal") == ["journal.md"]

    await wait_for(indexed, timeout=30)  # the daemon's own retries


async def test_read_file_gives_the_hash_a_guarded_edit_takes(notes: Daemon) -> None:
    write(notes.root / "by-hand.md", "typed by the user\n")
    write(notes.roots[1] / "ro.md", "read only\n")
    await notes.refresh()
    async with notes.client() as c:
        read = await c.request(ReadFile(path=str(notes.root / "by-hand.md")), ReadFileReply)
        elsewhere = await c.request(ReadFile(path=str(notes.roots[1] / "ro.md")), ReadFileReply)
    assert read.hash and elsewhere.hash == ""  # only where notes can be changed
    done = await note(
        notes, EditNote(path="by-hand.md", old_text="user", new_text="agent", if_match=read.hash)
    )
    assert (notes.root / "by-hand.md").read_text() == "typed by the agent\n"
    assert done.hash != read.hash
