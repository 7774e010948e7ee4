"""Issue 36: kbindex-mcp --http under another local user's flood: RSS and log lines.

A daemon on a one-file root and ``kbindex-mcp --http`` (``--mcp`` picks the build); a
first client initializes, then a forked process (another uid with ``--as-uid``, needs
root) sends ``--sessions`` initialize requests one after the other, each on its own
connection, with the token only if ``--with-token``; then holds ``--idle`` connections
that send nothing. Reported: the front end's RSS before, after the requests and with the
idle connections held, its peak (VmHWM), its open descriptors, the HTTP statuses seen,
the lines it wrote on stderr, and whether a client with the token is then served.

    .venv/bin/python bench/http_flood.py --as-uid 65534 [--mcp OTHER/.venv/bin/kbindex-mcp]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
from common import environment, rss_mb, start_daemon, stop_daemon, wait_serving

MCP = Path(sys.executable).with_name("kbindex-mcp")
INITIALIZE = json.dumps(
    {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "flood", "version": "0"},
        },
    }
).encode()


def post(port: int, token: str | None) -> int:
    head = [
        "POST /mcp HTTP/1.1",
        f"Host: 127.0.0.1:{port}",
        "Content-Type: application/json",
        "Accept: application/json, text/event-stream",
        f"Content-Length: {len(INITIALIZE)}",
    ]
    if token:
        head.append(f"Authorization: Bearer {token}")
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(30)
        sock.connect(("127.0.0.1", port))
        sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode() + INITIALIZE)
        data = b""
        while b"\r\n" not in data:
            chunk = sock.recv(4096)
            if not chunk:
                break
            data += chunk
    return int(data.split()[1]) if data else 0


def flood(port: int, token: str | None, sessions: int, idle: int, uid: int | None) -> dict:
    """In a child (as ``uid``): the requests, then ``idle`` silent connections held
    until the parent has measured; the statuses come back through a pipe."""
    report_r, report_w = os.pipe()
    go_r, go_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (idle + 256, idle + 256))
            if uid is not None:
                os.setgroups([])
                os.setresgid(uid, uid, uid)
                os.setresuid(uid, uid, uid)
            statuses: dict[str, int] = {}
            started = time.monotonic()
            for _ in range(sessions):
                try:
                    status = str(post(port, token))
                except OSError as exc:
                    status = type(exc).__name__
                statuses[status] = statuses.get(status, 0) + 1
            held = []
            for _ in range(idle):
                sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                sock.setblocking(False)
                sock.connect_ex(("127.0.0.1", port))
                held.append(sock)
            report = {"statuses": statuses, "seconds": round(time.monotonic() - started, 1)}
            os.write(report_w, json.dumps(report).encode() + b"\n")
            os.read(go_r, 1)
        finally:
            os._exit(0)
    os.close(report_w)
    with os.fdopen(report_r) as src:
        line = src.readline()

    def release() -> None:
        os.write(go_w, b"x")
        os.waitpid(pid, 0)

    return {"report": json.loads(line), "release": release}


async def served(url: str, token: str | None) -> str:
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        with anyio.fail_after(60):
            async with (
                httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=300)) as http,
                Client(streamable_http_client(url, http_client=http)) as client,
            ):
                result = await client.call_tool("search", {"query": "zebrafish"})
                return "served" if not result.is_error else "tool error"
    except Exception as exc:  # what a host would show
        return f"failed: {type(exc).__name__}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mcp", type=Path, default=MCP)
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--idle", type=int, default=3_000)
    parser.add_argument("--as-uid", type=int, default=None)
    parser.add_argument("--with-token", action="store_true")
    parser.add_argument("--nofile", type=int, default=0, help="the front end's open-file limit")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="kbflood-", dir="/tmp"))
    (work / "root").mkdir()
    (work / "root" / "fish.md").write_text("# Fish\n\nzebrafish live here\n")
    daemon = start_daemon(work / "root", work)
    try:
        anyio.run(wait_serving, daemon)
    except BaseException:
        stop_daemon(daemon)
        raise
    knows_tokens = (
        "--token-file"
        in subprocess.run(
            [str(args.mcp), "--help"], capture_output=True, text=True, check=False
        ).stdout
    )
    command = [str(args.mcp), "--http", "--port", "0", "--socket", str(daemon.sock)]
    if knows_tokens:
        command += ["--token-file", str(work / "token" / "mcp-http.token")]
    if args.nofile:
        command = ["prlimit", f"--nofile={args.nofile}:{args.nofile}", *command]
    log = (work / "front.log").open("w+")
    front = subprocess.Popen(command, stderr=log, env=environment())
    try:
        url = None
        while url is None:
            time.sleep(0.1)
            found = re.search(r"serving MCP on (http://\S+)", Path(log.name).read_text())
            url = found.group(1) if found else None
        port = int(url.rsplit(":", 1)[1].split("/")[0])
        token = (work / "token" / "mcp-http.token").read_text().strip() if knows_tokens else None
        first = anyio.run(served, url, token)
        figures = {"build": str(args.mcp), "first client": first}
        figures["rss MB before"] = rss_mb(front.pid)
        lines_before = len(Path(log.name).read_text().splitlines())
        sent = token if args.with_token else None
        flooding = flood(port, sent, args.sessions, args.idle, args.as_uid)
        figures["flood"] = flooding["report"]
        figures["rss MB after"] = rss_mb(front.pid)
        figures["peak rss MB"] = rss_mb(front.pid, "VmHWM")
        figures["open fds"] = len(os.listdir(f"/proc/{front.pid}/fd"))
        figures["client during idle flood"] = anyio.run(served, url, token)
        flooding["release"]()
        figures["log lines during flood"] = (
            len(Path(log.name).read_text().splitlines()) - lines_before
        )
        figures["log MB"] = round(os.path.getsize(log.name) / 1e6, 2)
        figures["load"] = os.getloadavg()
        print(json.dumps(figures, indent=2))
    finally:
        front.terminate()
        try:
            front.wait(timeout=30)
        except subprocess.TimeoutExpired:
            front.kill()  # the old build waits on its sessions
            front.wait()
        stop_daemon(daemon)


if __name__ == "__main__":
    main()
