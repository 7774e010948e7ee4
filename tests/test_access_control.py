"""Access control at the protocol edge: paths a client names never reach outside the
roots (``..``, absolute paths, symlinks out, NUL bytes, very long paths), special files
are never opened for reading, and pathological queries are refused politely or bounded
in time while the daemon keeps serving. (The peer-credential check is tested in
test_core_lifecycle.py.)
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import anyio
import pytest
from conftest import Daemon, MakeDaemon, write
from kbindex.daemon.indexing import textfile
from kbindex.daemon.roots import Roots
from kbindex.proto.client import Client, DaemonError
from kbindex.proto.messages import ReadFileReply, WhyReply

pytestmark = pytest.mark.anyio

SECRET = "TOPSECRET-7f3a"
ANSWER_DEADLINE = 7.0
"""Seconds any one answer may take: the searcher's own deadline is 5 s."""
MAX_MESSAGE = 300
"""An error message is a short sentence, never a file's contents."""


@pytest.fixture
async def guarded(make_daemon: MakeDaemon, tmp_path: Path) -> AsyncIterator[Daemon]:
    root = tmp_path / "root"
    outside = tmp_path / "outside"
    write(outside / "secret.md", f"{SECRET}\n")
    write(root / "doc.md", "inside text\n")
    write(root / "sub" / "inner.md", "inner text\n")
    write(root / "later_link.md", "will become a link\n")
    write(root / "later_fifo.md", "will become a fifo\n")
    (root / "link_out.md").symlink_to(outside / "secret.md")
    (root / "dir_out").symlink_to(outside, target_is_directory=True)
    os.mkfifo(root / "fifo.md")
    if os.geteuid() == 0:
        os.mknod(root / "null.md", 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    d = make_daemon(root)
    await d.start()
    yield d
    d.stop()


async def refused(call: Awaitable[object], *codes: str) -> DaemonError:
    with anyio.fail_after(ANSWER_DEADLINE), pytest.raises(DaemonError) as info:
        await call
    error = info.value
    assert error.code in codes, (error.code, error.message)
    assert SECRET not in error.message and len(error.message) <= MAX_MESSAGE, error.message
    return error


def escapes(d: Daemon) -> dict[str, str]:
    """Paths that name something outside the root, by how."""
    outside = d.base / "outside"
    return {
        "dot-dot": "../outside/secret.md",
        "dot-dot inside a path": "sub/../../outside/secret.md",
        "absolute, outside": str(outside / "secret.md"),
        "absolute, system file": "/etc/passwd",
        "absolute, through the root and out": f"{d.root}/../outside/secret.md",
        "home": "~/.bashrc",
        "file symlink out": "link_out.md",
        "directory symlink out": "dir_out/secret.md",
        "absolute via a directory symlink": f"{d.root}/dir_out/secret.md",
    }


def malformed() -> dict[str, str]:
    return {
        "NUL byte": "doc.md\x00../../outside/secret.md",
        "empty": "",
        "10 KB path": "a/" * 5000 + "doc.md",
        "10 KB name": "x" * 10_240,
    }


async def test_read_file_refuses_every_path_outside_the_roots(guarded: Daemon) -> None:
    async with guarded.client() as c:
        for how, path in escapes(guarded).items():
            error = await refused(c.read_file(path), "outside_roots")
            assert "outside" in error.message, how
        for path in malformed().values():
            await refused(c.read_file(path), "invalid_argument")
        # Inside the root, ``..`` that stays inside is fine.
        reply = await c.read_file("sub/../doc.md")
        assert isinstance(reply, ReadFileReply) and "inside text" in reply.text
        assert (await c.search(SECRET)).hits == []


async def test_special_files_are_never_opened(guarded: Daemon) -> None:
    """A FIFO (opening it for reading would block) and a device node inside the root."""
    async with guarded.client() as c:
        await refused(c.read_file("fifo.md"), "not_found")
        if os.geteuid() == 0:
            await refused(c.read_file("null.md"), "not_found")
            await refused(c.read_file("/dev/zero"), "outside_roots")
        why = await c.why("fifo.md")
        assert not why.indexed


@pytest.mark.slow
async def test_files_swapped_after_indexing_are_not_followed(guarded: Daemon) -> None:
    """An indexed file replaced by a symlink pointing out, or by a FIFO; an indexed
    directory replaced by a symlink out: read_file refuses, promptly."""
    root = guarded.root
    async with guarded.client() as c:
        assert (await c.read_file("later_link.md")).total_lines == 1
        (root / "later_link.md").unlink()
        (root / "later_link.md").symlink_to(guarded.base / "outside" / "secret.md")
        await refused(c.read_file("later_link.md"), "outside_roots")

        (root / "later_fifo.md").unlink()
        os.mkfifo(root / "later_fifo.md")
        await refused(c.read_file("later_fifo.md"), "not_found")

        os.rename(root / "sub", guarded.base / "moved_sub")
        write(guarded.base / "outside" / "inner.md", f"{SECRET}\n")
        (root / "sub").symlink_to(guarded.base / "outside", target_is_directory=True)
        await refused(c.read_file("sub/inner.md"), "outside_roots")


async def test_why_and_refresh_refuse_paths_outside_the_roots(guarded: Daemon) -> None:
    async with guarded.client() as c:
        for how, path in escapes(guarded).items():
            with anyio.fail_after(ANSWER_DEADLINE):
                why = await c.why(path)
            assert isinstance(why, WhyReply) and not why.indexed, how
            assert why.reason == "outside every root" and SECRET not in why.path, (how, why)
            await refused(c.refresh([path]), "outside_roots")
        for path in malformed().values():
            await refused(c.why(path), "invalid_argument")
            await refused(c.refresh([path]), "invalid_argument")
        files = await c.find_files("../outside/*")
        assert files.files == []
        assert all(f.path.startswith(str(guarded.root)) for f in (await c.find_files()).files)


async def test_pathological_queries_are_refused_or_bounded(guarded: Daemon) -> None:
    words = [f"w{i}" for i in range(5000)]
    cases: list[tuple[str, Callable[[Client], Awaitable[object]], set[str]]] = [
        ("5,000 terms", lambda c: c.search(" ".join(words)), {"bad_query"}),
        ("1,000 terms", lambda c: c.search(" ".join(words[:1000])[:2000]), set()),
        ("raw: 400 ORed terms", lambda c: c.search(" OR ".join(words[:400])[:2000], mode="raw"),
         {"bad_query"}),
        ("raw: 10,000 nested parentheses",
         lambda c: c.search("(" * 10_000 + "a" + ")" * 10_000, mode="raw"), {"bad_query"}),
        ("raw: 999 nested parentheses",
         lambda c: c.search("(" * 999 + "a" + ")" * 999, mode="raw"), {"bad_query"}),
        ("raw: 1,000 NOTs", lambda c: c.search("a" + " NOT a" * 330, mode="raw"), {"bad_query"}),
        ("raw: 600 NEARs", lambda c: c.search("NEAR(" + "a " * 600 + ")", mode="raw"),
         {"bad_query"}),
        ("1 MB query", lambda c: c.search("x" * 1_000_000), {"bad_query"}),
        ("1 MB raw query", lambda c: c.search("(" * 1_000_000, mode="raw"), {"bad_query"}),
        ("limit 2**63", lambda c: c.search("text", limit=2**63), {"invalid_argument"}),
        ("limit 2**64 - 1", lambda c: c.search("text", limit=2**64 - 1), {"invalid_argument"}),
        ("limit -1", lambda c: c.search("text", limit=-1), {"invalid_argument"}),
        ("limit 0", lambda c: c.search("text", limit=0), {"invalid_argument"}),
        ("find_files limit 10**12", lambda c: c.find_files(limit=10**12), {"invalid_argument"}),
        ("find_files limit -5", lambda c: c.find_files(limit=-5), {"invalid_argument"}),
        ("find_files 5,000-character glob", lambda c: c.find_files("*a" * 2500),
         {"invalid_argument"}),
        ("search path filter of 5,000 characters",
         lambda c: c.search("text", path="*" * 5000), {"invalid_argument"}),
        ("read_file start_line 2**63",  # past the end of the file
         lambda c: c.read_file("doc.md", start_line=2**63), {"invalid_argument"}),
        ("read_file end_line -1", lambda c: c.read_file("doc.md", end_line=-1),
         {"invalid_argument"}),
        ("read_file start_line 0", lambda c: c.read_file("doc.md", start_line=0),
         {"invalid_argument"}),
    ]  # fmt: skip
    async with guarded.client() as c:
        for name, call, codes in cases:
            started = time.monotonic()
            message = ""
            with anyio.fail_after(ANSWER_DEADLINE):
                try:
                    await call(c)
                    outcome = "answered"
                except DaemonError as exc:
                    outcome, message = exc.code, exc.message
            assert outcome == "answered" or outcome in codes, (name, outcome)
            assert len(message) <= MAX_MESSAGE, (name, message)
            assert time.monotonic() - started < ANSWER_DEADLINE, name
            with anyio.fail_after(1):
                await c.ping()
        reply = await c.search("inside")
        assert [h.relpath for h in reply.hits] == ["doc.md"]


def test_a_directory_swapped_for_a_symlink_after_the_check_is_caught_at_open(
    tmp_path: Path,
) -> None:
    """read_file checks the path, then opens it; O_NOFOLLOW guards only the last
    component. If a directory on the way became a symlink out of the root in between,
    the open itself must notice (the kernel's name for the open file)."""
    root, outside = tmp_path / "root", tmp_path / "outside"
    write(outside / "secret.md", "secret\n")
    root.mkdir()
    (root / "sub").symlink_to(outside)  # as if swapped in after the check
    inside = Roots((root,)).inside
    with pytest.raises(textfile.Escaped):
        textfile.load(str(root / "sub" / "secret.md"), 1 << 20, within=inside)
    write(root / "real" / "ok.md", "fine\n")
    loaded = textfile.load(str(root / "real" / "ok.md"), 1 << 20, within=inside)
    assert isinstance(loaded, textfile.Loaded) and loaded.text == "fine\n"
