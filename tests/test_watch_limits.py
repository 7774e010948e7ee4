"""When inotify cannot be trusted: the watch limit, a queue overflow, polled roots.

The inotify watch limit (fs.inotify.max_user_watches) is per user and shared with every
other process, so these tests do not exhaust it for real: they run the daemon in this
process and make watchdog's ``inotify_add_watch`` wrapper raise the very OSError it
raises at the limit (ENOSPC, "inotify watch limit reached"), for some paths only. A
kernel queue overflow cannot be provoked on demand either: that test drops events
itself, then hands the inotify reader the overflow event the kernel would send.
Everything else is real: the observer, the files, the socket, the client.
"""

from __future__ import annotations

import errno
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pytest
from conftest import MakeDaemon, write
from kbindex.daemon import app
from kbindex.daemon.settings import Settings
from kbindex.daemon.watching import inotify, router
from kbindex.proto.client import Client, ClientError
from watch_helpers import until_paths, until_status
from watchdog.events import FileSystemEvent
from watchdog.observers import inotify_c

pytestmark = pytest.mark.anyio


def refuse_watches(monkeypatch: pytest.MonkeyPatch, refuse: Callable[[bytes], bool]) -> None:
    real = inotify_c.InotifyFD._get_or_create_watch

    def limited(self: inotify_c.InotifyFD, path: bytes, mask: Any) -> Any:
        if refuse(path):
            raise OSError(errno.ENOSPC, "inotify watch limit reached")
        return real(self, path, mask)

    monkeypatch.setattr(inotify_c.InotifyFD, "_get_or_create_watch", limited)


@asynccontextmanager
async def in_process(tmp_path: Path, sockdir: Path, *roots: Path) -> AsyncIterator[Client]:
    settings = Settings(
        roots=roots,
        state_dir=tmp_path / "state",
        socket_path=sockdir / "kb.sock",
        included_extensions=frozenset({".md"}),
        scan_interval_seconds=3600,
        poll_interval_seconds=0.5,
        semantic="off",  # word search only: these tests check which files match
    )
    async with anyio.create_task_group() as tg:
        tg.start_soon(app.run, settings)
        with anyio.fail_after(10):
            while True:
                try:
                    async with Client.connect(settings.socket_path) as c:
                        if (await c.status()).last_scan_at is not None:
                            break
                except ClientError:
                    pass
                await anyio.sleep(0.02)
        async with Client.connect(settings.socket_path) as client:
            yield client
        # Trigger: cancelling while the server's reader callback for a just-closed
        # connection is already queued makes asyncio report InvalidStateError (a race
        # inside anyio's socket stream). Let the server see the EOF first.
        await anyio.sleep(0.2)
        tg.cancel_scope.cancel()


