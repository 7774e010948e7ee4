"""``kbindex-mcp``: the MCP front end of kbindex.

Stateless: it never opens the index or watches files; every tool call becomes a request
to kbindexd over its Unix socket. Two ways to run:

* stdio (default): one process per MCP client, launched by the client. stdout carries
  nothing but protocol, logs go to stderr. It exits when stdin reaches EOF and when its
  parent process dies, so a crashed client leaves no orphan behind.
* ``--http``: one long-running process serving many MCP clients over Streamable HTTP
  (httpserver.py): loopback only by default, every request carrying the user's token.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence
from typing import Final

import anyio
from kbindex.mcpfront import LAUNCHED_BY, credential
from kbindex.mcpfront.backend import Backend
from kbindex.mcpfront.httpserver import DEFAULT_PORT, serve_http
from kbindex.proto.address import SOCKET_ENV

log = logging.getLogger("kbindex.mcpfront")

ORPHAN_CHECK_SECONDS: Final = 0.5


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="kbindex-mcp",
        description=(
            "MCP server for the kbindex knowledge base: speaks MCP to the client and asks "
            "the kbindexd daemon for answers. Serves stdio by default."
        ),
    )
    parser.add_argument(
        "--socket",
        metavar="PATH",
        help=f"kbindexd socket (default: ${SOCKET_ENV}, else the per-user runtime directory)",
    )
    parser.add_argument(
        "--http", action="store_true", help="serve Streamable HTTP instead of stdio"
    )
    parser.add_argument("--host", default="127.0.0.1", help="HTTP address (default: 127.0.0.1)")
    parser.add_argument(
        "--port",
        type=int,
        default=DEFAULT_PORT,
        help=f"HTTP port (default: {DEFAULT_PORT}; 0 picks a free one)",
    )
    parser.add_argument(
        "--allow-origin",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="extra allowed browser Origin for --http, e.g. https://app.example (repeatable)",
    )
    parser.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="HOST[:PORT]",
        help="extra allowed Host header for --http (repeatable)",
    )
    parser.add_argument(
        "--token-file",
        metavar="PATH",
        help="the --http server's bearer token (default: mcp-http.token in the per-user "
        "runtime directory, made on first use)",
    )
    token = parser.add_mutually_exclusive_group()
    token.add_argument(
        "--print-token",
        action="store_true",
        help="print the --http server's token (made if there is none) and exit",
    )
    token.add_argument(
        "--new-token",
        action="store_true",
        help="replace the token with a new one, print it and exit (restart the server)",
    )
    parser.add_argument(
        "--log-level",
        default="WARNING",
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        type=str.upper,
        help="stderr log level (default: WARNING)",
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(
        stream=sys.stderr,
        level=args.log_level,
        format="%(asctime)s kbindex-mcp[%(process)d] %(levelname)s %(name)s: %(message)s",
    )
    if args.print_token or args.new_token:
        return print_token(args.token_file, new=args.new_token)
    try:
        if args.http:
            anyio.run(serve_http, args)
        else:
            anyio.run(serve_stdio, args.socket)
    except KeyboardInterrupt:
        return 130
    except BaseExceptionGroup as group:
        # The client closed our stdout while we were answering: nothing left to tell it.
        if group.subgroup(BrokenPipeError) is None or group.split(BrokenPipeError)[1]:
            raise
        return 0
    except BrokenPipeError:
        return 0
    return 0


def print_token(path: str | None, *, new: bool) -> int:
    """Write the token to stdout (for ``$(kbindex-mcp --print-token)``): no MCP is
    spoken by this command, so stdout is free for it."""
    try:
        token = credential.renew(path) if new else credential.load(path)
    except (credential.UnsafeTokenFile, OSError) as exc:
        sys.stderr.write(f"kbindex-mcp: cannot use the token file: {exc}\n")
        return 2
    sys.stdout.write(f"{token.reveal()}\n")
    return 0


# ------------------------------------------------------------------ stdio


async def serve_stdio(socket_path: str | None) -> None:
    from kbindex.mcpfront.server import build
    from mcp.server.stdio import stdio_server

    async with Backend.open(socket_path) as backend, anyio.create_task_group() as tg:
        server = build(backend)
        tg.start_soon(exit_when_orphaned, LAUNCHED_BY)
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())
        log.debug("stdin closed; exiting")
        tg.cancel_scope.cancel()


async def exit_when_orphaned(parent: int, interval: float = ORPHAN_CHECK_SECONDS) -> None:
    """Exit at once when the process that launched us is gone.

    Polling getppid() rather than PR_SET_PDEATHSIG: the latter fires when the parent
    *thread* exits, which kills us under clients that spawn servers from worker threads.
    os._exit rather than cancellation: the SDK reads stdin in a worker thread that no
    cancellation can interrupt, and if the dead parent's stdin pipe is still held open
    elsewhere that read never returns. Nothing is lost: this process holds no state.
    """
    while True:
        await anyio.sleep(interval)
        if os.getppid() != parent:
            log.warning("parent process %d is gone; exiting", parent)
            logging.shutdown()
            os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
