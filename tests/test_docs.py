"""The README documents every kbctl subcommand (each has help text) and every daemon
setting."""

from __future__ import annotations

import argparse
import re
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


def _options(parser: argparse.ArgumentParser, name: str) -> dict[str, argparse.Action]:
    """Every option of ``parser`` and of its subcommands, by where it is (``kbctl grep``)."""
    found: dict[str, argparse.Action] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub_name, sub in action.choices.items():
                found.update(_options(sub, f"{name} {sub_name}"))
        elif action.option_strings and action.dest != "help":
            found[f"{name} {action.option_strings[-1]}"] = action
    return found


def _kbctl_section() -> str:
    readme = README.read_text(encoding="utf-8")
    start = readme.index("\n## kbctl\n")
    return readme[start : readme.index("\n## ", start + 1)]


def test_every_kbctl_option_has_help_and_is_in_the_readmes_kbctl_section() -> None:
    """Each option (``kbctl --version``, ``grep -e``, ...) says what it does in ``--help``
    and is named in the README's kbctl section, in one of its spellings."""
    section = _kbctl_section()
    options = _options(build_parser(), "kbctl")
    assert {"kbctl --version", "kbctl grep --regexp", "kbctl search --limit"} <= set(options)
    for where, action in options.items():
        assert action.help, f"{where} has no help text"
        spellings = action.option_strings
        named = (re.search(rf"(?<![\w-]){re.escape(s)}(?![\w-])", section) for s in spellings)
        assert any(named), f"{where} is not in the README's kbctl section"


def test_the_readme_says_how_kbctl_search_takes_exclusions() -> None:
    section = _kbctl_section()
    assert "kbctl search python -django" in section
    assert "kbctl search -- " in section
    from kbindex.ctl.main import SEARCH_HELP

    assert "kbctl search python -django" in SEARCH_HELP
