"""Waiting on a live daemon for what its watcher should bring about: always a condition
polled through the protocol under a deadline, never a bare sleep."""

from __future__ import annotations

import time
from collections.abc import Callable

import anyio
from kbindex.proto.client import Client
from kbindex.proto.messages import StatusReply

POLL = 0.02


async def until_paths(
    client: Client, query: str, expected: list[str], *, timeout: float = 10.0
) -> float:
    """Poll ``query`` until its hits' relative paths (sorted) equal ``expected``;
    return the seconds it took."""
    started = time.monotonic()
    got: list[str] = []
    try:
        with anyio.fail_after(timeout):
            while True:
                reply = await client.search(query, limit=100)
                got = sorted(h.relpath for h in reply.hits)
                if got == sorted(expected):
                    return time.monotonic() - started
                await anyio.sleep(POLL)
    except TimeoutError:
        raise AssertionError(f"{query!r}: wanted {sorted(expected)}, still {got}") from None


async def until_status(
    client: Client, predicate: Callable[[StatusReply], bool], *, timeout: float = 10.0
) -> StatusReply:
    status: StatusReply | None = None
    try:
        with anyio.fail_after(timeout):
            while True:
                status = await client.status()
                if predicate(status):
                    return status
                await anyio.sleep(POLL)
    except TimeoutError:
        raise AssertionError(f"status never matched; last: {status}") from None


async def settled(client: Client, *, timeout: float = 10.0) -> StatusReply:
    """Nothing queued, nothing being indexed."""
    return await until_status(client, lambda s: s.pending == 0 and not s.scanning, timeout=timeout)
