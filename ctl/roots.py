"""kbctl roots / roots add / roots remove / why: the indexed directories and their health.

A root is a directory on this machine, so ``roots add|remove`` make it absolute against
the shell's working directory always; ``why`` takes a file like every other command
(see paths.py). Each subcommand is one request; ``main`` turns daemon errors into exit 1.
"""

from __future__ import annotations

import argparse
from typing import Any

from kbindex.ctl import paths, render
from kbindex.proto.blocking import BlockingClient
from kbindex.proto.messages import (
    AddRoot,
    RemoveRoot,
    RootsReply,
    RootStatus,
    Status,
    StatusReply,
    Why,
    WhyReply,
)
from kbindex.proto.report import ago


def add_parser(sub: Any) -> None:
    """Register ``roots`` (with ``add`` and ``remove``) on kbctl's subparsers."""
    p = sub.add_parser(
        "roots", help="list the indexed directories with their watch state; add or remove one"
    )
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(run=cmd_roots)
    actions = p.add_subparsers(dest="roots_action", metavar="ACTION")
    a = actions.add_parser("add", help="index another directory now (and list it in the config)")
    a.add_argument("path", type=paths.directory, help="the directory")
    a.set_defaults(run=cmd_roots_add)
    r = actions.add_parser("remove", help="stop indexing a directory and forget its documents")
    r.add_argument("path", type=paths.directory, help="the root directory")
    r.set_defaults(run=cmd_roots_remove)


def add_why_parser(sub: Any) -> None:
    """Register ``why`` on kbctl's subparsers."""
    w = sub.add_parser("why", help="say whether a file is indexed and, if not, why")
    w.add_argument("path", type=paths.given, help="a file (relative to here, or to a root)")
    w.add_argument("--json", action="store_true", help="machine-readable output")
    w.set_defaults(run=cmd_why)


def cmd_roots(client: BlockingClient, args: argparse.Namespace) -> int:
    status = client.request(Status(), StatusReply)
    if args.json:
        render.emit_json(status.roots)
    else:
        print(describe(status.roots) or "no roots: add one with kbctl roots add PATH")
    return 0


def cmd_roots_add(client: BlockingClient, args: argparse.Namespace) -> int:
    reply = client.request(AddRoot(path=args.path), RootsReply)
    print(reply.message)
    return 0


def cmd_roots_remove(client: BlockingClient, args: argparse.Namespace) -> int:
    reply = client.request(RemoveRoot(path=args.path), RootsReply)
    print(reply.message)
    return 0


def cmd_why(client: BlockingClient, args: argparse.Namespace) -> int:
    reply = client.request(Why(path=args.path), WhyReply)
    if args.json:
        render.emit_json(reply)
    elif reply.indexed:
        print(f"{reply.path}: {reply.reason}")
    else:
        print(f"{reply.path}: not indexed: {reply.reason}")
    return 0


def describe(roots: list[RootStatus]) -> str:
    lines: list[str] = []
    for root in roots:
        writable = "  writable" if root.writable else ""
        lines.append(f"{root.path}  {root.state}  {root.files:,} files{writable}")
        facts = [f"last event {ago(root.last_event_at)}"]
        if root.last_reconcile is not None:
            r = root.last_reconcile
            facts.append(
                f"last reconcile {ago(r.at)} ({r.seconds:.2f} s: {r.files_seen:,} seen, "
                f"{r.changed:,} changed, {r.removed:,} removed)"
            )
        if root.poll_seconds is not None:
            facts.append(f"polled every {root.poll_seconds:.0f} s")
        facts.append(f"{root.pending:,} pending")
        if root.scope:
            facts.append(f"--scope {root.scope}")
        lines.append("    " + "; ".join(facts))
        if root.description:
            lines.append(f"    {root.description}")
        if root.detail:
            lines.append(f"    {root.detail}")
    return "\n".join(lines)
