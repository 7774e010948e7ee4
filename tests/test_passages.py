"""Where a hit's snippet comes from: the line with the most distinct query words,
stem-aware, bounded whatever the size of the file."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kbindex.daemon.searching.passages import (
    MAX_CHARS,
    MAX_LINES,
    _lowered,
    _occurrences,
    _rules,
    _token_stop,
    best_passage,
    head,
)
from kbindex.daemon.searching.query import to_plan


def passage(body: str, query: str) -> tuple[str, int] | None:
    return best_passage(body, to_plan(query).needles)


def test_the_line_with_most_distinct_words_wins_over_the_first() -> None:
    body = "a scheduler note\n\nunrelated\nthe scheduler picks the next task\n"
    assert passage(body, "scheduler next task") == (
        "the ⟦scheduler⟧ picks the ⟦next⟧ ⟦task⟧",
        4,
    )


def test_stemmed_forms_are_found_and_marked_whole() -> None:
    body = "intro\nscheduling happens when a worker picked jobs\n"
    snippet, line = passage(body, "how does the scheduler pick jobs") or ("", 0)
    assert line == 2
    assert "⟦scheduling⟧" in snippet and "⟦picked⟧" in snippet and "⟦jobs⟧" in snippet


def test_a_phrase_split_by_a_line_break_still_places_the_snippet() -> None:
    body = "header\n\nthe quick\nbrown fox\n"
    snippet, line = passage(body, '"quick brown"') or ("", 0)
    assert line == 3 and "⟦quick⟧" in snippet and "⟦brown⟧" in snippet


def test_hard_wrapped_prose_shows_the_rest_of_the_paragraph() -> None:
    body = "# T\n\nThe needle is here,\nand the sentence goes on\nto the end.\n\nNext paragraph.\n"
    snippet, line = passage(body, "needle") or ("", 0)
    assert line == 3
    assert snippet == "The ⟦needle⟧ is here, and the sentence goes on to the end."


def test_a_huge_file_full_of_matches_gives_a_short_snippet_on_the_best_line() -> None:
    common = "common word here\n" * 50_000  # 850 KB, 50,000 hits of one word
    body = common + "common and rare together\n" + common
    snippet, line = passage(body, "common rare") or ("", 0)
    # The occurrence budget stops the scan before line 50,001; the first line with
    # the most distinct words among those seen is shown, still short.
    assert len(snippet) <= MAX_CHARS + 10
    assert "⟦common⟧" in snippet and line >= 1


def test_a_long_line_is_clipped_around_the_match() -> None:
    body = "y" * 5000 + " haystackneedle " + "z" * 5000
    snippet, line = passage(body, "haystackneedle") or ("", 0)
    assert line == 1 and "⟦haystackneedle⟧" in snippet
    assert snippet.startswith("…") and snippet.endswith("…")
    assert len(snippet) <= MAX_CHARS + 10


def test_no_needle_in_the_body_gives_none_and_head_shows_the_start() -> None:
    assert passage("nothing to see\n", "absent") is None
    assert head("\n\n# Title\nfirst line\n") == "# Title first line"
    assert len(head("x " * 10_000)) <= MAX_CHARS + 10


def test_markers_typed_in_the_file_do_not_leak() -> None:
    body = "control \x01chars\x02 near the needle\n"
    snippet, _ = passage(body, "needle") or ("", 0)
    assert "\x01" not in snippet and "\x02" not in snippet and "⟦needle⟧" in snippet


def test_text_whose_lower_case_changes_length_still_finds_the_line() -> None:
    body = "İstanbul first\nİzmir and the needle\n"  # "İ".lower() is two characters
    assert passage(body, "needle") == ("İzmir and the ⟦needle⟧", 2)


def test_the_phrase_itself_wins_over_its_words_apart() -> None:
    body = "intro\nthe zeels went west, the feling stayed\nwhere zeels feling grows\n"
    snippet, line = passage(body, '"zeels feling"') or ("", 0)
    assert line == 3
    assert snippet == "where ⟦zeels feling⟧ grows"
    # An identifier shows its parts too: the line holding it whole wins.
    body = "max and file size, but mb\nset max_file_size_mb here\n"
    assert (passage(body, "max_file_size_mb") or ("", 0))[1] == 2


_SPELLING = st.text(alphabet="abc -", min_size=1, max_size=4)


@settings(max_examples=300, deadline=None)
@given(
    text=st.text(alphabet="abcABC -\n", max_size=60),
    spellings=st.lists(_SPELLING, min_size=1, max_size=4, unique=True),
)
def test_string_search_finds_what_a_scan_of_every_position_finds(
    text: str, spellings: list[str]
) -> None:
    # Snippets are placed and marked by str.find (``_occurrences``), skipping what
    # is not a whole word; it must agree with trying every spelling at every position,
    # in order, or a snippet would show a different line or marks.
    needles = tuple(s for s in spellings if s.strip(" -") == s or not s.strip())
    rules = _rules(needles)
    lowered = _lowered(text)
    expected, pos = [], 0
    while pos < len(text):
        for spelling, rule in rules.items():
            if lowered.startswith(spelling, pos):
                stop = _token_stop(text, pos, spelling, rule)
                if stop != -1:
                    expected.append((pos, stop))
                    pos = stop - 1
                    break
        pos += 1
    found = [(a, b) for a, b, _ in _occurrences(lowered, text, rules, 0, len(text))]
    assert found == expected


@pytest.mark.parametrize(
    ("body", "query", "snippet", "line"),
    [
        # A word marks whole words, never the inside of another.
        ("start here\nextract the tar file\n", "tar", "extract the ⟦tar⟧ file", 2),
        ("GIT_CEILING_DIRECTORIES\nthis OR that\n", "OR", "this ⟦OR⟧ that", 2),
        # "Notes" stems to "note", not "not": the line is the one holding "not".
        ("# Release Notes\n" + "x\n" * 10 + "this is not it\n", "not", "this is ⟦not⟧ it", 12),
        ("target tar's tarred\n", "tar", "target ⟦tar⟧'s ⟦tarred⟧", 1),
        # Stems, camelCase parts, acronyms, plurals of capitals, prefixes.
        ("we are running now\n", "runs", "we are ⟦running⟧ now", 1),
        ("call parseHttpRequest()\n", "http", "call parse⟦Http⟧Request()", 1),
        ("an HTTPServer here\n", "server", "an HTTP⟦Server⟧ here", 1),
        ("the URLs here\n", "url", "the ⟦URLs⟧ here", 1),
        ("predeprecated\ndeprecation warnings\n", "deprecat*", "⟦deprecation⟧ warnings", 2),
        ("python3 only\nplain python\n", "python", "plain ⟦python⟧", 2),
    ],
)
def test_marks_and_lines_point_at_the_words_that_matched(
    body: str, query: str, snippet: str, line: int
) -> None:
    assert passage(body, query) == (snippet, line)


def test_a_window_cut_inside_a_word_marks_no_part_of_it() -> None:
    body = "x" * 300 + " tar " + "y" * 150 + "start" + "z" * 300
    snippet, _ = passage(body, "tar") or ("", 0)
    assert snippet.count("⟦") == 1 and "⟦tar⟧" in snippet


@pytest.mark.parametrize(
    ("before", "found"),
    [(MAX_LINES - 1, True), (MAX_LINES, False), (MAX_LINES + 100, False)],
)
def test_only_the_first_max_lines_lines_holding_a_word_are_looked_at(
    before: int, found: bool
) -> None:
    # Runs of lines holding one word, interleaved with another's, then the line with
    # both: it is the answer only while it is within the first MAX_LINES such lines.
    lines = [("alpha here" if i % 3 else "beta there") + f" {i}" for i in range(before)]
    body = "\n".join([*lines, "no word", "alpha and beta together", "alpha"]) + "\n"
    shown = best_passage(body, ("alpha", "beta"))
    assert shown is not None
    assert (shown[1] == before + 2) is found
    if not found:
        assert shown[1] == 1
