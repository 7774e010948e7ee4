"""Hostile notes: another member of a shared writable folder racing links into it, a FIFO
at a note's path, paths too deep or too long, names with control characters. Each gets
a clear POSIX-coded refusal (never ``internal``), nothing outside the root is touched,
and the daemon keeps serving notes and stops on one SIGTERM.

The racer is a second real uid (fork + setresuid, as in ``test_trust``): the kernel sees
two users exactly as on a shared machine.
"""

from __future__ import annotations

import ctypes
import os
import select
import shutil
import signal
import stat
import subprocess
import tempfile
import threading
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import anyio
import pytest
from conftest import Daemon, MakeDaemon, wait_for, with_writable_root, write
from hypothesis import given
from hypothesis import strategies as st
from kbindex.daemon.indexing.ignore import WRITING_MARK, IgnoreRules
from kbindex.daemon.notes.notefile import NAME_MAX, temporary_name
from kbindex.proto.errors import DaemonError
from kbindex.proto.messages import (
    AppendNote,
    DeleteNote,
    EditNote,
    MoveNote,
    NoteReply,
    Request,
    WriteNote,
)
from test_notes import note, refused
from test_trust import CHILD_SECONDS, _become, needs_root, throwaway_uids

pytestmark = pytest.mark.anyio

LIBC = ctypes.CDLL(None, use_errno=True)  # loaded before any fork: the racer runs as another uid
AT_FDCWD = -100
RENAME_EXCHANGE = 2
RACE_SECONDS = 4.0
ANSWER_SECONDS = 3.0
"""A refusal is a stat away; this only tells an answer from a wedge on a loaded machine."""


@pytest.fixture
async def notes(make_daemon: MakeDaemon, tmp_path: Path) -> AsyncIterator[Daemon]:
    d = with_writable_root(make_daemon, tmp_path)
    await d.start()
    yield d
    d.stop()


# ------------------------------------------------------------ a racer in a shared folder


class Racer:
    """Another member of the shared folder: it swaps the folder ``shared/d`` with a link
    to ``target`` (one atomic exchange of two names) as fast as it can, until stopped."""

    def __init__(self, uid: int, shared: Path, target: Path) -> None:
        self.stop_r, self.stop_w = os.pipe()
        self.count_r, count_w = os.pipe()
        self.pid = os.fork()
        if self.pid == 0:  # the child: never returns into pytest
            swaps = -1
            try:
                signal.alarm(CHILD_SECONDS)
                _become(uid)
                os.chdir(shared)
                os.symlink(target, "x")
                swaps = 0
                while True:
                    for _ in range(200):
                        if LIBC.renameat2(AT_FDCWD, b"d", AT_FDCWD, b"x", RENAME_EXCHANGE) == 0:
                            swaps += 1
                    if select.select([self.stop_r], [], [], 0)[0]:
                        break
                if os.path.islink("d"):  # leave the real folder in place
                    LIBC.renameat2(AT_FDCWD, b"d", AT_FDCWD, b"x", RENAME_EXCHANGE)
            finally:
                os.write(count_w, str(swaps).encode())
                os._exit(0)
        os.close(count_w)

    def stop(self) -> int:
        """Stop the racer; how many swaps it made."""
        os.write(self.stop_w, b"x")
        swaps = int(os.read(self.count_r, 64) or b"-1")
        os.waitpid(self.pid, 0)
        return swaps


def snapshot(top: Path) -> dict[str, tuple[int, int, bytes, int]]:
    """Every entry under ``top`` (links not followed): kind and mode, size, content of
    files, and inode, so a file replaced by a rename shows."""
    seen: dict[str, tuple[int, int, bytes, int]] = {}
    for folder, dirs, files in os.walk(top):
        for name in dirs + files:
            path = Path(folder, name)
            st = path.lstat()
            data = path.read_bytes() if stat.S_ISREG(st.st_mode) else b""
            seen[str(path.relative_to(top))] = (st.st_mode, st.st_size, data, st.st_ino)
    return seen


