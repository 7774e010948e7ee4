"""kbindexd: the composition root. Builds every part from one Settings object and runs
them in one task group.

Order: take the instance locks, open the index (or start building it again), start
serving — search works while the first scan is still running — then scan, then rescan
every ``scan_interval_seconds``. Under systemd, readiness, progress and watchdog pings
go to ``$NOTIFY_SOCKET``, and an inherited (socket-activated) listener is served
instead of a new one.

Shutdown on SIGTERM or SIGINT: stop accepting, let requests in flight finish (up to
``DRAIN_SECONDS``), then cancel the group; a batch being written finishes its
transaction first (worker threads are not abandoned); cleanup (socket file, database)
runs shielded. A second signal during shutdown exits at once.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import socket
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, suppress
from functools import partial
from pathlib import Path
from typing import Final

import anyio
import anyio.to_thread
from kbindex.daemon import backends, heap
from kbindex.daemon import settings as settings_mod
from kbindex.daemon.extracting.extractor import Extractor, installed
from kbindex.daemon.extracting.workers import Limits
from kbindex.daemon.health import Health
from kbindex.daemon.index.commits import Commits
from kbindex.daemon.index.interface import Index, IndexRefused
from kbindex.daemon.indexing.ignore import IgnoreRules
from kbindex.daemon.indexing.indexer import Indexer
from kbindex.daemon.indexing.kinds import Classifier
from kbindex.daemon.recovery import Recovery
from kbindex.daemon.roots import Roots
from kbindex.daemon.searching.texts import Texts
from kbindex.daemon.semantic import meaning as semantic
from kbindex.daemon.semantic.embedder import Embedder
from kbindex.daemon.semantic.encoder import Encoder
from kbindex.daemon.semantic.vectors import VectorFile
from kbindex.daemon.serving.activation import ActivationError, inherited_socket
from kbindex.daemon.serving.control import ConfigRefused, Control, describe_roots, kind_rules
from kbindex.daemon.serving.instance import (
    AlreadyRunning,
    Instance,
    UnsafeDirectory,
    UnsafeStateDirectory,
)
from kbindex.daemon.serving.notify import Notifier, status_loop, watchdog_loop
from kbindex.daemon.serving.refusal import wait_for_configuration
from kbindex.daemon.serving.server import Server
from kbindex.daemon.serving.service import READERS, Service
from kbindex.daemon.settings import Settings, SettingsError
from kbindex.daemon.watching.changes import Changes
from kbindex.daemon.watching.reconciler import Reconciler
from kbindex.daemon.watching.watcher import Watcher

log = logging.getLogger("kbindexd")

DRAIN_SECONDS: Final = 5.0
INDEX_ERROR_RETRY_SECONDS: Final = 5.0
"""How soon a scan retries after a write to the index failed (disk full)."""
INDEX_ERROR_RETRY_MAX_SECONDS: Final = 60.0


async def run(
    settings: Settings,
    notifier: Notifier | None = None,
    inherited: socket.socket | None = None,
    reread: Callable[[], Settings] | None = None,
) -> None:
    """Run the daemon until a signal stops it. ``reread`` resolves the settings again
    (from the same flags, environment and file) when SIGHUP asks for a reload."""
    notifier = notifier or Notifier.from_environ()
    roots = Roots(settings.roots)
    with ExitStack() as stack:
        kinds = Classifier(*kind_rules(settings))
        extractor = _extractor(settings)
        if extractor is not None:
            stack.callback(extractor.close)
        texts = Texts(roots, extractor)
        index = _index(settings, texts)
        notifier.status("opening the index")
        try:
            stack.enter_context(
                Instance(settings.socket_path, settings.state_dir, owns_socket=inherited is None)
            )
            opened = await anyio.to_thread.run_sync(index.open)
        except PermissionError as exc:
            raise StateDirUnusable(
                f"cannot use the state directory {settings.state_dir}: {exc.strerror}"
                f" ({exc.filename}); fix its permissions or choose another with --state-dir"
            ) from None
        readers = ThreadPoolExecutor(READERS, thread_name_prefix="kbindex-read")
        try:
            if opened.state != "ready":
                notifier.status(f"rebuilding the index: {opened.reason}")
            await _serve(settings, roots, index, kinds, readers, notifier, inherited, reread, texts)
        finally:
            with anyio.CancelScope(shield=True):
                # The reads first (each ends within its deadline), then the index.
                await anyio.to_thread.run_sync(readers.shutdown)
                await anyio.to_thread.run_sync(index.close)
            log.info("stopped")


def _extractor(settings: Settings) -> Extractor | None:
    """The documents' reader, where ``kbindex[documents]`` is installed."""
    if not installed():
        return None
    return Extractor(settings.state_dir, _limits(settings), _cache_bytes(settings))


