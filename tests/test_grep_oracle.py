"""grep answers exactly what ``rg -uu`` prints over the same files with the same flags.

A generated corpus (seeded, so every run sees the same files) of code, prose, Unicode
(accents, Greek, CJK, emoji, the Kelvin sign and the long s), CRLF files, a UTF-8 BOM,
a UTF-16 file, a cp1252 file, a 100 KB minified line and names with spaces, a newline
or bytes that are not UTF-8; one real daemon indexes it all (``--include-ext '*'``),
and every pattern below is run through the socket and by ``rg`` itself. Compared: the
paths, line numbers, line text (clipped lines: the clipped part), match or context,
the column of the first match, the totals and the truncation.
"""

from __future__ import annotations

import codecs
import random
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from conftest import Daemon, write
from grep_helpers import (
    Case,
    Expected,
    Found,
    as_found,
    clipped,
    expected,
    grep,
    needs_rg,
    rg_files,
    rg_lines,
    rg_searched,
)
from kbindex.proto.messages import GREP_LINE_CHARS, FindFiles, FindFilesReply

pytestmark = [pytest.mark.slow, needs_rg]

WORDS = (
    "alpha", "beta", "gamma", "delta", "parser", "render", "buffer", "handler", "token",
    "stream", "colour", "color", "word", "words", "sword", "wordy", "the", "a", "an", "of",
    "to", "and", "in", "on", "index", "search", "daemon", "socket", "queue", "banana",
    "request", "reply", "cache", "kernel", "module", "import", "export", "class", "struct",
    "impl", "trait", "fn", "def",
)  # fmt: skip
IDENTS = ("parse_header", "render_page", "parseHttpRequest", "MaxFileSize", "read_all", "ABC")
METAS = ("a.b*c", "[x]", "(y)", "$HOME", "^start", "foo|bar", r"\d+", "a+b?", "{1,2}")


