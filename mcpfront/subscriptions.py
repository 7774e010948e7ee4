"""Resource subscriptions: telling MCP clients that a note they follow has changed.

Two protocol eras, one source. A client of the handshake era (2025-11-25 and before)
sends ``resources/subscribe`` and receives ``notifications/resources/updated`` on its
connection; a client of 2026-07-28 opens a ``subscriptions/listen`` stream naming the
URIs, and the SDK's ListenHandler sends the same notification on that stream. Both are
fed by one long poll of the daemon's NoteChanges (the notes changed through it since a
cursor), which runs only while some subscription is open. When the daemon says it
forgot some changes (it restarted, or more happened than it remembers), every
subscribed URI is told: a notification means "read it again", so one too many is
harmless and one too few is not.

Changes made through the daemon are the ones reported, by any client (another agent,
kbctl note); a file saved by an editor behind the daemon's back is not.
"""

from __future__ import annotations

import logging
from typing import Any, Final

import anyio
import mcp_types as types
from kbindex.mcpfront.backend import Backend
from kbindex.mcpfront.resources import path_of
from kbindex.proto.messages import MAX_WAIT_SECONDS, NoteChangesReply
from mcp.server import ServerRequestContext
from mcp.server.connection import Connection
from mcp.server.session import ServerSession
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ResourceUpdated
from mcp.shared.exceptions import MCPError

log = logging.getLogger(__name__)

RETRY_SECONDS: Final = 1.0
"""Between polls while the daemon does not answer (stopped, restarting)."""

Followed = dict[str, str]
"""Subscribed URIs, each with the absolute path it names."""


def _connection(session: ServerSession) -> Connection:
    # A low-level handler is given a per-request ServerSession; a subscription belongs
    # to the connection behind it, whose exit_stack says when it ends. The SDK's
    # low-level context offers no public way to it (MCPServer's Context does).
    connection: Connection = session._connection
    return connection


def _path(uri: str) -> str | None:
    try:
        return path_of(uri)
    except MCPError:
        return None


class Subscriptions:
    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self.bus = InMemorySubscriptionBus()
        self._listen = ListenHandler(self.bus)
        self._sessions: dict[Connection, tuple[ServerSession, Followed]] = {}
        """Handshake-era connections and the URIs each subscribed to."""
        self._streams: dict[object, Followed] = {}
        """Open listen streams (2026-07-28) and the URIs each named."""
        self._polling = False
        self._starting = anyio.Lock()

    # ------------------------------------------------------------ handshake era

    async def subscribe(
        self, ctx: ServerRequestContext[Any], params: types.SubscribeRequestParams
    ) -> types.EmptyResult:
        uri = str(params.uri)
        path = path_of(uri)  # an MCPError for a URI that is not kbindex's
        connection = _connection(ctx.session)
        entry = self._sessions.get(connection)
        if entry is None:
            entry = self._sessions[connection] = (ctx.session, {})
            connection.exit_stack.callback(self._sessions.pop, connection, None)
        entry[1][uri] = path
        await self._ensure_polling()
        return types.EmptyResult()

    async def unsubscribe(
        self, ctx: ServerRequestContext[Any], params: types.UnsubscribeRequestParams
    ) -> types.EmptyResult:
        entry = self._sessions.get(_connection(ctx.session))
        if entry is not None:
            entry[1].pop(str(params.uri), None)
        return types.EmptyResult()

    # ------------------------------------------------------------ 2026-07-28

    async def listen(
        self, ctx: ServerRequestContext[Any], params: types.SubscriptionsListenRequestParams
    ) -> types.SubscriptionsListenResult:
        """One listen stream: served by the SDK's handler, followed here for as long as
        it is open. URIs that are not kbindex's are acknowledged and never fire."""
        named = params.notifications.resource_subscriptions or []
        followed = {uri: path for uri in named if (path := _path(uri)) is not None}
        token = object()
        if followed:
            self._streams[token] = followed
            # Before the acknowledgment: a change made once the client holds it is seen.
            await self._ensure_polling()
        try:
            return await self._listen(ctx, params)
        finally:
            self._streams.pop(token, None)

    # ------------------------------------------------------------ the long poll

    def _subscribed(self) -> bool:
        return any(uris for _, uris in self._sessions.values()) or any(self._streams.values())

    async def _ensure_polling(self) -> None:
        """Start the poll unless it runs, from the daemon's cursor now: the subscribe
        returns after that, so no change made after it can be missed."""
        async with self._starting:
            if self._polling:
                return
            try:
                cursor = (await self.backend.note_changes(0, 0)).cursor
            except Exception as exc:
                # The poll starts from the daemon's cursor once it answers; until then
                # nothing can change through it.
                log.info("could not ask kbindexd for note changes: %s", exc)
                cursor = 0
            self._polling = True
            self.backend.start_soon(lambda: self._poll(cursor))

    async def _poll(self, cursor: int) -> None:
        try:
            while self._subscribed():
                try:
                    reply = await self.backend.note_changes(cursor, MAX_WAIT_SECONDS)
                except Exception as exc:
                    log.info("waiting for note changes failed: %s", exc)
                    await anyio.sleep(RETRY_SECONDS)
                    continue
                if cursor:
                    await self._tell(reply)
                cursor = reply.cursor
        finally:
            # No await between the last check and here: a subscription that arrives
            # later finds _polling false and starts a new poll.
            self._polling = False

    async def _tell(self, reply: NoteChangesReply) -> None:
        changed = set(reply.paths)

        def due(followed: Followed) -> list[str]:
            return [uri for uri, path in followed.items() if reply.missed or path in changed]

        for session, followed in list(self._sessions.values()):
            for uri in due(followed):
                try:
                    await session.send_resource_updated(uri)
                except Exception as exc:
                    log.debug("could not tell a client that %s changed: %s", uri, exc)
        # Once per URI: the bus hands each event to every stream that named it.
        uris = {uri for followed in list(self._streams.values()) for uri in due(followed)}
        for uri in sorted(uris):
            await self.bus.publish(ResourceUpdated(uri=uri))
