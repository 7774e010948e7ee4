"""What each request does: the daemon's operations, independent of the transport.

The server decodes a request and calls ``Service.handle``; errors raised here are
small exception classes that ``error_reply`` translates into ``ErrorReply`` codes at
the edge (never by matching message text).
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import Executor
from contextlib import suppress
from dataclasses import replace
from functools import partial
from typing import Final, Literal, TypeVar

import anyio
import anyio.to_thread
from anyio.abc import TaskGroup
from kbindex.daemon import health as state
from kbindex.daemon.extracting import formats, pages
from kbindex.daemon.grep import grepper as grep
from kbindex.daemon.grep import narrowing, ripgrep, sweep
from kbindex.daemon.grep.extracted import Documents
from kbindex.daemon.health import Health
from kbindex.daemon.index.interface import Index, IndexRefused, NotIndexed
from kbindex.daemon.index.plan import Filters, PathFilter
from kbindex.daemon.index.values import Counts, File, Hit, SearchResult, Stats
from kbindex.daemon.indexing import structure, textfile
from kbindex.daemon.indexing.indexer import Indexer
from kbindex.daemon.notes.notes import Notes, content_hash
from kbindex.daemon.recovery import REBUILDING, IndexRebuilding, Recovery
from kbindex.daemon.roots import Located, OutsideRoots, Roots
from kbindex.daemon.searching import hits
from kbindex.daemon.searching.explanation import FileState, explain
from kbindex.daemon.searching.query import to_plan
from kbindex.daemon.searching.texts import Texts
from kbindex.daemon.semantic.meaning import BY_MEANING, Meaning
from kbindex.daemon.serving import replies
from kbindex.daemon.serving.control import Changed, Control
from kbindex.daemon.serving.failures import (
    IndexUnavailable,
    IndexUnwritable,
    InvalidArgument,
    VersionMismatch,
)
from kbindex.daemon.serving.filtering import Filtering
from kbindex.daemon.serving.scopes import Scopes
from kbindex.daemon.settings import Settings
from kbindex.daemon.watching.changes import Changes
from kbindex.proto.messages import (
    MAX_GREP_LIMIT,
    MAX_LIMIT,
    MIN_LIMIT,
    PROTOCOL_VERSION,
    AddRoot,
    AppendNote,
    Check,
    CheckReply,
    DeleteNote,
    EditNote,
    FindFiles,
    FindFilesReply,
    Freshness,
    Grep,
    GrepReply,
    Hello,
    HelloReply,
    Links,
    LinksReply,
    MoveNote,
    NoteChanges,
    NoteChangesReply,
    Ping,
    Pong,
    Progress,
    ReadFile,
    ReadFileReply,
    Refresh,
    RefreshReply,
    Reload,
    ReloadReply,
    RemoveRoot,
    Reply,
    Request,
    RetireMachine,
    RetireReply,
    RootsReply,
    RootStatus,
    Search,
    SearchReply,
    Status,
    StatusReply,
    Why,
    WhyReply,
    WriteNote,
)

log = logging.getLogger(__name__)

VERSION: Final = "0.1.0"
CAPABILITIES: Final = [
    "search.modes:auto,words,all,any,raw,hybrid,semantic",
    "refresh.progress",
    "read_file",
    "find_files",
    "links",
    "grep",
    "why",
    "watch",
    "roots.add_remove",
]
READ_FILE_MAX_CHARS: Final = 200_000
READERS: Final = 8
SHARED_RECOUNT_SECONDS: Final = 5.0
"""In an index several machines share, how old status's counts may be: the other
machines' commits are not announced here, so their rows are counted again this often
(when status is asked), besides after each commit of this daemon."""
"""Threads reading the index for requests (``Service.readers``), at most."""

T = TypeVar("T")
Emit = Callable[[Reply], Awaitable[None]]


class Service:
    def __init__(
        self,
        control: Control,
        index: Index,
        roots: Roots,
        indexer: Indexer,
        health: Health,
        background: TaskGroup,
        recovery: Recovery,
        *,
        readers: Executor,
        texts: Texts | None = None,
        changes: Changes | None = None,
        meaning: Meaning | None = None,
    ) -> None:
        self.control = control
        self.index = index
        self.roots = roots
        self.scopes = Scopes(roots, self._names_a_file)
        self.filtering = Filtering(roots, lambda: self.control.settings, self._passes)
        self.indexer = indexer
        self.health = health
        self.background = background
        self.recovery = recovery
        self.changes = changes
        self.readers = readers
        """The threads the reads of the index run in (READERS of them)."""
        self.texts = texts or Texts(roots)
        """The one reader of a file's text for clients (the documents' reader in it)."""
        documents = Documents(
            control.settings.state_dir, self.texts.current, lambda: self.settings.max_document_bytes
        )
        documents.clean()  # what a daemon killed during a grep left
        self.grepper = grep.Grepper(roots, documents=documents)
        self.meaning = meaning or Meaning(None, lambda: False)
        self.notes = Notes(lambda: control.settings, roots, indexer)
        self._queued: dict[tuple[tuple[str, ...] | None, bool], int] = {}
        self._counted: tuple[int, float, Stats] | None = None
        """(commits, monotonic time) of the last count, and what it counted."""

    @property
    def settings(self) -> Settings:
        """The settings in force (a reload replaces them)."""
        return self.control.settings

    async def _read(self, fn: Callable[..., T], *args: object) -> T:
        """``fn(*args)``, a read of the index, in a reader thread."""
        generation = self.index.describe().generation
        try:
            # The loop's own executor hands the call to a thread at once, where anyio's
            # to_thread passes through the event loop twice first (a visible share of a
            # fast search). A search whose client leaves is not waited for; it ends
            # within its deadline and gives its connection back.
            return await asyncio.get_running_loop().run_in_executor(
                self.readers, partial(fn, *args)
            )
        except Exception as exc:
            # A read of the index a rebuild just replaced says nothing about the new one.
            if (
                self.index.failure(exc) == "damaged"
                and generation == self.index.describe().generation
            ):
                self.recovery.damaged(str(exc))
            raise

    async def handle(self, request: Request, emit: Emit) -> Reply:
        try:
            return await self._dispatch(request, emit)
        except Exception as exc:
            # A write (a refresh the client waits for, a root added) that met a damaged
            # index has already scheduled the rebuild or recorded the error.
            failure = self.index.failure(exc)
            if failure == "damaged":
                raise IndexRebuilding(REBUILDING) from None
            if failure == "unwritable":
                raise IndexUnwritable(
                    f"cannot write the index ({exc}); check the disk where it lives"
                    f" ({self.settings.state_dir}): kbindexd catches up by itself"
                ) from None
            if failure == "unavailable":
                raise IndexUnavailable(
                    f"the index cannot be reached ({exc}); kbindexd retries by itself"
                ) from None
            raise

    async def _dispatch(self, request: Request, emit: Emit) -> Reply:
        match request:
            case Hello():
                return self.hello(request)
            case Ping():
                return Pong()
            case Status():
                return await self.status()
            case Search():
                return await self.search(request)
            case Grep():
                return await self.grep(request)
            case WriteNote() | EditNote() | AppendNote() | MoveNote() | DeleteNote():
                return replies.note(await self.notes.handle(request))
            case NoteChanges():
                cursor, paths, missed = await self.notes.changes_since(
                    request.since, request.wait_seconds
                )
                return NoteChangesReply(cursor=cursor, paths=paths, missed=missed)
            case Refresh():
                return await self.refresh(request, emit)
            case ReadFile():
                return await self.read_file(request)
            case FindFiles():
                return await self.find_files(request)
            case Links():
                return await self.links(request)
            case Why():
                return await self.why(request)
            case Check():
                return await self.check()
            case AddRoot():
                return await self._roots_reply(await self.control.add_root(request.path))
            case RemoveRoot():
                return await self._roots_reply(await self.control.remove_root(request.path))
            case Reload():
                return ReloadReply(message=await self.control.reload())
            case RetireMachine():
                return await self.retire_machine(request.name)
        raise InvalidArgument(f"unsupported request {type(request).__name__}")

    def hello(self, request: Hello) -> HelloReply:
        writable = ["notes"] if self.notes.writable_roots() else []
        return hello_reply(request, [*CAPABILITIES, *writable])

    async def _stats(self) -> Stats:
        """The index's counts and size, counted again only after a commit (``Commits``):
        counting scans the files table and clients poll status; any commit may change
        them, and nothing else can, except other machines' in a shared index (counted
        again after SHARED_RECOUNT_SECONDS). While the index cannot be reached, the last
        counts and no size (status says why)."""
        commits, now = self.indexer.commits.count, time.monotonic()
        counted = self._counted
        if (
            counted is None
            or counted[0] != commits
            or (self.index.describe().machine and now - counted[1] >= SHARED_RECOUNT_SECONDS)
        ):
            try:
                counted = self._counted = (commits, now, await self._read(self.index.stats))
            except Exception as exc:
                if self.index.failure(exc) != "unavailable":
                    raise
                return Stats(counted[2].counts if counted else Counts(0, {}, {}), 0)
        return counted[2]

    async def status(self) -> StatusReply:
        stats = await self._stats()
        # The documents' extraction cache counts in the index's size (issue 40).
        extracted = await anyio.to_thread.run_sync(self.texts.extracted_bytes)
        counts, size_bytes = stats.counts, stats.size_bytes + extracted
        health, described = self.health, self.index.describe()
        return StatusReply(
            version=VERSION,
            pid=os.getpid(),
            started_at=health.started_at,
            indexed_files=counts.indexed,
            total_documents=counts.indexed,
            index_size_mb=round(size_bytes / (1024 * 1024), 3),
            last_scan_at=health.last_scan_at,
            last_scan_seconds=health.last_scan_seconds,
            scanning=health.scanning,
            progress=replies.progress(health.progress),
            skipped=counts.skipped,
            errors_encountered=health.errors_encountered,
            recent_errors=replies.problems(health),
            roots=self._root_statuses(counts.per_root),
            state_dir=str(self.settings.state_dir),
            socket_path=str(self.settings.socket_path),
            index_recovered=described.recovered,
            index_rebuilding=described.rebuilding,
            index_error=self.health.index_error,
            config_error=self.control.config_error,
            watch=health.watch_state(),
            pending=health.pending,
            last_event_at=health.last_event_at,
            lag=replies.lag(health.lag()),
            files_read=health.files_read,
            files_moved=health.files_moved,
            semantic=await self._read(self.meaning.status),
            backend=replies.backend(described, counts),
        )

    def _root_statuses(self, files: dict[str, int]) -> list[RootStatus]:
        scopes = {path: name for name, path in self.filtering.named().items()}
        settings = self.settings
        return [
            replies.root_status(
                str(root),
                self.health.root(str(root)),
                files.get(str(root), 0),
                self.changes.depth_of(str(root)) if self.changes else 0,
                writable=settings.writable(root),
                scope=scopes.get(str(root), ""),
                description=settings.options_for(root).description,
            )
            for root in self.roots.paths
        ]

    async def search(self, request: Search) -> SearchReply:
        limit = _limit(request.limit)
        mode, notes = self.meaning.plan(request.mode)
        plan = to_plan(request.query, "auto" if mode in BY_MEANING else mode, limit=limit)
        boosts = () if self.control.kinds is None else self.control.kinds.boosts
        plan = replace(plan, recency=self.filtering.recency(request.recent), boosts=boosts)
        filters = self.filtering.of(request)

        async def run(path: str | None) -> tuple[SearchResult, list[str]]:
            filtered = replace(plan, filters=replace(filters, path=PathFilter.parse(path)))
            if mode in BY_MEANING:
                return await self._read(
                    self.meaning.search, self.index, filtered, request.query, mode
                )
            return await self._read(hits.search, self.index, filtered), []

        (result, waiting), scoped, path = await self.scopes.answer(
            request.path, run, lambda r: len(r[0].hits)
        )
        notes += waiting
        if not result.hits:
            notes += await self.filtering.unmatched(filters, path)
        context = self.filtering.descriptions()
        return SearchReply(
            hits=[
                replies.hit(h, p, context(h.root, h.relpath))
                for h, p in zip(result.hits, await self._pages(result.hits), strict=True)
            ],
            total_hits=result.total,
            truncated=result.total > len(result.hits),
            mode=result.mode,
            freshness=await self._freshness(),
            notes=[*notes, *scoped],
        )

    async def _pages(self, hits: Sequence[Hit]) -> list[tuple[int, int]]:
        """(page, line in the page) of each hit in a document with pages, else (0, 0):
        from the cached text (``Texts.current``), the one the snippet came from."""

        def locate() -> list[tuple[int, int]]:
            found = []
            for h in hits:
                text = None
                if formats.kind(h.path) is not None:
                    text = self.texts.current(h.path, h.size)
                found.append(pages.locate(text, h.line) if text else (0, 0))
            return found

        if not any(formats.kind(h.path) for h in hits):
            return [(0, 0)] * len(hits)
        return await anyio.to_thread.run_sync(locate)

    async def grep(self, request: Grep) -> GrepReply:
        limit = _limit(request.limit, maximum=MAX_GREP_LIMIT)
        query, words = narrowing.required(
            request.pattern, fixed=request.fixed, ignore_case=request.ignore_case, word=request.word
        )
        flags = ripgrep.Flags(
            request.pattern,
            fixed=request.fixed,
            ignore_case=request.ignore_case,
            word=request.word,
            before=request.before,
            after=request.after,
            max_count=request.max_count,
            files_only=request.files_only,
        )

        async def run(path: str | None) -> grep.Outcome:
            changes, rules = self.changes, self.indexer.rules
            pending, new = await anyio.to_thread.run_sync(narrowing.pending, changes, rules)
            found = await self._read(
                self.index.candidates, query, path, pending, new, words, filters
            )
            walk = sweep.walks([str(r) for r in self.roots.paths], path)
            return await sweep.run(self.grepper, flags, found, walk, limit)

        filters = self.filtering.of(request)
        outcome, scoped, path = await self.scopes.answer(request.path, run, lambda o: o.total)
        if not outcome.total:
            scoped += await self.filtering.unmatched(filters, path)
        return replies.grep_reply(outcome, await self._freshness(), scoped)

    async def _freshness(self) -> Freshness:
        """With the machines behind or gone, from the counts, in an index machines share
        (a cached count there; in SQLite, the count after a write would cost a search)."""
        shared = self.index.describe().machine != ""
        return replies.freshness(self.health, (await self._stats()).counts if shared else None)

    async def retire_machine(self, name: str) -> RetireReply:
        try:
            removed = await anyio.to_thread.run_sync(self.index.retire_machine, name)
        except IndexRefused as exc:
            raise InvalidArgument(str(exc)) from None
        self._counted = None
        return RetireReply(message=f"machine {name!r} retired", removed=removed)

    async def _refresh_in_background(self, scope: list[Located] | None, full: bool) -> None:
        # A client sending Refresh(wait=False) in a loop would queue a refresh per request
        # behind the indexer's lock; one running and one waiting per scope already
        # cover every change made before the request.
        key = (None if scope is None else tuple(str(s.path) for s in scope), full)
        if self._queued.get(key, 0) >= 2:
            return
        self._queued[key] = self._queued.get(key, 0) + 1
        try:
            await self.indexer.refresh(scope, full=full)
        except Exception:
            # The background task group is the daemon's: a failure here (a full disk)
            # must not take it down. Status shows the error; the next scan retries.
            log.exception("refresh failed")
        finally:
            self._queued[key] -= 1
            if not self._queued[key]:
                del self._queued[key]

    async def refresh(self, request: Refresh, emit: Emit) -> RefreshReply:
        scope = self.indexer.resolve_scope(request.paths) if request.paths else None
        for raw, located in zip(request.paths, scope or (), strict=True):
            await self._check_refreshable(raw, located)
        if not request.wait:
            self.background.start_soon(self._refresh_in_background, scope, request.full)
            return RefreshReply(queued=True)

        async def on_progress(p: state.Progress) -> None:
            # A client that leaves during the refresh must not cut it short.
            with suppress(anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                await emit(Progress(phase=p.phase, done=p.done, total=p.total))

        outcome = await self.indexer.refresh(scope, full=request.full, on_progress=on_progress)
        return RefreshReply(
            files_processed=outcome.seen,
            files_changed=outcome.changed,
            files_removed=outcome.removed,
            errors=outcome.errors,
            interrupted=outcome.interrupted,
        )

    async def _check_refreshable(self, raw: str, located: Located) -> None:
        """Raise NotIndexed when ``located`` names nothing on disk and nothing in the
        index: a typo would otherwise be answered "done, 0 files checked". A path gone
        from disk but still indexed is refreshable: that is how it leaves the index."""
        path = str(located.path)
        if await anyio.to_thread.run_sync(os.path.lexists, path):
            return
        if await self._read(partial(self.index.state, under=True), path) is None:
            raise NotIndexed(
                f"{raw} does not exist (looked for {path}) and nothing under it is indexed"
            )

    async def read_file(self, request: ReadFile) -> ReadFileReply:
        asked = (
            ("start_line", request.start_line),
            ("end_line", request.end_line),
            ("page", request.page),
        )
        for name, value in asked:
            if value is not None and value < 1:
                raise InvalidArgument(f"{name} must be 1 or more, not {value}")
        if request.page is not None and (request.start_line or request.end_line):
            raise InvalidArgument("give a page or lines (start_line, end_line), not both")
        located = self.roots.resolve(request.path)
        state = await self._read(self.index.state, str(located.path))
        if state is None or state[0] is not None:
            why = await self._explain(located, state) or "not indexed"
            raise NotIndexed(f"cannot read {located.relpath}: {why}")
        loaded = await anyio.to_thread.run_sync(self._load, str(located.path))
        document = loaded.encoding in formats.NAMES
        count = len(pages.starts(loaded.text)) if document else 0
        start_line, end_line = request.start_line, request.end_line
        if request.page is not None:
            if not document:
                raise InvalidArgument(
                    f"{located.relpath} is a text file, not a document: it has no pages;"
                    " read it by line (start_line)"
                )
            bounds = pages.lines_of(loaded.text, request.page)
            if bounds is None:
                raise InvalidArgument(
                    f"{located.relpath} has {count:,} page(s): page {request.page:,} is past"
                    " its end"
                )
            start_line, end_line = bounds
        text, first, last, total, truncated = textfile.line_slice(
            loaded.text, start_line, end_line, READ_FILE_MAX_CHARS, paged=document
        )
        if first > max(total, 1):
            # An empty answer would read as an empty file (kbctl printed a blank line).
            raise InvalidArgument(
                f"{located.path} has {total:,} line(s): start_line {first:,} is past its end"
            )
        digest = ""
        if self.settings.writable(located.root):
            data = await anyio.to_thread.run_sync(located.path.read_bytes)
            digest = content_hash(data)
        return ReadFileReply(
            path=str(located.path),
            text=text,
            start_line=first,
            end_line=last,
            total_lines=total,
            truncated=truncated,
            hash=digest,
            page=request.page or 0,
            pages=count,
        )

    def _load(self, path: str) -> textfile.Loaded:
        try:
            settings = self.settings
            cap = formats.size_cap(path, settings.max_file_bytes, settings.max_document_bytes)
            outcome = self.texts.load(path, cap)
        except textfile.Vanished:
            raise NotIndexed(f"{path} no longer exists") from None
        except textfile.Escaped:
            raise OutsideRoots(f"{path} now leads outside the roots (a symlink)") from None
        if isinstance(outcome, textfile.Skipped):
            raise NotIndexed(f"cannot read {path}: {outcome.reason} ({outcome.detail})")
        return outcome

    async def find_files(self, request: FindFiles) -> FindFilesReply:
        limit = _limit(request.limit, maximum=1000)
        filters = self.filtering.of(request)

        async def run(glob: str | None) -> tuple[list[File], int]:
            listing = await self._read(
                partial(self.index.files, glob or "*", limit, filters, newest=request.newest)
            )
            return list(listing.files), listing.total

        (files, total), scoped, glob = await self.scopes.answer(request.glob, run, lambda r: r[1])
        if not total:
            scoped += await self.filtering.unmatched(filters, glob)
        written = self.notes.written()
        return FindFilesReply(
            files=[replies.file_info(f, f.path in written) for f in files],
            total=total,
            truncated=total > len(files),
            notes=scoped,
        )

    async def _names_a_file(self, path_filter: str) -> bool:
        """Whether the index holds a file within ``path_filter`` (``scopes``)."""
        return (await self._read(self.index.files, path_filter, 1)).total > 0

    async def links(self, request: Links) -> LinksReply:
        located = self.roots.resolve(request.path)
        path = str(located.path)
        if await self._read(self.index.state, path) is None:
            raise NotIndexed(f"{located.relpath} is not in the index")
        direction: Literal["in", "out"] = "in" if request.backlinks else "out"
        limit = None if request.limit is None else _limit(request.limit, maximum=1000)
        found, files = await self._read(self.index.links, path, direction, limit)
        # A target left out of the index (ignored, or past a filter) may still be there.
        on_disk = await anyio.to_thread.run_sync(
            lambda: {x.target for x in found if not x.found and self._exists(x.target)}
        )
        links = [replies.link(x, broken=not x.found and x.target not in on_disk) for x in found]
        broken = sum(x.broken for x in links)
        what = "backlinks" if request.backlinks else "links"
        notes = [] if links else [f"{located.relpath} has no {what} in the index"]
        return LinksReply(path=path, links=links, broken=broken, notes=notes, files=files)

    def _exists(self, path: str) -> bool:
        return self.roots.inside(path) and os.path.lexists(path)

    async def _passes(self, filters: Filters) -> bool:
        """Whether an indexed file passes ``filters``, their path among them
        (``filtering``)."""
        path = filters.path.typed if filters.path else None
        return (await self._read(self.index.files, path, 1, filters)).total > 0

    async def check(self) -> CheckReply:
        checked = await self._read(self.index.check)
        return CheckReply(
            integrity=checked.integrity,
            db_bytes=checked.details.get("db_bytes", checked.size_bytes),
            wal_bytes=checked.details.get("wal_bytes", 0),
        )

    async def why(self, request: Why) -> WhyReply:
        try:
            located = self.roots.resolve(request.path)
        except OutsideRoots:
            return WhyReply(path=request.path, indexed=False, reason="outside every root")
        state = await self._read(self.index.state, str(located.path))
        why = await self._explain(located, state)
        if why is not None:
            return WhyReply(path=str(located.path), indexed=False, reason=why)
        problem = await anyio.to_thread.run_sync(self._header_problem, located)
        reason = f"indexed; {problem}" if problem else "indexed"
        return WhyReply(path=str(located.path), indexed=True, reason=reason)

    def _header_problem(self, located: Located) -> str:
        """Why the front matter of the indexed text file ``located`` was not read (or
        not all of it), "" when it was or it has none: the indexer reports it once, in
        the recent errors, and ``why`` answers for one file whenever asked."""
        path = str(located.path)
        if formats.kind(path) is not None:
            return ""  # a document's text has no front matter
        try:
            loaded = self._load(path)
        except (NotIndexed, OutsideRoots):
            return ""
        return structure.of(located.relpath, loaded.text).front.problem

    async def _explain(self, located: Located, state: FileState) -> str | None:
        return await anyio.to_thread.run_sync(
            explain, self.indexer.rules, self.changes, located, state
        )

    async def _roots_reply(self, changed: Changed) -> RootsReply:
        counts = (await self._stats()).counts
        return RootsReply(
            roots=self._root_statuses(counts.per_root),
            message=changed.message,
            config_path=str(changed.recorded_in),
        )


def hello_reply(request: Hello, capabilities: list[str]) -> HelloReply:
    if request.version != PROTOCOL_VERSION:
        raise VersionMismatch(
            f"client speaks protocol {request.version}, kbindexd {VERSION} speaks "
            f"{PROTOCOL_VERSION}; install matching versions of kbindex"
        )
    return HelloReply(
        version=PROTOCOL_VERSION, server=f"kbindexd {VERSION}", capabilities=capabilities
    )


def _limit(value: int, *, maximum: int = MAX_LIMIT) -> int:
    if not MIN_LIMIT <= value <= maximum:
        raise InvalidArgument(f"limit must be between {MIN_LIMIT} and {maximum}, not {value}")
    return value