def _sentence(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def _python(rng: random.Random, i: int) -> str:
    out = [f'"""Module {i}: {_sentence(rng, 6)}."""', "import os", "from typing import Any", ""]
    for j in range(rng.randint(3, 5)):
        name = rng.choice(IDENTS)
        out += [
            f"class {rng.choice(['Token', 'Stream', 'Page'])}Handler{j}:",
            f"    def {name}_{j}(self, value: Any) -> str:",
            f"        # TODO: {_sentence(rng, 5)}",
            f'        text = "{rng.choice(METAS)} {rng.choice(WORDS)}"',
            f"        return text.replace('{rng.choice(METAS)}', '{j}')",
            "",
        ]
    return "\n".join(out) + "\n"


def _rust(rng: random.Random) -> str:
    out = ["use std::collections::HashMap;", ""]
    for j in range(4):
        out += [
            f"pub struct Item{j} {{ map: HashMap<String, Vec<u8>>, id: u{rng.choice([8, 32])} }}",
            f"impl Item{j} {{",
            f"    fn {rng.choice(IDENTS).lower()}(&self) -> usize {{ 0x{rng.randrange(256):02X} }}",
            "    fn  spaced( ) {}",
            "}",
        ]
    return "\n".join(out) + "\n"


def _c() -> str:
    return (
        '#include <stdio.h>\n#include "main.h"\n\nint main(void) {\n'
        '\tprintf("%d\\n", 42);\n\treturn 0;\n}\n'
    )


def _minified(rng: random.Random) -> str:
    parts = ["__START__"]
    while sum(map(len, parts)) < 100_000:
        parts.append(f"var {rng.choice('abcxyz')}{len(parts)}=function(b){{return b+1}};")
        if len(parts) == 1600:
            parts.append("needleInTheMiddle();")
    parts.append("__END__")
    return "/* bundle */\n" + "".join(parts) + '\nconsole.log("short line");\n'


def _prose(rng: random.Random, i: int) -> str:
    out = [f"# Chapter {i}", ""]
    for _ in range(rng.randint(6, 10)):
        out.append(_sentence(rng, rng.randint(4, 14)).capitalize() + ".")
        if rng.random() < 0.3:
            out.append("")
    out += ["The the colour and the color.", "Dates: 2024-01-15 and 1999-12-31.", ""]
    return "\n".join(out)


UNICODE = """Café au lait, naïve résumé, été
Ærøskøbing and Ångström (Å with the angstrom sign)
Straße, STRASSE, strasse
Kelvin: 300 K, and kelvin, KELVIN
Greek: Σίσυφος, λόγος, ὀδυσσεύς
Final sigma: ς σ Σ in λόγος
日本語のテキストです。中文文本。한국어 텍스트
emoji 🙂 and 👩‍💻 and 🎉🎉 party
ﬁ ligature and fi letters; µ micro and μ mu
tab\there and ABC and abc and Abc
"""
CASE_FOLDS = {
    # Each in a file of its own: only these spellings can bring the file into a
    # case-insensitive answer, so a trigram query that requires the ASCII letters
    # (or the lower-case ones) loses the file.
    "kelvin sign.txt": "the sign alone: \u212aELVIN\n300 \u212a\n",
    "long s.txt": "ſtrasse with a long s only\nſtraße\n",
    "sharp s.txt": "STRAẞE with the capital sharp s\n",
    "sigma.txt": "ΣΊΣΥΦΟΣ\nσίσυφοσ\nΛΌΓΟΣ\n",
    "upper.txt": "CAFÉ NOIR, NAÏVE\n",
    "micro.txt": "μ alone\n",
}


def build(root: Path, rng: random.Random) -> None:
    for i in range(6):
        write(root / "src" / "core" / f"module_{i}.py", _python(rng, i))
    write(root / "src" / "lib" / "util.rs", _rust(rng))
    write(root / "src" / "c" / "main.c", _c())
    write(root / "include" / "main.h", "#ifndef MAIN_H\n#define MAIN_H\nint main(void);\n#endif\n")
    write(root / "web" / "app.js", "import { x } from './x.js';\nexport const y = x + 1;\n")
    write(root / "web" / "bundle.min.js", _minified(rng))
    for i in range(1, 5):
        write(root / "notes" / f"chapter {i}.md", _prose(rng, i))
    write(root / "dir with spaces" / "file name.txt", "a file whose path has spaces\nbanana\n")
    write(root / "odd" / "new\nline.txt", "a name with a newline in it\nbanana split\n")
    write(root / "unicode" / "mixed.txt", UNICODE)
    for name, text in CASE_FOLDS.items():
        write(root / "unicode" / name, text)
    write(root / "win" / "crlf file.txt", b"first line;\r\nsecond line\r\nthe end;\r\n\r\nword\r\n")
    write(root / "bom" / "utf8 bom.md", codecs.BOM_UTF8 + "hello bom\ncafé bom\n".encode())
    write(
        root / "bom" / "utf16.txt",
        codecs.BOM_UTF16_LE + "utf16 line one\nhello from UTF-16, été\n".encode("utf-16-le"),
    )
    write(
        root / "legacy" / "cp1252.txt",
        b"caf\xe9 cr\xe8me, \x93quoted\x94, 5 \x80\nna\xefve STRA\xdfE\n",
    )
    (root / "legacy").joinpath(b"latin\xe9.txt".decode("utf-8", "surrogateescape")).write_bytes(
        b"a name that is not UTF-8\nbanana\n"
    )
    write(root / "data" / "numbers.csv", "".join(
        f"{rng.randrange(10**6)},{rng.randrange(2000, 2030)}-0{rng.randrange(1, 10)}"
        f"-1{rng.randrange(10)},0x{rng.randrange(1 << 16):04x},{rng.choice(WORDS)}\n"
        for _ in range(30)
    ))  # fmt: skip
    # Where a phrase of a literal's words (``phrases``) would lose a file if taken
    # naively: words glued to the match's edges, a non-ASCII character between words,
    # a superscript or a private-use character that ``-w`` takes for a boundary and
    # FTS5 for a letter; and files holding the words elsewhere or in another order.
    write(root / "phrases" / "glued.txt", (
        "xInvalid number of channelsy\nkmemcache_alloc(p)\nmax = foo.bar(y);\n"
    ))  # fmt: skip
    write(root / "phrases" / "umlaut.txt", "x foo \u00fc bar y\n")
    write(root / "phrases" / "superscript.txt", "kmem_cache_alloc\u00b2 here\n")
    write(root / "phrases" / "private use.txt", "\ue000kmem_cache_alloc\n")
    write(root / "phrases" / "kelvin.txt", "THE \u212aERNEL MODULE\n\u00b2\u212aMEM_CACHE_ALLOC\n")
    write(
        root / "phrases" / "crlf.txt", b"p = kmem_cache_alloc(c);\r\nInvalid number of channels\r\n"
    )
    write(
        root / "phrases" / "decoy.txt", "kmem_cache then cache_alloc; channels of Invalid number\n"
    )
    # An ASCII word under ``-w`` next to non-ASCII characters: a word character for
    # ripgrep (é, a combining accent, the Kelvin sign), or not (², a curly quote); a
    # line where the first occurrence is glued and a later one whole; and bytes that
    # are not UTF-8.
    write(
        root / "legacy" / "cp1252 lantern.txt",
        b"\xe9lantern\xe9\nlantern\xe9 x\nlantern\nlantern again\n",
    )
    # A NUL past ripgrep's first 64 KiB (and past the 8 KiB the indexer samples): rg -uu
    # stops reading there; so must the daemon's ripgrep, also for a file read again.
    # Past 256 KiB: ripgrep's read buffer, reused from file to file on a thread, grows to
    # hold bundle.min.js's 100 KB line, and a NUL inside the first read of a file makes
    # rg print none of its lines; nearer, rg -uu's answer would depend on which file its
    # thread searched before.
    write(
        root / "legacy" / "late nul.txt",
        b"caf\xe9 lantern\nlantern\n"
        + b"".join(b"filler line %d zzz\n" % i for i in range(15000))
        + b"x\x00y\nlantern after a nul\n",
    )
    write(root / "unicode" / "word edges.txt", (
        "\u00e9lantern here\nlantern\u0301 there\n\u00e9lantern then lantern\n"
        "\u00b2lantern\u00b2 fine\nlanterné\n\u201clantern\u201d\nplain lantern\n"
        "\u00e9lantern only\n\u212aLANTERN \u212a\nLANTER\u212a\n"
    ))  # fmt: skip
    write(root / "legacy" / "cp1252 words.txt", b"caf\xe9 au lait; \xe9kmem_cache_alloc\xe9\n")
    write(root / "notes" / "misc.txt", "see util.rs and main.rs\nabcd cdab\na dog, a cog, a zog\n")
    write(root / "empty.txt", "")
    write(root / "no newline at end.txt", "last line without a break")
    # With -m 1 -A 2, ripgrep prints a match inside the after-context as a match too,
    # and counts it only when --count is given the context (Grepper's counting runs
    # past the limit).
    # Files first and last in path order: past the limit, the last ones are counted.
    for i in range(20):
        for folder in ("aa engines", "zz engines"):
            write(root / folder / f"e_{i:02}.txt", "engine one\nengine two\nx\n")
    for i in range(90):  # enough files for three ripgrep chunks (16, 64, ...)
        write(
            root / "gen" / f"file_{i:03d}.txt",
            "\n".join(_sentence(rng, 8) for _ in range(3)) + "\n",
        )


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Daemon, Path]]:
    """A daemon over the corpus, indexed (every file: ``--include-ext '*'``)."""
    base = tmp_path_factory.mktemp("grep")
    root = base / "root"
    root.mkdir()
    build(root, random.Random(18))
    sockdir = tmp_path_factory.mktemp("s", numbered=True)
    d = Daemon(base, sockdir, [root])
    d.extra_args = ["--include-ext", "*", "--watch", "off"]
    anyio.run(d.start)
    try:
        yield d, root
    finally:
        d.stop()


