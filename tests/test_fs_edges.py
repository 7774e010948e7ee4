"""Filesystem edge cases against a real daemon over real files: names that are not
valid UTF-8 or hold newlines, very deep trees, symlink loops, permission-denied files,
directories and roots, files that change or vanish while being read, huge sparse
files, FIFOs, sockets and devices, case-only renames, and too many open files.

What a user relies on, asserted for each: the daemon never hangs or crashes, never
opens a FIFO or a device, every file it does not index has a visible reason (status
counts, ``why``), the index equals the files on disk once it settles, and it recovers
when the cause goes away.

Permission tests run the daemon without the capabilities that let root ignore file
modes (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, dropped from the bounding set before
exec), so they test the same thing as root in CI and as a normal user.
"""

from __future__ import annotations

import os
import resource
import socket
import stat
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import anyio
import pytest
from conftest import Daemon, MakeDaemon, mode_bound, reading, wait_for, write
from kbindex.daemon.backends.sqlite.index import SqliteIndex
from kbindex.daemon.health import Health
from kbindex.daemon.indexing.ignore import IgnoreRules
from kbindex.daemon.indexing.indexer import Indexer
from kbindex.daemon.indexing.scanner import Seen
from kbindex.daemon.roots import Roots
from kbindex.proto.client import Client
from watch_helpers import settled, until_paths, until_status

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


@contextmanager
def restore_modes(*paths: Path) -> Iterator[None]:
    """Give back the modes a test took away, so that cleanup can remove the tree."""
    modes = {p: p.stat().st_mode for p in paths}
    try:
        yield
    finally:
        for p, mode in modes.items():
            if p.exists():
                p.chmod(stat.S_IMODE(mode))


def disk_files(root: Path, suffixes: tuple[str, ...] = (".md", ".txt")) -> set[str]:
    """Regular files under ``root`` (not following links), relative, as the index
    names them: a name that is not valid UTF-8 is shown with ``\\xNN`` escapes."""
    found = set()
    for dirpath, _dirs, files in os.walk(os.fsencode(root)):
        for name in files:
            path = os.path.join(dirpath, name)
            if name.endswith(tuple(s.encode() for s in suffixes)) and stat.S_ISREG(
                os.lstat(path).st_mode
            ):
                rel = os.path.relpath(path, os.fsencode(root))
                found.add(rel.decode("utf-8", "backslashreplace"))
    return found


async def indexed_files(c: Client) -> set[str]:
    reply = await c.find_files("*", limit=1000)
    assert not reply.truncated
    return {f.relpath for f in reply.files}


async def responsive(d: Daemon, timeout: float = 5.0) -> None:
    with anyio.fail_after(timeout):
        async with d.client() as c:
            await c.ping()
            await c.status()


def log_has_no_tracebacks(d: Daemon) -> None:
    text = d.log()
    assert "Traceback" not in text and "failed" not in text.lower(), text


# ---------------------------------------------------------------- names


