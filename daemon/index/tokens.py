"""What FTS5's ``unicode61`` tokenizer cannot see, precomputed as plain words.

Python's sqlite3 API (sqlean's too) cannot register a custom FTS5 tokenizer, so the
index gets two extra columns of ordinary space-separated words, built here at index
time and mirrored here at query time:

``subwords``: for each distinct compound identifier of a document, once, the words
unicode61 misses. It splits on ``_`` and ``-`` but not inside ``parseHttpRequest``
(one token, ``parsehttprequest``), so camelCase parts go here (``parse http request``);
and it never joins ``max_file_size_mb`` into one token, so the joined form goes here
(``maxfilesizemb``). A query for an identifier then searches it whole and as parts:
the document holding the identifier itself matches both ways and ranks first, and
``max_file_size_mb`` also finds ``MaxFileSizeMb`` (and ``IL-10`` finds ``IL10``).

``grams``: unicode61 makes one token of a whole run of Chinese, Japanese, Korean or
Thai text (no spaces between words), so a two-character word inside it is unreachable.
Every run becomes its overlapping character bigrams (``東京都`` → ``東京 京都 都``); a
query run becomes the phrase of its bigrams, which matches exactly where it occurs.
Documents without such text store nothing extra.

Symbol terms: unicode61 drops ``+``, ``#`` and ``.``, so ``C++`` and ``C#`` index as
the bare letter ``c`` and ``.NET`` as ``net``. A word directly followed by ``++`` or
``#`` (``++`` perhaps with a version: ``C++17``), or a word after a ``.`` that starts a term
(``.NET``, ``.gitignore``), standing alone (no word character or ``.`` before it, no
word character after it), also gets a token of its own in ``subwords``: ``C++`` →
``cplusplus``, ``C++17`` → ``cplusplus`` and ``cplusplus17``, ``C#`` → ``csharp``,
``F#`` → ``fsharp``, ``.NET`` → ``dotnet``. A query for such a term asks for that
token only (``symbol_token``), and a snippet marks the term only where it stands
alone (``symbol_at``).
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache
from typing import Final

MAX_IDENTIFIER_CHARS: Final = 80
"""Longer runs of word characters are data (hashes, base64), not identifiers."""

_WORD_BYTES: Final = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
_TO_SPACE: Final = bytes(c if c in _WORD_BYTES else 0x20 for c in range(256))
_SEPARATOR_TO_SPACE: Final = bytes(c if c in _WORD_BYTES or c >= 0x80 else 0x20 for c in range(256))
"""Keeps the bytes of non-ASCII characters: a chunk is then whole UTF-8 (ASCII bytes
never occur inside a multi-byte character)."""
_CHUNK: Final = re.compile(r"[A-Za-z0-9]+")
_PART: Final = re.compile(
    r"[A-Z]{2,}s(?![a-z])"  # a plural acronym: URLs, mRNAs
    r"|[A-Z]+(?=[A-Z][a-z])"  # an acronym before a word: HTTPServer
    r"|[A-Z]?[a-z]+[0-9]*|[A-Z]+[0-9]*|[0-9]+"
)
_IDENTIFIER: Final = re.compile(r"[A-Za-z0-9]+(?:[_-]+[A-Za-z0-9]+)*")
WORD: Final = re.compile(r"[^\W_]+")
"""A word as unicode61 sees one: letters and digits; ``_`` separates."""

# Scripts written without spaces between words: CJK ideographs (with 々〆〇), kana,
# Hangul, Thai, Lao, Myanmar, Khmer. Hangul has spaces, but particles stick to words.
_UNSEGMENTED_RANGES: Final = (
    "\u0e00-\u0eff\u1000-\u109f\u1100-\u11ff\u1780-\u17ff\u3005-\u3007\u3040-\u30ff"
    "\u3130-\u318f\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
    "\uff66-\uff9f\U00020000-\U0003134f"
)
_SYMBOL: Final = (
    r"(?:\.([A-Za-z][A-Za-z0-9]{0,39})"  # .NET
    r"|([A-Za-z][A-Za-z0-9]{0,39})(?:\+\+([0-9]*)|(#)))"  # C++, C++17, C#
)
_ALONE: Final = re.compile(rf"(?<![\w.]){_SYMBOL}(?![\w+#]|\.\w)")
"""A symbol term where it stands alone in a text: ``C++`` but not ``libc++`` or
``C++x``, ``.NET`` but not ``ASP.NET`` or ``example.net``."""
_TYPED: Final = re.compile(_SYMBOL)
_ALNUM: Final = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
_CANDIDATE: Final = re.compile(
    r"\.(?=[A-Za-z])(?<![\w.]\.)|\+\+(?<=[A-Za-z0-9]\+\+)|#(?<=[A-Za-z0-9]#)"
)
"""Where a symbol term may be. Why not ``_ALONE`` itself: a pattern that starts with a
word is tried at every letter, several times slower than one starting at a symbol."""
_UNSEGMENTED_RUN: Final = re.compile(f"[{_UNSEGMENTED_RANGES}]+")
_ANY_UNSEGMENTED: Final = re.compile(f"[{_UNSEGMENTED_RANGES}]")


def fts5_string(text: str) -> str:
    """``text`` as an FTS5 string (double quotes, inner quotes doubled): whatever it
    holds, FTS5 reads it as words to match, never as query syntax."""
    return '"' + text.replace('"', '""') + '"'


# ------------------------------------------------------------------ identifiers


def split_identifier(word: str) -> tuple[str, ...]:
    """Lower-cased parts: ``parseHTTPRequest2`` → parse, http, request2;
    ``max_file-size`` → max, file, size. Digits stay with the letters before them."""
    return tuple(p.lower() for p in _PART.findall(word))


def identifier_words(word: str) -> str:
    """What ``subwords`` holds for one ASCII identifier: the parts unicode61 cannot see
    (camelCase) and the joined form it cannot see (separators); "" if not compound.

    The parts are ``split_identifier``'s, lower-cased once for all, as this runs for
    every new identifier of a tree. One pass of ``_PART`` over the whole word finds
    what it finds in each chunk: it matches no separator, and its lookarounds see one
    as the end of a chunk."""
    parts = _PART.findall(word)
    if len(parts) < 2 or word.upper() == word.lower():
        return ""  # not compound, or a number such as a date: 2024-01-31
    chunks = len(_CHUNK.findall(word))
    out = []
    if len(parts) > chunks:
        out.append(" ".join(parts))
    if chunks > 1:
        out.append("".join(parts))
    return " ".join(out).lower()


def _compound(word: str) -> bool:
    """Has a separator inside, or mixed case that is not just a capital first letter."""
    return not (word.isalnum() and (word.islower() or word.isupper() or word.istitle()))


IDENTIFIER_CACHE: Final = 16384
"""Identifiers whose ``subwords`` are kept, most recently used. Why no more: in a
large tree most identifiers are seen once, so a larger cache hits hardly more often
and holds more memory."""


@lru_cache(maxsize=IDENTIFIER_CACHE)
def _raw_identifier_words(raw: bytes) -> str:
    word = raw.decode("ascii").strip("_-")
    if 2 < len(word) <= MAX_IDENTIFIER_CHARS and _compound(word):
        return identifier_words(word)
    return ""


def chunks(*texts: str) -> dict[bytes, None]:
    """The distinct runs of ``texts`` between ASCII characters other than letters,
    digits, ``_`` and ``-``, as UTF-8, in order of first appearance.

    unicode61 separates words at every one of those characters, so the chunks joined
    by spaces hold the same words as the texts: what the exact index needs of a
    document, at about half its tokens (``exact_words``)."""
    found: dict[bytes, None] = {}
    for text in texts:
        # This runs on every indexed byte: bytes.translate maps every separator to a
        # space in one C pass, much cheaper than a regex findall.
        found.update(
            dict.fromkeys(text.encode("utf-8", "replace").translate(_SEPARATOR_TO_SPACE).split())
        )
    return found


def subwords_of(found: dict[bytes, None], *texts: str) -> str:
    """The ``subwords`` column of a document's ``texts`` (path and body), whose
    ``chunks`` are ``found``: one line per distinct compound identifier, in order of
    first appearance, then a line of its symbol terms' tokens."""
    lines: dict[str, None] = {}
    for chunk in found:
        # Plain words (most of them) are rejected by C-level checks before any decoding;
        # identifiers repeat across files, so their split is cached.
        if chunk.isalnum() and (
            chunk.islower() or chunk.isupper() or chunk.istitle() or chunk.isdigit()
        ):
            continue
        # An identifier ends where a non-ASCII character begins (café_bar: "_bar").
        for raw in (chunk,) if chunk.isascii() else chunk.translate(_TO_SPACE).split():
            words = _raw_identifier_words(raw)
            if words:
                lines[words] = None
    symbols = symbol_words(*texts)
    if symbols:
        lines[symbols] = None
    return "\n".join(lines)