def _limits(settings: Settings) -> Limits:
    return Limits(
        cpu_seconds=settings.extract_seconds,
        memory_bytes=int(settings.extract_memory_mb * (1 << 20)),
        wall_seconds=2 * settings.extract_seconds,
        max_chars=settings.max_file_bytes,
    )


def _cache_bytes(settings: Settings) -> int:
    return int(settings.extract_cache_mb * (1 << 20))


async def _serve(
    settings: Settings,
    roots: Roots,
    index: Index,
    kinds: Classifier,
    readers: ThreadPoolExecutor,
    notifier: Notifier,
    inherited: socket.socket | None,
    reread: Callable[[], Settings] | None,
    texts: Texts,
) -> None:
    rules = IgnoreRules(
        included_extensions=settings.included_extensions,
        excluded_extensions=settings.excluded_extensions,
        private_dirs=(settings.state_dir, settings.socket_path.parent),
        exclude_globs=settings.exclude_globs,
        root_options=[settings.options_for(r) for r in roots.paths],
    )
    changes = Changes()
    health = Health(depth=changes.depth, rebuilding=lambda: index.describe().rebuilding)
    commits = Commits()
    recovery = Recovery(health)
    indexer = Indexer(
        index,
        roots,
        rules,
        health,
        settings.max_file_bytes,
        commits=commits,
        on_damage=recovery.damaged,
        max_document_bytes=settings.max_document_bytes,
        kinds=kinds,
        documents=texts.documents,
    )
    watcher = Watcher(
        [(str(r), settings.watch_mode(r)) for r in roots.paths],
        rules,
        changes,
        health,
        poll_seconds=settings.poll_interval_seconds,
    )
    control = Control(
        settings,
        roots,
        indexer,
        health,
        changes,
        watcher,
        reread=reread,
        notifier=notifier,
        reloaded=None if texts.documents is None else partial(_reconfigure, texts.documents),
        kinds=kinds,
    )
    meaning = _meaning(control, index, commits, health)
    async with anyio.create_task_group() as tg:
        service = Service(
            control,
            index,
            roots,
            indexer,
            health,
            tg,
            recovery,
            readers=readers,
            texts=texts,
            changes=changes,
            meaning=meaning,
        )
        server = Server(
            service.handle,
            settings.socket_path,
            inherited=inherited,
            frame_timeout=settings.frame_timeout_seconds,
        )
        await tg.start(server.serve)
        # Ready once the socket is served: search works while the first scan runs.
        notifier.ready(f"serving {len(roots.paths)} root(s); first scan running")
        tg.start_soon(watchdog_loop, notifier)
        tg.start_soon(recovery.run, indexer)
        tg.start_soon(status_loop, notifier, health, index, commits)
        log.info(
            "serving %s on %s (index %s)",
            ", ".join(str(r) for r in roots.paths),
            settings.socket_path,
            index.describe().server,
        )
        log.info("%s", describe_roots(settings))
        if not roots.paths:
            log.warning("no roots to index: add one with kbctl roots add PATH")
        tg.start_soon(_signals, tg, server, notifier, partial(_stopping, service, texts.documents))
        tg.start_soon(_reloads, control)
        # Watches first, then the first scan: a change made during the scan is queued.
        await tg.start(watcher.run)
        tg.start_soon(Reconciler(indexer, roots, changes, health).run)
        tg.start_soon(_rescan_forever, indexer, lambda: control.settings.scan_interval_seconds)
        tg.start_soon(_retry_unwritable, indexer)
        if meaning.embedder is not None:
            tg.start_soon(meaning.embedder.run)


