"""Links of Markdown files (``indexing.links``): which are recorded, and the path each
names relative to the root."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kbindex.daemon.indexing.links import Link, of_text, resolve


def test_links_of_a_note_with_their_lines() -> None:
    text = (
        "# Plan\n"
        'See [the design](design.md) and [api](../ref/api.md#get "API").\n'
        "![diagram](img/flow.png)\n"
        "[[Meeting notes]] and [[people/Ann|Ann]] and [[Topic#Heading]]\n"
        "[ref]: <other notes.md>\n"
    )
    assert of_text(text, "projects/plan.md") == [
        Link("projects/design.md", "the design", 2),
        Link("ref/api.md", "api", 2),
        Link("projects/img/flow.png", "diagram", 3),
        Link("Meeting notes.md", "Meeting notes", 4, wiki=True),
        Link("people/Ann.md", "Ann", 4, wiki=True),
        Link("Topic.md", "Topic", 4, wiki=True),
        Link("projects/other notes.md", "ref", 5),
    ]


@pytest.mark.parametrize(
    "target",
    [
        "https://example.org/a.md",
        "mailto:a@b.c",
        "//cdn.example.org/x.js",
        "#section",
        "../../outside.md",
        "..",
        "",
    ],
)
def test_external_and_outside_links_are_left_out(target: str) -> None:
    assert resolve(target, "notes/a.md") is None
    assert of_text(f"[x]({target})\n", "notes/a.md") == []


def test_resolution() -> None:
    assert resolve("/top.md", "a/b/c.md") == "top.md"
    assert resolve("./x%20y.md?raw=1", "a/c.md") == "a/x y.md"
    assert resolve("../b.md", "a/c.md") == "b.md"


def test_links_in_code_are_not_links() -> None:
    text = "```\n[x](a.md) [[b]]\n```\n`[y](c.md)`\n[z](d.md)\n"
    assert of_text(text, "n.md") == [Link("d.md", "z", 5)]


def test_only_markdown_has_links() -> None:
    assert of_text("[x](a.md) [[b]]\n", "n.txt") == []
    assert of_text("[x](a.md)\n", "n.MD") == [Link("a.md", "x", 1)]


@given(st.text(max_size=300))
def test_any_text_gives_paths_inside_the_root(text: str) -> None:
    for link in of_text(text, "dir/n.md"):
        assert not link.target.startswith(("/", "../")) and link.target not in ("", ".", "..")
