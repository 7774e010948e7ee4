"""``trigrams.required`` never rules out a line that matches: whenever a pattern
matches a line, the line's own trigram tokens (``grams.of_text``, as the index holds
them) satisfy the query. The pattern's syntax, flags and the file's bytes are those
of ripgrep; here Python's ``re`` is the matcher, so the patterns are drawn from a
grammar both engines read alike (literals, classes and ranges, ``.``, anchors,
alternation, ``?``/``*``/``+``/``{n,m}`` greedy or lazy, groups, ``(?i)`` and
``(?i:...)``), over an alphabet holding the letters whose case folds are special (the
Kelvin sign, the long s, the sigmas, the sharp s, micro and mu, the ohm sign), where
the two engines agree (checked against rg; they differ on the dotted and dotless i,
which are left out).
"""

from __future__ import annotations

import re

import pytest
from grep_helpers import add_document, memory_index
from hypothesis import given, settings
from hypothesis import strategies as st
from kbindex.daemon.backends.sqlite import candidates
from kbindex.daemon.grep import trigrams
from kbindex.daemon.indexing import grams

LETTERS = "abcksxyzABCKSXYZ"
SPECIAL = "é\u00c9σςΣµμßẞ\u212a\u017fǅΩ\u2126ω日本🙂"
OTHERS = " -_,;:'\"#%&~=<>/@!0123456789"
META = set(".^$*+?{}[]\\|()")
ALPHABET = LETTERS + SPECIAL + OTHERS


def _escaped(ch: str) -> str:
    return "\\" + ch if ch in META else ch


literal = st.sampled_from(ALPHABET + ".^$*+?{}[]|()").map(_escaped)
hex_escape = st.sampled_from("akK\u00e9\u212a\u03c3").map(
    lambda c: f"\\x{ord(c):02x}" if ord(c) < 0x80 else f"\\u{ord(c):04x}"
)
class_item = st.one_of(
    st.sampled_from(LETTERS + SPECIAL + " _,;:0123456789"),
    st.sampled_from(["a-c", "j-l", "r-t", "A-C", "x-z", "0-9", "α-ω"]),
)
bracket = st.builds(
    lambda negated, items: "[" + ("^" if negated else "") + "".join(items) + "]",
    st.booleans(),
    st.lists(class_item, min_size=1, max_size=4),
)
WORDS = ("abc", "kelvin", "Straße", "σίσυφος", "ΛΌΓΟΣ", "µικρό", "日本語", "a.b", "x+y", "sss")
"""Runs of literals: most of what a query requires comes from three or more in a row."""
word = st.sampled_from(WORDS).map(lambda w: "".join(map(_escaped, w)))
atom = st.one_of(
    literal, literal, word, word, hex_escape, bracket, st.sampled_from([".", "^", "$"])
)
quantifier = st.one_of(
    st.just(""),
    st.just(""),
    st.sampled_from(["?", "*", "+", "??", "*?", "+?"]),
    st.builds(lambda n: f"{{{n}}}", st.integers(0, 3)),
    st.builds(lambda n, m: f"{{{n},{n + m}}}", st.integers(0, 2), st.integers(0, 2)),
    st.builds(lambda n: f"{{{n},}}", st.integers(0, 2)),
)


MAX_QUANTIFIERS = 3
"""Per pattern, and never one inside another: Python's ``re`` backtracks, and shrinking
drives every character to the same letter ("a*a*a*a*b" on "aaaa..."), where it takes
time exponential in the nesting and polynomial in the count."""


