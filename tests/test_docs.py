"""The documentation: the README names every kbctl subcommand (each has help text),
docs/configuration.md every daemon setting, every link between the documents leads
somewhere, the README's commands work when followed in order, and CI runs the test
command the README gives."""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

from kbindex.ctl.main import build_parser
from kbindex.daemon.settings import OPTIONS

TOP = Path(__file__).resolve().parent.parent
README = TOP / "README.md"
CONFIGURATION = TOP / "docs" / "configuration.md"
DOCUMENTS = [README, TOP / "bench" / "README.md", *sorted((TOP / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")
OWN_COMMANDS = ("kbctl", "kbindexd", "kbindex-mcp")


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, str | None]:
    found: dict[str, str | None] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help for a in action._choices_actions}
            for name in action.choices:
                found[name] = helps.get(name)
    return found


def _fenced_blocks(text: str) -> list[tuple[str, int, list[str]]]:
    """Each fenced code block: its language, the line number of its fence, its lines."""
    blocks: list[tuple[str, int, list[str]]] = []
    current: list[str] | None = None
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if stripped.startswith("```"):
            if current is None:
                current = []
                blocks.append((stripped[3:], number, current))
            else:
                current = None
        elif current is not None:
            current.append(stripped)
    return blocks


def _anchors(text: str) -> set[str]:
    """The anchors GitHub gives a document's headings."""
    found = set()
    for heading in re.findall(r"^#+ (.+)$", text, flags=re.MULTILINE):
        slug = re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
        found.add(slug)
    return found


def test_every_kbctl_subcommand_has_help_and_is_in_the_readme() -> None:
    readme = README.read_text(encoding="utf-8")
    commands = _subcommands(build_parser())
    assert {"status", "search", "reindex", "why", "roots", "doctor", "service"} <= set(commands)
    for name, help_text in commands.items():
        assert help_text, f"kbctl {name} has no help text"
        assert f"kbctl {name}" in readme, f"kbctl {name} is not documented in README.md"


def test_every_daemon_setting_is_in_the_settings_table_with_its_flag_and_variable() -> None:
    rows = {
        line.split("|")[1].strip(" `"): line
        for line in CONFIGURATION.read_text(encoding="utf-8").splitlines()
        if line.startswith("| `")
    }
    for option in OPTIONS:
        row = rows.get(option.key)
        assert row is not None, f"{option.key} has no row in docs/configuration.md's table"
        assert f"`{option.flag}" in row, f"the {option.key} row lacks {option.flag}"
        assert f"`{option.env}`" in row, f"the {option.key} row lacks {option.env}"


def test_every_link_between_the_documents_leads_to_a_file_and_heading() -> None:
    for document in DOCUMENTS:
        for target in LINK.findall(document.read_text(encoding="utf-8")):
            if re.match(r"[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            linked = (document.parent / path).resolve() if path else document
            assert linked.exists(), f"{document.relative_to(TOP)} links to missing {target}"
            if anchor:
                headings = _anchors(linked.read_text(encoding="utf-8"))
                assert anchor in headings, (
                    f"{document.relative_to(TOP)} links to {target}: no such heading"
                )


def test_every_reference_document_is_linked_from_the_readme() -> None:
    readme = README.read_text(encoding="utf-8")
    for document in (TOP / "docs").glob("*.md"):
        assert f"](docs/{document.name})" in readme, f"README.md never links {document.name}"


def test_the_readme_puts_its_commands_on_path_before_using_them_bare() -> None:
    """A new user follows the README from the top: a bare `kbctl` before the PATH step
    is "command not found"."""
    text = README.read_text(encoding="utf-8")
    path_step = None
    for language, fence, lines in _fenced_blocks(text):
        if language not in ("sh", ""):
            continue
        for line in lines:
            if line.startswith('export PATH="$HOME/.kbindex/bin:$PATH"'):
                path_step = fence
            first = line.split()[0] if line.split() else ""
            if first in OWN_COMMANDS:
                assert path_step is not None and path_step <= fence, (
                    f"README.md line {fence}: `{line}` runs before ~/.kbindex/bin is on PATH"
                )
    assert path_step is not None, "README.md never puts ~/.kbindex/bin on PATH"


def test_the_readme_gives_mcp_hosts_absolute_commands() -> None:
    """Hosts start servers without a shell: no PATH lookup, no ~ expansion."""
    for language, fence, lines in _fenced_blocks(README.read_text(encoding="utf-8")):
        if language != "json":
            continue
        servers = json.loads("\n".join(lines))["mcpServers"]
        for server in servers.values():
            if "command" in server:
                assert server["command"].startswith("/"), f"README.md line {fence}"


def test_ci_runs_the_test_command_the_readme_gives() -> None:
    readme = README.read_text(encoding="utf-8")
    ci = (TOP / ".ci" / "run").read_text(encoding="utf-8")
    ci_steps = {
        step.replace(" -q ", " ").strip()
        for line in ci.splitlines()
        if not line.startswith("#")
        for step in line.split(" && ")
    }
    given = [
        line
        for _, _, lines in _fenced_blocks(readme)
        for line in lines
        if "pip install -e '.[test" in line
    ]
    assert len(given) == 1, "README.md gives the install-and-test command once"
    for line in given:
        for step in line.split(" && "):
            assert step in ci_steps, f".ci/run does not run the README's `{step}`"


def test_every_benchmark_section_the_code_cites_exists() -> None:
    """A comment that points at figures does so by section title (the figures themselves
    live in bench/README.md, never in code); a renamed or dropped section would leave it
    pointing at nothing."""
    headings = set(re.findall(r"^#+ (.+)$", (TOP / "bench" / "README.md").read_text("utf-8"), re.M))
    cited: list[tuple[str, str]] = []
    for package in ("daemon", "proto", "ctl", "mcpfront"):
        for source in (TOP / package).rglob("*.py"):
            text = " ".join(re.sub(r"\n\s*#\s*", " ", source.read_text("utf-8")).split())
            for title in re.findall(r'bench/README\.md`{0,2}, "([^"]+)"', text):
                cited.append((str(source.relative_to(TOP)), title))
    for where, title in cited:
        assert title in headings, f'{where} cites bench/README.md, "{title}": no such section'


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
    """The kbctl reference (docs/kbctl.md)."""
    return (TOP / "docs" / "kbctl.md").read_text(encoding="utf-8")


def test_every_kbctl_option_has_help_and_is_in_the_kbctl_reference() -> None:
    """Each option (``kbctl --version``, ``grep -e``, ...) says what it does in ``--help``
    and is named in docs/kbctl.md, in one of its spellings."""
    section = _kbctl_section()
    options = _options(build_parser(), "kbctl")
    assert {"kbctl --version", "kbctl grep --regexp", "kbctl search --limit"} <= set(options)
    for where, action in options.items():
        assert action.help, f"{where} has no help text"
        spellings = action.option_strings
        named = (re.search(rf"(?<![\w-]){re.escape(s)}(?![\w-])", section) for s in spellings)
        assert any(named), f"{where} is not in the README's kbctl section"


def test_the_kbctl_reference_says_how_search_takes_exclusions() -> None:
    section = _kbctl_section()
    assert "kbctl search python -django" in section
    assert "kbctl search -- " in section
    from kbindex.ctl.main import SEARCH_HELP

    assert "kbctl search python -django" in SEARCH_HELP
