"""Bringing the index in line with the files: scan, compare, read, write.

One refresh at a time (a lock), over a scope: every root, or some files and
directories inside them. A refresh walks the scope (list + stat only), compares what
``stat`` says (``Seen.signature``) with the index's metadata, reads only what changed
(or what the size cap now decides otherwise), and writes in batches of one transaction
each. Reading the next batch and preparing its column values (a worker thread)
overlaps with writing the previous one (the writer thread); SQLite releases the GIL
while it works, so they proceed in parallel. A refresh that finds nothing changed
writes nothing.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext, suppress
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Final, TypeVar

import anyio
import anyio.to_thread
from kbindex.daemon import heap
from kbindex.daemon.extracting import extractor, formats
from kbindex.daemon.health import (
    Counted,
    Health,
    Idle,
    Ignored,
    Problem,
    Progress,
    Reconciled,
    RootReconciled,
    Scanned,
    Walked,
    Writes,
)
from kbindex.daemon.index.commits import Commits
from kbindex.daemon.index.interface import Index
from kbindex.daemon.index.values import Batch, Move, SizeCaps, Update
from kbindex.daemon.indexing import documents, textfile
from kbindex.daemon.indexing.ignore import Chain, IgnoreRules
from kbindex.daemon.indexing.kinds import Classifier
from kbindex.daemon.indexing.scanner import Pending, Seen, Stamp, Walk, walk
from kbindex.daemon.roots import Located, Roots

if TYPE_CHECKING:
    from kbindex.daemon.extracting.extractor import Extractor

log = logging.getLogger(__name__)

BATCH_FILES: Final = 1000
BATCH_BYTES: Final = 2 << 20
"""File bytes per batch, at most (one file may be larger). Up to three batches are alive
at once (written, queued, read), each holding its text and derived columns, several
times its size: this bounds the daemon's memory whatever the tree."""
DOCUMENT_BATCH_BYTES: Final = 256 << 10
"""What a document counts for in a batch's bytes, at most: its text is a small share of
its bytes (and capped), and a batch of several lets EXTRACTORS read them at once."""
EXTRACTORS: Final = 2
"""Documents of a batch read at once, each in its own worker process (bounded on its
own): extraction is most of a document's cost, and one at a time leaves a core idle."""
LARGE_DOCUMENT_BYTES: Final = 16 << 20
"""A document larger than this is read while no other such one is: its bytes stay in the
daemon until its worker answers, and two of the largest at once exceed its memory budget."""
PIPELINE_DEPTH: Final = 4
MIN_SPLIT_FILES: Final = 100
WARNED_CAP: Final = 10_000
CHECKPOINT_AFTER_FILES: Final = 1000
"""A refresh that wrote this many files is a bulk write (``Index.maintain``)."""

ProgressCallback = Callable[[Progress], Awaitable[None]]
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Outcome:
    seen: int
    changed: int
    removed: int
    errors: int
    seconds: float
    interrupted: bool = False
    """The daemon began to stop before every changed file was read (``Indexer.stop``):
    what was written stays, the rest is read at the next start."""