def _index(settings: Settings, texts: Texts) -> Index:
    """The index backend the settings choose. SQLite reads the files for what it shows
    of them (it keeps no text) through ``texts``, within the roots only."""
    name = settings.backend
    try:
        backend = backends.load(name)
    except ImportError as exc:
        if name == "sqlite":  # the default is no extra: a broken install
            raise
        raise BackendMissing(
            f"backend {name} needs kbindex[{name}] installed ({exc.name} is missing)"
        ) from None
    return backend.configured(settings, texts.current)


def _meaning(control: Control, index: Index, commits: Commits, health: Health) -> semantic.Meaning:
    """Search by meaning, when its extra is installed: it waits for the setting to be on
    and for the first scan before it loads anything."""

    def enabled() -> bool:
        return control.settings.semantic != "off"

    if not semantic.installed():
        return semantic.Meaning(None, enabled)

    def eligible(root: str, size: int) -> bool:
        settings = control.settings
        return settings.embeds(Path(root)) and size <= settings.semantic_max_file_mb * (1 << 20)

    vectors = VectorFile(control.settings.state_dir / "vectors.sqlite3")
    embedder = Embedder(index, commits, Encoder(), vectors, health, eligible, enabled)
    return semantic.Meaning(embedder, enabled)


async def _rescan_forever(indexer: Indexer, interval_of: Callable[[], float]) -> None:
    while True:
        interval = interval_of()  # re-read each time: a reload may change it
        try:
            await indexer.refresh()
        except Exception:
            # A failed scan must not take the daemon down: it serves what it has and
            # tries again at the next interval.
            log.exception("scan failed; retrying in %.0f s", interval)
        await anyio.sleep(interval)


async def _retry_unwritable(indexer: Indexer) -> None:
    """While the index cannot be written (a full disk, a database server that is
    down), rescan: the changes wait in the files, and the index catches up once it can
    be written. The first retry comes after INDEX_ERROR_RETRY_SECONDS, each further one
    after twice as long as the last, up to INDEX_ERROR_RETRY_MAX_SECONDS: a server
    down for an hour costs tens of attempts and log lines, not hundreds."""
    delay = INDEX_ERROR_RETRY_SECONDS
    while True:
        await anyio.sleep(delay)
        if not indexer.health.index_error:
            delay = INDEX_ERROR_RETRY_SECONDS
            continue
        with suppress(Exception):  # logged by the indexer; status shows it
            await indexer.refresh()
        if indexer.health.index_error:
            delay = min(delay * 2, INDEX_ERROR_RETRY_MAX_SECONDS)


async def _signals(
    tg: anyio.abc.TaskGroup, server: Server, notifier: Notifier, wake: Callable[[], None]
) -> None:
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for signum in signals:
            if tg.cancel_scope.cancel_called or server.draining:
                log.warning("second signal: exiting now")
                os._exit(130)
            log.info("received %s: shutting down", signal.Signals(signum).name)
            notifier.stopping("shutting down")
            wake()  # long polls answer now rather than hold up the drain
            tg.start_soon(_shutdown, tg, server)


def _reconfigure(extractor: Extractor, new: Settings) -> None:
    """A reload's documents limits and cache bound, in force for the next document."""
    extractor.configure(_limits(new), _cache_bytes(new))


def _stopping(service: Service, extractor: Extractor | None) -> None:
    """What a shutdown does first: long polls answer now rather than hold up the drain,
    a refresh ends after the batch it is writing (its client told so), and a document
    being read is given up (read again at the next start)."""
    service.notes.wake()
    service.indexer.stop()
    if extractor is not None:
        extractor.close()


