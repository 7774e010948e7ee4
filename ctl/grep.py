"""kbctl grep: lines of the indexed files that match a pattern, printed as ripgrep does.

The output is ``rg --no-heading``'s: ``path:line:text`` for a matching line,
``path-line-text`` for context, ``--`` between groups that do not touch, and with
``-l`` one path per line. Paths under the current directory are shown relative to it
(as rg shows them), others absolute: either form works as a PATH for ``kbctl read``.
Exit status as grep's and rg's, so scripts can tell the three apart: 0 something
matched, 1 nothing did, 2 an error (``main`` prints it; other commands exit 1 on one,
but for grep 1 already means "no match").
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from typing import Any

import msgspec
from kbindex.ctl import filters, paths, render
from kbindex.proto.blocking import BlockingClient
from kbindex.proto.messages import MAX_CONTEXT, MAX_GREP_LIMIT, Grep, GrepLine, GrepReply

ERROR_STATUS = 2
"""Exit status of ``kbctl grep`` on any error (daemon down, bad pattern, bad usage)."""


def _bounded(low: int, high: int) -> Callable[[str], int]:
    """An argparse type: an integer from ``low`` to ``high``, else a usage error."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{value} is not from {low} to {high}")
        return value

    return parse


def add_parser(sub: Any) -> None:
    """Register ``grep`` on kbctl's subparsers."""
    p = sub.add_parser(
        "grep",
        help="lines matching a regex or a literal, as ripgrep prints them",
        description=(
            "Lines of the indexed files that match PATTERN (ripgrep's regex syntax), "
            "answered from the index. Exit status: 0 a match, 1 none, 2 an error."
        ),
    )
    p.add_argument("pattern", metavar="PATTERN", nargs="?", help="a regex, or a literal with -F")
    p.add_argument(
        "-e",
        "--regexp",
        action=_OnePattern,
        metavar="PATTERN",
        help="the pattern, given as an option: for one starting with - (once only)",
    )
    p.add_argument("-F", "--fixed", action="store_true", help="PATTERN is a literal string")
    p.add_argument("-i", "--ignore-case", action="store_true", help="case-insensitive")
    p.add_argument("-w", "--word", action="store_true", help="only whole-word matches")
    p.add_argument(
        "--path",
        metavar="GLOB",
        type=paths.given,
        help="only files under this folder, or matching this glob (relative to a root)",
    )
    context = _bounded(0, MAX_CONTEXT)
    p.add_argument("-C", "--context", type=context, metavar="N", help="lines around each match")
    p.add_argument("-A", "--after-context", type=context, metavar="N", help="lines after")
    p.add_argument("-B", "--before-context", type=context, metavar="N", help="lines before")
    p.add_argument(
        "-m",
        "--max-count",
        type=_bounded(1, 2**31 - 1),
        metavar="N",
        help="at most N matching lines per file",
    )
    p.add_argument(
        "-l", "--files-with-matches", action="store_true", help="only the paths of matching files"
    )
    p.add_argument(
        "--limit",
        type=_bounded(1, MAX_GREP_LIMIT),
        default=100,
        help=f"matching lines (or files with -l) to show (1-{MAX_GREP_LIMIT:,}; default 100)",
    )
    filters.add(p)
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(run=cmd_grep, error_status=ERROR_STATUS, check=check)


class _OnePattern(argparse.Action):
    """``-e PATTERN``, once. Why not several, as rg takes: rg searches for any of them,
    and being identical to rg for that (with -F, -w, -i, the match column, and the
    index's narrowing of each) is more than the need, a pattern starting with -;
    several alternatives fit in one regex (``-e 'a|b'``)."""

    def __call__(
        self, parser: argparse.ArgumentParser, namespace: Any, value: Any, *_: Any
    ) -> None:
        if getattr(namespace, self.dest, None) is not None:
            parser.error("-e is taken once; for several patterns write one regex: -e 'a|b'")
        setattr(namespace, self.dest, value)


def grep_argv(words: list[str]) -> list[str]:
    """The words after ``grep`` with each ``-e PATTERN`` joined into ``--regexp=PATTERN``:
    argparse takes a PATTERN starting with - for an option, the very case -e is for."""
    out: list[str] = []
    i = 0
    while i < len(words):
        word = words[i]
        if word == "--":
            return [*out, *words[i:]]
        if word in ("-e", "--regexp") and i + 1 < len(words):
            out.append(f"--regexp={words[i + 1]}")
            i += 2
            continue
        out.append(word)
        i += 1
    return out


