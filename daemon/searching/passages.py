"""The passage of a hit to show: the line holding the most distinct query words.

Not FTS5's ``snippet()``: it scores every window around every hit against every
other hit, quadratic in a document's hits, and ``highlight()`` re-tokenizes the whole
body. One pass of substring searches (``str.find``, in C) over the top hits' bodies,
stopped after ``MAX_LINES`` matching lines, is bounded whatever the file size, and it
also places snippets for what ``snippet()`` cannot see (a camelCase part, a CJK word
inside a run, a match only in the file name).

Needles are the query's words, lower-cased (``Compiled.terms``). Porter stemming
matches ``picks`` for ``pick`` and ``scheduling`` for ``scheduler``; a needle of five
letters or more also matches by its stem (common English suffixes cut), so the
passage shown is where the search matched. A symbol term (``c++``, ``.net``) is found
only where it stands alone, as the index sees it (``tokens.symbol_at``): never inside
``libc++`` or ``example.net``.

Matches are marked ``⟦`` ``⟧`` (``MATCH_OPEN``, ``MATCH_CLOSE``), characters that
ordinary text and Markdown do not use; where the text has them, it shows ``[ ]``.
"""

from __future__ import annotations

import heapq
import itertools
import re
from collections.abc import Iterator
from functools import lru_cache, partial
from typing import Final

