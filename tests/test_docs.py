"""The README documents every kbctl subcommand (each has help text) and every daemon
setting."""

from __future__ import annotations

import argparse
from pathlib import Path

from kbindex.ctl.main import build_parser
from kbindex.daemon.settings import OPTIONS

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


def test_every_daemon_setting_is_in_the_readme_table_with_its_flag_and_variable() -> None:
    rows = {
        line.split("|")[1].strip(" `"): line
        for line in README.read_text(encoding="utf-8").splitlines()
        if line.startswith("| `")
    }
    for option in OPTIONS:
        row = rows.get(option.key)
        assert row is not None, f"{option.key} has no row in the README's settings table"
        assert f"`{option.flag}" in row, f"the README's {option.key} row lacks {option.flag}"
        assert f"`{option.env}`" in row, f"the README's {option.key} row lacks {option.env}"
