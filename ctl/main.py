"""kbctl: control and query a running kbindexd from a shell.

Every subcommand is one request (or a short exchange) over the daemon's socket.
Imports stay light: a CLI started once per query pays its import time every time. So
no daemon code, no SQLite, no event loop (the blocking client, proto/blocking.py), and
the modules only ``doctor`` and ``service`` need are imported when they run; a
command line that names its subcommand gets that one's parser only. Exit
codes: 0 success, 1 the daemon is not running or answered with an error (``note``: a
refusal, its POSIX code in brackets), 2 bad usage; ``grep`` exits as grep does (0 a
match, 1 none, 2 any error: see grep.py); 130 interrupted (Ctrl-C).

``search`` takes its query's exclusions (``-django``) among its options: see
``search_argv``.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections.abc import Callable
from typing import Any, NoReturn

from kbindex.ctl import filters, grep, machines, note, paths, render, roots, structure
from kbindex.proto import report
from kbindex.proto.blocking import BlockingClient
from kbindex.proto.errors import ClientError, DaemonError, DaemonUnavailable
from kbindex.proto.messages import (
    PROTOCOL_VERSION,
    FindFiles,
    FindFilesReply,
    Progress,
    ReadFile,
    ReadFileReply,
    Refresh,
    RefreshReply,
    Reload,
    ReloadReply,
    Search,
    SearchReply,
    Status,
    StatusReply,
)

Command = Callable[[BlockingClient, argparse.Namespace], int]


def cmd_status(client: BlockingClient, args: argparse.Namespace) -> int:
    reply = client.request(Status(), StatusReply)
    if args.json:
        render.emit_json(report.status(reply))
    else:
        print(render.status(reply))
    return 0


def cmd_search(client: BlockingClient, args: argparse.Namespace) -> int:
    query = " ".join(args.query)
    search = Search(
        query=query,
        limit=args.limit,
        path=args.path,
        mode=args.mode,
        recent=args.recent,
        **filters.values(args),
    )
    reply = client.request(search, SearchReply)
    if args.json:
        render.emit_json(reply)
    else:
        print(render.search(reply, color=sys.stdout.isatty()))
    return 0


def cmd_reindex(client: BlockingClient, args: argparse.Namespace) -> int:
    if not args.wait:
        client.request(Refresh(paths=args.paths, full=args.full), RefreshReply)
        print("reindex queued; follow it with: kbctl status")
        return 0
    bar = render.ProgressBar()
    final: RefreshReply | None = None
    try:
        refresh = Refresh(paths=args.paths, full=args.full, wait=True)
        for reply in client.stream(refresh, RefreshReply):
            if isinstance(reply, Progress):
                bar.update(reply)
            else:
                final = reply
    except KeyboardInterrupt:
        bar.close()
        # The daemon answers a request to its end even when the client has gone (a
        # reindex cut short would leave the index half old), so only the wait stops.
        print(
            "kbctl: stopped waiting; the reindex goes on in kbindexd (follow it with: "
            "kbctl status)",
            file=sys.stderr,
        )
        return 130
    finally:
        bar.close()
    assert final is not None
    if final.interrupted:
        print(
            f"kbctl: kbindexd stopped during the reindex, after {final.files_changed:,} files"
            " read; it checks the rest when it starts again",
            file=sys.stderr,
        )
        return 1
    print(
        f"done: {final.files_processed:,} files checked, {final.files_changed:,} read, "
        f"{final.files_removed:,} removed, {final.errors:,} errors"
    )
    return 0


def cmd_reload(client: BlockingClient, args: argparse.Namespace) -> int:
    print(client.request(Reload(), ReloadReply).message)
    return 0


def cmd_files(client: BlockingClient, args: argparse.Namespace) -> int:
    listing = FindFiles(glob=args.glob, limit=args.limit, **filters.values(args))
    reply = client.request(listing, FindFilesReply)
    if args.json:
        render.emit_json(reply)
    else:
        print(render.files(reply))
        render.notes(reply.notes)
    return 0


def cmd_read(client: BlockingClient, args: argparse.Namespace) -> int:
    read = ReadFile(path=args.path, start_line=args.start, end_line=args.end, page=args.page)
    reply = client.request(read, ReadFileReply)
    if args.json:
        render.emit_json(reply)
        return 0
    print(reply.text)
    if reply.truncated:
        print(f"... (truncated at line {reply.end_line} of {reply.total_lines})", file=sys.stderr)
    elif reply.page and reply.page < reply.pages:
        print(
            f"... (page {reply.page} of {reply.pages}; next: --page {reply.page + 1})",
            file=sys.stderr,
        )
    return 0


PATHS_HELP = (
    "A PATH naming a file or folder is taken relative to the current directory when it "
    "exists there; otherwise it is passed on as given and the daemon looks for it under "
    "each root (as it does for MCP clients). Roots given to 'roots add|remove' are always "
    "relative to the current directory."
)


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """kbctl's parser: every subcommand, or only ``command`` (see ``_named_command``)."""
    parser = argparse.ArgumentParser(
        prog="kbctl",
        description="Control and query the kbindex daemon (kbindexd).",
        epilog=PATHS_HELP,
    )
    parser.add_argument(
        "--socket", metavar="PATH", help="daemon socket (default: $KBINDEX_SOCKET or the usual)"
    )
    parser.add_argument(
        "--version",
        action=_Version,
        help="print kbctl's version, and the running kbindexd's if it answers",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, add in SUBCOMMANDS.items():
        if command is None or name == command:
            add(sub)
    return parser


def search_argv(words: list[str]) -> list[str]:
    """The words after ``search`` rearranged for argparse: its options first (each with
    its value attached, which may start with -), then ``--`` and the query words.

    Why: argparse takes every word starting with - for an option, so the query
    language's exclusions (``-django``) were usage errors. Here a word is an option only
    when it starts with -- (argparse then judges it: a typo is an error, not a query
    word) or is -h; every other word, -django included, is a query word, and after --
    every word is."""
    options: list[str] = []
    query: list[str] = []
    i = 0
    while i < len(words):
        word = words[i]
        if word == "--":
            query += words[i + 1 :]
            break
        if word in SEARCH_VALUED and i + 1 < len(words):
            options.append(f"{word}={words[i + 1]}")
            i += 2
            continue
        if word.startswith("--") or word == "-h":
            options.append(word)
        else:
            query.append(word)
        i += 1
    return [*options, "--", *query]


def _named_command(argv: list[str]) -> str | None:
    """The subcommand ``argv`` starts with (after a ``--socket PATH``), else None.

    Why: argparse builds a parser per subcommand, and building all of them takes
    longer than a search, so a command line that plainly names one gets a parser with
    only that one. Anything else (``--help``, a typo, an abbreviated ``--sock``) gets
    every subcommand, for the full help and argparse's own errors."""
    at = _command_at(argv)
    if at < len(argv) and argv[at] in SUBCOMMANDS:
        return argv[at]
    return None


def _command_at(argv: list[str]) -> int:
    """Where the subcommand would be in ``argv``: after a leading ``--socket PATH``."""
    if argv[:1] == ["--socket"]:
        return 2
    if argv[:1] and argv[0].startswith("--socket="):
        return 1
    return 0


class _Version(argparse.Action):
    """``kbctl --version``: kbctl's version, then the daemon's (it may be older: one
    started before an upgrade runs on until restarted), or why it did not answer."""

    def __init__(self, option_strings: list[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: Any, *_: Any) -> None:
        from importlib.metadata import version  # only here: it costs a search's import time

        print(f"kbctl {version('kbindex')} (protocol {PROTOCOL_VERSION})")
        socket = getattr(namespace, "socket", None)
        try:
            with BlockingClient.connect(socket, client_name="kbctl") as client:
                assert client.server is not None
                print(f"{client.server.server} on {client.socket_path}")
        except DaemonError as exc:
            print(f"kbindexd: {exc.message} [{exc.code}]")
        except DaemonUnavailable as exc:
            print(exc)
        except ClientError as exc:
            print(f"kbindexd: {exc}")
        parser.exit(0)


def _add_status(sub: Any) -> None:
    p = sub.add_parser("status", help="show the index, its freshness and the roots' health")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(run=cmd_status)


SEARCH_HELP = (
    'QUERY is words, "phrases", -exclusions and prefix*: a word starting with a single '
    "- is a query word (kbctl search python -django), and options may come before or after "
    "the query. After --, every word is a query word (kbctl search -- --verbose)."
)
SEARCH_VALUED = frozenset({"--limit", "--path", "--mode", *filters.VALUED})
"""The options of ``kbctl search`` that take a value (see ``search_argv``)."""


def _add_search(sub: Any) -> None:
    # No abbreviations (--lim): a word that is not an option exactly is a usage error
    # or a query word, never a guess.
    p = sub.add_parser("search", help="search the index", epilog=SEARCH_HELP, allow_abbrev=False)
    p.add_argument("query", nargs="+", help='words, "phrases", -exclusions, prefix*')
    p.add_argument("--limit", type=int, default=10, help="results to show (1-100)")
    p.add_argument(
        "--path",
        metavar="GLOB",
        type=paths.given,
        help="only under a folder or matching a glob (relative to here or a root, or absolute)",
    )
    p.add_argument(
        "--mode",
        default="auto",
        choices=("auto", "words", "all", "any", "raw", "hybrid", "semantic"),
        help="auto: hybrid where search by meaning is on, else words; words: every term, then any",
    )
    filters.add(p)
    p.add_argument(
        "--recent",
        nargs="?",
        const="on",
        default="",
        metavar="HALF_LIFE",
        help="prefer recent files (by front matter date, else modified time): a score halves"
        " every HALF_LIFE of age (--recent=30d; bare: the daemon's recency_half_life, else"
        " 90d); --recent=off: not even when configured",
    )
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(run=cmd_search)


def _add_reindex(sub: Any) -> None:
    p = sub.add_parser("reindex", help="re-check files now (all roots, or the given paths)")
    p.add_argument(
        "paths", nargs="*", metavar="PATH", type=paths.given, help="relative to here, or a root"
    )
    p.add_argument("--full", action="store_true", help="re-read files even if unchanged")
    p.add_argument("--wait", action="store_true", help="show progress and wait until done")
    p.set_defaults(run=cmd_reindex)


def _add_files(sub: Any) -> None:
    p = sub.add_parser("files", help="list indexed files matching a glob")
    p.add_argument(
        "glob", nargs="?", default="*", type=paths.given, help="a folder or a glob (as --path)"
    )
    p.add_argument("--limit", type=int, default=100, help="files to list (1-1000)")
    filters.add(p)
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(run=cmd_files)


def _add_read(sub: Any) -> None:
    p = sub.add_parser("read", help="print an indexed file, or some of its lines")
    p.add_argument("path", type=paths.given, help="a file (relative to here, or to a root)")
    p.add_argument("--start", type=int, metavar="LINE", help="first line (1-based)")
    p.add_argument("--end", type=int, metavar="LINE", help="last line (inclusive)")
    p.add_argument(
        "--page", type=int, metavar="N", help="a document's page N (a PDF, an Office file...)"
    )
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(run=cmd_read)


def _add_reload(sub: Any) -> None:
    p = sub.add_parser(
        "reload",
        help="re-read the configuration; returns once it is in force (or refused)",
        description=(
            "What SIGHUP and systemctl --user reload kbindexd do, answered: exits 0 once "
            "the configuration is in force, 1 with the reason when it is refused (the "
            "daemon then keeps the one it had)."
        ),
    )
    p.set_defaults(run=cmd_reload)


def _add_doctor(sub: Any) -> None:
    p = sub.add_parser(
        "doctor", help="check the daemon, the index, the roots, inotify and the units"
    )
    p.set_defaults(func=run_doctor)


def _add_service(sub: Any) -> None:
    p = sub.add_parser(
        "service",
        help="run kbindexd as a systemd user service",
        description="Install, remove or inspect the kbindexd systemd user units.",
    )
    actions = p.add_subparsers(dest="service_command", metavar="COMMAND", required=True)
    a = actions.add_parser(
        "install", help="write the units and enable the socket (kbindexd starts on first use)"
    )
    a.add_argument(
        "--root",
        action="append",
        default=[],
        metavar="PATH",
        help="directory to index (repeatable); saved in the config if it lists none",
    )
    a.add_argument(
        "--print", action="store_true", help="print the units instead of installing them"
    )
    actions.add_parser("uninstall", help="stop, disable and remove the units")
    actions.add_parser("status", help="what systemd says about kbindexd")
    p.set_defaults(func=run_service)


SUBCOMMANDS: dict[str, Callable[[Any], None]] = {
    "status": _add_status,
    "search": _add_search,
    "grep": grep.add_parser,
    "reindex": _add_reindex,
    "reload": _add_reload,
    "files": _add_files,
    "recent": structure.add_recent_parser,
    "links": structure.add_links_parser,
    "read": _add_read,
    "roots": roots.add_parser,
    "why": roots.add_why_parser,
    "machines": machines.add_parser,
    "note": note.add_parser,
    "doctor": _add_doctor,
    "service": _add_service,
}
"""Each subcommand and what adds it to kbctl's parser, in the order the help lists them."""


# doctor and service import what no other command needs (the async client and its
# event loop; subprocess, tomllib and the unit files), so only when they run.


def run_doctor(args: argparse.Namespace) -> int:
    from kbindex.ctl import doctor

    return doctor.run(args)


def run_service(args: argparse.Namespace) -> int:
    from kbindex.ctl import service

    return service.run(args)


def _run(args: argparse.Namespace) -> int:
    command: Command = args.run
    # On a terminal, what the daemon sends is made safe to show (render.TerminalClient);
    # --json is data, escaped by JSON itself.
    on_terminal = sys.stdout.isatty() and not getattr(args, "json", False)
    client_type = render.TerminalClient if on_terminal else BlockingClient
    with client_type.connect(args.socket, client_name="kbctl") as client:
        return command(client, args)


def main(argv: list[str] | None = None) -> int:
    try:
        code = _main(argv)
        sys.stdout.flush()  # in here, so that a reader gone before the end is handled below
        return code
    except BrokenPipeError:
        # The reader stopped reading (``kbctl search x | head``): end quietly, as cat
        # does, with the status a process killed by SIGPIPE reports. Python flushes
        # stdout once more at exit, so it must point somewhere that takes the bytes.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 128 + signal.SIGPIPE


def _main(argv: list[str] | None) -> int:
    if argv is None:
        argv = sys.argv[1:]
    command = _named_command(argv)
    at = _command_at(argv) + 1
    if command == "search":
        argv = [*argv[:at], *search_argv(argv[at:])]
    elif command == "grep":
        argv = [*argv[:at], *grep.grep_argv(argv[at:])]
    parser = build_parser(command)
    args = parser.parse_args(argv)
    check: Callable[[argparse.Namespace], str] | None = getattr(args, "check", None)
    problem = check(args) if check is not None else ""
    if problem:
        print(f"kbctl {args.command}: {problem}", file=sys.stderr)
        return 2
    if getattr(args, "func", None) is not None:
        # Subcommands that do not talk to the daemon (service management).
        result: int = args.func(args)
        return result
    _carried(args)
    failed: int = getattr(args, "error_status", 1)
    try:
        return _run(args)
    except DaemonError as exc:
        print(render.shown(f"kbctl: {exc.message} [{exc.code}]", sys.stderr), file=sys.stderr)
        return failed
    except ClientError as exc:
        print(render.shown(f"kbctl: {exc}", sys.stderr), file=sys.stderr)
        return failed
    except KeyboardInterrupt:
        return 130


LOCAL_ARGUMENTS = frozenset({"socket", "old_file", "new_file"})
"""Arguments kbctl opens itself rather than sends: their names stay as the bytes."""


def _carried(args: argparse.Namespace) -> None:
    """Every argument sent to the daemon as the protocol can carry it (``paths.wire``):
    a query, a glob or a note's name typed with bytes that are not UTF-8 is sent with
    them as ``\\xNN`` (a file PATH already is, by ``paths.given``)."""
    for name, value in vars(args).items():
        if name in LOCAL_ARGUMENTS:
            continue
        if isinstance(value, str):
            setattr(args, name, paths.wire(value))
        elif isinstance(value, list) and all(isinstance(v, str) for v in value):
            setattr(args, name, [paths.wire(v) for v in value])


def run() -> NoReturn:
    """The ``kbctl`` console script (and ``python -m kbindex.ctl.main``): ``main``, then
    exit at once.

    Why ``os._exit``: the interpreter's teardown (freeing every module kbctl imported)
    takes longer than a search. kbctl leaves nothing for it to do: no files open for
    writing, no atexit handlers, and stdout (in ``main``) and stderr are flushed."""
    code = main()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    run()
