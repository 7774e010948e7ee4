"""Indexing and change detection through a real daemon: what users see in search."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest
from conftest import Daemon, MakeDaemon, bump_mtime, write
from kbindex.daemon.engine import sqlite

pytestmark = pytest.mark.anyio


@pytest.mark.backends
async def test_indexes_text_files_and_finds_them(daemon: Daemon) -> None:
    write(daemon.root / "notes" / "sched.md", "# Scheduler\n\nThe scheduler picks the next task.\n")
    write(daemon.root / "plain.txt", "nothing about that here\n")
    await daemon.refresh()
    assert await daemon.search_paths("scheduler") == ["notes/sched.md"]
    async with daemon.client() as c:
        status = await c.status()
    assert status.indexed_files == 2
    assert status.roots[0].files == 2
    assert status.last_scan_at is not None


@pytest.mark.slow
@pytest.mark.backends
async def test_modify_add_delete_rename_between_scans(daemon: Daemon) -> None:
    a = write(daemon.root / "a.md", "alpha original words\n")
    b = write(daemon.root / "b.md", "bravo to be deleted\n")
    c = write(daemon.root / "c.md", "charlie will move\n")
    await daemon.refresh()
    assert await daemon.search_paths("alpha") == ["a.md"]

    a.write_text("alpha replaced zulu\n")
    bump_mtime(a)
    b.unlink()
    (daemon.root / "moved").mkdir()
    c.rename(daemon.root / "moved" / "c2.md")
    write(daemon.root / "d.md", "delta is new\n")
    await daemon.refresh()

    assert await daemon.search_paths("zulu") == ["a.md"]
    assert await daemon.search_paths("original") == []
    assert await daemon.search_paths("bravo") == []
    assert await daemon.search_paths("charlie") == ["moved/c2.md"]
    assert await daemon.search_paths("delta") == ["d.md"]


@pytest.mark.backends
async def test_same_size_edit_in_same_second_is_detected(daemon: Daemon) -> None:
    """Change detection compares mtime in nanoseconds and size, not whole seconds."""
    f = write(daemon.root / "x.txt", "version one\n")
    await daemon.refresh()
    st = f.stat()
    f.write_text("version two\n")  # same length
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns + 1))  # 1 ns later, same second
    await daemon.refresh()
    assert await daemon.search_paths("two") == ["x.txt"]


async def test_no_change_scan_writes_nothing(daemon: Daemon) -> None:
    for i in range(30):
        write(daemon.root / f"d{i % 3}" / f"f{i}.md", f"document number {i}\n")
    await daemon.refresh()
    before = _db_fingerprint(daemon)
    for _ in range(3):
        await daemon.refresh()
    assert _db_fingerprint(daemon) == before


def _db_fingerprint(daemon: Daemon) -> tuple[object, ...]:
    conn = sqlite.connect(f"file:{daemon.db_path}?mode=ro", uri=True)
    try:
        rows = conn.execute("SELECT max(indexed_at), count(*) FROM files").fetchone()
    finally:
        conn.close()
    wal = Path(f"{daemon.db_path}-wal")
    wal_state = (wal.stat().st_size, wal.stat().st_mtime_ns) if wal.exists() else None
    return (*rows, daemon.db_path.stat().st_mtime_ns, wal_state)


@pytest.mark.backends
async def test_full_reindex_rereads_unchanged_files(daemon: Daemon) -> None:
    write(daemon.root / "a.md", "alpha\n")
    await daemon.refresh()
    async with daemon.client() as c:
        changed = [r async for r in c.refresh_wait(full=False)][-1]
        full = [r async for r in c.refresh_wait(full=True)][-1]
    assert changed.files_changed == 0  # type: ignore[union-attr]
    assert full.files_changed == 1  # type: ignore[union-attr]


@pytest.mark.slow
async def test_refresh_reports_progress_then_result(make_daemon: MakeDaemon) -> None:
    daemon = make_daemon()
    daemon.extra_args = ["--watch", "off"]  # count exactly what this refresh reads
    await daemon.start()
    for i in range(1200):
        write(daemon.root / f"dir{i % 10}" / f"n{i}.txt", f"note {i}\n")
    async with daemon.client() as c:
        replies = [r async for r in c.refresh_wait()]
    progress = replies[:-1]
    assert progress, "expected progress replies before the result"
    assert progress[-1].done == progress[-1].total == 1200  # type: ignore[attr-defined]
    assert replies[-1].files_changed == 1200  # type: ignore[attr-defined]
    # Written in several batches, so reading the next overlaps writing this one (and
    # the bar moves): at least four steps for 1,200 files.
    steps = [p.done for p in progress if p.done]  # type: ignore[attr-defined]
    assert steps == sorted(steps) and len(set(steps)) >= 4, steps


@pytest.mark.backends
async def test_refresh_of_one_file_and_of_a_deleted_file(daemon: Daemon) -> None:
    f = write(daemon.root / "one.md", "first text\n")
    await daemon.refresh(str(f))
    assert await daemon.search_paths("first") == ["one.md"]
    f.unlink()
    await daemon.refresh("one.md")  # relative to a root
    assert await daemon.search_paths("first") == []


@pytest.mark.backends
async def test_skips_binary_oversize_and_undecodable_with_reasons(make_daemon: MakeDaemon) -> None:
    d = make_daemon()
    write(d.root / "bin.txt", b"\x00\x01\x02 not text")
    write(d.root / "big.txt", "word " * 300_000)  # ~1.5 MB
    write(d.root / "utf16.txt", "\ufeffunicode sixteen".encode("utf-16-le"))
    write(d.root / "latin.txt", "caf\xe9 cr\xe8me".encode("cp1252"))
    write(d.root / "bad.txt", b"\x81\x8d\x8f\x90\x9d" * 10)  # undefined in cp1252, invalid UTF-8
    write(d.root / "ok.md", "fine file\n")
    d.extra_args = ["--max-file-size-mb", "1"]
    await d.start()
    async with d.client() as c:
        status = await c.status()
        why_big = await c.why("big.txt")
        why_bin = await c.why("bin.txt")
    assert status.skipped == {"binary": 1, "too_large": 1, "undecodable": 1}
    assert status.indexed_files == 3
    assert status.errors_encountered >= 1
    assert "too_large" in why_big.reason and not why_big.indexed
    assert "binary" in why_bin.reason
    assert await d.search_paths("sixteen") == ["utf16.txt"]
    assert await d.search_paths("crème") == ["latin.txt"]


async def test_extension_filters(make_daemon: MakeDaemon) -> None:
    d = make_daemon()
    write(d.root / "a.md", "needle\n")
    write(d.root / "b.py", "needle = 1\n")
    write(d.root / "c.log", "needle\n")
    d.extra_args = ["--include-ext", "*", "--exclude-ext", "log"]
    await d.start()
    assert sorted(await d.search_paths("needle")) == ["a.md", "b.py"]


async def test_builtin_ignores_and_self_exclusion(make_daemon: MakeDaemon, tmp_path: Path) -> None:
    d = make_daemon()
    write(d.root / ".git" / "notes.md", "needle in git\n")
    write(d.root / "node_modules" / "pkg" / "README.md", "needle in deps\n")
    write(d.root / "env" / "pyvenv.cfg", "home = /usr\n")
    write(d.root / "env" / "doc.txt", "needle in venv\n")
    write(d.root / "real.md", "needle for real\n")
    # The state directory inside the root: the daemon must not index its own files.
    d.state_dir = d.root / "kbstate"
    write(d.root / "kbstate" / "stray.txt", "needle in state\n")
    await d.start()
    assert await d.search_paths("needle") == ["real.md"]


async def test_symlinks_do_not_lead_out_of_a_root(make_daemon: MakeDaemon, tmp_path: Path) -> None:
    outside = write(tmp_path / "outside" / "secret.md", "needle outside\n")
    d = make_daemon()
    write(d.root / "inside.md", "needle inside\n")
    os.symlink(outside, d.root / "link.md")
    os.symlink(outside.parent, d.root / "linkdir")
    os.symlink(d.root / "inside.md", d.root / "alias.md")
    await d.start()
    # Links are not followed: the in-root target is found once, at its real path.
    assert sorted(await d.search_paths("needle")) == ["inside.md"]
    async with d.client() as c:
        assert (await c.why("link.md")).reason == "outside every root"


@pytest.mark.slow
@pytest.mark.backends
async def test_changes_while_stopped_appear_after_restart(make_daemon: MakeDaemon) -> None:
    d = make_daemon()
    keep = write(d.root / "keep.md", "kept words\n")
    gone = write(d.root / "gone.md", "vanishing words\n")
    await d.start()
    assert await d.search_paths("words") != []
    d.stop()
    gone.unlink()
    keep.write_text("kept words edited offline\n")
    bump_mtime(keep)
    write(d.root / "new.md", "offline addition\n")
    await d.start()
    assert await d.search_paths("vanishing") == []
    assert sorted(await d.search_paths("offline")) == ["keep.md", "new.md"]


@pytest.mark.slow
async def test_a_large_refresh_leaves_no_large_wal_behind(make_daemon: MakeDaemon) -> None:
    """The write-ahead log is emptied after a refresh that wrote many files, so the
    disk space comes back and the reported index size counts the index once."""
    d = make_daemon()
    d.extra_args = ["--watch", "off"]
    rng = random.Random(7)
    for i in range(1200):
        # Varied words: the index keeps text compressed, and a refrain would pack away.
        words = " ".join(f"w{rng.randrange(100_000)}" for _ in range(600))
        write(d.root / f"d{i % 30}" / f"n{i}.md", f"note {i} {words}")
    await d.start()
    wal = Path(f"{d.db_path}-wal")
    assert d.db_path.stat().st_size > 4 << 20
    assert not wal.exists() or wal.stat().st_size < 1 << 20, wal.stat().st_size


@pytest.mark.slow
def test_many_rewrites_are_merged_away(tmp_path: Path) -> None:
    """Rewritten documents leave entries and delete markers in the full-text index
    until its segments merge: once a quarter of the index (at least 1,000 documents)
    has been replaced, the store says so, and optimize gives the space back."""
    from kbindex.daemon.backends.sqlite.store import Store
    from kbindex.daemon.index.values import Batch, Seen, Update
    from kbindex.daemon.indexing.documents import prepare
    from kbindex.daemon.indexing.textfile import Loaded, decode

    store = Store(tmp_path / "index.sqlite3")
    store.open()
    conn = store.writer

    def version(i: int, v: int) -> Update:
        text = f"# note {i}\n" + f"word{v} other{i} " * 200
        seen = Seen(path=f"/r/n{i}.md", root="/r", size=len(text), mtime_ns=v)
        loaded = decode(text.encode(), len(text), v)
        assert isinstance(loaded, Loaded)
        return Update(seen, prepare(seen.relpath, loaded), "doc")

    def live_pages() -> int:
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        return int(pages - conn.execute("PRAGMA freelist_count").fetchone()[0])

    try:
        # The empty schema's own pages (a table or an index is a page at least) are
        # left out of the sizes compared below.
        empty = live_pages()
        store.apply(Batch([version(i, 0) for i in range(300)]))
        fresh = live_pages() - empty
        for v in range(1, 6):
            for i in range(300):
                store.apply(Batch([version(i, v)]))
        assert store.optimize_due()  # 3,300 written, over max(1,000, 300 / 4)
        bloated = live_pages() - empty
        store.maintain("refresh")  # after a refresh: the merge is due, so it runs
        assert not store.optimize_due()
        # Back to the size of a freshly built index (it had grown by a quarter), and
        # the pages the merge freed are given back: the file is that size too.
        merged = live_pages() - empty
        assert merged <= fresh * 1.05 < bloated, (fresh, bloated, merged)
        assert conn.execute("PRAGMA freelist_count").fetchone() == (0,)
        for table in ("docs", "docs_exact"):
            conn.execute(f"INSERT INTO {table}({table}) VALUES ('integrity-check')")
        found = conn.execute("SELECT count(*) FROM docs WHERE docs MATCH 'word5'").fetchone()
        assert found == (300,)
    finally:
        store.close()