def check(args: argparse.Namespace) -> str:
    """A usage problem argparse cannot see (one PATTERN, from -e or the argument), or ""."""
    if args.regexp is not None and args.pattern is not None:
        return (
            f"PATTERN given twice (-e {args.regexp!r} and {args.pattern!r}); kbctl grep takes "
            "no PATH arguments: narrow with --path"
        )
    if args.regexp is None and args.pattern is None:
        return "a PATTERN is needed (-e PATTERN for one starting with -)"
    return ""


def request(args: argparse.Namespace) -> Grep:
    """The Grep request for kbctl's arguments: -A and -B win over -C, as in rg."""
    around = args.context or 0
    before = args.before_context if args.before_context is not None else around
    after = args.after_context if args.after_context is not None else around
    return Grep(
        pattern=args.pattern if args.regexp is None else args.regexp,
        fixed=args.fixed,
        ignore_case=args.ignore_case,
        word=args.word,
        path=args.path,
        before=before,
        after=after,
        max_count=args.max_count,
        files_only=args.files_with_matches,
        limit=args.limit,
        **filters.values(args),
    )


def cmd_grep(client: BlockingClient, args: argparse.Namespace) -> int:
    grep = request(args)
    reply = client.request(grep, GrepReply)
    if args.json:
        render.emit_json(as_json(reply))
    else:
        shown = lines(reply, context=bool(grep.before or grep.after), files_only=grep.files_only)
        if shown:
            sys.stdout.write("\n".join(shown) + "\n")
    summary = caveat(reply, files_only=grep.files_only)
    if summary:
        sys.stdout.flush()  # the lines first, then what to make of them
        print(f"kbctl: {summary}", file=sys.stderr)
    if not args.json:
        render.notes(reply.notes)
    return 0 if reply.total or reply.lines else 1


def as_json(reply: GrepReply) -> dict[str, Any]:
    """The reply with each line as an object: the wire's arrays save bytes, but a script
    reading ``--json`` should not have to know the order of their fields."""
    data: dict[str, Any] = msgspec.to_builtins(reply)
    data["lines"] = [
        {"path": g.path, "line": g.line, "text": g.text, "match": g.match, "column": g.column}
        | ({"page": g.page, "extracted": True} if g.extracted else {})
        for g in reply.lines
    ]
    return data


def extracted_mark(g: GrepLine) -> str:
    """Before the text of a line of a document's extracted text: not a line of the
    file's bytes, and its line is within the page."""
    if not g.extracted:
        return ""
    return f"[extracted, page {g.page}] " if g.page else "[extracted] "


def shown_path(path: str, here: str) -> str:
    """``path`` relative to the directory ``here`` when it is under it, else as is."""
    prefix = os.path.join(here, "")
    return path[len(prefix) :] if path.startswith(prefix) else path


def lines(reply: GrepReply, *, context: bool, files_only: bool) -> list[str]:
    """The reply as rg prints it (``--no-heading``)."""
    here = os.getcwd()
    if files_only:
        return [shown_path(g.path, here) for g in reply.lines]
    out: list[str] = []
    previous: GrepLine | None = None
    for g in reply.lines:
        touches = previous is not None and (previous.path, previous.page, previous.line + 1) == (
            g.path,
            g.page,
            g.line,
        )
        if context and previous is not None and not touches:
            out.append("--")
        mark = ":" if g.match else "-"
        out.append(f"{shown_path(g.path, here)}{mark}{g.line}{mark}{extracted_mark(g)}{g.text}")
        previous = g
    return out


def caveat(reply: GrepReply, *, files_only: bool) -> str:
    """One line on what the lines do not show, or "" when they show everything."""
    what = "matching files" if files_only else "matching lines"
    shown = len(reply.lines) if files_only else sum(g.match for g in reply.lines)
    at_least = "" if reply.complete else "at least "
    parts: list[str] = []
    if reply.truncated:
        parts.append(
            f"showing {shown:,} of {at_least}{reply.total:,} {what}; "
            f"use --limit (up to {MAX_GREP_LIMIT:,}) or narrow with --path"
        )
    if not reply.complete:
        parts.append("the search stopped early (its deadline): there may be more")
    if reply.scanned_all:
        parts.append(
            f"the pattern has no literal the index can use, so all {reply.candidates:,} "
            "files were read"
        )
    return "; ".join(parts)
