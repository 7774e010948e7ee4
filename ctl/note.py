"""kbctl note write|edit|append|mv|rm: change notes in a writable root, for scripts and people.

Each is one request to the daemon, which does the writing (atomically, indexed before it
answers) and refuses what it must with a POSIX-named code. The content of ``write`` and
``append`` comes from standard input. On success one line: the note's new hash (for
``--if-match`` next time), its line count and its path; ``--json`` prints the reply.
Exit status: 0 done, 1 refused or failed (``main`` prints ``kbctl: SENTENCE [CODE]``
on stderr), 2 bad usage.

A relative PATH is taken from the current directory when it exists there, or when the
current directory is inside a root (as any shell command would take it); otherwise it
is relative to the writable root, so a script run from anywhere can name its notes.
"""

from __future__ import annotations

import argparse
import errno
import os
import sys
from typing import Any

from kbindex.ctl import render
from kbindex.proto.blocking import BlockingClient
from kbindex.proto.errors import DaemonError, RequestTooLarge
from kbindex.proto.messages import (
    AppendNote,
    DeleteNote,
    EditNote,
    MoveNote,
    NoteReply,
    Status,
    StatusReply,
    WriteNote,
)

NoteRequest = WriteNote | EditNote | AppendNote | MoveNote | DeleteNote


def add_parser(sub: Any) -> None:
    """Register ``note`` (write, edit, append, mv, rm) on kbctl's subparsers."""
    p = sub.add_parser(
        "note",
        help="write, edit, append to, move or delete a note in a writable root",
        description=(
            "Change notes in a root the configuration marks writable. Prints the note's new "
            "hash, line count and path. Exit status: 0 done, 1 refused (the POSIX code and "
            "why on stderr)."
        ),
    )
    actions = p.add_subparsers(dest="note_action", metavar="ACTION", required=True)

    a = actions.add_parser("write", help="create or replace a note with standard input")
    a.add_argument("path", help="the note (relative to here inside a root, else to the root)")
    _if_match(a)
    a.add_argument("--title", help="a '# TITLE' heading for a Markdown note without one")
    a.set_defaults(run=cmd_write)

    a = actions.add_parser("edit", help="replace the one occurrence of --old with --new")
    a.add_argument("path", help="the note")
    old = a.add_mutually_exclusive_group(required=True)
    old.add_argument("--old", metavar="TEXT", help="the exact text to replace (once in the note)")
    old.add_argument("--old-file", metavar="FILE", help="... read from FILE ('-': stdin)")
    new = a.add_mutually_exclusive_group(required=True)
    new.add_argument("--new", metavar="TEXT", help="what replaces it")
    new.add_argument("--new-file", metavar="FILE", help="... read from FILE ('-': stdin)")
    _if_match(a)
    a.set_defaults(run=cmd_edit)

    a = actions.add_parser("append", help="add standard input at the end (creates the note)")
    a.add_argument("path", help="the note")
    a.set_defaults(run=cmd_append)

    a = actions.add_parser("mv", help="move or rename a note within the writable roots")
    a.add_argument("src", help="the note")
    a.add_argument("dst", help="where it goes")
    a.add_argument("--overwrite", action="store_true", help="replace an existing DST")
    a.set_defaults(run=cmd_mv)

    a = actions.add_parser("rm", help="delete a note")
    a.add_argument("path", help="the note")
    _if_match(a)
    a.set_defaults(run=cmd_rm)

    for name in ("write", "edit", "append", "mv", "rm"):
        actions.choices[name].add_argument(
            "--json", action="store_true", help="print the reply as JSON"
        )


def _if_match(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--if-match",
        metavar="HASH",
        help="refuse (ECONFLICT) unless the note still has this hash ('' : must not exist)",
    )


# ------------------------------------------------------------------ commands


def cmd_write(client: BlockingClient, args: argparse.Namespace) -> int:
    request = WriteNote(
        path=_path(client, args.path),
        content=_stdin(),
        if_match=args.if_match,
        title=args.title,
    )
    return _send(client, request, args)


def cmd_edit(client: BlockingClient, args: argparse.Namespace) -> int:
    request = EditNote(
        path=_path(client, args.path),
        old_text=args.old if args.old is not None else _file(args.old_file),
        new_text=args.new if args.new is not None else _file(args.new_file),
        if_match=args.if_match,
    )
    return _send(client, request, args)


def cmd_append(client: BlockingClient, args: argparse.Namespace) -> int:
    request = AppendNote(path=_path(client, args.path), text=_stdin())
    return _send(client, request, args)


def cmd_mv(client: BlockingClient, args: argparse.Namespace) -> int:
    request = MoveNote(
        src=_path(client, args.src), dst=_path(client, args.dst), overwrite=args.overwrite
    )
    return _send(client, request, args)


def cmd_rm(client: BlockingClient, args: argparse.Namespace) -> int:
    request = DeleteNote(path=_path(client, args.path), if_match=args.if_match)
    return _send(client, request, args)


def _send(client: BlockingClient, request: NoteRequest, args: argparse.Namespace) -> int:
    try:
        reply = client.request(request, NoteReply)
    except RequestTooLarge as exc:
        raise _refused("EFBIG", f"{exc}: write the note in parts (write, then append)") from None
    if args.json:
        render.emit_json(reply)
    elif isinstance(request, DeleteNote):
        print(f"deleted {reply.path}")
    else:
        print(line(reply))
    return 0


def line(reply: NoteReply) -> str:
    """``HASH  N lines  PATH``: the hash first, for ``cut -d' ' -f1``."""
    created = "  (created)" if reply.created else ""
    return f"{reply.hash}  {reply.lines:,} lines  {reply.path}{created}"


# ------------------------------------------------------------------ input


def _path(client: BlockingClient, path: str) -> str:
    if os.path.isabs(path) or os.path.lexists(path):
        return os.path.abspath(path)
    here = os.getcwd()
    roots = client.request(Status(), StatusReply).roots
    if any(here == r.path or here.startswith(r.path.rstrip("/") + "/") for r in roots):
        return os.path.join(here, path)
    return path


def _stdin() -> str:
    if sys.stdin.isatty():
        print("kbctl: reading the note from standard input (end it with Ctrl-D)", file=sys.stderr)
    return _decode(sys.stdin.buffer.read(), "standard input")


def _file(name: str) -> str:
    if name == "-":
        return _decode(sys.stdin.buffer.read(), "standard input")
    try:
        with open(name, "rb") as f:
            return _decode(f.read(), name)
    except OSError as exc:
        code = errno.errorcode.get(exc.errno or 0, "EIO")
        raise _refused(code, f"cannot read {name}: {exc.strerror}") from None


def _decode(data: bytes, source: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise _refused("EILSEQ", f"{source} is not UTF-8 text: notes are text") from None


def _refused(code: str, message: str) -> DaemonError:
    """A refusal made here, before asking the daemon: a DaemonError all the same, so that
    ``main`` shows it as it shows the daemon's (``kbctl: SENTENCE [CODE]``, exit 1)."""
    return DaemonError(code, message)
