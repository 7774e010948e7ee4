"""Keeping the index usable when its database turns out to be damaged while running.

The index is derived data: an index made by an older kbindexd, or found damaged when
it opens (``Index.open``: a file that cannot be opened, fails ``PRAGMA quick_check`` or
holds paths that do not decode), is built again from the files by the first scan of
every root, which then makes it take over (``Index.built``); the old one answers
meanwhile if it can. Some damage only shows when a query meets it: a page of stored
text with damaged bytes, a block of the full-text index (``SQLITE_CORRUPT_VTAB``).
Then a read (``Service``) or a write (``Indexer``) reports it here, and the index is
rebuilt the same way in the background, once (``Index.rebuild``). A damaged file cannot
answer: it is moved aside, and the new one answers as it fills.

Why not exit and let systemd restart: the restart would find the same file, pass the
same startup check and fail the same way, a crash loop. Meanwhile the daemon keeps
serving: status works and says the index is being rebuilt, and a read that met the
damage gets ``index_rebuilding``.
"""

from __future__ import annotations

import logging
from contextlib import suppress
from typing import Final

import anyio
from kbindex.daemon.health import Health, Writes
from kbindex.daemon.indexing.indexer import Indexer

log = logging.getLogger(__name__)

RETRY_MAX_SECONDS: Final = 60.0
REBUILDING: Final = (
    "the index was found damaged and is being rebuilt from the files; try again in a moment"
)


class IndexRebuilding(Exception):
    """A read or write found the database damaged; it is being rebuilt from the files."""


class Recovery:
    """Built before the indexer, which reports damage here; ``run`` rebuilds through it."""

    def __init__(self, health: Health) -> None:
        self.health = health
        self.rebuilding = False
        self._send, self._reasons = anyio.create_memory_object_stream[str](1)

    def damaged(self, reason: str) -> None:
        """Start the rebuild, unless one is already under way."""
        if not self.rebuilding:
            self.rebuilding = True
            with suppress(anyio.ClosedResourceError):  # shutting down
                self._send.send_nowait(reason)

    async def run(self, indexer: Indexer) -> None:
        """Rebuild with ``indexer`` each time damage is reported, until cancelled."""
        with self._send, self._reasons:
            async for reason in self._reasons:
                await self._rebuild(indexer, reason)

    async def _rebuild(self, indexer: Indexer, reason: str) -> None:
        # Until a new database is open, nothing can be written: retry with backoff
        # (a full disk can make the new file fail too) and say why in status.
        delay = 1.0
        try:
            while True:
                try:
                    await indexer.rebuild(reason)
                    break
                except Exception as exc:
                    self.health.record(Writes(f"cannot rebuild the damaged index: {exc}"))
                    log.exception("rebuilding the index failed; retrying in %.0f s", delay)
                    await anyio.sleep(delay)
                    delay = min(delay * 2, RETRY_MAX_SECONDS)
            self.health.record(Writes())
            await indexer.refresh()
        except Exception:
            log.exception("refilling the rebuilt index failed; the next scan continues")
        finally:
            self.rebuilding = False
