"""``-w`` over an ASCII word runs between ASCII word boundaries (``ripgrep``'s
docstring); these pin down when, and which files are searched again with ``-w``.
``test_grep_oracle.py`` compares the outcome with rg's own ``-w`` (the lantern cases)."""

from __future__ import annotations

import pytest
from kbindex.daemon.searching import grep, ripgrep, trigrams
from kbindex.daemon.searching.ripgrep import Flags, Record


@pytest.mark.parametrize(
    ("flags", "ascii_word"),
    [
        (Flags("kmem_cache_alloc", word=True), True),
        (Flags("kmem_cache_alloc", fixed=True, word=True), True),
        (Flags("x86", word=True), True),
        (Flags("kmem_cache_alloc"), False),  # no -w
        (Flags("kmem_cache_alloc", word=True, ignore_case=True), False),  # Kelvin sign, long s
        (Flags("résumé", word=True), False),
        (Flags("cache_alloc(", fixed=True, word=True), False),
        (Flags("foo bar", word=True), False),
        (Flags(r"\w+", word=True), False),
    ],
)
def test_only_an_ascii_word_with_case_runs_between_ascii_boundaries(
    flags: Flags, ascii_word: bool
) -> None:
    assert flags.ascii_word is ascii_word


def test_an_ascii_word_is_given_as_a_regex_between_boundaries_not_as_w() -> None:
    flags = Flags("kmem_cache_alloc", fixed=True, word=True, before=1)
    argv = flags.argv("rg", ascii_word=True)
    assert "--word-regexp" not in argv
    assert "--fixed-strings" not in argv
    assert argv[-2:] == [r"(?-u:\b)kmem_cache_alloc(?-u:\b)", "--"]
    assert "--word-regexp" in flags.argv("rg")
    with pytest.raises(ValueError, match="ASCII word"):
        flags.argv("rg", count=True, ascii_word=True)


def test_files_where_the_word_meets_a_non_ascii_byte_are_searched_again() -> None:
    records = [
        Record(b"a.txt", 1, 3, "\u00e9lantern here".encode()),  # é: a word character
        Record(b"b.txt", 1, 6, "plain lantern, caf\u00e9".encode()),  # é elsewhere
        Record(b"c.txt", 2, 0, "\u00e9lantern".encode()),  # a context line
        Record(b"c.txt", 3, 1, b"lantern"),
        Record(b"d.txt", 1, 1, b"lantern\xe9"),  # a cp1252 byte
        Record(b"e.txt", 1, 1, "lanternlantern \u00b2lantern".encode()),  # the third
    ]
    assert ripgrep.unsure(records, "lantern") == {b"a.txt", b"d.txt", b"e.txt"}


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
