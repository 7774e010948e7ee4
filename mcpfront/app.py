"""``kbindex-mcp``: the MCP front end of kbindex.

Stateless: it never opens the index or watches files; every tool call becomes a request
to kbindexd over its Unix socket. Two ways to run:

* stdio (default): one process per MCP client, launched by the client. stdout carries
  nothing but protocol, logs go to stderr. It exits when stdin reaches EOF and when its
  parent process dies, so a crashed client leaves no orphan behind.
* ``--http``: one long-running process serving many MCP clients over Streamable HTTP,
  loopback only by default, with Host/Origin validation against DNS rebinding.
"""

from __future__ import annotations

import argparse
import logging
import os
import socket
import sys
from collections.abc import Sequence
from typing import Final

import anyio
from kbindex.mcpfront import LAUNCHED_BY
from kbindex.mcpfront.backend import Backend
from kbindex.proto.address import SOCKET_ENV
from mcp.server.transport_security import TransportSecuritySettings

log = logging.getLogger("kbindex.mcpfront")

DEFAULT_PORT: Final = 8751
HTTP_PATH: Final = "/mcp"
ORPHAN_CHECK_SECONDS: Final = 0.5
_LOOPBACK: Final = frozenset({"127.0.0.1", "localhost", "::1"})


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


# ------------------------------------------------------------------ http


def _host_header(host: str) -> str:
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def transport_security(
    host: str, port: int, extra_hosts: Sequence[str] = (), extra_origins: Sequence[str] = ()
) -> TransportSecuritySettings:
    """Host/Origin allow-lists: a DNS-rebinding page sends its own hostname as Host,
    so only our own address (and loopback names when bound to loopback) may appear."""
    names = {_host_header(host)}
    if host in _LOOPBACK:
        names |= {"127.0.0.1", "localhost", "[::1]"}
    hosts = sorted(f"{name}:{port}" for name in names) + list(extra_hosts)
    # Any port on our own names: browser-based clients such as the MCP Inspector run
    # on their own port (Origin http://localhost:6274) and talk to us directly.
    origins = sorted(f"http://{name}:*" for name in names) + list(extra_origins)
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins
    )


def bind(host: str, port: int) -> socket.socket:
    family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
    except OSError:
        sock.close()
        raise
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


async def serve_http(args: argparse.Namespace) -> None:
    import uvicorn
    from kbindex.mcpfront.server import build

    if args.host not in _LOOPBACK:
        log.warning(
            "serving on %s: every machine that can reach it can read the indexed files; "
            "there is no authentication",
            args.host,
        )
    try:
        sock = bind(args.host, args.port)
    except OSError as exc:
        sys.stderr.write(f"kbindex-mcp: cannot listen on {args.host}:{args.port}: {exc}\n")
        raise SystemExit(2) from None
    port = sock.getsockname()[1]
    security = transport_security(args.host, port, args.allow_host, args.allow_origin)
    async with Backend.open(args.socket) as backend:
        server = build(backend)
        starlette_app = server.streamable_http_app(
            streamable_http_path=HTTP_PATH, transport_security=security, host=args.host
        )
        config = uvicorn.Config(
            starlette_app,
            log_config=None,  # uvicorn's default config logs access lines to stdout
            access_log=False,
            lifespan="on",
            log_level=args.log_level.lower(),
        )
        # Said unconditionally on stderr: it is the one line a user needs (and with
        # --port 0 the only way to learn the port).
        sys.stderr.write(
            f"kbindex-mcp: serving MCP on http://{_host_header(args.host)}:{port}{HTTP_PATH}\n"
        )
        sys.stderr.flush()
        await uvicorn.Server(config).serve(sockets=[sock])


if __name__ == "__main__":
    sys.exit(main())