@st.composite
def _regex(draw: st.DrawFn, depth: int = 0) -> tuple[str, int]:
    """A pattern and how many quantifiers it holds."""
    branches, used = [], 0
    for _ in range(draw(st.integers(1, 3))):
        pieces = []
        for _ in range(draw(st.integers(0, 5))):
            inner = 0
            if depth < 2 and draw(st.integers(0, 4)) == 0:
                body, inner = draw(_regex(depth + 1))
                piece = draw(st.sampled_from(["(", "(?:", "(?i:"])) + body + ")"
            else:
                piece = draw(atom)
            used += inner
            if not inner and used < MAX_QUANTIFIERS and piece not in ("^", "$"):
                q = draw(quantifier)
                piece += q
                used += bool(q)
            pieces.append(piece)
        branches.append("".join(pieces))
    return "|".join(branches), used


patterns = st.builds(lambda flag, made: ("(?i)" if flag else "") + made[0], st.booleans(), _regex())
texts = st.text(st.sampled_from(ALPHABET + "\n"), max_size=30)
matching_limit = 30
"""Characters kept of a string built to match (``st.from_regex`` may pad it on both
sides): long lines only slow Python's backtracking down."""


def satisfied(query: trigrams.Query, tokens: set[str]) -> bool:
    if query is None:
        return True
    if isinstance(query, str):
        return query in tokens
    if isinstance(query, trigrams.And):
        return all(satisfied(p, tokens) for p in query.parts)
    return any(satisfied(p, tokens) for p in query.parts)


def tokens(line: str) -> set[str]:
    return set(grams.of_text(line, "utf-8").split())


def _clean(text: str) -> str:
    """A file's possible text: no lone surrogates (no file holds one)."""
    return "".join(c for c in text if not 0xD800 <= ord(c) <= 0xDFFF)


def _check(pattern: str, ignore_case: bool, lines: list[str], *, fixed: bool = False) -> None:
    compiled = re.compile(re.escape(pattern) if fixed else pattern, re.I if ignore_case else 0)
    query = trigrams.required(pattern, fixed=fixed, ignore_case=ignore_case)
    for line in lines:
        if compiled.search(line):
            assert satisfied(query, tokens(line)), (pattern, line, query)


def _matching_lines(pattern: str, ignore_case: bool, data: st.DataObject) -> None:
    try:
        compiled = re.compile(pattern, re.I if ignore_case else 0)
    except re.error:  # a construct Python refuses: not part of the grammar's promise
        return
    lines = data.draw(texts).split("\n")
    # Lines that match, built from the pattern: most random lines match nothing.
    whole = st.from_regex(compiled, fullmatch=True)
    made = data.draw(st.lists(st.one_of(whole, st.from_regex(compiled)), max_size=3))
    lines += [t[:matching_limit] for t in made]
    _check(pattern, ignore_case, [_clean(ln) for line in lines for ln in line.split("\n")])


@settings(max_examples=20, deadline=None)
@given(patterns, st.booleans(), st.data())
def test_a_matching_line_satisfies_the_query(
    pattern: str, ignore_case: bool, data: st.DataObject
) -> None:
    _matching_lines(pattern, ignore_case, data)


@pytest.mark.slow
@settings(max_examples=600, deadline=None)
@given(patterns, st.booleans(), st.data())
def test_a_matching_line_satisfies_the_query_over_many_patterns(
    pattern: str, ignore_case: bool, data: st.DataObject
) -> None:
    _matching_lines(pattern, ignore_case, data)


@settings(max_examples=100, deadline=None)
@given(st.text(st.sampled_from(ALPHABET), min_size=1, max_size=12), st.booleans(), texts, texts)
def test_a_line_holding_a_fixed_string_satisfies_its_query(
    literal_text: str, ignore_case: bool, before: str, after: str
) -> None:
    variants = [literal_text, literal_text.upper(), literal_text.lower(), literal_text.swapcase()]
    lines = [before + v + after for v in variants]
    _check(literal_text, ignore_case, [ln for line in lines for ln in line.split("\n")], fixed=True)


