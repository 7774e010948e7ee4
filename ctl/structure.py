"""``kbctl links`` and ``kbctl recent``: what the index knows of files besides their
words (issue 41): the links between notes, and what changed lately."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from kbindex.ctl import filters, paths, render
from kbindex.proto.blocking import BlockingClient
from kbindex.proto.messages import FindFiles, FindFilesReply, Links, LinksReply


def add_links_parser(sub: Any) -> None:
    p = sub.add_parser(
        "links",
        help="the links of a note, or the notes that link to it (--backlinks)",
        description=(
            "Markdown links and [[wikilinks]] between files of one root, from the index: "
            "LINE  TARGET  (TEXT), 'broken' where the target is neither indexed nor on disk;"
            " with --backlinks, SOURCE:LINE  (TEXT)."
        ),
    )
    p.add_argument("path", type=paths.given, help="a file (relative to here, or to a root)")
    p.add_argument("--backlinks", action="store_true", help="the links that lead to it")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(run=cmd_links)


def cmd_links(client: BlockingClient, args: argparse.Namespace) -> int:
    reply = client.request(Links(path=args.path, backlinks=args.backlinks), LinksReply)
    if args.json:
        render.emit_json(reply)
        return 0
    for x in reply.links:
        text = f"  ({x.text})" if x.text else ""
        if args.backlinks:
            print(f"{x.source}:{x.line}{text}")
        else:
            print(f"{x.line}  {x.target}{text}{'  broken' if x.broken else ''}")
    if reply.broken:
        print(f"kbctl: {reply.broken} broken link(s)", file=sys.stderr)
    render.notes(reply.notes)
    return 0


def add_recent_parser(sub: Any) -> None:
    p = sub.add_parser("recent", help="indexed files modified lately, newest first")
    p.add_argument(
        "since", nargs="?", default="7d", metavar="SPAN", help="as --modified (default 7d)"
    )
    p.add_argument(
        "--path",
        metavar="GLOB",
        type=paths.given,
        help="only under a folder or matching a glob (as search --path)",
    )
    p.add_argument("--limit", type=int, default=50, help="files to list (1-1000)")
    filters.add(p, modified=False)
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(run=cmd_recent)


def cmd_recent(client: BlockingClient, args: argparse.Namespace) -> int:
    given = filters.values(args) | {"modified": args.since}
    listing = FindFiles(glob=args.path or "*", limit=args.limit, newest=True, **given)
    reply = client.request(listing, FindFilesReply)
    if args.json:
        render.emit_json(reply)
    else:
        print(render.files(reply))
        render.notes(reply.notes)
    return 0
