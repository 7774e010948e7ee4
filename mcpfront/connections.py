"""HTTP connections for a server every local user can reach: each request must arrive in
time, and connections still waiting for their first request are bounded.

uvicorn bounds nothing before a request has arrived: its keep-alive timer runs only
between requests and any byte received cancels it, so a peer that connects and sends
nothing, or a byte now and then, holds a file descriptor for as long as it likes (enough
of them took every descriptor the front end had, and no one else could connect). The
protocol here is uvicorn's h11 protocol with two additions:

* A deadline per request: once a connection is made, or a response is finished, the next
  request (head and body) must have arrived within ``request_seconds``, however it
  trickles in; otherwise the connection is closed. Responses are not limited: an event
  stream stays open as long as its client keeps it.
* A bound on connections that have not sent a request head yet: when a new one would
  exceed it, the oldest of them is closed. A real client sends its request as soon as it
  is connected, so it is among the newest and has sent its head long before it could
  become the oldest; the idle connections of a flood are the ones closed. A connection
  whose request has arrived is never closed for this (a request without the token is
  answered at once and its connection closed, see ``httpserver.TokenGate``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any, Final

import h11
from uvicorn.config import Config
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.server import ServerState

log = logging.getLogger(__name__)

_RECEIVED: Final = frozenset({h11.DONE, h11.MUST_CLOSE, h11.CLOSED, h11.ERROR})
"""Client states in which the request has been read whole (or never will be)."""


class Waiting:
    """The connections of one server that have not sent a request head yet, oldest
    first, at most ``most`` of them."""

    def __init__(self, most: int) -> None:
        self.most = most
        self._connections: dict[BoundedH11Protocol, None] = {}
        self.closed = 0
        """How many were closed to make room (for the tests and the log)."""

    def add(self, connection: BoundedH11Protocol) -> None:
        self._connections[connection] = None
        while len(self._connections) > self.most:
            oldest = next(iter(self._connections))
            del self._connections[oldest]
            self.closed += 1
            log.info("closed the oldest connection that has sent no request, to make room")
            oldest.close()

    def discard(self, connection: BoundedH11Protocol) -> None:
        self._connections.pop(connection, None)

    def __len__(self) -> int:
        return len(self._connections)


class BoundedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a request deadline and a place in ``Waiting``.

    ``protocol_class`` makes a subclass bound to one server's limits: uvicorn creates
    protocols itself, with its own arguments only."""

    waiting: Waiting
    request_seconds: float

    def __init__(
        self,
        config: Config,
        server_state: ServerState,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        super().__init__(config, server_state, app_state, _loop)
        self._deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()
        self.waiting.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        self.waiting.discard(self)
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.cycle is not None:  # a request head has arrived on this connection
            self.waiting.discard(self)
        if self.conn.their_state in _RECEIVED:
            self._disarm()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._arm()
            if self.conn.their_state in _RECEIVED:  # a pipelined request, read already
                self._disarm()

    def close(self) -> None:
        if not self.transport.is_closing():
            with contextlib.suppress(h11.LocalProtocolError):
                self.conn.send(h11.ConnectionClosed())
            self.transport.close()

    def _arm(self) -> None:
        self._disarm()
        self._deadline = self.loop.call_later(self.request_seconds, self._too_slow)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _too_slow(self) -> None:
        self._deadline = None
        if self.conn.their_state not in _RECEIVED:
            log.info(
                "closed a connection whose request did not arrive within %g s",
                self.request_seconds,
            )
            self.close()


def protocol_class(waiting: Waiting, request_seconds: float) -> type[BoundedH11Protocol]:
    """A BoundedH11Protocol class for one server: its ``Waiting`` and deadline."""
    return type(
        "ServerH11Protocol",
        (BoundedH11Protocol,),
        {"waiting": waiting, "request_seconds": request_seconds},
    )