@pytest.fixture
def shared_base() -> Iterator[Path]:
    """A directory under /tmp that another uid can reach (pytest's tmp_path is 0700)."""
    base = Path(tempfile.mkdtemp(dir="/tmp", prefix="kbshared-"))
    base.chmod(0o755)
    try:
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _operations(k: int) -> list[Request]:
    """One round of what an agent does with notes, in the folder the racer swaps."""
    return [
        WriteNote(path=f"d/n{k}.md", content=f"first text {k}\n"),
        AppendNote(path=f"d/n{k}.md", text="appended line"),
        EditNote(path=f"d/n{k}.md", old_text="first", new_text="edited"),
        WriteNote(path=f"d/sub/n{k}.md", content=f"deeper {k}\n"),
        MoveNote(src=f"d/n{k}.md", dst=f"moved{k}.md", overwrite=True),
        MoveNote(src=f"moved{k}.md", dst=f"d/m{k}.md", overwrite=True),
        MoveNote(src=f"d/sub/n{k}.md", dst=f"out{k}.md", overwrite=True),
        DeleteNote(path=f"d/m{k}.md"),
        DeleteNote(path=f"d/n{k}.md"),
        DeleteNote(path=f"d/sub/n{k}.md"),
    ]


@pytest.mark.slow
@needs_root
async def test_a_link_racer_in_a_shared_folder_reaches_nothing_outside_it(
    make_daemon: MakeDaemon, tmp_path: Path, shared_base: Path
) -> None:
    """Before: the path was checked by name, then used again by name; writes landed in
    the victim's private folder, and moves and deletes reached the files there."""
    _, other = throwaway_uids()
    shared = shared_base / "shared"
    (shared / "d").mkdir(parents=True)
    for folder in (shared, shared / "d"):
        os.chown(folder, 0, other)  # the group the other member is in
        folder.chmod(0o2775)
    home = shared_base / "home"  # the victim's own files: the other uid cannot enter
    for k in range(3):
        for name in (f"d/n{k}.md", f"d/m{k}.md", f"d/sub/n{k}.md"):
            write(home / name, f"private {name}\n")
    home.chmod(0o700)
    before = snapshot(home)
    config = tmp_path / "config.toml"
    config.write_text(f'[root."{shared}"]\nwritable = true\n')
    d = make_daemon(shared)
    # No watcher: the racer's renames would keep it busy (and its queue overflowing),
    # and this is about the note requests, which then get more turns in the race.
    d.extra_args = ["--config", str(config), "--watch", "off"]
    await d.start()

    outcomes: Counter[str] = Counter()
    unclean: list[str] = []  # an error without a POSIX code (``internal``) or of many lines
    racer = Racer(other, shared, home / "d")
    try:
        async with d.client() as c:
            with anyio.move_on_after(RACE_SECONDS):
                k = 0
                while True:
                    for request in _operations(k % 3):
                        try:
                            await c.request(request, NoteReply)
                            outcomes["ok"] += 1
                        except DaemonError as exc:
                            outcomes[exc.code] += 1
                            if not exc.code.startswith("E") or "\n" in exc.message:
                                unclean.append(f"{exc.code}: {exc.message}")
                    k += 1
    finally:
        swaps = racer.stop()
    assert snapshot(home) == before, outcomes
    assert unclean == []
    assert swaps > 1000 and outcomes["ok"] > 10, (swaps, outcomes)
    assert outcomes["EACCES"], outcomes  # the race was on: some paths met the link
    await note(d, WriteNote(path="d/calm.md", content="after the race\n"))
    assert (shared / "d" / "calm.md").read_text() == "after the race\n"


# ------------------------------------------------------------ FIFOs and shutdown


async def test_a_fifo_at_a_note_path_is_refused_at_once_and_other_notes_work(
    notes: Daemon,
) -> None:
    """Before: the open blocked, holding the notes lock: every note operation waited."""
    fifo = notes.root / "pipe.md"
    os.mkfifo(fifo)
    write(notes.root / "plain.md", "plain note\n")
    requests: list[Request] = [
        WriteNote(path="pipe.md", content="x"),
        EditNote(path="pipe.md", old_text="a", new_text="b"),
        AppendNote(path="pipe.md", text="x"),
        MoveNote(src="pipe.md", dst="elsewhere.md"),
        MoveNote(src="plain.md", dst="pipe.md", overwrite=True),
        DeleteNote(path="pipe.md"),
        WriteNote(path="pipe.md/inside.md", content="x"),
    ]
    for request in requests:
        with anyio.fail_after(ANSWER_SECONDS):
            error = await refused(notes, request)
        assert error.code in ("EINVAL", "ENOTDIR"), (request, error.code, error.message)
        assert "pipe.md" in error.message
    assert stat.S_ISFIFO(fifo.lstat().st_mode)
    with anyio.fail_after(ANSWER_SECONDS):
        await note(notes, AppendNote(path="plain.md", text="still served"))
    assert (notes.root / "plain.md").read_text() == "plain note\nstill served"