def test_the_daemon_indexes_exactly_the_files_rg_searches(corpus: tuple[Daemon, Path]) -> None:
    d, root = corpus

    async def listed() -> list[str]:
        async with d.client() as c:
            reply = await c.request(FindFiles(glob="*", limit=1000), FindFilesReply)
        assert not reply.truncated
        return sorted(f.path for f in reply.files)

    assert anyio.run(listed) == rg_searched(root)


CASES = [
    # literals
    Case("parse_header"),
    Case("HashMap<String, Vec<u8>>"),
    Case("needleInTheMiddle"),
    Case("__START__"),
    Case("__END__"),
    Case("café"),
    Case("Σίσυφος"),
    Case("日本語"),
    Case("🙂"),
    Case("Straße"),
    Case("hello"),
    Case("banana"),
    Case("utf16 line"),
    # regexes
    Case("colou?r"),
    Case("render|token|socket"),
    Case(r"(parse|render)_[a-z]+"),
    Case(r"fn\s+\w+\("),
    Case("^#include"),
    Case(";$"),
    Case(r";\r$"),
    Case(r"\d{4}-\d{2}-\d{2}"),
    Case("0x[0-9A-Fa-f]+"),
    Case("[A-Z][a-z]+Handler[0-9]"),
    Case("(?i)handler"),
    Case("(?i:STRASSE)"),
    Case("a(?i)BC"),
    Case(r"\bword\b"),
    Case("ba(na){2,}"),
    Case("(ab|cd){2}"),
    Case("<.+?>"),
    Case("a.b*c"),
    Case(r"\.rs\b"),
    Case(r"\tprintf"),
    Case(r"\x41\x42C"),
    Case(r"caf\x{e9}"),
    Case(r"\u00e9t\u00e9"),
    Case(r"(?-u:\xe9)"),
    Case("[[:alpha:]]oo"),
    Case("[a-c[x-z]]og"),
    Case(r"[\p{Greek}&&\p{Lu}]{3,}"),
    Case(r"\p{Han}+"),
    Case("caf."),
    # word mode
    Case("word", word=True),
    Case("WORD", word=True, ignore_case=True),
    Case("résumé", word=True),
    Case("the", word=True, max_count=1),
    Case("lantern", word=True),
    Case("lantern", word=True, max_count=1),
    Case("lantern", word=True, before=1),
    Case("lantern", word=True, files_only=True),
    Case("lantern", fixed=True, word=True),
    Case("lantern", word=True, ignore_case=True),
    Case("LANTERk", word=True, ignore_case=True),
    Case("number of channels", fixed=True, word=True),
    Case("a dog, a cog", word=True),
    Case("cache then cache", word=True),
    # case-insensitive
    Case("kelvin", ignore_case=True),
    Case("(?i)kelvin"),
    Case("strasse", ignore_case=True),
    Case("straße", ignore_case=True),
    Case("σίσυφος", ignore_case=True),
    Case("ΛΌΓΟΣ", ignore_case=True),
    Case("café", ignore_case=True),
    Case("naïve", ignore_case=True),
    Case("µ alone", ignore_case=True),
    Case("abc", ignore_case=True),
    # fixed strings
    Case("a.b*c", fixed=True),
    Case("[x]", fixed=True),
    Case("(y)", fixed=True),
    Case("$HOME", fixed=True),
    Case("^start", fixed=True),
    Case("foo|bar", fixed=True),
    Case(r"\d+", fixed=True),
    Case("{1,2}", fixed=True),
    Case("👩‍💻", fixed=True),
    Case("STRASSE", fixed=True, ignore_case=True),
    # no usable trigram
    Case("."),
    Case(r"\w+"),
    Case("ab"),
    Case("é"),
    Case("^$"),
    Case("x*y+z?"),
    # phrases of a literal's words
    Case("Invalid number of channels", fixed=True),
    Case("kmem_cache_alloc", word=True),
    Case("kmem_cache_alloc", word=True, ignore_case=True),
    Case("cache_alloc(", fixed=True),
    Case("x = foo.bar(y)", fixed=True),
    Case(" foo \u00fc bar ", fixed=True),
    Case("the kernel module", fixed=True, ignore_case=True),
    Case(" au lait;", fixed=True),
    # context, max count, files
    Case("impl", before=2, after=2),
    Case("class", before=1),
    Case("TODO", after=3),
    Case("def", max_count=1),
    Case("fn", max_count=2, after=1),
    Case("the", files_only=True),
    Case("IMPORT", files_only=True, ignore_case=True),
    Case("return", before=1, after=1, max_count=1),
]


