"""Helpers for the kbindex-mcp end-to-end tests: spawning the front end, reading results.

The daemon side comes from conftest.py (a real kbindexd on a real socket); the front end
is the installed ``kbindex-mcp`` console script, driven by the MCP SDK's own client.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
from anyio.abc import Process
from anyio.streams.text import TextReceiveStream
from conftest import LAUNCHER, write
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

FRONT_END = str(Path(sys.executable).parent / "kbindex-mcp")
CLIENT_TIMEOUT = 20.0


def front_end_env() -> dict[str, str]:
    """The test environment minus any KBINDEX_* variable that could point elsewhere."""
    return {k: v for k, v in os.environ.items() if not k.startswith("KBINDEX_")}


def stdio_params(socket: Path | str, *extra: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=FRONT_END, args=["--socket", str(socket), *extra], env=front_end_env()
    )


@asynccontextmanager
async def mcp_stdio(
    socket: Path | str, *extra: str, mode: str = "auto", **options: Any
) -> AsyncIterator[Client]:
    """An MCP client session with a freshly spawned ``kbindex-mcp`` over stdio.

    Every request is bounded by read_timeout_seconds; closing the session closes the
    front end's stdin, and the SDK kills it if it does not exit by itself. ``mode``
    "legacy" speaks the initialize handshake most clients still use; "auto" negotiates
    the newest protocol revision. ``options`` go to the Client (a message_handler).
    """
    params = stdio_params(socket, *extra)
    async with Client(params, read_timeout_seconds=CLIENT_TIMEOUT, mode=mode, **options) as client:
        yield client


def text(result: types.CallToolResult) -> str:
    """The concatenated text content of a tool result."""
    return "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))


def structured(result: types.CallToolResult) -> dict[str, Any]:
    assert not result.is_error, text(result)
    data = result.structured_content
    assert isinstance(data, dict), result
    return data


def response_size(result: types.CallToolResult) -> int:
    """Bytes of the result as it travels: text content plus structured content."""
    return len(text(result).encode()) + len(json.dumps(result.structured_content).encode())


def corpus(root: Path) -> None:
    """A small knowledge base with a known answer for each tool."""
    write(
        root / "docs" / "scheduler.md",
        "# Scheduler\n\nIntro line.\n\nThe scheduler picks the next task from the queue.\n",
    )
    write(root / "docs" / "queue.md", "# Queue\n\nA queue holds tasks in order.\n")
    write(root / "notes" / "todo.txt", "buy milk\nrefactor the dispatcher\n")
    write(root / "a b" / "späce.md", "# Unicode\n\nzebrafish appear here\n")


def serving_url(stderr_text: str) -> str | None:
    match = re.search(r"serving MCP on (http://\S+)", stderr_text)
    return match.group(1) if match else None


@dataclass
class HttpFrontEnd:
    url: str
    proc: Process
    token_file: Path
    stderr: list[str]
    """What the front end wrote on stderr up to the serving line (more with ``read_log``)."""

    @property
    def token(self) -> str:
        return self.token_file.read_text().strip()

    @property
    def port(self) -> int:
        return int(self.url.split(":")[2].split("/")[0])

    async def read_log(self) -> str:
        """All of stderr, once the process has exited."""
        assert self.proc.stderr is not None
        async for chunk in TextReceiveStream(self.proc.stderr):
            self.stderr.append(chunk)
        return "".join(self.stderr)


@asynccontextmanager
async def http_front_end(
    socket: Path | str, *extra: str, nofile: int = 0, token_file: Path | None = None
) -> AsyncIterator[HttpFrontEnd]:
    """A ``kbindex-mcp --http --port 0`` process, its URL (from stderr) and its token file
    (``token_file``, else one in a private directory removed afterwards); with
    ``nofile``, that open-file limit."""
    tokens = Path(tempfile.mkdtemp(prefix="kbtok-", dir="/tmp"))
    token_file = token_file or tokens / "mcp-http.token"
    command = [FRONT_END, "--socket", str(socket), "--http", "--port", "0"]
    command += ["--token-file", str(token_file), *extra]
    if nofile:
        command = [sys.executable, "-c", LAUNCHER, str(nofile), *command]
    try:
        async with await anyio.open_process(command, env=front_end_env()) as proc:
            assert proc.stderr is not None
            seen = ""
            try:
                with anyio.fail_after(CLIENT_TIMEOUT):
                    async for chunk in TextReceiveStream(proc.stderr):
                        seen += chunk
                        url = serving_url(seen)
                        if url:
                            break
                    else:
                        raise AssertionError(f"kbindex-mcp --http exited:\n{seen}")
                yield HttpFrontEnd(url, proc, token_file, [seen])
            finally:
                if proc.returncode is None:
                    proc.terminate()
                    with anyio.fail_after(CLIENT_TIMEOUT, shield=True):
                        await proc.wait()
    finally:
        shutil.rmtree(tokens, ignore_errors=True)


@asynccontextmanager
async def mcp_http(url: str, token: str | None, **options: Any) -> AsyncIterator[Client]:
    """An MCP client session over Streamable HTTP that sends ``token`` on every request
    (as hosts do with a configured ``Authorization`` header)."""
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    # The SDK's own timeouts for its HTTP client: a response stream may stay open.
    timeout = httpx2.Timeout(30, read=300)
    async with (
        httpx2.AsyncClient(headers=headers, timeout=timeout) as http,
        Client(
            streamable_http_client(url, http_client=http),
            read_timeout_seconds=CLIENT_TIMEOUT,
            **options,
        ) as client,
    ):
        yield client