@pytest.mark.slow
async def test_one_sigterm_stops_the_daemon_after_a_fifo_request(
    make_daemon: MakeDaemon, tmp_path: Path
) -> None:
    """Before: a worker thread stayed blocked in the FIFO's open, shutdown waited for it,
    and the daemon kept its instance lock until someone opened the FIFO for writing."""
    d = with_writable_root(make_daemon, tmp_path)
    await d.start()
    os.mkfifo(d.root / "pipe.md")
    with anyio.move_on_after(ANSWER_SECONDS), pytest.raises(DaemonError):
        await note(d, EditNote(path="pipe.md", old_text="a", new_text="b"))
    assert d.proc is not None
    d.proc.send_signal(signal.SIGTERM)
    try:
        assert d.proc.wait(timeout=20) == 0
    except subprocess.TimeoutExpired:
        d.proc.kill()
        raise
    d.proc = None
    await d.start()  # the instance lock is free: a new daemon takes it
    await note(d, WriteNote(path="again.md", content="served again\n"))


@pytest.mark.slow
async def test_a_fifo_swapped_in_as_an_ignore_file_does_not_wedge_notes(
    make_daemon: MakeDaemon, tmp_path: Path
) -> None:
    """A note's path is checked against the ignore files above it, read by name. Before:
    a FIFO swapped in between their stat and their open blocked the daemon's event loop
    in the open, for good."""
    d = with_writable_root(make_daemon, tmp_path)
    d.extra_args += ["--watch", "off"]
    await d.start()
    write(d.root / ".ignore", "*.tmp\n")
    os.mkfifo(d.root / "swap")
    stop = threading.Event()
    swaps = 0

    def swapper() -> None:
        nonlocal swaps
        ignore, fifo = bytes(d.root / ".ignore"), bytes(d.root / "swap")
        while not stop.is_set():
            swaps += LIBC.renameat2(AT_FDCWD, ignore, AT_FDCWD, fifo, RENAME_EXCHANGE) == 0

    thread = threading.Thread(target=swapper)
    thread.start()
    try:
        for i in range(100):
            with anyio.fail_after(ANSWER_SECONDS):
                await note(d, WriteNote(path=f"n{i % 5}.md", content=f"version {i}\n"))
    finally:
        stop.set()
        thread.join()
    assert swaps > 1000


# ------------------------------------------------------------ names


async def test_deep_paths_and_long_names_get_a_clear_refusal(notes: Daemon) -> None:
    """Before: ~2,000 components recursed until RecursionError (``internal``, a traceback
    in the log per request)."""
    cases = [
        ("a/" * 2000 + "x.md", "EINVAL"),
        ("a/" * 100 + "x.md", "EINVAL"),
        ("n" * 253 + ".md", "ENAMETOOLONG"),
        ("é" * 127 + ".md", "ENAMETOOLONG"),  # 257 bytes in 130 characters
        ("f" * 300 + "/x.md", "ENAMETOOLONG"),
        ("abcdefg/" * 600 + "x.md", "ENAMETOOLONG"),
    ]
    for path, code in cases:
        for request in (WriteNote(path=path, content="x"), DeleteNote(path=path)):
            error = await refused(notes, request)
            assert error.code == code, (path[:40], error.code, error.message)
            assert len(error.message) < 300 and "\n" not in error.message
    assert "Traceback" not in notes.log() and "RecursionError" not in notes.log()
    assert [p.name for p in notes.root.iterdir()] == []


