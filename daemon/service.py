"""What each request does: the daemon's operations, independent of the transport.

The server decodes a request and calls ``Service.handle``; errors raised here are
small exception classes that ``error_reply`` translates into ``ErrorReply`` codes at
the edge (never by matching message text).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path
from typing import Final, TypeVar

import anyio
import anyio.to_thread
from anyio.abc import TaskGroup
from kbindex.daemon import searcher, textfile
from kbindex.daemon.health import Health
from kbindex.daemon.indexer import Indexer
from kbindex.daemon.query import BadQuery, compile_query
from kbindex.daemon.roots import InvalidPath, OutsideRoots, Roots
from kbindex.daemon.settings import Settings
from kbindex.daemon.store import Store
from kbindex.proto.messages import (
    MAX_LIMIT,
    MIN_LIMIT,
    PROTOCOL_VERSION,
    ErrorCode,
    ErrorReply,
    FindFiles,
    FindFilesReply,
    Hello,
    HelloReply,
    Ping,
    Pong,
    Progress,
    ReadFile,
    ReadFileReply,
    Refresh,
    RefreshReply,
    Reply,
    Request,
    RootStatus,
    ScanProgress,
    Search,
    SearchReply,
    Status,
    StatusReply,
    Why,
    WhyReply,
)

log = logging.getLogger(__name__)

VERSION: Final = "0.1.0"
CAPABILITIES: Final = [
    "search.modes:auto,all,any,raw",
    "refresh.progress",
    "read_file",
    "find_files",
    "why",
]
READ_FILE_MAX_CHARS: Final = 200_000
READERS: Final = 8

T = TypeVar("T")
Emit = Callable[[Reply], Awaitable[None]]


class InvalidArgument(Exception):
    """A request's argument is out of range or inconsistent."""


class VersionMismatch(Exception):
    """The client speaks another protocol version."""


ERROR_CODES: Final[dict[type[Exception], str]] = {
    InvalidArgument: ErrorCode.INVALID_ARGUMENT,
    InvalidPath: ErrorCode.INVALID_ARGUMENT,
    BadQuery: ErrorCode.BAD_QUERY,
    OutsideRoots: ErrorCode.OUTSIDE_ROOTS,
    searcher.NotIndexed: ErrorCode.NOT_FOUND,
    VersionMismatch: ErrorCode.VERSION_MISMATCH,
}


def error_reply(exc: Exception) -> ErrorReply | None:
    """The reply for a known error class, or None for an unexpected exception."""
    for cls, code in ERROR_CODES.items():
        if isinstance(exc, cls):
            return ErrorReply(code=code, message=str(exc))
    return None


