"""What the rest of the daemon asks of search by meaning: which mode a search runs in,
what its reply should say, and what status shows.

Why a facade: the service must not care whether the extra is installed, the setting
is off, the model failed to load or is still embedding; each of those answers by
words, and says so only where the client asked for meaning.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from typing import Final

from kbindex.daemon.index.interface import BadQuery, Index
from kbindex.daemon.index.plan import Plan
from kbindex.daemon.index.values import SearchResult
from kbindex.daemon.searching.query import MODES
from kbindex.daemon.semantic import hybrid
from kbindex.daemon.semantic.embedder import Embedder
from kbindex.daemon.semantic.encoder import NOT_INSTALLED
from kbindex.proto.messages import SemanticStatus

BY_MEANING: Final = ("hybrid", "semantic")
SEARCH_MODES: Final = ("auto", "words", *MODES[1:], *BY_MEANING)
RUNTIME_MODULES: Final = ("onnxruntime", "tokenizers")


def installed() -> bool:
    """Whether the extra's runtime is installed (found, not imported)."""
    return all(importlib.util.find_spec(name) is not None for name in RUNTIME_MODULES)


class Meaning:
    def __init__(self, embedder: Embedder | None, enabled: Callable[[], bool]) -> None:
        self.embedder = embedder
        """None: the extra is not installed, or the setting was off at start-up."""
        self.enabled = enabled
        """The ``semantic`` setting in force (a reload may change it)."""
        self._installed = installed()
        """Looked up once: status asks on every request, and packages do not appear in a
        running daemon (the extra needs a restart)."""

    @property
    def ready(self) -> bool:
        return self.embedder is not None and self.embedder.ready and self.enabled()

    def plan(self, requested: str) -> tuple[str, list[str]]:
        """The mode a search asked for as ``requested`` runs in, and its notes."""
        if requested not in SEARCH_MODES:
            modes = ", ".join(SEARCH_MODES)
            raise BadQuery(f"unknown search mode {requested!r}; use one of {modes}")
        if requested == "words":
            return "auto", []
        if requested == "auto":
            return ("hybrid", []) if self.ready else ("auto", [])
        if requested in BY_MEANING:
            if self.ready:
                return requested, []
            return "auto", [f"search by meaning is {self._why_not()}; answered by words"]
        return requested, []

    def _why_not(self) -> str:
        if self.embedder is None or not self.enabled():
            return "off" if self._installed else NOT_INSTALLED
        progress = self.embedder.progress
        if progress.state == "unavailable":
            return f"unavailable ({progress.detail})"
        return "not loaded yet (it loads after the first scan)"

    def search(
        self,
        index: Index,
        plan: Plan,
        text: str,
        mode: str,
    ) -> tuple[SearchResult, list[str]]:
        """A ``hybrid`` or ``semantic`` search (``plan`` said so), on a reader thread,
        and its notes: how many files are not embedded yet (found by words only)."""
        assert self.embedder is not None
        assert self.embedder.matrix is not None
        matrix = self.embedder.matrix
        query = self.embedder.encoder.embed_query(text)
        result = hybrid.search(
            index,
            plan,
            lambda k, allowed, named, floor: matrix.search(query, k, allowed, named, floor),
            words=mode == "hybrid",
        )
        waiting = self.embedder.waiting()
        notes = [f"{waiting:,} file(s) not embedded yet: found by words only"] if waiting else []
        return result, notes

    def status(self) -> SemanticStatus:
        """On a reader thread: the files to embed are counted from the index."""
        if self.embedder is None or not self.enabled():
            return SemanticStatus(state="off", detail="" if self._installed else NOT_INSTALLED)
        progress = self.embedder.progress
        waiting = self.embedder.waiting()
        return SemanticStatus(
            state=progress.state,
            detail=progress.detail,
            model=self.embedder.encoder.name,
            files=self.embedder.files,
            passages=self.embedder.passages,
            backlog=waiting,
            rate=progress.rate(),
            seconds_left=progress.seconds_left(waiting),
            embedded=progress.embedded,
            loaded_at=progress.loaded_at,
            size_mb=round(self.embedder.vectors.size_bytes() / 1e6, 2),
        )