@pytest.mark.slow
async def test_a_255_byte_name_can_be_written_edited_and_found(notes: Daemon) -> None:
    """Before: the temporary name (``.NAME.kbindex-tmp-XXXX``) went over the file
    system's 255 bytes, and the write failed."""
    for name in ("n" * 252 + ".md", "é" * 126 + ".md"):
        assert len(name.encode()) == 255
        made = await note(notes, WriteNote(path=name, content="quokka sightings\n"))
        assert made.created
        await note(notes, EditNote(path=name, old_text="quokka", new_text="numbat"))
        assert (notes.root / name).read_text() == "numbat sightings\n"
    assert sorted(await notes.search_paths("numbat")) == sorted(
        ["n" * 252 + ".md", "é" * 126 + ".md"]
    )
    assert not [p for p in notes.root.iterdir() if WRITING_MARK in p.name]


async def test_names_with_control_characters_are_refused(notes: Daemon) -> None:
    """Before: a name with a newline was written, and spoofed lines of kbctl grep; one
    with a right-to-left override shows reversed wherever it is printed unescaped."""
    for path in (
        "two\nlines.md",
        "tab\there.md",
        "title\x1b]0;pwned\x07.md",
        "del\x7f.md",
        "c1\x9b31m.md",
        "line\u2028sep.md",
        "folder\x1b[2J/x.md",
        "invoice\u202edm.exe.md",
        "isolate\u2066x\u2069.md",
    ):
        error = await refused(notes, WriteNote(path=path, content="x"))
        assert error.code == "EINVAL", (path, error.code, error.message)
        assert "control character" in error.message
        assert "\x1b" not in error.message and "\n" not in error.message
    assert [p.name for p in notes.root.iterdir()] == []


async def test_a_note_grown_past_the_size_cap_is_refused_without_being_read(
    notes: Daemon,
) -> None:
    """Another member of a shared folder can make a note of any size (a sparse file
    costs them nothing): before, every change read it whole, holding the notes lock."""
    huge = notes.root / "huge.md"
    with huge.open("wb") as f:
        f.truncate(64 << 30)  # 64 GiB, sparse
    write(notes.root / "plain.md", "plain note\n")
    for request in (
        AppendNote(path="huge.md", text="more"),
        EditNote(path="huge.md", old_text="a", new_text="b"),
        WriteNote(path="huge.md", content="small now", if_match=""),
        DeleteNote(path="huge.md", if_match="0" * 16),
    ):
        with anyio.fail_after(ANSWER_SECONDS):
            error = await refused(notes, request)
        assert error.code == "EFBIG", (request, error.code, error.message)
        assert "huge.md" in error.message
    assert huge.stat().st_size == 64 << 30
    with anyio.fail_after(ANSWER_SECONDS):
        await note(notes, AppendNote(path="plain.md", text="still served"))


async def test_a_note_or_folder_that_is_a_link_is_refused_even_inside_the_root(
    notes: Daemon,
) -> None:
    """No link is followed: not even one that points back inside the root, since the
    other member who planted it can point it elsewhere the next moment."""
    write(notes.root / "real" / "a.md", "real note\n")
    (notes.root / "alias").symlink_to(notes.root / "real")
    (notes.root / "b.md").symlink_to(notes.root / "real" / "a.md")
    await notes.refresh()
    for request in (
        WriteNote(path="alias/new.md", content="x"),
        AppendNote(path="alias/a.md", text="x"),
        WriteNote(path="b.md", content="x"),
        DeleteNote(path="b.md"),
        MoveNote(src="real/a.md", dst="alias/c.md"),
    ):
        error = await refused(notes, request)
        assert error.code == "EACCES", (request, error.code, error.message)
        assert "symbolic link" in error.message
    assert (notes.root / "real" / "a.md").read_text() == "real note\n"
    assert sorted(p.name for p in (notes.root / "real").iterdir()) == ["a.md"]
    assert (notes.root / "b.md").is_symlink()

    async def unchanged() -> bool:
        return await notes.search_paths("real") == ["real/a.md"]

    await wait_for(unchanged)


NAMES = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="/\x00"), min_size=1
).filter(lambda name: len(name.encode()) <= NAME_MAX)


@pytest.mark.slow
@given(NAMES)
def test_a_temporary_name_fits_beside_any_legal_name_and_is_never_indexed(name: str) -> None:
    temporary = temporary_name(name)
    assert len(os.fsencode(temporary)) <= NAME_MAX
    assert "/" not in temporary
    rules = IgnoreRules(included_extensions=None, excluded_extensions=frozenset())
    assert rules.ignored_file(temporary) is not None  # what the scanner and watcher ask