from kbindex.daemon.indexing import tokens
from kbindex.proto.messages import MATCH_CLOSE, MATCH_OPEN

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

    A line scores the needles it shows, not its distinct spellings: so the line
    holding a phrase holds every needle, beats one with the words apart, and ends the
    search early."""
    covered = {n: frozenset(m for m in needles if m in n) for n in needles}
    for needle in needles:
        stem = _stem(needle)
        if stem is not None and stem not in covered:
            covered[stem] = frozenset({needle})
    return covered


@lru_cache(maxsize=256)
def _ordered(needles: tuple[str, ...]) -> tuple[str, ...]:
    """The spellings in the order the alternatives of ``needle_pattern`` run."""
    return tuple(_spellings(needles))


@lru_cache(maxsize=256)
def needle_pattern(needles: tuple[str, ...]) -> re.Pattern[str] | None:
    """One case-insensitive pattern for all needles, longest spelling first, each
    word and stem taking the rest of the word it starts.

    Compiled only for a text whose lower case changes its length (``İ``): elsewhere
    ``_occurrences`` finds what it would, because compiling a pattern (parsed in
    Python) costs a noticeable share of a query."""
    if not needles:
        return None
    return re.compile("|".join(_alternative(s) for s in _spellings(needles)), re.IGNORECASE)


def _alternative(spelling: str) -> str:
    if _takes_rest(spelling):
        return re.escape(spelling) + _REST
    if tokens.symbol_token(spelling):  # alone, as tokens.symbol_at sees it
        version = "[0-9]*" if spelling.endswith("+") else ""
        return rf"(?<![\w.]){re.escape(spelling)}(?={version}(?![\w+#]|\.\w))"
    return re.escape(spelling)


def _takes_rest(spelling: str) -> bool:
    return spelling.isascii() and spelling.isalpha()


@lru_cache(maxsize=1024)
def _is_symbol(spelling: str) -> bool:
    return not spelling.isalnum() and tokens.symbol_token(spelling) is not None


def _find(text: str, spelling: str, start: int, end: int | None = None) -> int:
    """``text.find(spelling, start, end)``, skipping where a symbol term is not alone."""
    at = text.find(spelling, start, end)
    if _is_symbol(spelling):
        while at != -1 and not tokens.symbol_at(text, at, at + len(spelling)):
            at = text.find(spelling, at + 1, end)
    return at


def _occurrences(
    text: str, spellings: tuple[str, ...], start: int, end: int, rest: str | None = None
) -> Iterator[tuple[int, int, str]]:
    """(start, end, spelling) of each match of ``spellings`` in ``text[start:end]`` as
    the regex ``spelling1|spelling2|...`` finds them: leftmost first, the earlier
    spelling where two start at one place, none overlapping. With ``rest`` (``text``
    before lower-casing), a word spelling also takes the lower-case ASCII letters
    that follow it there, as ``_REST`` does."""
    following = {s: _find(text, s, start, end) for s in spellings}
    pos = start
    while True:
        found, first = "", end
        for spelling in spellings:
            at = following[spelling]
            if at == -1:
                continue
            if at < pos:  # inside the last match: look again past it
                at = following[spelling] = _find(text, spelling, pos, end)
                if at == -1:
                    continue
            if at < first:
                found, first = spelling, at
        if not found:
            return
        stop = first + len(found)
        if rest is not None and _takes_rest(found):
            while stop < end and "a" <= rest[stop] <= "z":
                stop += 1
        yield first, stop, found
        pos = stop


def best_passage(body: str, needles: tuple[str, ...]) -> tuple[str, int] | None:
    """(snippet, line) of the line with the most distinct needles, the first such
    line (1-based), with the needles marked ``⟦`` ``⟧``; None when none occurs."""
    if not needles:
        return None
    # Lines are found on the lower-cased body (the same offsets unless lower()
    # changed its length, as for "İ"); only the shown window is marked case-aware.
    lowered = body.lower()
    if len(lowered) != len(body):
        return _best_by_pattern(body, needles)
    # Each match is a spelling, which shows some needles: the first line that shows
    # them all is the answer (for a one-word query, the first line it is on).
    best, start = _best_line(lowered, _ordered(needles), _coverage(needles), len(needles))
    return _passage(body, start, needles) if best else None


def _best_line(
    text: str, spellings: tuple[str, ...], coverage: dict[str, frozenset[str]], needles: int
) -> tuple[int, int]:
    """(needles shown, start) of the first line showing the most needles, among the
    first MAX_LINES lines of ``text`` holding a spelling.

    Why ``str.find`` and not one regex of the spellings: a question's hits rarely
    have a line holding every word, so each body is scanned to MAX_LINES, and
    CPython's substring search skips ahead several times faster than a regex scan. A
    heap holds each spelling's next occurrence; a spelling is looked for again only
    past the line where it was found (no spelling holds a line break). Most lines
    hold one spelling: while the next one does too, the heap is left alone."""
    find = partial(_find, text) if any(map(_is_symbol, spellings)) else text.find
    newline = text.find
    heap = [(at, rank, s) for rank, s in enumerate(spellings) if (at := find(s, 0)) != -1]
    heapq.heapify(heap)
    best = start = lines = 0
    while heap and lines < MAX_LINES:
        at, rank, spelling = heapq.heappop(heap)
        end = newline("\n", at)
        line_end = len(text) if end == -1 else end
        if not heap or heap[0][0] >= line_end:
            # Lines holding this spelling only, up to the next line holding another.
            width, limit = len(coverage[spelling]), heap[0][0] if heap else len(text) + 1
            while True:
                lines += 1
                if width > best:
                    best, start = width, text.rfind("\n", 0, at) + 1
                    if best >= needles:
                        return best, start
                at = find(spelling, line_end + 1)
                if at == -1 or lines >= MAX_LINES:
                    break
                if at >= limit:
                    heapq.heappush(heap, (at, rank, spelling))
                    break
                end = newline("\n", at)
                line_end = len(text) if end == -1 else end
                if line_end > limit:  # the next spelling is on this line too
                    heapq.heappush(heap, (at, rank, spelling))
                    break
            continue
        lines += 1
        # The spellings the line holds, in the order of ``spellings``: the others
        # cannot change which of them the regex would match there.
        following = [(at, rank, spelling)]
        while heap and heap[0][0] < line_end:
            following.append(heapq.heappop(heap))
        following.sort(key=lambda f: f[1])
        present = tuple(f[2] for f in following)
        if len(frozenset().union(*(coverage[s] for s in present))) > best:
            line_start = text.rfind("\n", 0, at) + 1
            on_line = _occurrences(text, present, line_start, line_end)
            shown = len(frozenset().union(*(coverage[s] for _, _, s in on_line)))
            if shown > best:
                best, start = shown, line_start
                if best >= needles:
                    break
        for _, rank, spelling in following:
            after = find(spelling, line_end + 1)
            if after != -1:
                heapq.heappush(heap, (after, rank, spelling))
    return best, start


def _best_by_pattern(body: str, needles: tuple[str, ...]) -> tuple[str, int] | None:
    """``best_passage`` on the text as it is, with whole words found by the pattern."""
    pattern = needle_pattern(needles)
    assert pattern is not None
    best, start = 0, 0
    for line_start, line_end in itertools.islice(_lines_matching(body, pattern), MAX_LINES):
        distinct = len({w.lower() for w in pattern.findall(body, line_start, line_end)})
        if distinct > best:
            best, start = distinct, line_start
    return _passage(body, start, needles) if best else None


def _passage(body: str, start: int, needles: tuple[str, ...]) -> tuple[str, int]:
    """(snippet, 1-based line) of the line of ``body`` at ``start``."""
    return _marked(_lines_from(body, start), needles), body.count("\n", 0, start) + 1


def _marked(text: str, needles: tuple[str, ...]) -> str:
    """At most MAX_CHARS of ``text`` around its first needle, needles marked."""
    lowered = text.lower()
    if len(lowered) == len(text):
        spellings = _ordered(needles)
        first = next(_occurrences(lowered, spellings, 0, len(text)), None)
        window = _unmarked(_window(text, first[0] if first else 0))
        low = window.lower()
        if len(low) == len(window):
            parts: list[str] = []
            pos = 0
            for at, stop, _ in _occurrences(low, spellings, 0, len(low), rest=window):
                parts += (window[pos:at], OPEN, window[at:stop], CLOSE)
                pos = stop
            return clean("".join(parts) + window[pos:])
    pattern = needle_pattern(needles)
    assert pattern is not None
    found = pattern.search(text)
    window = _unmarked(_window(text, found.start() if found else 0))
    return clean(pattern.sub(lambda m: OPEN + m.group() + CLOSE, window))


def _lines_matching(text: str, pattern: re.Pattern[str]) -> Iterator[tuple[int, int]]:
    """(start, end) of each line of ``text`` where ``pattern`` matches, in order."""
    pos = 0
    while (found := pattern.search(text, pos)) is not None:
        line_start, line_end = _line_at(text, found.start())
        yield line_start, line_end
        pos = line_end + 1


def _line_at(text: str, at: int) -> tuple[int, int]:
    """(start, end) of the line of ``text`` holding position ``at``, without its break."""
    end = text.find("\n", at)
    return text.rfind("\n", 0, at) + 1, len(text) if end == -1 else end


def in_lines(body: str, start: int, end: int, needles: tuple[str, ...]) -> tuple[str, int]:
    """(snippet, line) of a passage found by meaning, lines ``start`` to ``end``
    (1-based, inclusive): its line with the most needles when one holds any, else its
    first line of text after any headings."""
    lines = body.split("\n")[start - 1 : end]
    found = best_passage("\n".join(lines), needles)
    if found is not None:
        return found[0], start + found[1] - 1
    first = next((i for i, line in enumerate(lines) if _is_text(line)), 0)
    return head("\n".join(lines[first:])), start + first


def _is_text(line: str) -> bool:
    """A line of a passage worth showing first: not blank, not a Markdown heading."""
    stripped = line.strip()
    return bool(stripped) and not stripped.startswith("#")


def shown(body: str, needles: tuple[str, ...]) -> tuple[str, int]:
    """What a hit found by words shows, and its line: its best passage for ``needles``,
    else the start of the file."""
    return best_passage(body, needles) or (head(body), 1)


def head(body: str) -> str:
    """The snippet when no needle occurs in the body (a match in the path or title)."""
    return clean(_unmarked(_window(_lines_from(body.lstrip(), 0), 0)))


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


_OWN_MARKS: Final = str.maketrans({OPEN: None, CLOSE: None, MATCH_OPEN: "[", MATCH_CLOSE: "]"})


def _unmarked(text: str) -> str:
    """``text`` without the mark characters a file may hold itself: ``⟦ ⟧`` in a
    snippet are then always marks."""
    return text.translate(_OWN_MARKS)


def clean(snippet: str) -> str:
    """One line of text with ``⟦`` ``⟧`` around the marked words."""
    text = " ".join(snippet.split())  # what a regex of \s+ and strip() give, in C
    # Adjacent marks (parse|Http|Request) read better as one.
    return text.replace(CLOSE + OPEN, "").replace(OPEN, MATCH_OPEN).replace(CLOSE, MATCH_CLOSE)