class Service:
    def __init__(
        self,
        settings: Settings,
        store: Store,
        roots: Roots,
        indexer: Indexer,
        health: Health,
        background: TaskGroup,
    ) -> None:
        self.settings = settings
        self.store = store
        self.roots = roots
        self.indexer = indexer
        self.health = health
        self.background = background
        self._readers = anyio.CapacityLimiter(READERS)

    async def _read(self, fn: Callable[..., T], *args: object) -> T:
        def run() -> T:
            with self.store.reader() as conn:
                return fn(conn, *args)

        return await anyio.to_thread.run_sync(run, limiter=self._readers)

    async def handle(self, request: Request, emit: Emit) -> Reply:
        match request:
            case Hello():
                return self.hello(request)
            case Ping():
                return Pong()
            case Status():
                return await self.status()
            case Search():
                return await self.search(request)
            case Refresh():
                return await self.refresh(request, emit)
            case ReadFile():
                return await self.read_file(request)
            case FindFiles():
                return await self.find_files(request)
            case Why():
                return await self.why(request)
        raise InvalidArgument(f"unsupported request {type(request).__name__}")

    def hello(self, request: Hello) -> HelloReply:
        if request.version != PROTOCOL_VERSION:
            raise VersionMismatch(
                f"client speaks protocol {request.version}, kbindexd {VERSION} speaks "
                f"{PROTOCOL_VERSION}; install matching versions of kbindex"
            )
        return HelloReply(
            version=PROTOCOL_VERSION, server=f"kbindexd {VERSION}", capabilities=CAPABILITIES
        )

    async def status(self) -> StatusReply:
        counts = await self._read(searcher.counts)
        health = self.health
        roots = []
        for root in self.roots.paths:
            rh = health.root(str(root))
            roots.append(
                RootStatus(
                    path=str(root),
                    state=rh.state,
                    detail=rh.detail,
                    files=counts.per_root.get(str(root), 0),
                    last_scan_at=rh.last_scan_at,
                )
            )
        return StatusReply(
            version=VERSION,
            pid=os.getpid(),
            started_at=health.started_at,
            indexed_files=counts.indexed,
            total_documents=counts.indexed,
            index_size_mb=round(self.store.size_bytes() / (1024 * 1024), 3),
            last_scan_at=health.last_scan_at,
            last_scan_seconds=health.last_scan_seconds,
            scanning=health.scanning,
            progress=health.progress,
            skipped=counts.skipped,
            errors_encountered=health.errors_encountered,
            recent_errors=list(health.recent_errors),
            roots=roots,
            state_dir=str(self.settings.state_dir),
            socket_path=str(self.settings.socket_path),
            index_recovered=self.store.recovered,
        )

    async def search(self, request: Search) -> SearchReply:
        limit = _limit(request.limit)
        compiled = compile_query(request.query, request.mode)
        result = await self._read(searcher.search, compiled, limit, request.path)
        return SearchReply(
            hits=result.hits,
            total_hits=result.total,
            truncated=result.total > len(result.hits),
            mode=result.mode,
            freshness=self.health.freshness(),
        )

    async def refresh(self, request: Refresh, emit: Emit) -> RefreshReply:
        scope = self.indexer.resolve_scope(request.paths) if request.paths else None
        if not request.wait:
            self.background.start_soon(partial(self.indexer.refresh, scope, full=request.full))
            return RefreshReply(queued=True)

        async def on_progress(p: ScanProgress) -> None:
            await emit(Progress(phase=p.phase, done=p.done, total=p.total))

        outcome = await self.indexer.refresh(scope, full=request.full, on_progress=on_progress)
        return RefreshReply(
            files_processed=outcome.seen,
            files_changed=outcome.changed,
            files_removed=outcome.removed,
            errors=outcome.errors,
        )

    async def read_file(self, request: ReadFile) -> ReadFileReply:
        for name, value in (("start_line", request.start_line), ("end_line", request.end_line)):
            if value is not None and value < 1:
                raise InvalidArgument(f"{name} must be 1 or more, not {value}")
        located = self.roots.resolve(request.path)
        state = await self._read(searcher.file_state, str(located.path))
        if state is None or state[0] is not None:
            why = "it is not indexed" if state is None else f"it was skipped ({state[0]})"
            raise searcher.NotIndexed(f"cannot read {located.relpath}: {why}")
        loaded = await anyio.to_thread.run_sync(self._load, str(located.path))
        text, first, last, total, truncated = textfile.line_slice(
            loaded.text, request.start_line, request.end_line, READ_FILE_MAX_CHARS
        )
        return ReadFileReply(
            path=str(located.path),
            text=text,
            start_line=first,
            end_line=last,
            total_lines=total,
            truncated=truncated,
        )

    def _load(self, path: str) -> textfile.Loaded:
        try:
            outcome = textfile.load(path, self.settings.max_file_bytes)
        except textfile.Vanished:
            raise searcher.NotIndexed(f"{path} no longer exists") from None
        if isinstance(outcome, textfile.Skipped):
            raise searcher.NotIndexed(f"cannot read {path}: {outcome.reason} ({outcome.detail})")
        return outcome

    async def find_files(self, request: FindFiles) -> FindFilesReply:
        limit = _limit(request.limit, maximum=1000)
        files, total = await self._read(searcher.find_files, request.glob, limit)
        return FindFilesReply(files=files, total=total, truncated=total > len(files))

    async def why(self, request: Why) -> WhyReply:
        try:
            located = self.roots.resolve(request.path)
        except OutsideRoots:
            return WhyReply(path=request.path, indexed=False, reason="outside every root")
        path = located.path
        reason = self._ignored_by(located.root, path)
        if reason is not None:
            return WhyReply(path=str(path), indexed=False, reason=f"ignored: {reason}")
        state = await self._read(searcher.file_state, str(path))
        if state is None:
            exists = path.exists()
            return WhyReply(
                path=str(path),
                indexed=False,
                reason="not indexed yet (waiting for the next scan)"
                if exists
                else "does not exist",
            )
        if state[0] is None:
            return WhyReply(path=str(path), indexed=True, reason="indexed")
        return WhyReply(path=str(path), indexed=False, reason=f"skipped: {state[0]} ({state[1]})")

    def _ignored_by(self, root: Path, path: Path) -> str | None:
        current = root
        for part in path.relative_to(root).parts[:-1]:
            current = current / part
            reason = self.indexer.rules.ignored_dir(str(current), part)
            if reason is not None:
                return reason
        if path.is_dir():
            return "it is a directory"
        return self.indexer.rules.ignored_file(path.name)


def _limit(value: int, *, maximum: int = MAX_LIMIT) -> int:
    if not MIN_LIMIT <= value <= maximum:
        raise InvalidArgument(f"limit must be between {MIN_LIMIT} and {maximum}, not {value}")
    return value
