"""kbindexd: the composition root. Builds every part from one Settings object and runs
them in one task group.

Order: take the instance locks, open (or rebuild) the index, start serving — search
works while the first scan is still running — then scan, then rescan every
``scan_interval_seconds``. SIGTERM or SIGINT cancels the group; cleanup (socket file,
database) runs shielded; a second SIGINT during shutdown exits at once.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
from functools import partial

import anyio
import anyio.to_thread
from kbindex.daemon import settings as settings_mod
from kbindex.daemon.health import Health
from kbindex.daemon.ignore import IgnoreRules
from kbindex.daemon.indexer import Indexer
from kbindex.daemon.instance import AlreadyRunning, Instance, UnsafeDirectory
from kbindex.daemon.roots import Roots
from kbindex.daemon.server import Server
from kbindex.daemon.service import Service
from kbindex.daemon.settings import Settings, SettingsError
from kbindex.daemon.store import Store

log = logging.getLogger("kbindexd")


async def run(settings: Settings) -> None:
    with Instance(settings.socket_path, settings.state_dir):
        store = Store(settings.db_path)
        await anyio.to_thread.run_sync(store.open)
        try:
            await _serve(settings, store)
        finally:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(store.close)
            log.info("stopped")


async def _serve(settings: Settings, store: Store) -> None:
    roots = Roots(settings.roots)
    rules = IgnoreRules(
        included_extensions=settings.included_extensions,
        excluded_extensions=settings.excluded_extensions,
        private_dirs=(settings.state_dir, settings.socket_path.parent),
    )
    health = Health()
    indexer = Indexer(store, roots, rules, health, settings.max_file_bytes)
    async with anyio.create_task_group() as tg:
        service = Service(settings, store, roots, indexer, health, tg)
        server = Server(service.handle, settings.socket_path)
        await tg.start(server.serve)
        log.info(
            "serving %s on %s (index %s)",
            ", ".join(str(r) for r in roots.paths),
            settings.socket_path,
            settings.db_path,
        )
        tg.start_soon(_signals, tg.cancel_scope)
        tg.start_soon(_rescan_forever, indexer, settings.scan_interval_seconds)


async def _rescan_forever(indexer: Indexer, interval: float) -> None:
    while True:
        try:
            await indexer.refresh()
        except Exception:
            # A failed scan must not take the daemon down: it serves what it has and
            # tries again at the next interval.
            log.exception("scan failed; retrying in %.0f s", interval)
        await anyio.sleep(interval)


async def _signals(scope: anyio.CancelScope) -> None:
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for signum in signals:
            if scope.cancel_called:
                log.warning("second signal: exiting now")
                os._exit(130)
            log.info("received %s: shutting down", signal.Signals(signum).name)
            scope.cancel()


def _configure_logging(level: str) -> None:
    # Under systemd (JOURNAL_STREAM set) the journal adds timestamps itself.
    fmt = "%(levelname)s %(name)s: %(message)s"
    if not os.environ.get("JOURNAL_STREAM"):
        fmt = "%(asctime)s " + fmt
    logging.basicConfig(level=level.upper(), format=fmt, stream=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="kbindexd",
        description="Keep a full-text index of directories current and serve it on a socket.",
    )
    settings_mod.add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        settings = settings_mod.load(args)
    except SettingsError as exc:
        print(f"kbindexd: {exc}", file=sys.stderr)  # noqa: T201
        return 2
    _configure_logging(settings.log_level)
    try:
        anyio.run(partial(run, settings))
    except (AlreadyRunning, UnsafeDirectory) as exc:
        log.error("%s", exc)
        return 1
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
