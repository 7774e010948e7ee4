"""``-w`` over a literal with word characters at its ends runs as ``\\bLITERAL\\b``
(``ripgrep``'s docstring); these pin down when, and which files are searched again with
``-w``. ``test_grep_oracle.py`` compares the outcome with rg's own ``-w`` (the lantern
cases, and literals of several words)."""

from __future__ import annotations

import asyncio
import os
import sysconfig
from pathlib import Path
from typing import Any

import pytest
from grep_helpers import add_document, memory_index, needs_rg
from kbindex.daemon.roots import Roots
from kbindex.daemon.searching import candidates, grep, ripgrep, trigrams
from kbindex.daemon.searching.ripgrep import Flags, Record
from kbindex.daemon.storage.engine import sqlite


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
    query, words = candidates.required(literal, fixed=False, ignore_case=False, word=True)
    assert words is not None
    assert isinstance(every, trigrams.And)
    assert isinstance(query, trigrams.And)
    assert len(query.parts) == candidates.TRIGRAMS_BESIDE_WORDS
    assert query.parts < every.parts
    first, last = literal[:3].encode().hex(), literal[-3:].encode().hex()
    assert {first, last} <= query.parts
    # Without words (a literal whose edges may be glued), every trigram is asked.
    fixed = "Invalid number of channels"
    assert candidates.required(fixed, fixed=True, ignore_case=False, word=False) == (
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
    query, words = candidates.required(
        "kmem_cache_alloc", fixed=False, ignore_case=False, word=True
    )
    found = set(candidates.find(conn, query, None, [], [], words).paths)
    reals = {f"/r/real{i}.c" for i in range(3)}
    if near > candidates.FEW_FILES:
        assert found == reals
    else:
        assert found == reals | {f"/r/near{i}.txt" for i in range(near)}


def _files(tmp_path: Path, contents: dict[str, bytes]) -> candidates.Candidates:
    for name, data in contents.items():
        (tmp_path / name).write_bytes(data)
    sizes = {str(tmp_path / name): len(data) for name, data in contents.items()}
    return candidates.Candidates.of(sizes, scanned_all=False)


@needs_rg
def test_the_lines_of_a_word_literal_are_asked_between_boundaries_and_unsure_files_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The processes are real; the spy only records what each was asked.
    grepper = grep.Grepper(Roots((tmp_path,)))
    asked: list[list[str | bytes]] = []
    spawn = grepper.spawn

    async def spy(argv: list[str | bytes], counts: bool) -> Any:
        asked.append(argv)
        return await spawn(argv, counts)

    monkeypatch.setattr(grepper, "spawn", spy)
    found = _files(tmp_path, {"a.txt": b"lantern\n", "b.txt": b"\xe9lantern\nlantern two\n"})
    outcome = asyncio.run(grepper.run(Flags("lantern", word=True), found, 100))
    assert [(Path(ln.path).name, ln.line) for ln in outcome.lines] == [("a.txt", 1), ("b.txt", 2)]
    first, again = asked
    assert r"\blantern\b" in first
    assert "--word-regexp" not in first
    assert "--word-regexp" in again
    assert again[-1:] == [os.fsencode(tmp_path / "b.txt")]


@needs_rg
def test_a_second_run_cut_short_leaves_a_prefix_of_the_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # b.txt is searched again (its first match line is not UTF-8) and that output is
    # cut: c.txt, past it in path order, must not be shown although the first run read it.
    monkeypatch.setattr(grep, "CHUNK_OUTPUT_BYTES", 1000)
    found = _files(
        tmp_path,
        {"a.txt": b"lantern\n", "b.txt": b"\xe9lantern\nlantern " + b"x" * 3000 + b"\n",
         "c.txt": b"lantern\n"},
    )  # fmt: skip
    flags = Flags("lantern", word=True, max_count=1)
    outcome = asyncio.run(grep.Grepper(Roots((tmp_path,))).run(flags, found, 100))
    assert not outcome.complete
    assert [Path(ln.path).name for ln in outcome.lines] == ["a.txt", "b.txt"]


def test_the_ripgrep_on_path_comes_before_the_grep_extras(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    on_path = tmp_path / "bin" / "rg"
    on_path.parent.mkdir()
    on_path.write_text("#!/bin/sh\n")
    on_path.chmod(0o755)
    monkeypatch.delenv(ripgrep.RIPGREP_ENV, raising=False)
    monkeypatch.setenv("PATH", str(on_path.parent))
    assert ripgrep.find() == str(on_path)
    # Without one on PATH, the grep extra's beside this Python, if installed.
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    extra = os.path.join(sysconfig.get_path("scripts"), "rg")
    if os.access(extra, os.X_OK):
        assert ripgrep.find() == extra
    else:
        with pytest.raises(ripgrep.Unavailable):
            ripgrep.find()
    # KBINDEX_RG wins, made absolute; naming no executable file, it is an error.
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(ripgrep.RIPGREP_ENV, "bin/rg")
    assert ripgrep.find() == str(on_path)
    monkeypatch.setenv(ripgrep.RIPGREP_ENV, "bin/missing")
    with pytest.raises(ripgrep.Unavailable, match="KBINDEX_RG names bin/missing"):
        ripgrep.find()