@pytest.mark.backends
async def test_names_that_are_not_valid_utf8_are_indexed_under_escaped_names(
    make_daemon: MakeDaemon,
) -> None:
    d = make_daemon()
    broot = os.fsencode(d.root)
    with open(broot + b"/caf\xe9 menu.md", "wb") as fh:
        fh.write(b"croissantword on the menu\n")
    os.mkdir(broot + b"/d\xff\xfe")
    with open(broot + b"/d\xff\xfe/inner.md", "wb") as fh:
        fh.write(b"croissantword inside a strange directory\n")
    write(d.root / "plain.md", "plain croissantword\n")
    await d.start()
    async with d.client() as c:
        await until_paths(
            c, "croissantword", ["caf\\xe9 menu.md", "d\\xff\\xfe/inner.md", "plain.md"]
        )
        escaped = f"{d.root}/caf\\xe9 menu.md"
        why = await c.why(escaped)
        assert why.indexed, why
        read = await c.read_file(escaped)
        assert "croissantword on the menu" in read.text

        # Live: a new strange name must not stall the queue (a normal file written
        # right after it is searchable within a second) and is indexed too.
        with open(broot + b"/new\x80.md", "wb") as fh:
            fh.write(b"brioche arrives\n")
        write(d.root / "after.md", "brioche after it\n")
        assert await until_paths(c, "brioche", ["after.md", "new\\x80.md"], timeout=4) < 2.0
        # Renames into and out of strange names, and a deletion.
        os.rename(broot + b"/plain.md", broot + b"/pl\xe4in.md")
        os.rename(broot + b"/caf\xe9 menu.md", broot + b"/cafe menu.md")
        os.rename(broot + b"/d\xff\xfe", broot + b"/dir")
        os.unlink(broot + b"/new\x80.md")
        await until_paths(
            c, "croissantword", ["cafe menu.md", "dir/inner.md", "pl\\xe4in.md"], timeout=4
        )
        await settled(c)
        assert await indexed_files(c) == disk_files(d.root)
        # A stored escaped name is not confused with a real file of that literal name.
        # (the real name wins; the other one is left out, with a warning in the log).
        write(d.root / "pl\\xe4in.md", "a literal backslash name\n")
        await until_paths(c, "literal", ["pl\\xe4in.md"])
        await until_paths(c, "croissantword", ["cafe menu.md", "dir/inner.md"])
        await settled(c)
        assert await indexed_files(c) == disk_files(d.root)
    log_has_no_tracebacks(d)


def kbctl_bytes(d: Daemon, *args: bytes, cwd: Path) -> subprocess.CompletedProcess[bytes]:
    """kbctl given arguments as a shell gives them: bytes, whatever their encoding."""
    command = [os.fsencode(sys.executable), b"-m", b"kbindex.ctl.main"]
    command += [b"--socket", os.fsencode(d.socket), *args]
    return subprocess.run(command, capture_output=True, cwd=cwd, timeout=30)


@pytest.mark.slow
async def test_kbctl_takes_names_that_are_not_utf8(make_daemon: MakeDaemon) -> None:
    """A name that is not UTF-8, typed (or pasted) as it is, works in every kbctl
    command that takes a path or a glob: it travels as ``\\xNN`` (the protocol's
    strings are UTF-8) and the daemon reads the file of those bytes. Before: a
    traceback (the request could not be encoded)."""
    d = make_daemon()
    broot = os.fsencode(d.root)
    with open(broot + b"/caf\xe9.md", "wb") as fh:
        fh.write(b"croissantword on the menu\n")
    os.mkdir(broot + b"/d\xff")
    with open(broot + b"/d\xff/inner.md", "wb") as fh:
        fh.write(b"croissantword in a strange folder\n")
    write(d.root / "plain.md", "croissantword plain\n")
    await d.start()
    shown = f"{d.root}/caf\\xe9.md"
    for name in (b"caf\xe9.md", broot + b"/caf\xe9.md", shown.encode()):
        why = kbctl_bytes(d, b"why", name, cwd=d.root)
        assert (why.returncode, why.stdout, why.stderr) == (0, f"{shown}: indexed\n".encode(), b"")
        read = kbctl_bytes(d, b"read", name, cwd=d.root)
        assert read.returncode == 0 and read.stdout == b"1| croissantword on the menu\n", read
    grep = kbctl_bytes(d, b"grep", b"--path", b"d\xff", b"croissantword", cwd=d.root)
    assert grep.returncode == 0, grep.stderr
    assert grep.stdout == b"d\\xff/inner.md:1:croissantword in a strange folder\n"
    listed = kbctl_bytes(d, b"files", b"d\xff/*", cwd=d.root)
    assert listed.returncode == 0 and listed.stdout.startswith(
        f"{d.root}/d\\xff/inner.md ".encode()
    )
    found = kbctl_bytes(d, b"search", b"croissantword", b"--path", b"d\xff", cwd=d.root)
    assert found.returncode == 0 and b"inner.md" in found.stdout and b"plain" not in found.stdout
    redo = kbctl_bytes(d, b"reindex", b"--wait", b"caf\xe9.md", cwd=d.root)
    assert redo.returncode == 0 and redo.stdout.startswith(b"done: 1 files checked"), redo


