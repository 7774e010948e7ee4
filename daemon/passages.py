"""The passage of a hit to show: the line holding the most distinct query words.

Trigger: FTS5's ``snippet()`` scores every window around every phrase hit against
every other hit, quadratic in the hits of a document: ten 400 KB files full of a
common word took 1.2 s for one query (``highlight()`` still re-tokenizes the whole
body, 0.3 s). Why this instead: one regex pass over the top hits' bodies, stopped
after ``MAX_LINES`` matching lines, costs milliseconds whatever the file size, and it
also places snippets for what ``snippet()`` cannot see (a camelCase part, a CJK word
inside a run, a match only in the file name).

Needles are the query's words, lower-cased (``Compiled.terms``). Porter stemming
matched ``picks`` for ``pick`` and ``scheduling`` for ``scheduler``; a needle of five
letters or more also matches by its stem (common English suffixes cut), so the
passage shown is where the search matched.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Final

OPEN: Final = "\x01"
CLOSE: Final = "\x02"
ELLIPSIS: Final = "…"
MAX_CHARS: Final = 400
"""A snippet is at most about this long, whatever the line length."""
MIN_CHARS: Final = 160
"""A shorter best line is followed by the next lines (hard-wrapped prose) up to this."""
MAX_LINES: Final = 500
"""How many lines holding a needle a search looks at before it settles."""
_SUFFIXES: Final = (
    "ational", "ization", "fulness", "iveness", "ations", "ingly", "ement", "ments",
    "ation", "ness", "ment", "able", "ible", "ings", "ing", "ers", "ies", "ied",
    "ed", "er", "es", "ly", "s",
)  # fmt: skip
_MIN_STEM: Final = 4
_REST: Final = "(?-i:[a-z]*)"
"""The rest of a word, to the next capital: ``pick`` marks ``picked``, ``Http`` in
``parseHttpRequest`` marks ``Http``."""
_SPACE = re.compile(r"\s+")


def _stem(word: str) -> str | None:
    """``scheduler`` → ``schedul``; None when nothing is cut or the rest is too short."""
    if len(word) < _MIN_STEM + 1 or not word.isascii() or not word.isalpha():
        return None
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= _MIN_STEM:
            return word[: -len(suffix)]
    return None


def _spellings(needles: tuple[str, ...]) -> dict[str, None]:
    """The needles, longest first, then the stems of the long ones."""
    found = dict.fromkeys(sorted(needles, key=len, reverse=True))
    for needle in needles:
        stem = _stem(needle)
        if stem is not None:
            found[stem] = None
    return found


@lru_cache(maxsize=256)
def _coverage(needles: tuple[str, ...]) -> dict[str, frozenset[str]]:
    """For each spelling, the needles an occurrence of it shows: those it contains (a
    phrase holds its words, ``max_file_size`` its parts), or the one it is the stem of.

    Trigger: a line was scored by the distinct spellings on it, so for the query
    ``"zeels feling"`` a line with "zeels" and "feling" apart (two) beat the line
    with the phrase itself (one), and no line ever held all three, so every search
    read MAX_LINES lines of each hit. Why needles: a line holding the phrase holds
    every needle, ranks first and ends the search."""
    covered = {n: frozenset(m for m in needles if m in n) for n in needles}
    for needle in needles:
        stem = _stem(needle)
        if stem is not None and stem not in covered:
            covered[stem] = frozenset({needle})
    return covered


@lru_cache(maxsize=256)
def _line_pattern(needles: tuple[str, ...]) -> re.Pattern[str]:
    """Case-sensitive, for lower-cased text: 5x faster than re.IGNORECASE, which
    checks both cases at every position of every line."""
    return re.compile("|".join(re.escape(s) for s in _spellings(needles)))


@lru_cache(maxsize=256)
def needle_pattern(needles: tuple[str, ...]) -> re.Pattern[str] | None:
    """One case-insensitive pattern for all needles, longest spelling first, each
    word and stem taking the rest of the word it starts."""
    if not needles:
        return None
    alternatives = (
        re.escape(s) + (_REST if s.isascii() and s.isalpha() else "") for s in _spellings(needles)
    )
    return re.compile("|".join(alternatives), re.IGNORECASE)


def best_passage(body: str, needles: tuple[str, ...]) -> tuple[str, int] | None:
    """(snippet, line) of the line with the most distinct needles, the first such
    line (1-based), with the needles marked as ``**bold**``; None when none occurs."""
    pattern = needle_pattern(needles)
    if pattern is None:
        return None
    # Lines are found on the lower-cased body (the same offsets unless lower()
    # changed its length, as for "İ"); only the shown window is marked case-aware.
    lowered = body.lower()
    text, lines = (
        (lowered, _line_pattern(needles)) if len(lowered) == len(body) else (body, pattern)
    )
    # On the lower-cased text each match is a spelling, which shows some needles: the
    # first line that shows them all is the answer (for a one-word query, the first
    # line it is on). The other pattern takes whole words: no such bound.
    coverage = _coverage(needles) if text is lowered else None
    most = len(needles) if coverage is not None else MAX_LINES
    best, start, pos = 0, 0, 0
    for _ in range(MAX_LINES):
        # One search finds the next line holding a needle; one findall counts the
        # distinct needles on it. Both run in C: a line costs two calls, not a
        # Python step per occurrence.
        found = lines.search(text, pos)
        if found is None:
            break
        line_start = text.rfind("\n", 0, found.start()) + 1
        line_end = text.find("\n", found.end())
        line_end = len(text) if line_end == -1 else line_end
        matched = set(lines.findall(text, line_start, line_end))
        if coverage is not None:
            distinct = len(frozenset().union(*(coverage[m] for m in matched)))
        else:
            distinct = len({w.lower() for w in matched})
        if distinct > best:
            best, start = distinct, line_start
            if best >= most:
                break
        pos = line_end + 1
    if best == 0:
        return None
    text = _lines_from(body, start)
    first = pattern.search(text)
    window = _window(text, first.start() if first else 0).replace(OPEN, "").replace(CLOSE, "")
    marked = pattern.sub(lambda m: OPEN + m.group() + CLOSE, window)
    return clean(marked), body.count("\n", 0, start) + 1


def head(body: str) -> str:
    """The snippet when no needle occurs in the body (a match in the path or title)."""
    return clean(_window(_lines_from(body.lstrip(), 0), 0).replace(OPEN, "").replace(CLOSE, ""))


def _lines_from(body: str, start: int) -> str:
    """The line at ``start``, with the lines after it while shorter than MIN_CHARS."""
    end = body.find("\n", start)
    end = len(body) if end == -1 else end
    for _ in range(4):
        if end >= len(body) or end - start >= MIN_CHARS:
            break
        following = body.find("\n", end + 1)
        following = len(body) if following == -1 else following
        if not body[end + 1 : following].strip():
            break  # a paragraph ends at a blank line
        end = following
    return body[start:end]


def _window(text: str, centre: int) -> str:
    """At most MAX_CHARS of ``text`` around ``centre``, cut at spaces when it can."""
    if len(text) <= MAX_CHARS:
        return text
    begin = max(0, min(centre - MAX_CHARS // 3, len(text) - MAX_CHARS))
    end = begin + MAX_CHARS
    if begin > 0:
        space = text.find(" ", begin, begin + 40)
        begin = space + 1 if space != -1 and space < centre else begin
    if end < len(text):
        space = text.rfind(" ", end - 40, end)
        end = space if space > centre else end
    return (ELLIPSIS if begin > 0 else "") + text[begin:end] + (ELLIPSIS if end < len(text) else "")


def clean(snippet: str) -> str:
    """One line of text with ``**`` around the marked words."""
    text = _SPACE.sub(" ", snippet).strip()
    # Adjacent marks (parse|Http|Request) read better as one.
    return text.replace(CLOSE + OPEN, "").replace(OPEN, "**").replace(CLOSE, "**")