class Indexer:
    def __init__(
        self,
        index: Index,
        roots: Roots,
        rules: IgnoreRules,
        health: Health,
        max_file_bytes: int,
        *,
        commits: Commits | None = None,
        on_damage: Callable[[str], None] | None = None,
        max_document_bytes: int | None = None,
        kinds: Classifier | None = None,
        documents: Extractor | None = None,
    ) -> None:
        self.index = index
        self.roots = roots
        self.rules = rules
        self.health = health
        self.max_file_bytes = max_file_bytes
        self.max_document_bytes = (
            max_file_bytes if max_document_bytes is None else max_document_bytes
        )
        """Documents' size cap (``formats.size_cap``); a reload sets both."""
        self._job = anyio.Lock()
        self._writer = anyio.CapacityLimiter(1)
        self._warned: set[tuple[str, str]] = set()
        self._stopping = False
        self._extracting = ThreadPoolExecutor(EXTRACTORS, thread_name_prefix="extract")
        self._large = threading.Lock()
        self.commits = commits or Commits()
        """Announces each write committed here (this is the index's only writer)."""
        self.on_damage = on_damage or _ignore
        """Called when a write finds the database damaged (the recovery's)."""
        self.kinds = kinds or Classifier()
        """Each file's kind, from its root's rules and its path."""
        self.documents = documents
        """The documents' reader (None: documents are skipped as binary)."""

    async def _write(self, fn: Callable[..., T], *args: object) -> T:
        try:
            result = await anyio.to_thread.run_sync(partial(fn, *args), limiter=self._writer)
        except Exception as exc:
            # The batch was rolled back: the files keep their old index metadata, so
            # the next refresh reads them again. Status says why until a write works.
            failure = self.index.failure(exc)
            if failure == "damaged":
                self.on_damage(str(exc))
            elif failure is not None:
                self.health.record(Writes(f"cannot write the index: {exc}"))
                log.error("cannot write the index: %s; serving what it holds", exc)
            raise
        return result

    async def _commit(self, fn: Callable[..., T], *args: object) -> T:
        """A write that commits (or raises having committed nothing), announced."""
        return await self._write(self._announced, fn, *args)

    def _announced(self, fn: Callable[..., T], *args: object) -> T:
        """``fn`` in the writer thread, announced as soon as it returns: a search may see
        its rows at once, and status's counts must follow them as soon."""
        result = fn(*args)
        self.commits.committed()
        return result

    def _writable(self) -> None:
        """A refresh or a move finished without a write error: the index is writable
        (also when there was nothing left to write, as after the user freed space by
        deleting the very file that did not fit)."""
        if self.health.index_error:
            log.info("index writes work again")
            self.health.record(Writes())

    async def _maintain(self, outcome: Outcome) -> None:
        """The index's housekeeping after a refresh (``Index.maintain``)."""
        bulk = outcome.changed + outcome.removed >= CHECKPOINT_AFTER_FILES
        try:
            maintain = self._commit if outcome.changed + outcome.removed else self._write
            # What maintenance changes (the size on disk) is announced when it followed writes.
            await maintain(self.index.maintain, "bulk" if bulk else "refresh")
        except Exception as exc:
            # The refresh itself is done; the index tries again after the next one.
            log.warning("maintaining the index failed: %s", exc)

    async def rebuild(self, reason: str) -> None:
        """Start a damaged index afresh (the next refresh of every root fills it)."""
        async with self._job:
            await anyio.to_thread.run_sync(
                self._announced, self.index.rebuild, reason, limiter=self._writer
            )

    async def refresh(
        self,
        scope: Sequence[Located] | None = None,
        *,
        full: bool = False,
        on_progress: ProgressCallback | None = None,
    ) -> Outcome:
        """Refresh ``scope`` (None: every root). ``full`` re-reads unchanged files too."""
        async with self._job:
            started = time.monotonic()
            committed = self.commits.count
            self.health.record(Progress("scanning", 0, 0, time.time()))
            try:
                outcome = await self._refresh(scope, full, on_progress, started)
            except ExceptionGroup as group:
                # The read-ahead task group wraps a failed write (a full disk): callers
                # see the error itself, so the service can name it.
                if len(group.exceptions) == 1:
                    raise group.exceptions[0] from None
                raise
            finally:
                self.health.record(Idle())
                if self.commits.count != committed:
                    # Once more now that the refresh is over: a reader that puts its
                    # work off while the indexer writes (search by meaning) starts now.
                    self.commits.committed()
            self._writable()
            await self._maintain(outcome)
            if scope is None and not outcome.interrupted:
                # Every root scanned into it: an index being rebuilt is complete (before
                # the scan counts as done: the new index answers once it does).
                if self.index.describe().rebuilding:
                    await self._commit(self.index.built)
                self.health.record(Scanned(outcome.seconds))
            # Event-driven refreshes (every saved file) log at debug, full scans at info.
            log.log(
                logging.INFO if scope is None else logging.DEBUG,
                "refresh of %s: %d files seen, %d changed, %d removed, %d errors in %.2f s",
                "every root" if scope is None else f"{len(scope)} path(s)",
                outcome.seen,
                outcome.changed,
                outcome.removed,
                outcome.errors,
                outcome.seconds,
            )
            return outcome

    async def _refresh(
        self,
        scope: Sequence[Located] | None,
        full: bool,
        on_progress: ProgressCallback | None,
        started: float,
    ) -> Outcome:
        current = self.roots.paths
        # A scope computed before a root was removed must not write into it again.
        targets = (
            [t for t in scope if t.root in current]
            if scope is not None
            else [Located(r, r, "") for r in current]
        )
        # In an index several daemons share, a root is written by one of them at a time.
        await self._write(self.index.claim, [str(t.root) for t in targets])
        prefixes = None if scope is None else [str(t.path) for t in targets]
        # Read before the walk, which compares each file with it as it lists it. (The
        # two once ran at once, but they share the GIL: that saved less than the
        # comparison afterwards cost.)
        known = await self._write(self._known, prefixes)
        # One worker thread walks every target: a burst brings thousands of scopes.
        results = await anyio.to_thread.run_sync(self._walk_all, targets, None if full else known)
        changed, removed = _compare(results, known, full)
        listed = [r.listed for r in results]
        # Freed now, not held while the files are read.
        del known
        for r in results:
            r.stamps.clear()
        for result in results:
            for path, reason in result.problems:
                self.health.record(Problem(path, f"cannot list directory: {reason}"))
        total = len(changed)
        progress = Progress("indexing", 0, total, time.time())
        self.health.record(progress)
        if on_progress is not None:
            await on_progress(progress)
        if removed:
            await self._commit(self.index.apply, Batch(deletes=removed))
        # After the removals: a root that status calls missing holds no files.
        for target, result, count in zip(targets, results, listed, strict=True):
            if target.path == target.root:
                ignored = Ignored.tally(result.ignored_by, count)
                self.health.record(Walked(str(target.root), result.root_missing, ignored))
        errors = 0
        done = 0
        batches = anyio.create_memory_object_stream[tuple[list[Update], list[str], int]](1)
        send, receive = batches

        async def read_ahead() -> None:
            # A failed write (a full disk) closes ``receive`` and cancels this task, but
            # a batch read meanwhile may meet the closed stream first: that is the same
            # failure, not a second one to report beside it.
            with suppress(anyio.BrokenResourceError):
                async with send:
                    for batch in _batches(changed):
                        updates, vanished = await anyio.to_thread.run_sync(self._read_batch, batch)
                        await send.send((updates, vanished, len(batch)))

        async with anyio.create_task_group() as tg, receive:
            tg.start_soon(read_ahead)
            async for updates, vanished, count in receive:
                errors += sum(
                    1
                    for u in updates
                    if isinstance(u.given, textfile.Skipped)
                    and u.given.reason == textfile.SkipReason.UNREADABLE
                )
                read = len(updates)
                # Files deleted since the walk: the index drops the rows it has of them.
                await self._write(self._apply, updates, vanished)
                self.health.record(Counted(read=read))
                done += count
                progress = Progress("indexing", done, total, progress.started_at)
                self.health.record(progress)
                if on_progress is not None:
                    await on_progress(progress)
                if self._stopping and done < total:
                    tg.cancel_scope.cancel()  # the read-ahead: nothing more is written
                    break
        seconds = time.monotonic() - started
        if done < total:
            return Outcome(sum(listed), done, len(removed), errors, seconds, interrupted=True)
        outcome = Outcome(sum(listed), total, len(removed), errors, seconds)
        self._report_roots(targets, listed, changed, removed, outcome.seconds)
        return outcome

    def stop(self) -> None:
        """The daemon is stopping: a refresh under way ends after the batch it is
        writing, so that a client waiting for it gets its answer (``interrupted``)
        within the shutdown's drain, rather than a cut connection."""
        self._stopping = True

    def _apply(self, updates: list[Update], vanished: list[str]) -> None:
        """Write a batch, then drop it (the lists are emptied: its texts and columns
        are freed here, not when the next batch arrives) and trim the heap."""
        self._announced(self.index.apply, Batch(updates, vanished))
        updates.clear()
        vanished.clear()
        heap.trim()

    def _walk_all(self, targets: Sequence[Located], known: set[Stamp] | None) -> list[Walk]:
        memo: dict[str, Chain | str] = {}
        return [walk(t.root, t.path, self.rules, memo, known) for t in targets]

    def _report_roots(
        self,
        targets: Sequence[Located],
        listed: Sequence[int],
        changed: Pending,
        removed: list[str],
        seconds: float,
    ) -> None:
        """For every whole root refreshed: what this reconcile found, for status."""
        for target, count in zip(targets, listed, strict=True):
            if target.path != target.root:
                continue
            root = str(target.root)
            prefix = root + "/"
            reconciled = Reconciled(
                at=time.time(),
                seconds=round(seconds, 4),
                files_seen=count,
                changed=changed.count_in(root),
                removed=sum(1 for p in removed if p.startswith(prefix)),
            )
            self.health.record(RootReconciled(root, reconciled))

    async def move(self, src: Located, dest: Located) -> int:
        """Re-key what the index holds at ``src`` (a file or a directory) to ``dest``."""
        async with self._job:
            move = Move(str(src.path), str(dest.path), str(dest.root))
            renaming = documents.Renaming(self.kinds, self.roots.inside, self.documents)
            moved = await self._commit(self.index.apply, Batch(moves=[move], renamer=renaming))
            self._writable()
            self.health.record(Counted(moved=moved))
            return moved

    async def remove_root(self, root: str) -> int:
        """Forget every document of a root that is no longer indexed."""
        async with self._job:
            return await self._commit(self.index.forget, root)

    def _known(self, prefixes: list[str] | None) -> set[Stamp]:
        """``Index.known`` under each file's size cap (``formats.size_cap``)."""
        caps = SizeCaps(self.max_file_bytes, self.max_document_bytes, formats.CAPPED_SUFFIXES)
        if not extractor.installed():
            caps = SizeCaps.one(self.max_file_bytes)  # documents are read as text, or not
        return self.index.known(prefixes, caps)

    def _load(self, seen: Seen) -> textfile.Loaded | textfile.Skipped | None:
        """``seen`` read (None: it vanished, or leads outside the roots)."""
        large = seen.size > LARGE_DOCUMENT_BYTES and formats.kind(seen.path) is not None
        try:
            # Within the roots: a folder on the way swapped for a link since the
            # scan listed it (by someone who may write in a root) leads elsewhere.
            cap = formats.size_cap(seen.path, self.max_file_bytes, self.max_document_bytes)
            with self._large if large else nullcontext():
                return textfile.load(
                    seen.path, cap, within=self.roots.inside, documents=self.documents
                )
        except (textfile.Vanished, textfile.Escaped):
            return None

    async def reclassify(self, root: str) -> int:
        """Give the files of ``root`` their kinds by the rules now in force."""
        async with self._job:
            return await self._commit(self.index.reclassify, root, self.kinds.of)

    def _read_batch(self, batch: list[Seen]) -> tuple[list[Update], list[str]]:
        updates: list[Update] = []
        vanished: list[str] = []
        kind = self.kinds.of
        # Documents are read EXTRACTORS at a time, ahead; text files in order, here.
        ahead = {
            id(seen): self._extracting.submit(self._load, seen)
            for seen in batch
            if formats.kind(seen.path) is not None
        }
        for seen in batch:
            found = ahead.get(id(seen))
            outcome = self._load(seen) if found is None else found.result()
            if outcome is None:
                vanished.append(seen.path)
                continue
            if isinstance(outcome, textfile.Skipped) and outcome.reason in (
                textfile.SkipReason.UNREADABLE,
                textfile.SkipReason.UNDECODABLE,
            ):
                self.health.record(Problem(seen.path, f"{outcome.reason}: {outcome.detail}"))
                # Unreadable files are retried at every scan: warn once per cause.
                key = (seen.path, outcome.detail)
                level = logging.DEBUG if key in self._warned else logging.WARNING
                if len(self._warned) >= WARNED_CAP:
                    self._warned.clear()
                self._warned.add(key)
                log.log(level, "skipping %s: %s (%s)", seen.path, outcome.reason, outcome.detail)
            if isinstance(outcome, textfile.Loaded):
                doc = documents.prepare(seen.relpath, outcome)
                if doc.structure.front.problem:
                    # The file is indexed all the same, without its front matter's fields.
                    self.health.record(Problem(seen.path, doc.structure.front.problem))
                updates.append(Update(seen, doc, kind(seen.root, seen.relpath)))
            else:
                updates.append(Update(seen, outcome, kind(seen.root, seen.relpath)))
        return updates, vanished

    def resolve_scope(self, paths: Sequence[str]) -> list[Located]:
        """Client-given paths to refresh, each resolved inside a root (raises OutsideRoots)."""
        return [self.roots.resolve(p) for p in paths]