@pytest.mark.parametrize(
    ("pattern", "ignore_case", "line"),
    [
        ("kelvin", True, "\u212aELVIN"),
        ("(?i)strasse", False, "\u017ftrasse"),
        ("(?i)STRASSE", False, "\u017fTRASSE"),
        ("σίσυφος", True, "ΣΊΣΥΦΟΣ"),
        ("(?i:μικρό)", False, "µικρό"),
        ("ohm Ω", True, "OHM \u2126"),
        ("[k]elvin", True, "\u212aelvin"),
        ("caf\\x{e9}", False, "café"),
        ("caf\\u00e9|thé", False, "du thé"),
        (r"a\x{212A}b", True, "akb"),
        ("x(kelvin)?y", False, "xy"),
        ("ab(cde){0,2}f", False, "abf"),
        ("abc[^xyz]def", False, "abc-def"),
        ("^abc$", False, "abc"),
        ("a.c", False, "abc"),
        ("(abc|xyz)(def|uvw)", False, "xyzdef"),
        ("(?i:ABC)def", False, "abcdef"),
        ("abc|", False, "z"),
    ],
)
def test_tricky_patterns_require_what_the_line_holds(
    pattern: str, ignore_case: bool, line: str
) -> None:
    query = trigrams.required(pattern, ignore_case=ignore_case)
    assert satisfied(query, tokens(line)), query


def test_queries_stay_shallow_enough_for_fts5() -> None:
    # Alternations nested 80 deep, which ripgrep accepts: FTS5's parser overflows
    # its stack past about 30 levels.
    nested = "".join(f"(ab{i:03d}|cd{i:03d}" for i in range(80)) + ")" * 80
    query = trigrams.required(nested)
    assert query is not None and _depth(query) <= trigrams.MAX_DEPTH
    assert satisfied(query, tokens("xx cd000cd001ab002 yy"))
    conn = memory_index()
    candidates.find(conn, query, None, [], [])
    assert trigrams.required("(" * 5000) is None  # deeper than Python's stack: ANY


def _depth(query: trigrams.Query) -> int:
    if not isinstance(query, trigrams.And | trigrams.Or):
        return 0
    return 1 + max(_depth(p) for p in query.parts)


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(patterns, st.booleans(), st.data())
def test_the_index_admits_every_file_with_a_match(
    pattern: str, ignore_case: bool, data: st.DataObject
) -> None:
    """The same property through FTS5: the query's MATCH expression is valid and the
    trigram table admits each document holding a matching line."""
    try:
        compiled = re.compile(pattern, re.I if ignore_case else 0)
    except re.error:
        return
    whole = st.from_regex(compiled, fullmatch=True)
    made = data.draw(st.lists(st.one_of(whole, st.from_regex(compiled)), min_size=1, max_size=3))
    texts = [t[:matching_limit] for t in made]
    conn = memory_index()
    want = set()
    for i, text in enumerate(_clean(t) for t in texts):
        path = f"/r/f{i}.txt"
        loaded = add_document(conn, path, "/r", text.encode())
        if loaded is None:  # control characters: binary, not indexed
            continue
        if any(compiled.search(line) for line in loaded.text.split("\n")):
            want.add(path)
    query = trigrams.required(pattern, ignore_case=ignore_case)
    found = candidates.find(conn, query, None, [], [])
    conn.close()
    assert want <= set(found.paths), (pattern, query)


def test_a_fixed_string_under_i_requires_the_runs_between_k_and_s() -> None:
    # -i lets k match the Kelvin sign and s the long s: those require nothing, the
    # characters around them still do (the whole literal used to require nothing).
    query = trigrams.required("ISA DMA", fixed=True, ignore_case=True)
    assert isinstance(query, trigrams.And)
    assert query.parts == {b"a d".hex(), b" dm".hex(), b"dma".hex()}
    kmem = trigrams.required("Kmem_cache_alloc", fixed=True, ignore_case=True)
    assert isinstance(kmem, trigrams.And)
    assert b"mem".hex() in kmem.parts
    assert b"kme".hex() not in kmem.parts
    assert satisfied(kmem, tokens("\u212amem_cache_alloc"))
