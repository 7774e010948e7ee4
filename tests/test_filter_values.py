"""Filter values as people type them (``searching.filters``): time spans, kinds, tags,
fields, scopes, and a clear error for what cannot be read."""

from __future__ import annotations

import datetime as dt

import pytest
from kbindex.daemon.index.plan import DateRange, Filters
from kbindex.daemon.searching.filters import BadFilter, build, span

NOW = dt.datetime(2026, 3, 15, 12, tzinfo=dt.UTC).timestamp()
DAY = 86400


def _at(*parts: int) -> float:
    return dt.datetime(*parts, tzinfo=dt.UTC).timestamp()  # type: ignore[misc]


@pytest.mark.parametrize(
    ("text", "after", "before"),
    [
        ("7d", NOW - 7 * DAY, None),
        ("2 weeks", NOW - 14 * DAY, None),
        ("3h ago", NOW - 3 * 3600, None),
        ("1 month", NOW - 30 * DAY, None),
        ("2024", _at(2024, 1, 1), _at(2025, 1, 1)),
        ("2024-12", _at(2024, 12, 1), _at(2025, 1, 1)),
        ("2024-02-29", _at(2024, 2, 29), _at(2024, 3, 1)),
        ("2024-05-01T10:00", _at(2024, 5, 1, 10), None),
        ("2024-01..2024-03", _at(2024, 1, 1), _at(2024, 4, 1)),
        ("30d..", NOW - 30 * DAY, None),
        ("..2023", None, _at(2024, 1, 1)),
    ],
)
def test_spans(text: str, after: float | None, before: float | None) -> None:
    assert span(text, NOW, "modified") == DateRange(after, before)


@pytest.mark.parametrize(
    "text",
    ["", " ", "..", "last tuesday", "2024-13", "7 parsecs", "20240", "7 fortnights", "2024..2023"],
)
def test_spans_that_cannot_be_read(text: str) -> None:
    with pytest.raises(BadFilter, match="is not a time span") as raised:
        span(text, NOW, "modified")
    assert "isoformat" not in str(raised.value)  # Python's words, not the user's


def test_a_request_s_filters() -> None:
    got = build(
        kinds=["Doc", "code", "doc"],
        tags=["#Project"],
        fields=[" status = draft "],
        modified="7d",
        dates=["created:2024", "..2020"],
        scopes=["notes"],
        named={"notes": "/home/me/notes"},
        now=NOW,
    )
    assert got == Filters(
        roots=("/home/me/notes",),
        kinds=("doc", "code"),
        tags=("project",),
        fields=(("status", "draft"),),
        modified=DateRange(NOW - 7 * DAY, None),
        dated=(
            DateRange(_at(2024, 1, 1), _at(2025, 1, 1), "created"),
            DateRange(None, _at(2021, 1, 1)),
        ),
    )
    assert not build(named={}, now=NOW).structured


@pytest.mark.parametrize(
    ("given", "why"),
    [
        ({"kinds": ["docs"]}, "unknown kind 'docs'"),
        ({"tags": ["#"]}, "an empty tag"),
        ({"fields": ["status"]}, "not key=value"),
        ({"fields": ["=draft"]}, "not key=value"),
        ({"scopes": ["work"]}, r"no root is named 'work' \(scopes: notes\)"),
        ({"dates": ["created:soon"]}, "created date filter 'soon'"),
        ({"dates": ["due:2024"]}, "'due' is not a front matter date; name one of created, date"),
        ({"dates": [""]}, "date filter '' is not a time span"),
        ({"modified": ""}, "modified filter '' is not a time span"),
        ({"modified": "  "}, "modified filter '' is not a time span"),
    ],
)
def test_values_that_cannot_be_read(given: dict[str, list[str]], why: str) -> None:
    with pytest.raises(BadFilter, match=why):
        build(**given, named={"notes": "/n"}, now=NOW)  # type: ignore[arg-type]


def test_a_folder_name_several_roots_share_says_why_it_names_none() -> None:
    with pytest.raises(BadFilter, match=r"'docs': several roots' folders are, so none is; give"):
        build(scopes=["docs"], named={"notes": "/n"}, shared={"docs"}, now=NOW)
