"""Front matter, tags and dates of Markdown files (``indexing.frontmatter``): what a
note's header and text give as filterable fields, and that a bad header costs only its
own fields."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kbindex.daemon.indexing import frontmatter
from kbindex.daemon.indexing.frontmatter import FrontMatter, read

NOTE = """---
title: Launch plan
tags: [Project, q3]
created: 2024-05-01
updated: 2024-06-02T10:30:00+02:00
status: draft
author:
  name: Ann
  teams: [infra, web]
---
# Launch plan

Notes on the #rollout, see #Project/Alpha.
"""


def test_fields_tags_and_dates_of_a_note() -> None:
    got = read(NOTE, "notes/plan.md")
    assert ("title", "Launch plan") in got.fields
    assert ("status", "draft") in got.fields
    assert ("author.name", "Ann") in got.fields
    assert ("author.teams", "infra") in got.fields and ("author.teams", "web") in got.fields
    assert ("created", "2024-05-01") in got.fields
    assert got.tags == ("project", "q3", "rollout", "project/alpha")
    assert dict(got.dates) == {
        "created": dt.datetime(2024, 5, 1, tzinfo=dt.UTC).timestamp(),
        "updated": dt.datetime(2024, 6, 2, 8, 30, tzinfo=dt.UTC).timestamp(),
    }
    assert got.problem == ""


def test_tags_as_text_and_date_as_text() -> None:
    got = read("---\ntags: one, two three\ndate: '2023-01-02'\n---\nbody\n", "a.md")
    assert got.tags == ("one", "two", "three")
    assert dict(got.dates) == {"date": dt.datetime(2023, 1, 2, tzinfo=dt.UTC).timestamp()}


@pytest.mark.parametrize(
    ("text", "tags"),
    [
        ("# Heading\n## Sub\n", ()),
        ("issue #12 and #a1\n", ("a1",)),
        ("see http://x.org/page#anchor and [l](https://e.com/#frag)\n", ()),
        ("`#inline` and\n```sh\n# comment #notatag\n```\n#after\n", ("after",)),
        ("~~~\n#fenced\n~~~\n", ()),
        ("a#b c&#35;d (#paren) [#bracket]\n", ("paren", "bracket")),
        ("#Same #same\n", ("same",)),
    ],
)
def test_hash_tags_in_text(text: str, tags: tuple[str, ...]) -> None:
    assert read(text, "n.md").tags == tags


def test_only_markdown_has_front_matter_or_tags() -> None:
    assert read(NOTE, "plan.txt") == FrontMatter()
    assert read("#!/bin/sh\n# #comment\n", "run.sh") == FrontMatter()


@pytest.mark.parametrize(
    ("header", "why"),
    [
        ("a: [1, 2\n", "invalid YAML"),
        ("a: &x [1]\nb: *x\n", "aliases"),
        ("a: " + "[" * 20 + "]" * 20 + "\n", "nested deeper"),
        ("a: [" + ", ".join(["1"] * 3000) + "]\n", "more than"),
        ("x: '" + "y" * (70 << 10) + "'\n", "longer than"),
        ("- just\n- a list\n", "not a mapping"),
        ("a: !!python/object/apply:os.system ['true']\n", "invalid YAML"),
    ],
)
def test_bad_front_matter_is_reported_and_the_text_still_read(header: str, why: str) -> None:
    got = read(f"---\n{header}---\nbody #kept\n", "bad.md")
    assert got.fields == () and got.dates == ()
    assert why in got.problem and got.problem.startswith("front matter not read")
    assert got.tags == ("kept",)


def test_billion_laughs_is_refused_before_it_is_built() -> None:
    lines = ["a: &a ['lol','lol','lol','lol','lol','lol','lol','lol','lol']"]
    for n in range(1, 9):
        prev, cur = chr(ord("a") + n - 1), chr(ord("a") + n)
        lines.append(f"{cur}: &{cur} [{', '.join(['*' + prev] * 9)}]")
    got = read("---\n" + "\n".join(lines) + "\n---\n", "bomb.md")
    assert "aliases" in got.problem


def test_no_front_matter_unclosed_and_crlf() -> None:
    assert read("title: x\n", "a.md").fields == ()
    assert read("---\ntitle: x\nno end\n", "a.md") == FrontMatter()
    got = read("---\r\ntitle: x\r\n---\r\nbody\r\n", "a.md")
    assert got.fields == (("title", "x"),)
    assert frontmatter.block("---\na: 1\n...\nrest") == ("a: 1\n", len("---\na: 1\n...\n"))


def test_long_values_are_cut_and_fields_bounded() -> None:
    many = "".join(f"k{i}: v\n" for i in range(frontmatter.MAX_FIELDS + 50))
    got = read(f"---\nlong: {'z' * 500}\n{many}---\n", "a.md")
    assert len(got.fields) == frontmatter.MAX_FIELDS
    assert got.fields[0] == ("long", "z" * frontmatter.MAX_VALUE_CHARS)


@given(st.text(max_size=300))
def test_any_header_text_never_raises(header: str) -> None:
    got = read(f"---\n{header}\n---\nbody\n", "a.md")
    assert isinstance(got, FrontMatter)