@pytest.mark.backends
async def test_names_with_newlines_are_indexed_and_searchable(daemon: Daemon) -> None:
    root = daemon.root
    write(root / "first\nline.md", "newlineword in a name with a newline\n")
    write(root / "dir\nwith\nbreaks" / "x.md", "newlineword deeper\n")
    async with daemon.client() as c:
        await until_paths(c, "newlineword", ["dir\nwith\nbreaks/x.md", "first\nline.md"])
        why = await c.why(str(root / "first\nline.md"))
        assert why.indexed
        assert "newlineword" in (await c.read_file(str(root / "first\nline.md"))).text
        (root / "first\nline.md").rename(root / "second\nline.md")
        await until_paths(c, "newlineword", ["dir\nwith\nbreaks/x.md", "second\nline.md"])
        await daemon.refresh()
        assert await indexed_files(c) == disk_files(root)


@pytest.mark.backends
async def test_a_nul_past_the_binary_sample_does_not_cut_the_text(daemon: Daemon) -> None:
    """Text detection samples the first 8 KiB: a NUL further on leaves the file text.
    The words after it must be indexed too (SQLite's JSON functions, which carry a
    batch into the index, would end the text at a NUL)."""
    head = "beforenul " + "filler words here\n" * 600  # past the 8 KiB sample
    (daemon.root / "nul.txt").write_bytes(head.encode() + b"\x00afternul tail\n")
    async with daemon.client() as c:
        await until_paths(c, "afternul", ["nul.txt"])
        await until_paths(c, "beforenul", ["nul.txt"])
        await until_paths(c, "aftern*", ["nul.txt"])  # the exact index holds it too
        hit = (await c.search("afternul")).hits[0]
        assert "⟦afternul⟧" in hit.snippet


@pytest.mark.backends
async def test_case_only_renames_leave_one_document(daemon: Daemon) -> None:
    root = daemon.root
    write(root / "a.md", "caseword lower\n")
    write(root / "Notes" / "n.md", "caseword in a directory\n")
    async with daemon.client() as c:
        await until_paths(c, "caseword", ["Notes/n.md", "a.md"])
        (root / "a.md").rename(root / "A.md")
        (root / "Notes").rename(root / "notes")
        await until_paths(c, "caseword", ["A.md", "notes/n.md"])
        status = await settled(c)
        assert status.indexed_files == 2
        assert await indexed_files(c) == {"A.md", "notes/n.md"}
    # And while the daemon is stopped.
    daemon.stop()
    (root / "A.md").rename(root / "a.md")
    await daemon.start()
    async with daemon.client() as c:
        await until_paths(c, "caseword", ["a.md", "notes/n.md"])
        assert await indexed_files(c) == {"a.md", "notes/n.md"}


# ---------------------------------------------------------------- trees