async def _reloads(control: Control) -> None:
    with anyio.open_signal_receiver(signal.SIGHUP) as signals:
        async for _ in signals:
            with suppress(ConfigRefused):  # logged, and status shows it
                await control.reload()


async def _shutdown(tg: anyio.abc.TaskGroup, server: Server) -> None:
    if not await server.drain(DRAIN_SECONDS):
        log.warning(
            "%d request(s) still running after %.0f s; cancelling them",
            server.in_flight,
            DRAIN_SECONDS,
        )
    tg.cancel_scope.cancel()


def _configure_logging(level: str) -> None:
    # Under systemd (JOURNAL_STREAM set) the journal adds timestamps itself.
    fmt = "%(levelname)s %(name)s: %(message)s"
    if not os.environ.get("JOURNAL_STREAM"):
        fmt = "%(asctime)s " + fmt
    logging.basicConfig(level=level.upper(), format=fmt, stream=sys.stderr)


class BackendMissing(Exception):
    """The configured index backend's package is not installed."""


class StateDirUnusable(Exception):
    """The state directory (index, locks) cannot be written by this user."""


def main(argv: list[str] | None = None) -> int:
    given = sys.argv[1:] if argv is None else argv
    if given[:1] == ["db"]:  # the shared index's owner: kbindexd db migrate
        try:
            from kbindex.daemon.backends.postgres import migrate
        except ImportError as exc:
            print(f"kbindexd db needs kbindex[postgres] ({exc.name} is missing)", file=sys.stderr)  # noqa: T201
            return 2
        return migrate.main(given[1:])
    parser = argparse.ArgumentParser(
        prog="kbindexd",
        description="Keep a full-text index of directories current and serve it on a socket.",
    )
    settings_mod.add_arguments(parser, tuple(backends.BACKENDS))
    args = parser.parse_args(given)
    reread = partial(settings_mod.load, args)
    try:
        settings: Settings | None = reread()
        problem = ""
    except SettingsError as exc:
        if not os.environ.get("LISTEN_FDS"):
            print(f"kbindexd: {exc}", file=sys.stderr)  # noqa: T201
            return 2
        settings, problem = None, str(exc)  # served on the socket systemd passed
    _configure_logging(settings.log_level if settings is not None else "info")
    # Everything the daemon creates (socket, index, locks) is for its user alone.
    os.umask(0o077)
    heap.map_large_allocations()
    notifier = Notifier.from_environ(unset=True)
    try:
        inherited = inherited_socket()
    except ActivationError as exc:
        # A misconfigured socket unit: restarting would not help (exit 2 is not retried).
        log.error("%s", exc)
        return 2
    if settings is None and inherited is None:
        log.error("%s", problem)  # LISTEN_FDS was another process's: nothing to serve
        return 2
    try:
        anyio.run(_supervise, settings, problem, reread, notifier, inherited)
    except (AlreadyRunning, UnsafeDirectory) as exc:
        log.error("%s", exc)
        return 1
    except (StateDirUnusable, UnsafeStateDirectory, BackendMissing, IndexRefused) as exc:
        log.error("%s", exc)
        return 2  # a restart would not help: not retried by the unit
    except KeyboardInterrupt:
        return 130
    finally:
        notifier.close()
    return 0


async def _supervise(
    settings: Settings | None,
    problem: str,
    reread: Callable[[], Settings],
    notifier: Notifier,
    inherited: socket.socket | None,
) -> None:
    """Run the daemon; on a socket systemd passed, a configuration that is refused
    (at start, or by the backend or state directory it names) is served by
    ``refusal`` until it is fixed, then the daemon runs with the fixed one."""
    while True:
        if settings is None:
            assert inherited is not None
            settings = await wait_for_configuration(problem, reread, notifier, inherited)
            if settings is None:
                return  # stopped by a signal
            logging.getLogger().setLevel(settings.log_level.upper())
        try:
            await run(settings, notifier, inherited, reread)
            return
        except (StateDirUnusable, BackendMissing, IndexRefused) as exc:
            if inherited is None:
                raise
            settings, problem = None, str(exc)


if __name__ == "__main__":
    sys.exit(main())
