"""Keeping the vectors in step with the word index, in the background.

The word index is the truth about files; embedding follows it. After the index's
writer commits (``Commits`` announces it), a pass compares each indexed file's
``indexed_at`` with the stamp it was embedded for, embeds what changed, and forgets
what left. A file is searchable by words as soon as it is indexed, and by meaning
once its passages are done; status shows the backlog and the rate.

Why it cannot slow the rest: every pass runs in one thread of its own at the lowest
CPU priority (nice 19), the model runs on that thread alone (one core of two), and
a pass waits while the indexer is writing. The model's runtime releases the GIL
while it computes, which is nearly all of a pass's time.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Final

import anyio
import numpy as np
from kbindex.daemon.engine import sqlite
from kbindex.daemon.health import Health
from kbindex.daemon.index.commits import Commits
from kbindex.daemon.index.interface import Index
from kbindex.daemon.semantic import chunks
from kbindex.daemon.semantic.encoder import Encoder, EncoderUnavailable
from kbindex.daemon.semantic.matrix import Matrix
from kbindex.daemon.semantic.vectors import Span, VectorFile

log = logging.getLogger(__name__)

POLL_SECONDS: Final = 0.5
"""How often the end of the first scan and the setting are looked at: they belong to
other parts. Commits (and the end of a refresh that made some) are waited for."""
PASS_EVERY_SECONDS: Final = 60.0
"""A pass also runs this often without a write: a reload may have changed which roots
and sizes are embedded."""
FILES_PER_STEP: Final = 16
"""Files chunked, embedded and saved per transaction: a pass stops between steps."""
TEXTS_PER_CALL: Final = 8
"""Passages per call of the model: a step gives up between calls at shutdown, so the
daemon never waits more than about a second for it."""
RATE_WINDOW_SECONDS: Final = 60.0
IDLE_NICE: Final = 19


@dataclass
class Progress:
    """What status shows of embedding."""

    state: str = "off"
    """``waiting`` | ``loading`` | ``embedding`` | ``ready`` | ``unavailable`` |
    ``failing`` (see ``SemanticStatus.state``)."""
    detail: str = ""
    embedded: int = 0
    """Passages embedded by the model since the daemon started (a passage whose text
    already had a vector is not counted: nothing was computed)."""
    loaded_at: float | None = None
    recent: deque[tuple[float, float, int]] = field(default_factory=lambda: deque(maxlen=256))
    """(when, seconds, passages) of each call of the model."""
    cut: int = 0
    """Files of this pass cut into passages so far, and of their passages those that
    needed the model: what a file still to embed is expected to cost."""
    computed: int = 0

    def done(self, began: float, count: int) -> None:
        now = time.monotonic()
        self.embedded += count
        self.recent.append((now, now - began, count))

    def rate(self) -> float:
        """Passages per second of the model's work over the last minute (0 when it did
        none): the speed an estimate can count on."""
        now = time.monotonic()
        done = [(s, n) for t, s, n in self.recent if now - t <= RATE_WINDOW_SECONDS]
        seconds = sum(s for s, _ in done)
        return round(sum(n for _, n in done) / seconds, 1) if seconds > 0 else 0.0

    def seconds_left(self, files: int) -> float | None:
        """About how long ``files`` more files take, once there is a rate to go by."""
        rate = self.rate()
        if not files or not rate or not self.cut:
            return None
        return round(files * self.computed / self.cut / rate, 1)


Eligible = Callable[[str, int], bool]
"""Whether a file of this root and size is to be embedded (settings, read each pass)."""


class Embedder:
    def __init__(
        self,
        index: Index,
        commits: Commits,
        encoder: Encoder,
        vectors: VectorFile,
        health: Health,
        eligible: Eligible,
        enabled: Callable[[], bool],
    ) -> None:
        self.index = index
        self.commits = commits
        self.encoder = encoder
        self.vectors = vectors
        self.health = health
        self.eligible = eligible
        self.enabled = enabled
        self.progress = Progress(state="waiting")
        self.matrix: Matrix | None = None
        """Set once the model and the vector file are open; searches use it."""
        self._thread = ThreadPoolExecutor(1, "kbindex-embed", initializer=_lower_priority)
        self._stamps: dict[int, float] = {}
        self._stop = threading.Event()
        self._seen = -1
        """``commits.count`` when the last pass began (-1: a pass is due)."""
        self._todo: set[int] = set()
        """The files this pass has still to embed."""
        self._cut_before: set[int] = set()
        """Files the vector file holds cut by an older rule (``chunks.VERSION``), until
        the first pass has cut them again or forgotten them."""
        self._listed: tuple[int, frozenset[int]] = (-1, frozenset())
        """``commits.count`` when this pass listed its files, and the files it listed."""
        self._counted: tuple[int, int, int] | None = None
        """(``commits.count``, the listing's count, files) of the last count of the
        files indexed since the pass listed its own."""

    @property
    def ready(self) -> bool:
        return self.matrix is not None

    @property
    def files(self) -> int:
        """Files embedded (read from other threads: a dict's length is one step)."""
        return len(self._stamps)

    @property
    def passages(self) -> int:
        return self.matrix.passages if self.matrix is not None else 0

    def waiting(self) -> int:
        """Files indexed and not embedded yet, as the index is now: those this pass has
        still to do, and those written since it listed its files (a note saved a moment
        ago included). Counted again only after a write; from a reader thread. Before
        the model is loaded nothing is known: 0."""
        if self.matrix is None:
            return 0
        todo = len(self._todo)
        commits = self.commits.count
        listed, in_pass = self._listed
        if commits == listed:
            return todo
        counted = self._counted
        if counted is None or counted[:2] != (commits, listed):
            try:
                files = self.index.files(None).files
            except Exception as exc:  # an index out of reach: what the pass knows
                if self.index.failure(exc) is None:
                    raise
                return todo
            stamps = self._stamps
            since = sum(
                1
                for f in files
                if f.id not in in_pass
                and stamps.get(f.id) != f.indexed_at
                and self.eligible(f.root, f.size)
            )
            counted = self._counted = (commits, listed, since)
        return todo + counted[2]

    async def run(self) -> None:
        """Load, then follow the index until cancelled. Never raises: a model that
        cannot load leaves search lexical, and status says why."""
        try:
            # After the first scan: the daemon starts and indexes words at full speed,
            # and the model's load (and its memory) waits until then.
            # Polled: both conditions belong to other parts (a reload, the scan).
            while not self.enabled() or self.health.last_scan_at is None:  # noqa: ASYNC110
                await anyio.sleep(POLL_SECONDS)
            self.progress.state = "loading"
            try:
                opened = await self._call(self._open)
            except Exception as exc:  # a damaged install or vector file: never the daemon
                log.exception("search by meaning is unavailable")
                self.progress.state, self.progress.detail = "unavailable", str(exc)
                return
            if not opened:
                return
            last_pass = 0.0
            while True:
                next_pass = last_pass + PASS_EVERY_SECONDS
                if self.commits.count == self._seen and anyio.current_time() < next_pass:
                    with anyio.move_on_at(next_pass):
                        await self.commits.changed(self._seen)
                elif self.enabled() and self.health.progress is None:
                    self._seen = self.commits.count
                    last_pass = anyio.current_time()
                    await self._pass_or_report()
                else:
                    # Due, but off for now or behind a refresh under way (which
                    # announces its end when it committed something).
                    with anyio.move_on_after(POLL_SECONDS):
                        await self.commits.changed(self.commits.count)
        finally:
            self._stop.set()
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(self._close)

    async def _pass_or_report(self) -> None:
        """A pass; one that fails (a full disk under the vector file, out of memory in
        the model) is logged and shown in status, and the next pass tries again. The
        vectors already made keep serving searches."""
        try:
            await self._call(self._pass)
        except Exception as exc:
            log.exception("embedding failed; trying again in %.0f s", PASS_EVERY_SECONDS)
            self.progress.state = "failing"
            self.progress.detail = f"embedding failed: {exc}; trying again"
        else:
            self.progress.detail = ""

    async def _call(self, fn: Callable[[], bool]) -> bool:
        future = self._thread.submit(fn)
        return await anyio.to_thread.run_sync(future.result, abandon_on_cancel=True)

    def _close(self) -> None:
        self._thread.shutdown(wait=True, cancel_futures=True)
        self.vectors.close()

    def _open(self) -> bool:
        try:
            self.encoder.load()
            self.vectors.open(self.encoder.name, self.encoder.dim)
        except (EncoderUnavailable, OSError, sqlite.Error) as exc:
            self.progress.state, self.progress.detail = "unavailable", str(exc)
            log.warning("search by meaning is unavailable: %s; searches use words", exc)
            return False
        stamps = self.vectors.stamps()
        if self.vectors.chunks == chunks.VERSION:
            matrix = matrix_of(self.vectors, self.encoder.dim)
        else:
            # Cut by another rule: no passage of it is searched until its file is cut
            # again by this one (the first pass; vectors of unchanged passages are kept).
            matrix = Matrix(self.encoder.dim)
            self._cut_before = set(stamps)
            stamps = {}
        self._stamps = stamps
        self.matrix = matrix
        self.progress.loaded_at = time.time()
        self.progress.state = "ready"
        log.info("search by meaning ready: %s, %d passages", self.encoder.name, matrix.passages)
        return True

    def _pass(self) -> bool:
        """Embed what the index changed since the last pass; forget what it dropped."""
        assert self.matrix is not None
        commits = self.commits.count
        wanted = {
            f.id: f.indexed_at
            for f in self.index.files(None).files
            if self.eligible(f.root, f.size)
        }
        todo = [i for i, stamp in wanted.items() if self._stamps.get(i) != stamp]
        gone = [i for i in {*self._stamps, *self._cut_before} if i not in wanted]
        self._cut_before = set()
        self._todo = set(todo)
        self._listed = (commits, frozenset(todo))
        self.progress.cut = self.progress.computed = 0
        if todo:
            self.progress.state = "embedding"
        for begin in range(0, len(todo), FILES_PER_STEP):
            if self._stop.is_set() or self.health.progress is not None:
                self._seen = -1  # come back for the rest
                break
            self._step(todo[begin : begin + FILES_PER_STEP], wanted)
        if gone:
            self.vectors.forget(gone)
            for file_id in gone:
                self.matrix.drop(file_id)
                self._stamps.pop(file_id, None)
        if not self._todo:
            if self.vectors.chunks != chunks.VERSION:
                self.vectors.cut_again()
            self.progress.state = "ready"
        return True

    def _step(self, file_ids: list[int], stamps: dict[int, float]) -> None:
        assert self.matrix is not None
        stored = self.index.records(file_ids)
        # A file that cannot be read now is left for a later pass, not saved as having
        # no passages.
        unread = {doc.id for doc in stored if doc.body is None}
        file_ids = [i for i in file_ids if i not in unread]
        split = {
            doc.id: chunks.split(doc.file.relpath, doc.title, doc.body)
            for doc in stored
            if doc.body is not None
        }
        have = self.vectors.vectors_of([c.key for parts in split.values() for c in parts])
        missing = {c.key: c.text for parts in split.values() for c in parts if c.key not in have}
        self.progress.cut += len(file_ids)
        self.progress.computed += len(missing)
        new: dict[bytes, np.ndarray] = {}
        keys, texts = list(missing), list(missing.values())
        for begin in range(0, len(texts), TEXTS_PER_CALL):
            if self._stop.is_set():
                return  # nothing of this step is saved: the next start does it again
            part = slice(begin, begin + TEXTS_PER_CALL)
            began = time.monotonic()
            computed = self.encoder.embed(texts[part]).astype(np.float16)
            new.update(zip(keys[part], computed, strict=True))
            self.progress.done(began, len(computed))
        saved = {
            i: (stamps[i], [Span(i, c.start, c.end, c.key) for c in split.get(i, [])])
            for i in file_ids
        }
        self.vectors.save(saved, new)
        dim = self.encoder.dim
        for file_id, (stamp, spans) in saved.items():
            rows = [new[s.key].tobytes() if s.key in new else have[s.key] for s in spans]
            self.matrix.put(file_id, [(s.start, s.end) for s in spans], _rows(rows, dim))
            self._stamps[file_id] = stamp
            self._todo.discard(file_id)


def matrix_of(vectors: VectorFile, dim: int) -> Matrix:
    """Every stored passage in a matrix, as searches use it."""
    matrix = Matrix(dim)
    current: list[tuple[int, int]] = []
    rows: list[bytes] = []
    file_id = None
    for span, vector in vectors.spans():
        if span.file_id != file_id and file_id is not None:
            matrix.put(file_id, current, _rows(rows, dim))
            current, rows = [], []
        file_id = span.file_id
        current.append((span.start, span.end))
        rows.append(vector)
    if file_id is not None:
        matrix.put(file_id, current, _rows(rows, dim))
    return matrix


def _rows(vectors: list[bytes], dim: int) -> np.ndarray:
    return np.frombuffer(b"".join(vectors), dtype=np.float16).reshape(len(vectors), dim)


def _lower_priority() -> None:
    """Run this thread (and any thread the model's runtime starts from it) at the
    lowest CPU priority: Linux applies nice values per thread."""
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), IDLE_NICE)
    except OSError as exc:
        log.debug("cannot lower the embedding thread's priority: %s", exc)