async def test_very_deep_trees(daemon: Daemon) -> None:
    """Depth 200 is indexed (startup walk and live events); a tree whose paths exceed
    PATH_MAX cannot be named by any path, so it is skipped with a visible reason."""
    root = daemon.root
    deep = root.joinpath(*["d"] * 200)
    write(deep / "bottom.md", "abyssword at depth two hundred\n")
    async with daemon.client() as c:
        await until_paths(c, "abyssword", [f"{'d/' * 200}bottom.md"])
        write(deep / "d" / "lower.md", "abyssword one deeper\n")
        await until_paths(c, "abyssword", [f"{'d/' * 200}bottom.md", f"{'d/' * 201}lower.md"])

        # 40 levels of 120-character names: about 4,900 characters, over PATH_MAX.
        name = "x" * 120
        top = root / "long"
        top.mkdir()
        fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
        try:
            for _ in range(40):
                os.mkdir(name, dir_fd=fd)
                new = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
                os.close(fd)
                fd = new
            leaf = os.open("leaf.md", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
            os.write(leaf, b"abyssword beyond PATH_MAX\n")
            os.close(leaf)
        finally:
            os.close(fd)
        await daemon.refresh()
        await responsive(daemon)
        # 30 s, not 10: once in a loaded full-suite run the rescan after the PATH_MAX
        # tree was still running at 10 s (event lag up to 4.7 s); alone it takes 2-3 s.
        status = await settled(c, timeout=30)
        assert any("too long" in e.reason.lower() for e in status.recent_errors), status
        await until_paths(c, "abyssword", [f"{'d/' * 200}bottom.md", f"{'d/' * 201}lower.md"])
        # Cleanup of a tree deeper than PATH_MAX needs relative steps.
        os.chdir(top)
        try:
            for _ in range(40):
                os.chdir(name)
            os.unlink("leaf.md")
            for _ in range(40):
                os.chdir("..")
                os.rmdir(name)
        finally:
            os.chdir("/")


async def test_symlink_loops_are_not_followed(daemon: Daemon) -> None:
    root = daemon.root
    write(root / "real" / "a.md", "loopword real file\n")
    os.symlink(".", root / "self")
    os.symlink("..", root / "real" / "up")
    os.symlink("b", root / "a")
    os.symlink("a", root / "b")
    os.symlink("a.md", root / "real" / "alias.md")
    os.symlink("loop.md", root / "loop.md")
    async with daemon.client() as c:
        await until_paths(c, "loopword", ["real/a.md"])
        await daemon.refresh()
        await daemon.refresh(full=True)
        await responsive(daemon)
        # A new link loop made while watching.
        os.symlink("../real", root / "real" / "again")
        write(root / "real" / "c.md", "loopword second\n")
        await until_paths(c, "loopword", ["real/a.md", "real/c.md"])
        status = await settled(c)
        assert status.indexed_files == 2
        why = await c.why(str(root / "loop.md"))
        assert not why.indexed and why.reason
    log_has_no_tracebacks(daemon)


def test_a_folder_swapped_for_a_link_after_the_scan_leads_the_indexer_nowhere(
    tmp_path: Path,
) -> None:
    """Someone who may write in a root swaps a folder the scan listed for a link to a
    folder of yours elsewhere, before its files are read: the reader must not follow it.
    The race is made certain here by swapping between the listing (``Seen``) and the
    read (``Indexer._read_batch``, the indexer's own reader); before, the file outside
    was read and indexed under the name inside the root."""
    root, outside = tmp_path / "root", tmp_path / "outside"
    write(root / "d" / "secret.md", "inside text\n")
    write(outside / "secret.md", "privatekeyword held outside every root\n")
    listed = os.stat(root / "d" / "secret.md")
    seen = Seen(str(root / "d" / "secret.md"), str(root), listed.st_size, listed.st_mtime_ns)
    os.rename(root / "d", root / "d.real")
    os.symlink(outside, root / "d")
    rules = IgnoreRules(included_extensions=None, excluded_extensions=frozenset())
    roots = Roots([root])
    index = SqliteIndex(tmp_path / "index.sqlite3", reading(*roots.paths))
    indexer = Indexer(index, roots, rules, Health(), 1 << 20)
    updates, vanished = indexer._read_batch([seen])
    assert updates == [] and vanished == [seen.path]


# ---------------------------------------------------------------- permissions


async def test_permission_denied_files_and_directories(make_daemon: MakeDaemon) -> None:
    d = mode_bound(make_daemon)
    secret = write(d.root / "secret.md", "lockword in a closed file\n")
    locked = d.root / "locked"
    write(locked / "inside.md", "lockword in a closed directory\n")
    write(d.root / "open.md", "lockword open\n")
    with restore_modes(secret, locked):
        secret.chmod(0)
        locked.chmod(0)
        await d.start()
        async with d.client() as c:
            await until_paths(c, "lockword", ["open.md"])
            status = await settled(c)
            assert status.skipped.get("unreadable") == 1, status.skipped
            reasons = {e.path: e.reason for e in status.recent_errors}
            assert "Permission denied" in reasons[str(secret)]
            assert "Permission denied" in reasons[str(locked)]
            why = await c.why(str(secret))
            assert not why.indexed and "unreadable" in why.reason and "denied" in why.reason

            # The cause goes away: both are indexed (chmod changes no mtime).
            secret.chmod(0o644)
            locked.chmod(0o755)
            await until_paths(c, "lockword", ["locked/inside.md", "open.md", "secret.md"])
            status = await settled(c)
            assert status.skipped.get("unreadable", 0) == 0
            assert await indexed_files(c) == disk_files(d.root)

            # Taken away again while indexed: a full refresh keeps the index honest.
            secret.chmod(0)
            await d.refresh(full=True)
            status = await settled(c)
            assert status.skipped.get("unreadable") == 1
            await until_paths(c, "lockword", ["locked/inside.md", "open.md"])


async def test_unreadable_root_keeps_serving_and_recovers(make_daemon: MakeDaemon) -> None:
    d = mode_bound(make_daemon)
    write(d.root / "a.md", "rootword kept while the root is closed\n")
    await d.start()
    with restore_modes(d.root):
        async with d.client() as c:
            await until_paths(c, "rootword", ["a.md"])
            d.root.chmod(0)
            status = await until_status(c, lambda s: s.roots[0].state == "error", timeout=5)
            assert "denied" in status.roots[0].detail.lower(), status.roots[0]
            assert status.watch == "error"
            await d.refresh()
            # It keeps serving what it has.
            await until_paths(c, "rootword", ["a.md"])
            d.root.chmod(0o755)
            write(d.root / "b.md", "rootword after recovery\n")
            await until_status(c, lambda s: s.roots[0].state == "live", timeout=5)
            await until_paths(c, "rootword", ["a.md", "b.md"])
        d.stop()

        # Started while the root is unreadable: serves the old index, says why, and
        # goes live within seconds of the fix (not after the five-minute retry).
        d.root.chmod(0)
        await d.start()
        async with d.client() as c:
            status = await until_status(c, lambda s: s.roots[0].state == "error", timeout=5)
            assert "denied" in status.roots[0].detail.lower(), status.roots[0]
            await until_paths(c, "rootword", ["a.md", "b.md"])
            d.root.chmod(0o755)
            await until_status(c, lambda s: s.roots[0].state == "live", timeout=5)
            write(d.root / "c.md", "rootword live again\n")
            await until_paths(c, "rootword", ["a.md", "b.md", "c.md"])


# ---------------------------------------------------------------- contents


async def test_files_that_change_or_vanish_while_read(daemon: Daemon) -> None:
    root = daemon.root
    grow = root / "grow.md"
    grow.write_text("flowword start\n")
    stop = threading.Event()

    def grower() -> None:
        # Appends without pause, and now and then shrinks back to nothing (truncated
        # while being read), staying under the size limit.
        with grow.open("a") as fh:
            i = 0
            while not stop.is_set():
                fh.write(f"line {i} " + "x" * 200 + "\n")
                fh.flush()
                i += 1
                if i % 2000 == 0:
                    fh.truncate(0)
            fh.write("flowword finalmark\n")

    def churner() -> None:
        i = 0
        while not stop.is_set():
            p = root / "churn" / f"f{i % 50}.md"
            p.parent.mkdir(exist_ok=True)
            if p.exists():
                p.unlink()
            else:
                p.write_text(f"churnword {i}\n" * 100)
            i += 1

    threads = [threading.Thread(target=grower), threading.Thread(target=churner)]
    for t in threads:
        t.start()
    try:
        for _ in range(3):
            await daemon.refresh(full=True)
    finally:
        stop.set()
        for t in threads:
            t.join()
    # A file written without pause is read with backoff (daemon/watching/changes.py), so its
    # last state may wait for the backoff; a refresh reads it at once.
    await daemon.refresh()
    async with daemon.client() as c:
        await until_paths(c, "finalmark", ["grow.md"])
        await settled(c)
        await wait_for(lambda: _matches(c, root), timeout=5)


async def _matches(c: Client, root: Path) -> bool:
    return await indexed_files(c) == disk_files(root)


def _rchar(pid: int) -> int:
    with open(f"/proc/{pid}/io") as fh:
        for line in fh:
            if line.startswith("rchar:"):
                return int(line.split()[1])
    raise AssertionError("no rchar")


async def test_a_huge_sparse_file_is_skipped_without_being_read(daemon: Daemon) -> None:
    root = daemon.root
    assert daemon.proc is not None
    before = _rchar(daemon.proc.pid)
    huge = root / "huge.md"
    with huge.open("wb") as fh:
        fh.truncate(10 << 30)  # 10 GiB, no blocks
    write(root / "small.md", "sparseword neighbour\n")
    async with daemon.client() as c:
        await until_paths(c, "sparseword", ["small.md"])
        status = await until_status(c, lambda s: s.skipped.get("too_large") == 1)
        why = await c.why(str(huge))
        assert not why.indexed and "too_large" in why.reason
        await daemon.refresh(full=True)
        assert (await settled(c)).skipped.get("too_large") == 1
    assert status.indexed_files == 1
    read = _rchar(daemon.proc.pid) - before
    assert read < 1 << 20, f"the daemon read {read} bytes"


# ---------------------------------------------------------------- special files


async def test_fifos_sockets_and_devices_are_never_opened(make_daemon: MakeDaemon) -> None:
    d = make_daemon()
    root = d.root
    fifo = root / "pipe.md"
    os.mkfifo(fifo)
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(root / "sock.md"))
    specials = 2
    if os.geteuid() == 0:
        os.mknod(root / "null.md", stat.S_IFCHR | 0o600, os.makedev(1, 3))
        specials += 1
    write(root / "real.md", "pipeword in a real file\n")

    # A writer blocks in open() until someone opens the FIFO for reading.
    opened = threading.Event()

    def writer(path: Path) -> None:
        try:
            with path.open("w") as fh:
                opened.set()
                fh.write("x")
        except OSError:
            pass

    t = threading.Thread(target=writer, args=(fifo,), daemon=True)
    t.start()
    try:
        await d.start()
        async with d.client() as c:
            await until_paths(c, "pipeword", ["real.md"])
            await d.refresh(full=True)
            fifo2 = root / "pipe2.md"
            os.mkfifo(fifo2)  # made while watching
            t2 = threading.Thread(target=writer, args=(fifo2,), daemon=True)
            t2.start()
            status = await until_status(
                c, lambda s: s.skipped.get("not_regular") == specials + 1 and s.pending == 0
            )
            await responsive(d)
            assert not opened.is_set(), "the daemon opened a FIFO"
            for name in ("pipe.md", "pipe2.md", "sock.md"):
                why = await c.why(str(root / name))
                assert not why.indexed and "not_regular" in why.reason, why
            assert status.indexed_files == 1
            fifo.unlink()
            await until_status(c, lambda s: s.skipped.get("not_regular") == specials)
    finally:
        sock.close()
        for p in (fifo, root / "pipe2.md"):
            # Unblock the writers (their open returns once a reader exists).
            try:
                fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK)
                os.close(fd)
            except OSError:
                pass


