"""``kbindex-mcp --http``: one front end serving many MCP clients over Streamable HTTP.

The port is reachable by every local user (loopback is everyone's), so the door checks,
in this order: the connection (``connections.py``: a deadline for each request, a bound
on connections that have sent nothing), the token (``TokenGate``: every request carries
the bearer token of ``credential.py`` or is answered 401 and closed, before the MCP SDK
sees it), then the SDK's own checks: Host and Origin against DNS rebinding, the body
size, at most ``MAX_SESSIONS`` sessions, each closed after ``SESSION_IDLE_SECONDS``
without a request. Repeated log lines are counted, not repeated (``repeats.py``).
"""

from __future__ import annotations

import argparse
import json
import logging
import resource
import socket
import sys
from collections.abc import Sequence
from typing import Final

import anyio
from kbindex.mcpfront import credential, repeats
from kbindex.mcpfront.backend import Backend
from mcp.server.transport_security import TransportSecuritySettings
from starlette.types import ASGIApp, Receive, Scope, Send

log = logging.getLogger(__name__)

DEFAULT_PORT: Final = 8751
HTTP_PATH: Final = "/mcp"
LOOPBACK: Final = frozenset({"127.0.0.1", "localhost", "::1"})

REQUEST_SECONDS: Final = 10.0
"""Time a request (head and body) has to arrive, from the connection or the last response."""
KEEP_ALIVE_SECONDS: Final = 5
"""uvicorn's own limit on an idle connection between two requests."""
MAX_SESSIONS: Final = 100
SESSION_IDLE_SECONDS: Final = 5 * 60.0
"""An MCP session with no request in flight (and no open event stream) this long is
closed; a client that is still there opens a new one. The SDK's default is 30 minutes."""
WANTED_DESCRIPTORS: Final = 4096
ACCEPT_BATCH: Final = 128
"""Connections accepted in one pass of the event loop (and the listen backlog): a real
client's request head is read before more than two batches arrive after it, and the
bound on waiting connections is larger than that."""
REPEAT_WINDOW: Final = 60.0


def _host_header(host: str) -> str:
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def transport_security(
    host: str, port: int, extra_hosts: Sequence[str] = (), extra_origins: Sequence[str] = ()
) -> TransportSecuritySettings:
    """Host/Origin allow-lists: a DNS-rebinding page sends its own hostname as Host,
    so only our own address (and loopback names when bound to loopback) may appear."""
    names = {_host_header(host)}
    if host in LOOPBACK:
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
    sock.listen(ACCEPT_BATCH)
    sock.set_inheritable(True)
    return sock


def descriptor_limit(wanted: int = WANTED_DESCRIPTORS) -> int:
    """Raise the soft open-file limit towards ``wanted`` (never above the hard limit,
    never lower); the limit in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            pass
    return wanted if soft == resource.RLIM_INFINITY else soft


class TokenGate:
    """ASGI middleware: a request without the token is answered 401 (saying where the
    token is) and its connection closed; nothing behind the gate runs for it."""

    def __init__(self, app: ASGIApp, token: credential.Credential) -> None:
        self.app = app
        self.credential = token
        message = (
            f"kbindex-mcp needs its token on every request: 'Authorization: Bearer <token>'. "
            f"The token is in {token.path} (readable only by the user who runs the server); "
            f"print it with: {token.print_command()}"
        )
        error = {"jsonrpc": "2.0", "id": None, "error": {"code": -32001, "message": message}}
        self._body = json.dumps(error).encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)  # lifespan
            return
        authorization = next((v for k, v in scope["headers"] if k == b"authorization"), None)
        if self.credential.accepts(authorization):
            await self.app(scope, receive, send)
            return
        client = scope.get("client")
        peer = f"{client[0]}:{client[1]}" if client else "?"
        log.warning("refused an HTTP request without the right token (from %s)", peer)
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(self._body)).encode()),
            (b"www-authenticate", b'Bearer realm="kbindex"'),
            (b"connection", b"close"),
        ]
        await send({"type": "http.response.start", "status": 401, "headers": headers})
        await send({"type": "http.response.body", "body": self._body})


async def flush_repeats(filter_: repeats.RepeatFilter, every: float) -> None:
    while True:
        await anyio.sleep(every)
        filter_.flush()


async def serve_http(args: argparse.Namespace) -> None:
    # Imported here: a stdio front end (most of them) never loads the HTTP server.
    import uvicorn
    from kbindex.mcpfront.connections import Waiting, protocol_class
    from kbindex.mcpfront.server import build

    try:
        token = credential.load(args.token_file)
    except (credential.UnsafeTokenFile, OSError) as exc:
        sys.stderr.write(f"kbindex-mcp: cannot use the token file: {exc}\n")
        raise SystemExit(2) from None
    if args.host not in LOOPBACK:
        log.warning(
            "serving on %s over plain HTTP: the token and every answer cross the network "
            "unencrypted; anyone who can read that traffic can use the server",
            args.host,
        )
    try:
        sock = bind(args.host, args.port)
    except OSError as exc:
        sys.stderr.write(f"kbindex-mcp: cannot listen on {args.host}:{args.port}: {exc}\n")
        raise SystemExit(2) from None
    port = sock.getsockname()[1]
    security = transport_security(args.host, port, args.allow_host, args.allow_origin)
    descriptors = descriptor_limit()
    waiting = Waiting(most=max(16, min(512, descriptors // 4)))
    filter_ = repeats.install(REPEAT_WINDOW)
    async with Backend.open(args.socket) as backend, anyio.create_task_group() as tg:
        server = build(backend)
        starlette_app = server.streamable_http_app(
            streamable_http_path=HTTP_PATH,
            transport_security=security,
            host=args.host,
            max_sessions=MAX_SESSIONS,
            session_idle_timeout=SESSION_IDLE_SECONDS,
        )
        config = uvicorn.Config(
            TokenGate(starlette_app, token),
            http=protocol_class(waiting, REQUEST_SECONDS),
            ws="none",
            # No proxy stands in front: X-Forwarded-For from a local peer is a lie.
            proxy_headers=False,
            timeout_keep_alive=KEEP_ALIVE_SECONDS,
            limit_concurrency=max(64, min(1024, descriptors // 2)),
            backlog=ACCEPT_BATCH,
            log_config=None,  # uvicorn's default config logs access lines to stdout
            access_log=False,
            lifespan="on",
            log_level=args.log_level.lower(),
        )
        tg.start_soon(flush_repeats, filter_, REPEAT_WINDOW)
        # Said unconditionally on stderr: it is the one line a user needs (and with
        # --port 0 the only way to learn the port).
        sys.stderr.write(
            f"kbindex-mcp: serving MCP on http://{_host_header(args.host)}:{port}{HTTP_PATH} "
            f"(clients send the token in {token.path}: {token.print_command()})\n"
        )
        sys.stderr.flush()

        class Server(uvicorn.Server):
            async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
                try:
                    await super().shutdown(sockets)
                finally:
                    # Here, not after serve(): after a signal, serve() ends by raising
                    # it again, and the process ends there.
                    filter_.flush()

        await Server(config).serve(sockets=[sock])
        tg.cancel_scope.cancel()