def _id(case: Case) -> str:
    flags = "".join(
        f for f, on in (("F", case.fixed), ("i", case.ignore_case), ("w", case.word)) if on
    )
    return f"{case.pattern!a}-{flags}" if flags else ascii(case.pattern)


def check(d: Daemon, root: Path, case: Case, limit: int) -> None:
    reply = anyio.run(grep, d, case, limit)
    if case.files_only:
        files = rg_files(root, case)
        lines = [Found(p, 0, "", True, 0) for p in files[:limit]]
        want = Expected(lines, len(files), len(files), len(files) > limit)
    else:
        want = expected(rg_lines(root, case), limit, case)
    got = as_found(reply.lines)
    assert [(f.path, f.line, f.match, f.column) for f in got] == [
        (f.path, f.line, f.match, f.column) for f in want.lines
    ]
    for g, w in zip(got, want.lines, strict=True):
        assert clipped(g.text, w.text), (g, w)
    assert (reply.total, reply.files, reply.truncated, reply.complete) == (
        want.total,
        want.files,
        want.truncated,
        True,
    )


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_grep_prints_what_rg_prints(corpus: tuple[Daemon, Path], case: Case) -> None:
    d, root = corpus
    check(d, root, case, limit=1000)


@pytest.mark.parametrize(
    "case",
    [
        Case("banana"),
        Case("the", files_only=True),
        Case("TODO", after=3),
        Case("impl", before=2, after=2),
        Case("fn", max_count=2, after=1),
        Case("^e.g", max_count=1, after=2),
    ],
    ids=_id,
)
@pytest.mark.parametrize("limit", [1, 5, 20])
def test_a_small_limit_keeps_the_first_lines_and_counts_them_all(
    corpus: tuple[Daemon, Path], case: Case, limit: int
) -> None:
    # Past the limit, later ripgrep runs only count (--count): the total stays exact.
    d, root = corpus
    check(d, root, case, limit)


