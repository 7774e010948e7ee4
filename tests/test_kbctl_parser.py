"""kbctl builds the parser of the one subcommand a command line names, and parses it as
the parser with every subcommand would (a search should not pay for eleven parsers)."""

from __future__ import annotations

import argparse

import pytest
from kbindex.ctl.main import SUBCOMMANDS, _named_command, build_parser


def subcommands(parser: argparse.ArgumentParser) -> set[str]:
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return set(sub.choices)


@pytest.mark.parametrize(
    ("argv", "command"),
    [
        (["search", "ocelot", "--limit", "3"], "search"),
        (["--socket", "/run/kb.sock", "search", "two", "words", "--json"], "search"),
        (["--socket=/run/kb.sock", "status", "--json"], "status"),
        (["grep", "-F", "-C", "2", "x.y"], "grep"),
        (["reindex", "--wait", "/abs/a.md"], "reindex"),
        (["files", "*.md"], "files"),
        (["read", "/abs/a.md", "--start", "2"], "read"),
        (["roots", "add", "/abs/dir"], "roots"),
        (["why", "/abs/a.md"], "why"),
        (["note", "rm", "n.md", "--if-match", ""], "note"),
        (["service", "install", "--print"], "service"),
    ],
)
def test_a_named_command_gets_only_its_parser_and_the_same_arguments(
    argv: list[str], command: str
) -> None:
    assert _named_command(argv) == command
    parser = build_parser(command)
    assert subcommands(parser) == {command}
    assert parser.parse_args(argv) == build_parser().parse_args(argv)


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["--help"],
        ["serch", "ocelot"],  # a typo: argparse lists every choice
        ["--sock", "/run/kb.sock", "search", "x"],  # argparse's abbreviation of --socket
        ["--socket"],
        ["--socket", "search"],  # "search" is the socket's path here, and no command follows
    ],
)
def test_anything_else_gets_every_subcommand(argv: list[str]) -> None:
    assert _named_command(argv) is None
    assert subcommands(build_parser(None)) == set(SUBCOMMANDS)


def test_the_full_help_lists_every_subcommand(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser(_named_command(["--help"])).parse_args(["--help"])
    shown = capsys.readouterr().out
    assert all(f"    {name} " in shown or f"    {name}\n" in shown for name in SUBCOMMANDS)