def _ignore(reason: str) -> None:
    pass


def _compare(results: Sequence[Walk], known: set[Stamp], full: bool) -> tuple[Pending, list[str]]:
    """The files to read and the paths to remove, after ``results`` were walked with
    ``known`` (then it holds only the rows of files changed or gone) or, when ``full``,
    without it (every file is read)."""
    unmatched = known - set().union(*(r.stamps for r in results)) if full else known
    roots = list(dict.fromkeys(r.root for r in results))
    fresh: dict[str, tuple[Stamp, int]] = {}  # by path: a later scope's listing wins
    for result in results:
        root = roots.index(result.root)
        fresh.update((s[0], (s, root)) for s in result.stamps)
    # A row whose path was listed is a changed file; the others are gone, except under a
    # directory that could not be listed, which says nothing of its files.
    unlisted = [p + "/" for r in results for p, _ in r.problems]
    removed = [
        p for p, *_ in unmatched if p not in fresh and not any(p.startswith(u) for u in unlisted)
    ]
    # In path order, not the sets' hash order, which changes with every process: files
    # of a folder are read together, and a first index numbers them the same way each
    # time (search ties are broken by that number).
    return Pending(fresh, roots), removed


def _batches(items: Pending) -> Iterator[list[Seen]]:
    """``items`` in batches of at most BATCH_FILES files and BATCH_BYTES bytes, and
    in at least PIPELINE_DEPTH batches once there are MIN_SPLIT_FILES files or more.

    Why several: the reconciler hands a burst (a git checkout) over in refreshes of up
    to 1,000 paths, and a refresh written as one batch cannot read ahead while it
    writes; split, reading overlaps writing from the second batch on."""
    per_batch = min(BATCH_FILES, max(MIN_SPLIT_FILES, -(-len(items) // PIPELINE_DEPTH)))
    current: list[Seen] = []
    size = 0
    for item in items:
        current.append(item)
        document = formats.kind(item.path) is not None
        size += min(item.size, DOCUMENT_BATCH_BYTES) if document else item.size
        if len(current) >= per_batch or size >= BATCH_BYTES:
            yield current
            current, size = [], 0
    if current:
        yield current
