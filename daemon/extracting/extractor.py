"""The daemon's one way to a document's text: the cache first, a worker on a miss.

Built once by the app when ``kbindex[documents]`` is installed; without it there is no
extractor and documents stay skipped as binary, saying which extra would read them.
"""

from __future__ import annotations

import hashlib
import importlib.util
from pathlib import Path

from kbindex.daemon.extracting.cache import Cache
from kbindex.daemon.extracting.results import Failed, Outcome
from kbindex.daemon.extracting.workers import Limits, Workers

_LIBRARIES = {"pypdfium2": ("pdf",), "selectolax": ("html", "epub")}
_ZIPPED_XML = ("docx", "pptx", "xlsx", "odt", "ods", "odp")


def installed() -> frozenset[str]:
    """The kinds this installation reads: those of the libraries of the extra that
    import, and the Office and OpenDocument kinds (the standard library's zip and XML)
    once any of them does, since they come with the same extra."""
    kinds = {
        kind
        for library, its in _LIBRARIES.items()
        if importlib.util.find_spec(library) is not None
        for kind in its
    }
    return frozenset(kinds | set(_ZIPPED_XML)) if kinds else frozenset()


class Extractor:
    def __init__(self, state_dir: Path, limits: Limits, cache_bytes: int) -> None:
        self.kinds = installed()
        self.cache = Cache(state_dir, cache_bytes)
        self.workers = Workers(limits)

    def reads(self, kind: str) -> bool:
        return kind in self.kinds

    def extract(self, kind: str, data: bytes) -> Outcome:
        """What ``data`` gives as ``kind``: from the cache, else from a worker (and then
        kept, unless the worker ran out of time, which a busy machine may cause).
        Raises OSError when no worker can be started."""
        digest = hashlib.sha256(data).hexdigest()
        kept = self.cache.get(digest, kind)
        if kept is not None:
            return kept
        outcome = self.workers.run(kind, data)
        if not (isinstance(outcome, Failed) and outcome.detail.startswith("time:")):
            self.cache.put(digest, kind, outcome)
        return outcome

    def cached(self, kind: str, data: bytes) -> Outcome | None:
        """What the cache holds for ``data``, never a worker: for what is read while a
        client waits (a hit's snippet)."""
        return self.cache.get(hashlib.sha256(data).hexdigest(), kind)

    def configure(self, limits: Limits, cache_bytes: int) -> None:
        """Limits and a cache bound a reload brings: the next document is read under
        them (the workers waiting were started under the old ones, and end)."""
        self.workers.configure(limits)
        self.cache.bound(cache_bytes)

    def size_bytes(self) -> int:
        return self.cache.size_bytes()

    def close(self) -> None:
        self.workers.close()