@pytest.mark.slow
async def test_watch_limit_at_start_falls_back_to_polling_for_that_root(
    tmp_path: Path, sockdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    limited = tmp_path / "big"
    fine = tmp_path / "small"
    write(limited / "a.md", "present at start: pollword\n")
    write(fine / "b.md", "in the live root: liveword\n")
    refuse_watches(monkeypatch, lambda path: path.startswith(bytes(limited)))
    async with in_process(tmp_path, sockdir, limited, fine) as c:
        status = await c.status()
        by_path = {r.path: r for r in status.roots}
        big, small = by_path[str(limited)], by_path[str(fine)]
        assert big.state == "degraded"
        assert "inotify watch limit reached" in big.detail
        assert "sysctl fs.inotify.max_user_watches=524288" in big.detail
        assert "/etc/sysctl.d/" in big.detail
        assert small.state == "live"
        assert status.watch == "degraded"
        fresh = (await c.search("pollword")).freshness
        assert fresh is not None and fresh.watch == "degraded"

        # The daemon keeps running, and changes in the degraded root still arrive.
        write(limited / "new.md", "found by polling: pollword\n")
        await until_paths(c, "pollword", ["a.md", "new.md"], timeout=10)
        write(fine / "c.md", "still live: liveword\n")
        assert await until_paths(c, "liveword", ["b.md", "c.md"]) < 1.0
        status = await c.status()
        big = next(r for r in status.roots if r.path == str(limited))
        assert big.poll_seconds is not None and big.poll_seconds >= 0.5


@pytest.mark.slow
async def test_watch_limit_hit_for_a_new_directory_degrades_the_root(
    tmp_path: Path, sockdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """watchdog swallows a refused watch below the root; the daemon must not."""
    root = tmp_path / "root"
    write(root / "a.md", "first deepword\n")
    refuse_watches(monkeypatch, lambda path: b"/deep" in path)
    async with in_process(tmp_path, sockdir, root) as c:
        assert (await c.status()).roots[0].state == "live"
        write(root / "deep" / "er" / "b.md", "unwatched deepword\n")
        await until_status(c, lambda s: s.roots[0].state == "degraded", timeout=5)
        await until_paths(c, "deepword", ["a.md", "deep/er/b.md"], timeout=10)
        write(root / "deep" / "er" / "c.md", "later deepword\n")
        await until_paths(c, "deepword", ["a.md", "deep/er/b.md", "deep/er/c.md"], timeout=10)


@pytest.mark.slow
async def test_root_set_to_poll_in_the_config(make_daemon: MakeDaemon, tmp_path: Path) -> None:
    d = make_daemon()
    config = tmp_path / "config" / "kbindex" / "config.toml"
    write(
        config,
        f'poll_interval_seconds = 0.5\n\n[root."{d.root}"]\nwatch = "poll"\nexclude = ["skip/"]\n',
    )
    write(d.root / "a.md", "network share nfsword\n")
    write(d.root / "skip" / "b.md", "excluded nfsword\n")
    await d.start()
    async with d.client() as c:
        status = await c.status()
        assert status.roots[0].state == "polling"
        assert status.roots[0].poll_seconds == 0.5
        await until_paths(c, "nfsword", ["a.md"])
        write(d.root / "c.md", "appears on the next poll: nfsword\n")
        await until_paths(c, "nfsword", ["a.md", "c.md"], timeout=5)
        why = await c.why(str(d.root / "skip" / "b.md"))
        assert why.reason == f'ignored: pattern "skip/" in [root."{d.root}"] exclude in the config'


async def test_queue_overflow_triggers_a_rescan_that_finds_lost_changes(
    tmp_path: Path, sockdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "root"
    write(root / "a.md", "first lostword\n")
    observers: list[Any] = []
    dropped_b = threading.Event()
    real_init = inotify.RootObserver.__init__
    real_route = router.EventRouter.route

    def recording(self: Any, *args: Any) -> None:
        real_init(self, *args)
        observers.append(self)

    def lossy(self: router.EventRouter, root: str, event: FileSystemEvent) -> None:
        if dropping:
            if str(event.src_path).endswith("b.md"):
                dropped_b.set()
        else:
            real_route(self, root, event)

    monkeypatch.setattr(inotify.RootObserver, "__init__", recording)
    monkeypatch.setattr(router.EventRouter, "route", lossy)
    dropping = True
    async with in_process(tmp_path, sockdir, root) as c:
        before = (await c.status()).roots[0].last_reconcile
        write(root / "b.md", "missed lostword\n")
        assert await anyio.to_thread.run_sync(dropped_b.wait, 5), "the event never came"
        assert not (await c.search("missed")).hits
        dropping = False
        overflow = inotify_c.InotifyEvent(-1, inotify_c.InotifyConstants.IN_Q_OVERFLOW, 0, b"")
        observers[0]._fd.handle_event(overflow)
        await until_paths(c, "lostword", ["a.md", "b.md"])
        after = (await c.status()).roots[0]
        assert after.last_reconcile is not None and before is not None
        assert after.last_reconcile.at > before.at and after.last_reconcile.changed == 1
        assert after.state == "live"


@pytest.mark.slow
async def test_watching_turned_off_says_so_and_explicit_refresh_still_works(
    make_daemon: MakeDaemon,
) -> None:
    """``--watch off`` gives scripted runs exact refresh counts (no watcher racing them)."""
    d = make_daemon()
    d.extra_args = ["--watch", "off"]
    await d.start()
    for i in range(300):
        write(d.root / f"d{i % 3}" / f"n{i}.md", f"note {i} offword\n")
    async with d.client() as c:
        status = await c.status()
        assert status.roots[0].state == "off" and status.watch == "off"
        assert "next scan" in status.roots[0].detail
        replies = [r async for r in c.refresh_wait()]
        assert replies[-1].files_changed == 300  # type: ignore[attr-defined]
