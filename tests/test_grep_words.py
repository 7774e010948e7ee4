"""``-w`` over a literal: which files its words and trigrams admit (``candidates``).
``test_grep_oracle.py`` compares the lines with rg's own ``-w`` (the lantern cases, and
literals of several words)."""

from __future__ import annotations

import pytest
from grep_helpers import add_document, memory_index
from kbindex.daemon.backends.sqlite import candidates
from kbindex.daemon.engine import sqlite
from kbindex.daemon.grep import narrowing, trigrams


def test_beside_a_literals_words_a_few_trigrams_spread_over_it_are_asked() -> None:
    literal = "devm_hwmon_device_register_with_info"
    every = trigrams.required(literal)
    query, words = narrowing.required(literal, fixed=False, ignore_case=False, word=True)
    assert words is not None
    assert isinstance(every, trigrams.And)
    assert isinstance(query, trigrams.And)
    assert len(query.parts) == narrowing.TRIGRAMS_BESIDE_WORDS
    assert query.parts < every.parts
    first, last = literal[:3].encode().hex(), literal[-3:].encode().hex()
    assert {first, last} <= query.parts
    # Without words (a literal whose edges may be glued), every trigram is asked.
    fixed = "Invalid number of channels"
    assert narrowing.required(fixed, fixed=True, ignore_case=False, word=False) == (
        trigrams.required(fixed, fixed=True),
        None,
    )


def test_a_short_or_structured_query_is_kept_whole() -> None:
    short = trigrams.required("kmem_ca")
    assert trigrams.spread(short, "kmem_ca", 6) == short
    either = trigrams.required("(kmem_cache_alloc|kfree_rcu_pointer)")
    assert isinstance(either, trigrams.Or)
    assert trigrams.spread(either, "kmem_cache_alloc", 2) == either


def _indexed(texts: dict[str, str]) -> sqlite.Connection:
    conn = memory_index()
    for relpath, text in texts.items():
        assert add_document(conn, f"/r/{relpath}", "/r", text.encode()) is not None
    return conn


@pytest.mark.parametrize("near", [3, candidates.FEW_FILES + 1])
def test_the_files_of_a_literals_words_are_narrowed_by_its_trigrams_when_many(near: int) -> None:
    # "kmem cache alloc" is the phrase of kmem_cache_alloc's words without its
    # trigrams m_c and e_a. A few such files are read rather than ruled out by a
    # trigram query (which costs more than reading them); many are ruled out.
    texts = {f"real{i}.c": f"p = kmem_cache_alloc(c, {i});\n" for i in range(3)}
    texts |= {f"near{i}.txt": f"the kmem cache alloc path, note {i}\n" for i in range(near)}
    texts["other.txt"] = "kmem_cache_free only\n"
    conn = _indexed(texts)
    query, words = narrowing.required("kmem_cache_alloc", fixed=False, ignore_case=False, word=True)
    found = set(candidates.find(conn, query, None, [], [], words).paths)
    reals = {f"/r/real{i}.c" for i in range(3)}
    if near > candidates.FEW_FILES:
        assert found == reals
    else:
        assert found == reals | {f"/r/near{i}.txt" for i in range(near)}
