"""kbctl machines / machines retire NAME: the machines that write a shared index.

Each machine's daemon holds a lease on its name and renews it with a heartbeat: a machine
is ``live``, ``behind`` (its heartbeat is late: stalled, or cut off from the server) or
``gone`` (no daemon writes it; its rows are still served). ``retire`` removes a gone
machine's rows; a live one is refused. Each subcommand is one request.
"""

from __future__ import annotations

import argparse
from typing import Any

from kbindex.ctl import render
from kbindex.proto.blocking import BlockingClient
from kbindex.proto.messages import MachineCount, RetireMachine, RetireReply, Status, StatusReply


def add_parser(sub: Any) -> None:
    """Register ``machines`` (with ``retire``) on kbctl's subparsers."""
    p = sub.add_parser(
        "machines", help="list the machines of a shared index; retire one no daemon writes"
    )
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(run=cmd_machines)
    actions = p.add_subparsers(dest="machines_action", metavar="ACTION")
    r = actions.add_parser("retire", help="remove a gone machine and its files from the index")
    r.add_argument("name", help="the machine's name (kbctl machines lists them)")
    r.set_defaults(run=cmd_retire)


def cmd_machines(client: BlockingClient, args: argparse.Namespace) -> int:
    status = client.request(Status(), StatusReply)
    machines = status.backend.machines if status.backend is not None else []
    if args.json:
        render.emit_json(machines)
    elif status.backend is None or status.backend.name == "sqlite":
        print("one machine: this daemon's own index (backend sqlite)")
    else:
        print(describe(machines) or "no machines yet")
    return 0


def describe(machines: list[MachineCount]) -> str:
    lines = []
    for m in machines:
        beat = "" if m.heartbeat_age is None else f", heartbeat {m.heartbeat_age:.0f} s ago"
        lines.append(f"{m.machine}: {m.state or 'unregistered'}, {m.files:,} files{beat}")
    return "\n".join(lines)


def cmd_retire(client: BlockingClient, args: argparse.Namespace) -> int:
    reply = client.request(RetireMachine(name=args.name), RetireReply)
    print(f"{reply.message}: {reply.removed:,} files removed from the index")
    return 0
