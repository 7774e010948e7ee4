"""The tools: what a model sees (name, description, schemas, hints) and what they do.

Six read the index; the five note tools (notes.py) are listed only when the daemon has
a writable root, and are dispatched here like the others.

Schemas are written out by hand rather than derived from function signatures: they are
the contract with the model, with bounds and descriptions tuned for it, and building
them costs nothing at startup. Arguments are read leniently (see arguments.py); every
failure becomes a tool error with one sentence (see errors.py), never an exception.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Final

import mcp_types as types
from kbindex.mcpfront import links, matches, notes, results, schemas, where
from kbindex.mcpfront.arguments import ArgumentError, Arguments
from kbindex.mcpfront.backend import Backend
from kbindex.mcpfront.errors import describe
from kbindex.mcpfront.schemas import FIND_LIMIT, GREP_ARGUMENTS, GREP_LIMIT, MAX_FIND_LIMIT
from kbindex.proto.messages import (
    MAX_CONTEXT,
    MAX_GREP_LIMIT,
    MAX_LIMIT,
    MAX_PATTERN_CHARS,
    MIN_LIMIT,
    Grep,
    Progress,
)

log = logging.getLogger(__name__)

ProgressFn = Callable[[float, float | None, str | None], Awaitable[None]]
Outcome = tuple[dict[str, Any], str]

MAX_QUERY_CHARS: Final = 2000


@dataclass(frozen=True, slots=True)
class Call:
    """One tool call: its arguments and a way to report progress (a no-op unless the
    client sent a progressToken)."""

    args: Arguments
    progress: ProgressFn


class Toolbox:
    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self._handlers: dict[str, tuple[frozenset[str], Callable[[Call], Awaitable[Outcome]]]] = {
            "search": (frozenset(("query", "limit", "path_glob", "mode", "where")), self._search),
            "get_index_stats": (frozenset(), self._stats),
            "refresh_index": (frozenset(("filepath",)), self._refresh),
            "read_file": (frozenset(("path", "start_line", "end_line", "page")), self._read_file),
            "find_files": (frozenset(("glob", "limit", "where")), self._find_files),
            "grep": (GREP_ARGUMENTS, self._grep),
        }
        for name in notes.NAMES:
            self._handlers[name] = (notes.ARGUMENTS[name], self._note(name))

    @staticmethod
    def definitions(*, writable: bool) -> list[types.Tool]:
        """The tools to list: with the note tools when some root is writable."""
        return [*schemas.TOOLS, *notes.TOOLS] if writable else schemas.TOOLS

    async def writable(self) -> bool:
        """Whether the daemon has a writable root now. When it cannot be asked (not
        running, not answering), no: the list is then what it is without a daemon, the
        tools that read; the note tools appear in the next list once it answers."""
        try:
            return "notes" in await self.backend.capabilities()
        except Exception as exc:
            log.debug("could not ask kbindexd for its capabilities: %s", exc)
            return False

    async def call(
        self, name: str, raw: dict[str, Any] | None, progress: ProgressFn
    ) -> types.CallToolResult:
        entry = self._handlers.get(name)
        if entry is None:
            known = ", ".join(self._handlers)
            return _error(f"Unknown tool {name!r}; this server has: {known}.")
        known_args, handler = entry
        subject: str | None = None
        try:
            args = Arguments(raw, known_args)
            subject = _subject(raw)
            structured, text = await handler(Call(args, progress))
        except Exception as exc:
            # Everything, including bugs, ends as a tool error: a crashed front end takes
            # the whole MCP session down with it, an error result costs one turn.
            if not isinstance(exc, ArgumentError):
                log.info("tool %s failed: %s", name, exc)
            return _error(describe(exc, subject=subject, changing=name in notes.NAMES))
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=text)],
            structured_content=structured,
            is_error=False,
        )

    # ------------------------------------------------------------ handlers

    async def _search(self, call: Call) -> Outcome:
        args = call.args
        query = args.string("query", required=True, max_length=MAX_QUERY_CHARS)
        assert query is not None
        limit = args.integer(
            "limit", default=10, minimum=MIN_LIMIT, maximum=MAX_LIMIT, clamp_high=True
        )
        assert limit is not None
        path_glob = args.string("path_glob")
        mode = args.string("mode") or "auto"
        if mode not in schemas.SEARCH_MODES:
            raise ArgumentError(
                f"The argument 'mode' must be one of {', '.join(schemas.SEARCH_MODES)}."
            )
        filters = where.filters(args.string("where"), ranked=True)
        reply = await self.backend.search(query, limit, path_glob, mode, filters)
        return results.search(reply, query, [*args.notes, *reply.notes])

    async def _stats(self, call: Call) -> Outcome:
        reply = await self.backend.status()
        structured, text = results.status(reply)
        if call.args.notes:
            structured["notes"] = list(call.args.notes)
            text += "\n" + "\n".join(f"Note: {n}" for n in call.args.notes)
        return structured, text

    async def _refresh(self, call: Call) -> Outcome:
        filepath = call.args.string("filepath")
        paths = [filepath] if filepath else []
        scope = filepath or "all indexed folders"
        tracker = _ProgressTracker(call.progress)
        started = time.monotonic()
        reply = await self.backend.refresh(paths, tracker.update)
        structured, text = results.refresh(reply, scope, time.monotonic() - started)
        return structured, text

    async def _read_file(self, call: Call) -> Outcome:
        args = call.args
        path = args.string("path", required=True)
        assert path is not None
        start = args.integer("start_line", default=None, minimum=1, clamp_low=True)
        end = args.integer("end_line", default=None, minimum=1)
        if start is not None and end is not None and end < start:
            raise ArgumentError(
                f"end_line ({end}) is before start_line ({start}); "
                "send end_line >= start_line, or omit it to read to the end."
            )
        page = args.integer("page", default=None, minimum=1)
        if page is not None and (start is not None or end is not None):
            raise ArgumentError("give page or start_line/end_line, not both.")
        reply = await self.backend.read_file(path, start, end, page)
        # A file's links come with its first lines only: reading on does not repeat them.
        found = await links.trailer(self.backend, reply.path) if reply.start_line == 1 else []
        return results.read_file(reply, [*args.notes, *found])

    async def _find_files(self, call: Call) -> Outcome:
        args = call.args
        glob = args.string("glob") or "*"
        limit = args.integer(
            "limit", default=FIND_LIMIT, minimum=1, maximum=MAX_FIND_LIMIT, clamp_high=True
        )
        assert limit is not None
        link = where.linked(args.string("where"))
        if link is not None:
            if glob != "*":
                raise ArgumentError(
                    "A links: or linked-from: term of 'where' lists every such file: leave"
                    " glob out."
                )
            return await links.listing(self.backend, *link, limit, MAX_FIND_LIMIT)
        filters = where.filters(args.string("where"))
        # With a modified span, what changed lately: the newest first.
        newest = bool(filters.get("modified"))
        reply = await self.backend.find_files(glob, limit, filters, newest)
        return results.find_files(reply, glob, limit, MAX_FIND_LIMIT, [*args.notes, *reply.notes])

    async def _grep(self, call: Call) -> Outcome:
        args = call.args
        pattern = args.string("pattern", required=True, max_length=MAX_PATTERN_CHARS, strip=False)
        assert pattern is not None
        context = args.integer(
            "context", default=0, minimum=0, maximum=MAX_CONTEXT, clamp_high=True
        )
        limit = args.integer(
            "limit", default=GREP_LIMIT, minimum=1, maximum=MAX_GREP_LIMIT, clamp_high=True
        )
        assert context is not None
        assert limit is not None
        grep = Grep(
            pattern=pattern,
            fixed=args.boolean("fixed_strings", default=False),
            ignore_case=not args.boolean("case_sensitive", default=True),
            word=args.boolean("word", default=False),
            path=args.string("path_glob"),
            before=context,
            after=context,
            limit=limit,
            **where.filters(args.string("where")),
        )
        reply = await self.backend.grep(grep)
        # The lines carry absolute paths; the text shows them relative to their root,
        # which only the status knows.
        roots = [r.path for r in (await self.backend.status()).roots] if reply.lines else []
        return matches.grep(
            reply,
            pattern,
            roots,
            context=context > 0,
            limit=limit,
            max_limit=MAX_GREP_LIMIT,
            notes=[*args.notes, *reply.notes],
        )

    def _note(self, name: str) -> Callable[[Call], Awaitable[Outcome]]:
        async def run(call: Call) -> Outcome:
            request = notes.request(name, call.args)
            reply = await self.backend.note(request)
            return notes.result(request, reply, call.args.notes)

        return run


class _ProgressTracker:
    """Maps the daemon's per-phase Progress (done/total restart at each phase) onto MCP
    progress, whose value must strictly increase over the whole request."""

    def __init__(self, send: ProgressFn) -> None:
        self._send = send
        self._phase: str | None = None
        self._base = 0
        self._last_done = 0
        self._sent = -1.0

    async def update(self, progress: Progress) -> None:
        if progress.phase != self._phase:
            if self._phase is not None:
                self._base += self._last_done
            self._phase = progress.phase
        self._last_done = progress.done
        value = float(self._base + progress.done)
        if value <= self._sent:
            return
        self._sent = value
        total = float(self._base + progress.total) if progress.total else None
        message = f"{progress.phase}: {progress.done}/{progress.total or '?'}"
        try:
            await self._send(value, total, message)
        except Exception:
            # A client that went away must not turn a finished refresh into an error.
            log.debug("could not send a progress notification", exc_info=True)


def _subject(raw: dict[str, Any] | None) -> str | None:
    if not raw:
        return None
    for key in ("path", "filepath", "query", "glob", "path_glob", "pattern", "src"):
        value = raw.get(key)
        if isinstance(value, str) and value:
            return value
    return None


def _error(message: str) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=message)], is_error=True
    )
