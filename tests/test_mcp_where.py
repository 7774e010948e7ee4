"""The ``where`` argument of the MCP tools (``mcpfront.where``): one string for every
filter, read into the request's fields."""

from __future__ import annotations

import pytest
from kbindex.mcpfront.arguments import ArgumentError
from kbindex.mcpfront.where import filters
from kbindex.proto.messages import Search


def test_every_filter_in_one_string() -> None:
    got = filters(
        "kind:doc kind:code tag:#project 'owner=Ann Lee' modified:7d created:2024"
        " date:..2023 scope:notes"
    )
    assert got == {
        "kind": ["doc", "code"],
        "tag": ["#project"],
        "field": ["owner=Ann Lee"],
        "modified": "7d",
        "date": ["created:2024", "..2023"],
        "scope": ["notes"],
    }
    Search(query="x", **got)  # the fields a request takes


@pytest.mark.parametrize("where", [None, "", "  "])
def test_no_filters(where: str | None) -> None:
    assert filters(where) == {}


@pytest.mark.parametrize(("where", "why"), [("alpha", "is not a filter"), ("'open", "cannot")])
def test_a_term_that_is_no_filter(where: str, why: str) -> None:
    with pytest.raises(ArgumentError, match=why):
        filters(where)


def test_prefer_recent_is_a_search_term() -> None:
    assert filters("prefer:recent kind:doc", ranked=True)["recent"] == "on"
    assert filters("prefer:recent:30d", ranked=True)["recent"] == "30d"
    Search(query="x", **filters("prefer:recent", ranked=True))
    with pytest.raises(ArgumentError, match="works in search only"):
        filters("prefer:recent")


def test_links_terms_go_to_find_files_alone() -> None:
    from kbindex.mcpfront.where import linked

    assert linked("'links:notes/a b.md'") == ("notes/a b.md", False)
    assert linked("linked-from:/abs/x.md") == ("/abs/x.md", True)
    assert linked("kind:doc") is None and linked(None) is None
    with pytest.raises(ArgumentError, match="goes alone"):
        linked("links:a.md tag:x")
    with pytest.raises(ArgumentError, match="needs a path"):
        linked("links:")
    with pytest.raises(ArgumentError, match="find_files only"):
        filters("linked-from:a.md")


@pytest.mark.parametrize("where", ["tag:", "kind:", "scope:", "modified:", "created:", "date:"])
def test_a_term_without_its_value_says_so(where: str) -> None:
    with pytest.raises(ArgumentError, match=rf"The term '{where}' of 'where' needs a value, like"):
        filters(f"kind:doc {where}")


def test_a_second_modified_span_is_refused_not_dropped() -> None:
    with pytest.raises(ArgumentError, match="modified: goes once"):
        filters("modified:7d modified:2020")


def test_term_names_without_regard_to_case() -> None:
    assert filters("TAG:Project Created:2024 Kind:doc") == {
        "kind": ["doc"],
        "tag": ["Project"],
        "field": [],
        "date": ["created:2024"],
        "scope": [],
    }
