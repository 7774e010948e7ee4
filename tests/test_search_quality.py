"""Search quality with known answers: identifiers whole and by their parts, CJK text,
snippets placed on the match. A generated corpus of a few hundred files goes through
a real daemon; the document writer is checked on real
SQLite files.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import Daemon, note, reading, renaming, write
from hypothesis import given, settings
from hypothesis import strategies as st
from kbindex.daemon.backends.sqlite import documents, schema, searcher
from kbindex.daemon.backends.sqlite.store import Store
from kbindex.daemon.engine import sqlite
from kbindex.daemon.index import tokens
from kbindex.daemon.index.values import Batch, Move, Seen, Update
from kbindex.daemon.indexing.documents import prepare
from kbindex.daemon.indexing.textfile import Loaded, decode
from kbindex.daemon.searching.query import to_plan

SYLLABLES = [
    "zor",
    "vex",
    "quil",
    "ban",
    "trel",
    "mor",
    "kap",
    "lun",
    "dri",
    "sab",
    "fen",
    "wox",
    "gir",
    "pol",
    "nuk",
    "ter",
    "yal",
    "bex",
    "cim",
    "dro",
    "hask",
    "jup",
    "lem",
    "nar",
    "osk",
    "pim",
    "rud",
    "sul",
    "tav",
    "uzz",
]
STYLES = ("camel", "pascal", "snake", "kebab", "screaming", "dotted", "path")
FILLER = [
    "value",
    "result",
    "return",
    "index",
    "count",
    "buffer",
    "offset",
    "config",
    "handler",
    "item",
]


@dataclass(frozen=True)
class Identifier:
    parts: tuple[str, ...]
    style: str
    path: str

    def spell(self, style: str | None = None) -> str:
        p = self.parts
        match style or self.style:
            case "camel":
                return p[0] + "".join(w.title() for w in p[1:])
            case "pascal":
                return "".join(w.title() for w in p)
            case "snake":
                return "_".join(p)
            case "kebab":
                return "-".join(p)
            case "screaming":
                return "_".join(p).upper()
            case "dotted":
                return ".".join(p)
            case _:
                return "/".join(p)


def _identifiers(rng: random.Random, n: int) -> list[Identifier]:
    used: set[str] = set()
    out = []
    for i in range(n):
        parts = []
        while len(parts) < rng.choice((2, 3)):
            word = "".join(rng.sample(SYLLABLES, 2))
            if word not in used:
                used.add(word)
                parts.append(word)
        out.append(Identifier(tuple(parts), STYLES[i % len(STYLES)], f"pkg/mod{i:03d}.txt"))
    return out


def _code(rng: random.Random, ident: str) -> str:
    lines = [f"{rng.choice(FILLER)} = {rng.choice(FILLER)}({i})" for i in range(12)]
    lines.insert(rng.randrange(3, 10), f"result = {ident}(value)  # the one")
    return "\n".join(lines) + "\n"


def code_corpus(root: Path, n: int = 140, seed: int = 7) -> list[Identifier]:
    """``n`` files each defining one identifier, plus decoys: for every identifier a
    prose note with its parts as separate words, and for every third one a file
    holding a longer identifier that contains it."""
    rng = random.Random(seed)
    idents = _identifiers(rng, n)
    for i, ident in enumerate(idents):
        write(root / ident.path, _code(rng, ident.spell()))
        words = " and then ".join(ident.parts)
        write(root / "notes" / f"note{i:03d}.txt", f"A note on {words} in passing.\n")
        if i % 3 == 0 and ident.style in ("snake", "camel"):
            longer = "legacy_" + ident.spell() if ident.style == "snake" else ident.spell() + "Old"
            write(root / "old" / f"old{i:03d}.txt", _code(rng, longer))
    return idents


# Sentences of Chinese, Japanese and Korean; the test searches substrings of them.
CJK_SENTENCES = (
    "東京都に住んでいます",
    "京都の大学で勉強しました",
    "東京タワーは高いです",
    "全文検索エンジンを作る",
    "日本語の形態素解析は難しい",
    "我们在北京大学学习中文",
    "全文搜索引擎的索引结构",
    "上海的天气很好",
    "서울에서 한국어를 공부합니다",
    "검색 엔진의 색인 구조",
)


def cjk_corpus(root: Path, seed: int = 11) -> dict[str, str]:
    """40 notes, each a few of the sentences joined with punctuation and Latin words."""
    rng = random.Random(seed)
    texts = {}
    for i in range(40):
        picked = rng.sample(CJK_SENTENCES, rng.choice((1, 2, 3)))
        text = f"# note {i}\n\n" + "。\n".join(picked) + "。 see also section 3\n"
        rel = f"cjk/n{i:02d}.md"
        write(root / rel, text)
        texts[rel] = text
    return texts


def cjk_queries(rng: random.Random) -> list[str]:
    runs = [r for s in CJK_SENTENCES for r in s.split()]
    queries = {"東京", "京都", "東京都", "大学", "検索", "搜索", "索引", "색인", "東", "学"}
    for _ in range(40):
        run = rng.choice(runs)
        size = rng.choice((2, 2, 3, 4, 6))
        if len(run) >= size:
            start = rng.randrange(len(run) - size + 1)
            queries.add(run[start : start + size])
    return sorted(queries)


# ------------------------------------------------------------------ through a daemon


@pytest.mark.slow
@pytest.mark.anyio
async def test_identifiers_whole_and_by_parts(daemon: Daemon) -> None:
    idents = code_corpus(daemon.root)
    await daemon.refresh()
    failures = []
    async with daemon.client() as c:

        async def expect(query: str, target: str, within: int) -> None:
            found = [h.relpath for h in (await c.search(query, limit=10)).hits]
            if target not in found[:within]:
                failures.append(f"{query!r}: {target} not in top {within} of {found[:5]}")

        for ident in idents:
            # The whole identifier, as written: the defining file ranks first, above
            # the note with the same words and the file with a longer identifier.
            await expect(ident.spell(), ident.path, 1)
            # Every part alone, and the trailing parts in the identifier's own style
            # (the tail of camelCase is PascalCase: parseHttpRequest → HttpRequest).
            for part in ident.parts:
                await expect(part, ident.path, 3)
            tail = Identifier(ident.parts[1:], ident.style, ident.path)
            if len(tail.parts) > 1 or ident.style in ("camel", "pascal"):
                style = "pascal" if ident.style == "camel" else ident.style
                await expect(tail.spell(style), ident.path, 3)
            # Another spelling of the same name (a snake_case query finds camelCase).
            other = "snake" if ident.style in ("camel", "pascal") else "camel"
            await expect(ident.spell(other), ident.path, 3)
    assert not failures, "\n".join(failures[:20]) + f"\n({len(failures)} failures)"


def _parts_by_chunk(word: str) -> tuple[str, ...]:
    """The parts of an identifier by definition: ``_PART`` within each alphanumeric
    chunk, lower-cased."""
    return tuple(p.lower() for c in tokens._CHUNK.findall(word) for p in tokens._PART.findall(c))


def _words_by_parts(word: str) -> str:
    """``identifier_words`` as its docstring defines it, from the parts by chunk."""
    chunks, parts = tokens._CHUNK.findall(word), _parts_by_chunk(word)
    if len(parts) < 2 or not any(ch.isalpha() for ch in word):
        return ""
    out = [" ".join(parts)] if len(parts) > len(chunks) else []
    return " ".join([*out, "".join(parts)] if len(chunks) > 1 else out)


@pytest.mark.slow
@settings(max_examples=500, deadline=None)
@given(st.text(alphabet="aBcXyZ019_-.é ", min_size=1, max_size=24))
def test_identifiers_split_in_one_pass_as_chunk_by_chunk(word: str) -> None:
    """One pass of ``_PART`` over a word (what indexing runs per new identifier, and
    queries per word) gives the parts chunk by chunk, whatever the case runs, digits,
    separators and other characters."""
    assert tokens.split_identifier(word) == _parts_by_chunk(word)
    if word.isascii():
        assert tokens.identifier_words(word) == _words_by_parts(word)


@pytest.mark.slow
@pytest.mark.anyio
async def test_cjk_substrings_find_exactly_the_documents_holding_them(daemon: Daemon) -> None:
    texts = cjk_corpus(daemon.root)
    await daemon.refresh()
    failures = []
    for query in cjk_queries(random.Random(3)):
        expected = sorted(rel for rel, text in texts.items() if query in text)
        async with daemon.client() as c:
            reply = await c.search(query, limit=100)
        found = sorted(h.relpath for h in reply.hits)
        if found != expected:
            failures.append(f"{query!r}: expected {expected}, found {found}")
        for hit in reply.hits:
            line = texts[hit.relpath].splitlines()[hit.line - 1]
            highlighted = re.findall(r"⟦(.+?)⟧", hit.snippet)
            if query not in line or not any(query in h for h in highlighted):
                failures.append(f"{query!r}: {hit.relpath} line {hit.line}: {hit.snippet!r}")
    assert not failures, "\n".join(failures[:20])


@pytest.mark.anyio
async def test_cjk_mixed_with_latin_and_questions(daemon: Daemon) -> None:
    write(daemon.root / "a.md", "東京タワー tower notes\n")
    write(daemon.root / "b.md", "京都 tower\n")
    write(daemon.root / "会議メモ.md", "minutes of the meeting\n")
    await daemon.refresh()
    assert await daemon.search_paths("東京 tower") == ["a.md"]
    assert await daemon.search_paths("会議") == ["会議メモ.md"]  # by its file name
    # A whole sentence no document holds: the bigrams still find the closest.
    async with daemon.client() as c:
        reply = await c.search("東京タワーの高さ")
    assert reply.mode == "any" and reply.hits[0].relpath == "a.md"


@pytest.mark.anyio
async def test_snippet_is_on_the_matching_line(daemon: Daemon) -> None:
    head = "".join(f"filler line {i}\n" for i in range(1, 30))
    write(daemon.root / "code.txt", head + "const x = parseHttpRequest(raw);\n" + head)
    write(daemon.root / "wide.txt", "y" * 5000 + " haystackneedle " + "z" * 5000 + "\n")
    write(daemon.root / "prose.md", head + "The scheduler picks the next runnable task.\n")
    await daemon.refresh()
    async with daemon.client() as c:
        part = (await c.search("HttpRequest")).hits[0]
        wide = (await c.search("haystackneedle")).hits[0]
        prose = (await c.search("how does the scheduler pick the next task")).hits[0]
    assert (part.relpath, part.line) == ("code.txt", 30)
    assert "parse⟦HttpRequest⟧(raw)" in part.snippet
    assert wide.line == 1 and "⟦haystackneedle⟧" in wide.snippet
    assert len(wide.snippet) <= 420
    assert (prose.relpath, prose.line) == ("prose.md", 30)
    assert "⟦scheduler⟧" in prose.snippet


@pytest.mark.anyio
async def test_natural_language_never_empty_for_one_missing_word(daemon: Daemon) -> None:
    write(daemon.root / "sched.md", "# Scheduler\n\nThe scheduler picks the next task to run.\n")
    await daemon.refresh()
    async with daemon.client() as c:
        reply = await c.search("how does the scheduler pick the next xylophone")
    assert reply.mode == "any" and [h.relpath for h in reply.hits] == ["sched.md"]


# ------------------------------------------------------------------ pure and in-process


@pytest.fixture(scope="module")
def tables() -> Iterator[sqlite.Connection]:
    """Both full-text tables as the store creates them, holding a few documents."""
    conn = sqlite.connect(":memory:", isolation_level=None)
    schema.create(conn)
    for i, text in enumerate(["parseHttpRequest max_file_size_mb", "東京都 京都", "plain"]):
        loaded = decode(text.encode(), len(text), 0)
        assert isinstance(loaded, Loaded)
        doc = prepare(f"f{i}.md", loaded)
        documents.insert(conn, [documents.entry(i + 1, doc)])
    yield conn
    conn.close()


TRICKY = st.sampled_from(
    ['"', "-", "*", "(", ")", ":", "^", "{", "}", "_", ".", "/", "AND", "OR", "NOT", "NEAR"]
)
WORDS = st.sampled_from(["parseHttpRequest", "max_file_size_mb", "IL-10", "a.b/c", "mRNAs"])
CJK = st.text(alphabet="東京都にすんでいま서울ภาษาไทย々ー", min_size=1, max_size=6)


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.one_of(TRICKY, WORDS, CJK, st.text(max_size=8)), max_size=12),
    st.sampled_from(["auto", "all", "any"]),
)
def test_no_mixed_input_raises(tables: sqlite.Connection, pieces: list[str], mode: str) -> None:
    """Identifiers, CJK, Thai and operator soup together still compile to valid FTS5."""
    searcher.search(tables, to_plan(" ".join(pieces), mode, limit=1))


def test_documents_keep_both_tables_consistent(tmp_path: Path) -> None:
    s = Store(tmp_path / "index.sqlite3", reading(tmp_path))
    s.open()
    tables = ((s.writer, "docs"), (s.writer, "docs_exact"))

    def check(expr: str, expected: int) -> None:
        for conn, table in tables:
            conn.execute(f"INSERT INTO {table}({table}) VALUES ('integrity-check')")
            sql = f"SELECT count(*) FROM {table} WHERE {table} MATCH ?"
            assert conn.execute(sql, (expr,)).fetchone()[0] == expected, table

    try:
        text = "def parseHttpRequest(): pass  # 東京都\n"
        r = tmp_path / "r"
        s.apply(Batch([note("a.py", text, r)]))
        write(r / "renamed" / "moved.py", text)  # the rename, on disk
        (r / "a.py").unlink()
        assert (
            s.apply(
                Batch(
                    moves=[Move(f"{r}/a.py", f"{r}/renamed/moved.py", str(r))], renamer=renaming(r)
                )
            )
            == 1
        )
        with s.reader() as conn:
            found = conn.execute(
                "SELECT f.relpath FROM docs_exact d JOIN files f ON f.id = d.rowid"
                " WHERE docs_exact MATCH 'moved AND http* AND 東京'"
            ).fetchall()
        assert found == [("renamed/moved.py",)]
        check("moved AND parse", 1)
        check("a", 0)  # the old name is gone from both
        s.apply(Batch(deletes=[f"{r}/renamed/moved.py"]))
        check("parse OR moved", 0)
        # A root removed at runtime leaves neither table holding its words.
        seen = Seen(path="/r2/b.md", root="/r2", size=len(text), mtime_ns=1)
        s.apply(
            Batch([Update(seen, prepare("b.md", Loaded(text, "utf-8", "", len(text), 1)), "doc")])
        )
        check("parse* OR 東京", 1)
        assert s.forget("/r2") == 1
        check("parse* OR 東京", 0)
    finally:
        s.close()
