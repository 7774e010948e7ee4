"""Symbol terms: ``C++``, ``C#``, ``F#``, ``.NET`` find the documents that contain them,
not every document with a bare ``c``, ``f`` or ``net``, and their snippets mark the term
itself, never a fragment of another word (``semanti-cs``, ``Net-work``)."""

from __future__ import annotations

import re

import pytest
from conftest import Daemon, MakeDaemon, write
from kbindex.daemon.backends.sqlite import schema
from kbindex.daemon.engine import sqlite
from kbindex.daemon.index import tokens
from kbindex.daemon.searching.passages import best_passage
from kbindex.proto.messages import MATCH_CLOSE, MATCH_OPEN

pytestmark = pytest.mark.anyio

CORPUS = {
    "cpp.md": "# Templates\n\nC++ templates are compiled at build time.\n",
    "cpp17.md": "# Bindings\n\nStructured bindings arrived in C++17, see (C++) notes.\n",
    "csharp.md": "# Delegates\n\nC# delegates wrap a method.\n",
    "fsharp.md": "# Pipelines\n\nF# pipelines chain functions.\n",
    "dotnet.md": "# Runtime\n\nThe .NET runtime runs managed code.\n",
    "node.md": "# Servers\n\nA node.js server answers requests.\n",
    "words.md": (
        "# Words\n\nSemantics and generics of functional programs on the Network.\n"
        "Plan C was fine, see section F. The libc++ library; mail example.net or ASP.NET.\n"
    ),
}


def marked(snippet: str) -> list[str]:
    return re.findall(f"{MATCH_OPEN}(.*?){MATCH_CLOSE}", snippet)


def test_tokens_of_symbol_terms() -> None:
    text = "C++ and C#, F# on .NET. C++17, libc++, ASP.NET, example.net, issue#23, a.md#x"
    assert tokens.symbol_words(text).split() == [
        "cplusplus", "csharp", "fsharp", "dotnet", "cplusplus17", "libcplusplus",
    ]  # fmt: skip
    assert tokens.symbol_words("Semantics, generics, functional Network. Plan C, F.") == ""
    assert [tokens.symbol_token(t) for t in ("C++", "c#", ".NET", "C++17", "node.js", "c")] == [
        "cplusplus", "csharp", "dotnet", "cplusplus17", None, None,
    ]  # fmt: skip


@pytest.mark.parametrize("prefix", ["", "İ "])  # İ: lower() changes the length
def test_a_snippet_marks_a_symbol_term_only_where_it_stands_alone(prefix: str) -> None:
    body = f"{prefix}libc++ and example.net\nthe C++ code on .NET, C++17\n"
    assert best_passage(body, ("c++",)) == ("the ⟦C++⟧ code on .NET, ⟦C++⟧17", 2)
    assert best_passage(body, (".net",)) == ("the C++ code on ⟦.NET⟧, C++17", 2)


async def test_symbol_terms_find_their_documents_and_mark_only_themselves(daemon: Daemon) -> None:
    for name, text in CORPUS.items():
        write(daemon.root / name, text)
    await daemon.refresh()
    expected = {
        "C++": {"cpp.md", "cpp17.md"},
        "(C++),": {"cpp.md", "cpp17.md"},
        "C#": {"csharp.md"},
        "c#": {"csharp.md"},
        "F#": {"fsharp.md"},
        ".NET": {"dotnet.md"},
        ".net": {"dotnet.md"},
        "C++17": {"cpp17.md"},
        "node.js": {"node.md"},
    }
    lists = {}
    async with daemon.client() as c:
        for query, documents in expected.items():
            reply = await c.search(query)
            lists[query] = [h.relpath for h in reply.hits]
            # Before: C++ and C# both listed cpp.md, csharp.md and words.md, marking
            # "semanti**cs**", "generi**cs**", "**C**#"; .NET marked ".**NET**".
            assert set(lists[query]) == documents, (query, lists[query])
            term = query.strip("(),")
            for hit in reply.hits:
                assert [m.lower() for m in marked(hit.snippet)] == [term.lower()] * len(
                    marked(hit.snippet)
                ), hit.snippet
                assert marked(hit.snippet), hit.snippet
        # A question in any mode: the C++ document first, no bare "c" anywhere.
        question = await c.search("how are templates compiled in C++")
        assert question.mode == "any"
        assert question.hits[0].relpath == "cpp.md"
        assert "words.md" not in [h.relpath for h in question.hits]
        # C++17 shows its C++ marked; the bare letter and word still find their document.
        cpp17 = next(h for h in (await c.search("C++")).hits if h.relpath == "cpp17.md")
        assert "⟦C++⟧17" in cpp17.snippet
        assert [h.relpath for h in (await c.search("network")).hits] == ["words.md"]
    assert lists["C++"] != lists["C#"]


@pytest.mark.slow
async def test_an_index_from_version_4_learns_the_symbol_tokens(make_daemon: MakeDaemon) -> None:
    """A v4 index holds C++ as the bare "c" only: it is built again from the files (the
    first scan reads them into a new file, which then takes its place) and C++ finds
    its document."""
    d = make_daemon()
    for name, text in CORPUS.items():
        write(d.root / name, text)
    await d.start()
    assert d.stop() == 0
    # What version 4 wrote: the same rows without symbol tokens, and the unstemmed index
    # in a file of its own (none here: it would be deleted anyway).
    conn = sqlite.connect(d.db_path)
    conn.executescript(
        "DROP TABLE docs_exact_words; DROP TABLE docs_exact; DROP TABLE docs_grams;"
        " DROP TABLE titles; DROP TABLE docs;"
        " CREATE VIRTUAL TABLE docs USING fts5(name, title, body, subwords, grams);"
        " PRAGMA user_version = 4;"
    )
    conn.commit()
    conn.close()

    await d.start()
    assert set(await d.search_paths("C++")) == {"cpp.md", "cpp17.md"}
    assert await d.search_paths(".NET") == ["dotnet.md"]
    conn = sqlite.connect(d.db_path)
    try:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == schema.SCHEMA_VERSION
    finally:
        conn.close()