# ---------------------------------------------------------------- resources


async def test_too_many_open_files(daemon: Daemon) -> None:
    """The daemon's open-file limit is lowered under it (prlimit) to what it holds: reads
    fail with EMFILE. The files are reported, not recorded as unreadable for good, and
    are indexed once descriptors are available again."""
    assert daemon.proc is not None
    pid = daemon.proc.pid
    fd_dir = Path(f"/proc/{pid}/fd")
    limits = resource.prlimit(pid, resource.RLIMIT_NOFILE)
    async with daemon.client() as c:
        await settled(c)
        try:
            # A new descriptor takes the lowest free number: a limit at that number
            # refuses every new one.
            used = {int(n) for n in os.listdir(fd_dir)}
            lowest_free = min(set(range(len(used) + 1)) - used)
            resource.prlimit(pid, resource.RLIMIT_NOFILE, (lowest_free, limits[1]))
            for i in range(5):
                write(daemon.root / f"f{i}.md", f"fdword {i}\n")
            status = await until_status(
                c, lambda s: s.skipped.get("unreadable") == 5 and s.pending == 0
            )
            assert any("Too many open files" in e.reason for e in status.recent_errors)
            assert daemon.proc.poll() is None, daemon.log()
        finally:
            resource.prlimit(pid, resource.RLIMIT_NOFILE, limits)
    # (What the server does with connections while starved is tested with the server.)
    async with daemon.client() as c:
        await daemon.refresh()
        await until_paths(c, "fdword", [f"f{i}.md" for i in range(5)])
        assert (await settled(c)).skipped.get("unreadable", 0) == 0
    await responsive(daemon)
