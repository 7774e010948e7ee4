"""The phrases of a literal's words (``phrases``) never rule out a file ripgrep reports.

Texts are drawn from an alphabet that sits where FTS5's tokenizer and ripgrep disagree
on what a word is: ``_``, digits, a superscript and a private-use character (letters
for unicode61, boundaries for ``-w``), the Kelvin sign and the long s (``-i``), accents,
CR; some files are written in cp1252. A literal is cut from one of them, run by the real
``rg`` over the files, and every file it lists must be a candidate of the index built
from them.
"""

from __future__ import annotations

import subprocess

import pytest
from grep_helpers import RG, add_document, memory_index, needs_rg
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kbindex.daemon.backends.sqlite import candidates
from kbindex.daemon.grep import phrases, trigrams

pytestmark = [pytest.mark.slow, needs_rg]

ALPHABET = "abkKsS019_ .(-\r\u00b2\ue000\u212a\u017f\u00e9\u00fc"
WORDS = ("kmem", "cache", "alloc", "Kelvin", "sum", "x1", "a_b")

piece = st.one_of(st.sampled_from(WORDS), st.text(ALPHABET, min_size=1, max_size=3))
line = st.lists(piece, min_size=1, max_size=8).map("".join)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(line, min_size=1, max_size=4),
    st.data(),
    st.booleans(),
    st.booleans(),
    st.booleans(),
)
def test_candidates_hold_every_file_rg_reports(
    tmp_path_factory: pytest.TempPathFactory,
    lines: list[str],
    data: st.DataObject,
    word: bool,
    ignore_case: bool,
    cp1252: bool,
) -> None:
    source = data.draw(st.sampled_from(lines))
    start = data.draw(st.integers(0, len(source) - 1))
    end = data.draw(st.integers(start + 1, len(source)))
    literal = source[start:end]
    root = tmp_path_factory.mktemp("phrases")
    conn = memory_index()
    for i, text in enumerate(lines):
        raw = text.encode("cp1252", "ignore") if cp1252 and i % 2 else text.encode()
        path = root / f"f{i}.txt"
        path.write_bytes(raw + b"\n")
        add_document(conn, str(path), str(root), raw + b"\n")
    flags = ["--fixed-strings"] + ["--word-regexp"] * word + ["--ignore-case"] * ignore_case
    assert RG is not None
    done = subprocess.run(
        [RG, "-uu", "--no-config", "-l", *flags, "--regexp", literal, "--", str(root)],
        capture_output=True,
        text=True,
    )
    assert done.returncode in (0, 1), done.stderr
    query = trigrams.required(literal, fixed=True, ignore_case=ignore_case)
    words = phrases.required(literal, fixed=True, word=word, ignore_case=ignore_case)
    found = candidates.find(conn, query, None, [], [], words)
    conn.close()
    reported = set(done.stdout.split())
    assert reported <= set(found.paths), (literal, words)


def test_only_literals_and_their_whole_words_count() -> None:
    def match(pattern: str, **flags: bool) -> str | None:
        words = phrases.required(
            pattern,
            fixed=flags.get("fixed", False),
            word=flags.get("word", False),
            ignore_case=flags.get("ignore_case", False),
        )
        return None if words is None else words.phrases

    assert match('"Invalid number of channels', fixed=True) is None  # an edge left out
    assert match('"Invalid number of channels"', fixed=True) == (
        'body : "invalid number of channels"'
    )
    assert match("kmem_cache_alloc", word=True) == 'body : "kmem cache alloc"'
    assert match("kmem_cache_alloc", word=True, ignore_case=True) is None
    assert match(" foo \u00fc bar ") == 'body : "foo" AND body : "bar"'
    assert match("(struct) kmem_cache *", fixed=True) == 'body : "struct kmem cache"'
    assert match("kmem_cache_alloc\\(") is None  # a regex
    assert match("tty_port") is None  # either edge may be glued
    assert match(" a b\nc d ", fixed=True) is None  # ripgrep: two patterns