def test_a_long_line_is_clipped_around_its_match(corpus: tuple[Daemon, Path]) -> None:
    d, root = corpus
    for needle, head, tail in [
        ("needleInTheMiddle", True, True),
        ("__START__", False, True),
        ("__END__", True, False),
    ]:
        reply = anyio.run(grep, d, Case(needle))
        (line,) = reply.lines
        assert line.text.startswith("…") == head and line.text.endswith("…") == tail
        assert len(line.text) == GREP_LINE_CHARS + head + tail and needle in line.text
        full = (root / "web" / "bundle.min.js").read_text().splitlines()[line.line - 1]
        assert full.index(needle) == line.column - 1 and len(full) > 100_000


def test_selective_patterns_read_few_files_and_no_trigram_ones_all(
    corpus: tuple[Daemon, Path],
) -> None:
    d, root = corpus
    everything = len(rg_searched(root))
    for pattern in ("needleInTheMiddle", "HashMap<String", "(?i)ligature|micro"):
        reply = anyio.run(grep, d, Case(pattern))
        assert not reply.scanned_all and 1 <= reply.candidates <= 3, (pattern, reply)
    for pattern in (".", r"\w+", "ab"):
        reply = anyio.run(grep, d, Case(pattern))
        assert reply.scanned_all and reply.candidates == everything, (pattern, reply)


def test_cases_cover_fifty_patterns() -> None:
    assert len(CASES) >= 50


def test_a_literals_words_in_a_row_narrow_the_candidates(corpus: tuple[Daemon, Path]) -> None:
    # phrases/decoy.txt holds every trigram of kmem_cache_alloc, not its words in a
    # row: only the files rg reports and cp1252 words.txt (a non-ASCII byte next to the
    # identifier) are read.
    d, root = corpus
    case = Case("kmem_cache_alloc", word=True)
    reply = anyio.run(grep, d, case)
    assert reply.candidates == len(rg_files(root, case)) + 1 == 4, reply
    # A two-letter word has no trigram but is a word: not every file is read.
    reply = anyio.run(grep, d, Case("ab", word=True))
    assert not reply.scanned_all and reply.candidates < len(rg_searched(root)) / 2, reply
