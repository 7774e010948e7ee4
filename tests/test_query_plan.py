"""The query plan renders to the very queries of d209e23, before the plan existed: the
FTS5 MATCH expressions of SQLite and the tsquery pieces of PostgreSQL, for the bench's
queries (``frozen/bench_queries.json``, written by ``frozen/bench_queries.py``) and for
any text (Hypothesis).

The old code is kept verbatim in ``frozen/`` (``daemon/searching/query.py`` and
``daemon/backends/postgres/tsquery.py`` at d209e23). It cannot drift: each copy's git
blob id is checked here against the one ``git rev-parse d209e23:<path>`` prints. Both
old and new read the same tokenizer (``index.tokens``), which is what they share.

One difference, on purpose: the old code gave ``all`` mode a fallback that was the same
expression without its parentheses (one short CJK term, every excluded term a prefix:
``"東" -foo*``), so a search that found nothing ran again and said ``any``. The plan has
no fallback there; ``_pointless`` recognises that case in the old output.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kbindex.daemon import indexing
from kbindex.daemon.backends.postgres import render as tsquery
from kbindex.daemon.backends.sqlite import render as fts5
from kbindex.daemon.index import tokens
from kbindex.daemon.searching.query import BadQuery, to_plan

FROZEN = Path(__file__).parent / "frozen"
BLOBS = {
    "query_d209e23.py": "65526a93ca034f0b61790c0b157a96911af42b35",
    "tsquery_d209e23.py": "44f6a9ff05886cba53945bb1cbef042f49eda859",
}
MODES = ("auto", "all", "any", "raw")
OLD_TOKENS = "kbindex.daemon.indexing.tokens"


def _load(name: str, replacing_query: ModuleType | None = None) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"frozen_{name}", FROZEN / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    key = "kbindex.daemon.searching.query"
    current = sys.modules[key]
    if replacing_query is not None:  # the old tsquery imports the old query's Compiled
        sys.modules[key] = replacing_query
    # The tokenizer moved into the seam (index.tokens) since: the old code imports it
    # from where it was then.
    sys.modules[OLD_TOKENS] = tokens
    setattr(indexing, "tokens", tokens)  # noqa: B010
    try:
        spec.loader.exec_module(module)
    finally:
        sys.modules[key] = current
        del sys.modules[OLD_TOKENS]
        delattr(indexing, "tokens")
    return module


OLD_QUERY = _load("query_d209e23")
OLD_TSQUERY = _load("tsquery_d209e23", OLD_QUERY)
BENCH = json.loads((FROZEN / "bench_queries.json").read_text())


def test_frozen_copies_are_d209e23s() -> None:
    for name, blob in BLOBS.items():
        data = (FROZEN / name).read_bytes()
        assert hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest() == blob, name


def _expr(expr: Any) -> Any:
    if expr is None:
        return None
    return tuple(p if isinstance(p, str) else ("prefix", p.text) for p in expr)


def _pointless(old: Any) -> bool:
    """The old ``all`` mode's fallback was its own expression again."""
    alternatives = old.alternatives
    if old.mode != "all" or alternatives is None:
        return False
    return bool(old.match == OLD_QUERY.grouped(alternatives.expression(), ""))


def _alternatives(alternatives: Any) -> Any:
    if alternatives is None:
        return None
    return tuple(_expr(i) for i in alternatives.items), alternatives.exclusions


def _sqlite_old(query: str, mode: str) -> Any:
    old = OLD_QUERY.compile_query(query, mode)
    alternatives = None if _pointless(old) else old.alternatives
    required, excluded = old.required_prefixes, old.excluded_prefixes
    return _expr(old.match), old.mode, required, excluded, _alternatives(alternatives), old.terms


def _sqlite_new(query: str, mode: str) -> Any:
    plan = to_plan(query, mode)
    new = fts5.match(plan)
    required, excluded = new.required_prefixes, new.excluded_prefixes
    alternatives = _alternatives(new.alternatives)
    return _expr(new.expr), new.mode, required, excluded, alternatives, plan.needles


def _tsquery(expr: Any, condition: Any) -> Any:
    if expr is None:
        return None
    return dataclasses.astuple(expr), dataclasses.astuple(condition(expr))


def _postgres_old(query: str, mode: str) -> Any:
    compiled = OLD_QUERY.compile_query(query, mode)
    old = OLD_TSQUERY.plan(compiled)
    fallback = None if _pointless(compiled) else old.fallback
    condition = OLD_TSQUERY.condition
    return _tsquery(old.main, condition), old.mode, _tsquery(fallback, condition)


def _postgres_new(query: str, mode: str) -> Any:
    new = tsquery.query(to_plan(query, mode))
    condition = tsquery.condition
    return _tsquery(new.main, condition), new.mode, _tsquery(new.fallback, condition)


def _same(query: str, mode: str) -> None:
    try:
        old = _sqlite_old(query, mode)
    except OLD_QUERY.BadQuery:
        with pytest.raises(BadQuery):
            to_plan(query, mode)
        return
    assert _sqlite_new(query, mode) == old, (query, mode)
    assert _postgres_new(query, mode) == _postgres_old(query, mode), (query, mode)


@pytest.mark.parametrize("mode", MODES)
def test_bench_queries_render_as_before(mode: str) -> None:
    assert len(BENCH) == 400
    for query in BENCH:
        _same(query, mode)


# Pieces that reach every branch of the parser and both renderers: stop words, camelCase,
# snake_case, kebab-case, symbol terms, runs of CJK (one longer than a query keeps),
# Thai (with combining marks: a run can vanish), Hangul, accents, operators, quotes,
# stars, dashes and control characters.
PIECES = (
    "the", "a", "how", "does", "fox", "brown", "parseHttpRequest", "max_file_size_mb",
    "kebab-case-word", "HTTPServer", "IL-10", "0-dimensional", "C++", "C++17", "C#", ".NET",
    "libc++", "東京都", "東", "東京", "東京タワーの高さ", "東京都庁" * 20, "ภาษาไทย", "ั",
    "한국어", "café", "Ünïcödé", "AND", "OR", "NOT", "NEAR(", "(", ")", ":", "^", '"', "-",
    "*", "--verbose", "-2", "deprecat", "universi", "x", "\x00", "\t", "foo.bar", "a/b/c.py",
    "_private", "__init__",
)  # fmt: skip


@st.composite
def _queries(draw: st.DrawFn) -> str:
    words = []
    for piece in draw(st.lists(st.sampled_from(PIECES), max_size=8)):
        if draw(st.booleans()):
            piece = "-" + piece
        if draw(st.booleans()):
            piece = piece + "*"
        words.append(piece)
    if words and draw(st.booleans()):
        start = draw(st.integers(0, len(words) - 1))
        words[start] = '"' + words[start]
        end = draw(st.integers(start, len(words) - 1))
        words[end] = words[end] + '"' + ("*" if draw(st.booleans()) else "")
    return draw(st.sampled_from(["", " ", "  "])).join(words)


@pytest.mark.slow
@settings(max_examples=1500, deadline=None)
@given(_queries(), st.sampled_from(MODES))
def test_any_query_of_pieces_renders_as_before(query: str, mode: str) -> None:
    _same(query, mode)


@pytest.mark.slow
@settings(max_examples=1500, deadline=None)
@given(st.text(max_size=120), st.sampled_from(MODES))
def test_any_text_renders_as_before(query: str, mode: str) -> None:
    _same(query, mode)