def exact_words(found: dict[bytes, None]) -> str:
    """The distinct ``chunks`` as one text, for the exact index."""
    return b" ".join(found).decode("utf-8")


def identifier_alternatives(text: str) -> tuple[str, str, str] | None:
    """(as typed, parts as a phrase, parts joined) for a query word that is one
    compound identifier, each to be quoted as an FTS5 string; None if it is not one.

    ``parseHttpRequest`` → (parseHttpRequest, "parse http request", "parsehttprequest");
    ``max_file_size_mb`` → (max_file_size_mb, "max file size mb", "maxfilesizemb").
    """
    word = text.strip("_-")
    if not _IDENTIFIER.fullmatch(word) or len(word) > MAX_IDENTIFIER_CHARS:
        return None
    if not _compound(word):
        return None
    parts = split_identifier(word)
    if len(parts) < 2:
        return None
    return text, " ".join(parts), "".join(parts)


# ------------------------------------------------------------------ symbol terms


def _symbol_tokens(match: re.Match[str]) -> list[str]:
    dotted, word, version, sharp = match.groups()
    if dotted is not None:
        return ["dot" + dotted.lower()]
    if sharp is not None:
        return [word.lower() + "sharp"]
    token = word.lower() + "plusplus"
    return [token, token + version] if version else [token]


