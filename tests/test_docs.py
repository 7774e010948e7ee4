"""The README documents every kbctl subcommand, and each has help text."""

from __future__ import annotations

import argparse
from pathlib import Path

from kbindex.ctl.main import build_parser

README = Path(__file__).resolve().parent.parent / "README.md"


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, str | None]:
    found: dict[str, str | None] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help for a in action._choices_actions}
            for name in action.choices:
                found[name] = helps.get(name)
    return found


def test_every_kbctl_subcommand_has_help_and_is_in_the_readme() -> None:
    readme = README.read_text(encoding="utf-8")
    commands = _subcommands(build_parser())
    assert {"status", "search", "reindex", "why", "roots", "doctor", "service"} <= set(commands)
    for name, help_text in commands.items():
        assert help_text, f"kbctl {name} has no help text"
        assert f"kbctl {name}" in readme, f"kbctl {name} is not documented in README.md"
