"""kbctl: control and query a running kbindexd from a shell.

Every subcommand is one request (or a short exchange) over the daemon's socket.
Imports stay light (no daemon code, no SQLite): a CLI started once per query pays its
import time every time. Exit codes: 0 success, 1 the daemon is not running or
answered with an error, 2 bad usage.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections.abc import Awaitable, Callable

import anyio
from kbindex.ctl import doctor, paths, render, roots, service
from kbindex.proto import report
from kbindex.proto.client import Client, ClientError, DaemonError
from kbindex.proto.messages import Progress, RefreshReply

Command = Callable[[Client, argparse.Namespace], Awaitable[int]]


async def cmd_status(client: Client, args: argparse.Namespace) -> int:
    reply = await client.status()
    if args.json:
        render.emit_json(report.status(reply))
    else:
        print(render.status(reply))
    return 0


async def cmd_search(client: Client, args: argparse.Namespace) -> int:
    query = " ".join(args.query)
    reply = await client.search(query, limit=args.limit, path=args.path, mode=args.mode)
    if args.json:
        render.emit_json(reply)
    else:
        print(render.search(reply, color=sys.stdout.isatty()))
    return 0


async def cmd_reindex(client: Client, args: argparse.Namespace) -> int:
    if not args.wait:
        await client.refresh(args.paths, full=args.full)
        print("reindex queued; follow it with: kbctl status")
        return 0
    bar = render.ProgressBar()
    final: RefreshReply | None = None
    try:
        async for reply in client.refresh_wait(args.paths, full=args.full):
            if isinstance(reply, Progress):
                bar.update(reply)
            else:
                final = reply
    finally:
        bar.close()
    assert final is not None
    print(
        f"done: {final.files_processed:,} files checked, {final.files_changed:,} read, "
        f"{final.files_removed:,} removed, {final.errors:,} errors"
    )
    return 0


async def cmd_files(client: Client, args: argparse.Namespace) -> int:
    reply = await client.find_files(args.glob, limit=args.limit)
    if args.json:
        render.emit_json(reply)
    else:
        print(render.files(reply))
    return 0


async def cmd_read(client: Client, args: argparse.Namespace) -> int:
    reply = await client.read_file(args.path, args.start, args.end)
    if args.json:
        render.emit_json(reply)
        return 0
    print(reply.text)
    if reply.truncated:
        print(f"... (truncated at line {reply.end_line} of {reply.total_lines})", file=sys.stderr)
    return 0


PATHS_HELP = (
    "A PATH naming a file or folder is taken relative to the current directory when it "
    "exists there; otherwise it is passed on as given and the daemon looks for it under "
    "each root (as it does for MCP clients). Roots given to 'roots add|remove' are always "
    "relative to the current directory."
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kbctl",
        description="Control and query the kbindex daemon (kbindexd).",
        epilog=PATHS_HELP,
    )
    parser.add_argument(
        "--socket", metavar="PATH", help="daemon socket (default: $KBINDEX_SOCKET or the usual)"
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("status", help="show the index, its freshness and the roots' health")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(run=cmd_status)

    p = sub.add_parser("search", help="search the index")
    p.add_argument("query", nargs="+", help='words, "phrases", -exclusions, prefix*')
    p.add_argument("--limit", type=int, default=10, help="results to show (1-100)")
    p.add_argument("--path", metavar="GLOB", help="only paths matching a glob or prefix")
    p.add_argument(
        "--mode", default="auto", choices=("auto", "all", "any", "raw"), help="query mode"
    )
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(run=cmd_search)

    p = sub.add_parser("reindex", help="re-check files now (all roots, or the given paths)")
    p.add_argument(
        "paths", nargs="*", metavar="PATH", type=paths.given, help="relative to here, or a root"
    )
    p.add_argument("--full", action="store_true", help="re-read files even if unchanged")
    p.add_argument("--wait", action="store_true", help="show progress and wait until done")
    p.set_defaults(run=cmd_reindex)

    p = sub.add_parser("files", help="list indexed files matching a glob")
    p.add_argument("glob", nargs="?", default="*")
    p.add_argument("--limit", type=int, default=100, help="files to list (1-1000)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(run=cmd_files)

    p = sub.add_parser("read", help="print an indexed file, or some of its lines")
    p.add_argument("path", type=paths.given, help="a file (relative to here, or to a root)")
    p.add_argument("--start", type=int, metavar="LINE", help="first line (1-based)")
    p.add_argument("--end", type=int, metavar="LINE", help="last line (inclusive)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(run=cmd_read)

    roots.add_parser(sub)
    doctor.add_parser(sub)
    service.add_parser(sub)
    return parser


async def _run(args: argparse.Namespace) -> int:
    command: Command = args.run
    async with Client.connect(args.socket, client_name="kbctl") as client:
        return await command(client, args)


def main(argv: list[str] | None = None) -> int:
    try:
        return _main(argv)
    except BrokenPipeError:
        # The reader stopped reading (``kbctl search x | head``): end quietly, as cat
        # does, with the status a process killed by SIGPIPE reports. Python flushes
        # stdout once more at exit, so it must point somewhere that takes the bytes.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 128 + signal.SIGPIPE


def _main(argv: list[str] | None) -> int:
    args = build_parser().parse_args(argv)
    if getattr(args, "func", None) is not None:
        # Subcommands that do not talk to the daemon (service management).
        result: int = args.func(args)
        return result
    try:
        return anyio.run(_run, args)
    except DaemonError as exc:
        print(f"kbctl: {exc.message} [{exc.code}]", file=sys.stderr)
        return 1
    except ClientError as exc:
        print(f"kbctl: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