def symbol_words(*texts: str) -> str:
    """The symbol terms' tokens of ``texts``, distinct, space-separated ("" if none)."""
    found: dict[str, None] = {}
    for text in texts:
        for candidate in _CANDIDATE.finditer(text):
            start = end = candidate.start()
            if text[start] != ".":  # back to the start of the word before the symbol
                while start > max(0, end - 41) and text[start - 1] in _ALNUM:
                    start -= 1
            alone = _ALONE.match(text, start)
            if alone is not None:
                found.update(dict.fromkeys(_symbol_tokens(alone)))
    return " ".join(found)


def symbol_token(text: str) -> str | None:
    """The token of a query word that is one symbol term (``C++`` → ``cplusplus``)."""
    typed = _TYPED.fullmatch(text)
    return _symbol_tokens(typed)[-1] if typed else None


def symbol_at(text: str, start: int, stop: int) -> bool:
    """Whether ``text[start:stop]``, a symbol term, stands alone there as the index
    sees one (``C++`` in ``C++17`` does; in ``libc++`` it does not)."""
    alone = _ALONE.match(text, start)
    return alone is not None and stop in (alone.end(), alone.start(3))


# ------------------------------------------------------------------ unsegmented scripts


def has_unsegmented(text: str) -> bool:
    # Most text is ASCII, and str.isascii() is one flag check; the regex is the slow path.
    return not text.isascii() and _ANY_UNSEGMENTED.search(text) is not None


def _clean_run(run: str) -> str:
    # Thai, Lao, Khmer and Myanmar vowel signs are combining marks, which unicode61
    # treats as separators: dropped on both sides, they cannot split a bigram.
    return "".join(ch for ch in run if unicodedata.category(ch)[0] != "M")


def unsegmented_runs(text: str) -> list[str]:
    """The runs of unsegmented-script characters in ``text``, combining marks removed."""
    runs = (_clean_run(m.group()) for m in _UNSEGMENTED_RUN.finditer(text))
    return [r for r in runs if r]


def without_unsegmented(text: str) -> str:
    """``text`` with its unsegmented runs replaced by spaces."""
    return _UNSEGMENTED_RUN.sub(" ", text)


def run_bigrams(run: str) -> list[str]:
    """``東京都`` → [東京, 京都]; a single character stays as it is."""
    if len(run) < 2:
        return [run]
    return [run[i : i + 2] for i in range(len(run) - 1)]


def grams(*texts: str) -> str:
    """The ``grams`` column of a document: per unsegmented run, one line of its bigrams
    and then its last character alone; "" when the text has none (the common case).

    The last character makes every character the first of some token, so a
    one-character query (a prefix query on this column) finds it anywhere; it also
    keeps a query's bigram phrase from running across two runs.
    """
    lines = []
    for text in texts:
        if has_unsegmented(text):
            for run in unsegmented_runs(text):
                words = run_bigrams(run)
                lines.append(" ".join([*words, run[-1]] if len(run) > 1 else words))
    return "\n".join(lines)
