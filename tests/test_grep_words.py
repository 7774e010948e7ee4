"""``-w`` over a literal with word characters at its ends runs as ``\\bLITERAL\\b``
(``ripgrep``'s docstring); these pin down when, and which files are searched again with
``-w``. ``test_grep_oracle.py`` compares the outcome with rg's own ``-w`` (the lantern
cases, and literals of several words)."""

from __future__ import annotations

import pytest
from kbindex.daemon.searching import grep, ripgrep, trigrams
from kbindex.daemon.searching.ripgrep import Flags, Record


@pytest.mark.parametrize(
    ("flags", "word_literal"),
    [
        (Flags("kmem_cache_alloc", word=True), True),
        (Flags("kmem_cache_alloc", fixed=True, word=True), True),
        (Flags("x86", word=True), True),
        (Flags("kmem_cache_alloc"), False),  # no -w
        (Flags("kmem_cache_alloc", word=True, ignore_case=True), True),
        (Flags("résumé", word=True), False),
        (Flags("cache_alloc(", fixed=True, word=True), False),
        (Flags("number of channels", word=True), True),
        (Flags("a-b c#d", fixed=True, word=True), True),
        (Flags("foo.bar", word=True), False),  # a metacharacter
        (Flags("foo.bar", fixed=True, word=True), False),
        (Flags(" foo", word=True), False),  # not a word character at an end
        (Flags("line\nbreak", word=True), False),
        (Flags(r"\w+", word=True), False),
    ],
)
def test_only_a_literal_with_word_characters_at_its_ends_runs_between_boundaries(
    flags: Flags, word_literal: bool
) -> None:
    assert flags.word_literal is word_literal


def test_a_word_literal_is_given_between_word_boundaries_not_with_w() -> None:
    flags = Flags("kmem_cache_alloc", fixed=True, word=True, before=1)
    argv = flags.argv("rg", word_literal=True)
    assert "--word-regexp" not in argv
    assert "--fixed-strings" not in argv
    assert argv[-2:] == [r"\bkmem_cache_alloc\b", "--"]
    assert "--word-regexp" in flags.argv("rg")
    with pytest.raises(ValueError, match="word literal"):
        flags.argv("rg", count=True, word_literal=True)


def test_files_with_a_match_line_that_is_not_utf8_are_searched_again() -> None:
    records = [
        Record(b"a.txt", 1, 3, "\u00e9lantern here".encode()),  # UTF-8: \\b is -w
        Record(b"b.txt", 1, 2, b"\xe9lantern"),  # a cp1252 byte: \\b is not -w
        Record(b"c.txt", 2, 0, b"\xe9lantern"),  # a context line
        Record(b"c.txt", 3, 1, b"lantern"),
        Record(b"d.txt", 1, 1, b"lantern, caf\xe9"),
    ]
    assert ripgrep.unsure(records) == {b"b.txt", b"d.txt"}


def test_beside_a_literals_words_a_few_trigrams_spread_over_it_are_asked() -> None:
    literal = "devm_hwmon_device_register_with_info"
    every = trigrams.required(literal)
    query, words = grep.required(literal, fixed=False, ignore_case=False, word=True)
    assert words is not None
    assert isinstance(every, trigrams.And)
    assert isinstance(query, trigrams.And)
    assert len(query.parts) == grep.TRIGRAMS_BESIDE_WORDS
    assert query.parts < every.parts
    first, last = literal[:3].encode().hex(), literal[-3:].encode().hex()
    assert {first, last} <= query.parts
    # Without words (a literal whose edges may be glued), every trigram is asked.
    fixed = "Invalid number of channels"
    assert grep.required(fixed, fixed=True, ignore_case=False, word=False) == (
        trigrams.required(fixed, fixed=True),
        None,
    )


def test_a_short_or_structured_query_is_kept_whole() -> None:
    short = trigrams.required("kmem_ca")
    assert trigrams.spread(short, "kmem_ca", 6) == short
    either = trigrams.required("(kmem_cache_alloc|kfree_rcu_pointer)")
    assert isinstance(either, trigrams.Or)
    assert trigrams.spread(either, "kmem_cache_alloc", 2) == either
