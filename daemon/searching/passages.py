"""The passage of a hit to show: the line holding the most distinct query words.

Not FTS5's ``snippet()``: it scores every window around every hit against every
other hit, quadratic in a document's hits, and ``highlight()`` re-tokenizes the whole
body. One pass of substring searches (``str.find``, in C) over the top hits' bodies,
stopped after ``MAX_LINES`` matching lines, is bounded whatever the file size, and it
also places snippets for what ``snippet()`` cannot see (a camelCase part, a CJK word
inside a run, a match only in the file name).

Needles are the query's words, lower-cased (``Plan.needles``); one ending in ``*``
is a prefix term. A needle marks only whole words of the text, where the search
matched them: an occurrence must begin a word (or a camelCase part: ``Http`` in
``parseHttpRequest``), and the rest of its word must leave the stem unchanged, as
the index's Porter stemmer (``stems``) sees it: ``pick`` marks ``picked``, never
``tar`` the ``tart`` in ``start`` nor ``not`` the word ``Notes``. The line shown is
the first line holding such a word, so its number is where ``read_file`` finds it.
A needle also matches by its stem (``scheduler`` finds ``scheduling``); a prefix
takes any rest of the word. A symbol term (``c++``, ``.net``) is found only where it
stands alone, as the index sees it (``tokens.symbol_at``): never inside ``libc++``
or ``example.net``. Runs of CJK text, indexed as character pairs, match anywhere.

Matches are marked ``⟦`` ``⟧`` (``MATCH_OPEN``, ``MATCH_CLOSE``), characters that
ordinary text and Markdown do not use; where the text has them, it shows ``[ ]``.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator
from functools import lru_cache
from typing import Final

from kbindex.daemon.index import tokens
from kbindex.daemon.searching import stems
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
ANY_REST: Final = ""
"""The rule of a prefix: any rest of the word (``Rules``)."""
Rules = dict[str, str | None]
"""Per spelling, how an occurrence is checked: None (a symbol, a CJK run, no letter
or digit at its end: as found), ``ANY_REST`` (a prefix), or the stem the whole word
must have."""
Find = Callable[[str, int], int]


def _last_word(text: str) -> str:
    words = tokens.WORD.findall(text)
    return words[-1] if words else ""


@lru_cache(maxsize=256)
def _rules(needles: tuple[str, ...]) -> Rules:
    """The spellings to look for, longest needle first, then the stems of the word
    needles (``scheduler`` → ``schedul``), each with its ``Rules`` entry."""
    rules: Rules = {}
    stemmed: list[str] = []
    for needle in sorted(needles, key=lambda n: len(n.rstrip("*")), reverse=True):
        spelling = needle.rstrip("*")
        if not spelling:
            continue
        if tokens.symbol_token(spelling) or tokens.has_unsegmented(spelling):
            rules.setdefault(spelling, None)
        elif needle.endswith("*"):
            rules[spelling] = ANY_REST
        elif spelling[-1].isalnum():
            word = _last_word(spelling)
            target = stems.stem(word)
            rules.setdefault(spelling, target)
            if word == spelling and target != spelling and target.isalnum():
                stemmed.append(target)
        else:
            rules.setdefault(spelling, None)
    for target in stemmed:
        rules.setdefault(target, target)
    return rules


@lru_cache(maxsize=256)
def _coverage(needles: tuple[str, ...]) -> dict[str, frozenset[str]]:
    """For each spelling, the needles an occurrence of it shows: those it contains (a
    phrase holds its words, ``max_file_size`` its parts), or the one it is the stem of.

    A line scores the needles it shows, not its distinct spellings: so the line
    holding a phrase holds every needle, beats one with the words apart, and ends the
    search early."""
    plain = [n.rstrip("*") for n in needles]
    covered = {n: frozenset(m for m in plain if m in n) for n in plain}
    for spelling in _rules(needles):
        if spelling not in covered:
            covered[spelling] = frozenset(
                n for n in plain if tokens.WORD.fullmatch(n) and stems.stem(n) == spelling
            )
    return covered


def _starts_word(text: str, at: int) -> bool:
    """Whether a word, or a part of an identifier, begins at ``text[at]``."""
    if at == 0:
        return True
    before, here = text[at - 1], text[at]
    if not before.isalnum() or (not before.isascii() and tokens.has_unsegmented(before)):
        return True
    if before.isupper():  # the last capital of an acronym before a word: HTTPServer
        return here.isupper() and at + 1 < len(text) and text[at + 1].islower()
    return (before.islower() and here.isupper()) or (before.isdigit() and here.isalpha())


def _ends_word(text: str, at: int) -> bool:
    """Whether a word, or a part of an identifier, ends before ``text[at]``."""
    if at == len(text) or not text[at].isalnum():
        return True
    return _starts_word(text, at) and not text[at].isdigit()


def _word_end(text: str, stop: int) -> int:
    """Where the word that ``text[:stop]`` ends inside goes on to: its lower-case
    letters after a lower-case one (``picked``), its capitals after a capital
    (``NOTES``; one before a lower-case letter begins the next part), or a plural
    ``s`` after capitals (``URLs``)."""
    end = len(text)
    if stop == 0 or stop >= end or not text[stop - 1].isalpha():
        return stop
    at = stop
    if text[stop - 1].isupper():
        while at < end and "A" <= text[at] <= "Z":
            at += 1
        if at < end and text[at].islower():
            if at == stop and text[at] == "s" and (at + 1 == end or not text[at + 1].isalpha()):
                return at + 1
            return max(stop, at - 1)
        return at
    while at < end and "a" <= text[at] <= "z":
        at += 1
    return at


def _token_stop(text: str, at: int, spelling: str, rule: str | None) -> int:
    """The end of the word ``spelling`` matched at ``text[at]`` (``text`` as written),
    or -1 when this occurrence is not where the search matched (``Rules``)."""
    stop = at + len(spelling)
    if rule is None:
        if tokens.symbol_token(spelling) and not tokens.symbol_at(text, at, stop):
            return -1
        return stop
    if spelling[0].isalnum() and not _starts_word(text, at):
        return -1
    end = _word_end(text, stop)
    if not _ends_word(text, end):
        return -1 if rule != ANY_REST else end
    if rule == ANY_REST or (end == stop and _last_word(spelling) == rule):
        return end
    word = _last_word(spelling) + text[stop:end].lower()
    return end if word == rule or stems.stem(word) == rule else -1


def _finder(lowered: str, text: str, rules: Rules) -> Callable[[str, int, int], int]:
    """``find(spelling, start, end)``: ``lowered.find`` skipping the occurrences
    ``_token_stop`` refuses (``text`` is ``lowered`` as written, the same length)."""

    def find(spelling: str, start: int, end: int) -> int:
        rule = rules[spelling]
        at = lowered.find(spelling, start, end)
        while at != -1 and _token_stop(text, at, spelling, rule) == -1:
            at = lowered.find(spelling, at + 1, end)
        return at

    return find


def _occurrences(
    lowered: str, text: str, rules: Rules, start: int, end: int
) -> Iterator[tuple[int, int, str]]:
    """(start, end, spelling) of each word of ``lowered[start:end]`` a spelling marks
    (in the order of ``rules``), leftmost first, the earlier spelling where two
    start at one place, none overlapping; ``end`` takes the rest of the word."""
    find = _finder(lowered, text, rules)
    spellings = tuple(rules)
    following = {s: find(s, start, end) for s in spellings}
    pos = start
    while True:
        found, first = "", end
        for spelling in spellings:
            at = following[spelling]
            if at == -1:
                continue
            if at < pos:  # inside the last match: look again past it
                at = following[spelling] = find(spelling, pos, end)
                if at == -1:
                    continue
            if at < first:
                found, first = spelling, at
        if not found:
            return
        stop = max(_token_stop(text, first, found, rules[found]), first + len(found))
        yield first, stop, found
        pos = stop


def _lowered(text: str) -> str:
    """``text`` lower-cased character by character, the same length: a character
    whose lower case is longer (``İ``) stays as it is."""
    lowered = text.lower()
    if len(lowered) == len(text):
        return lowered
    return "".join(low if len(low := c.lower()) == 1 else c for c in text)


def best_passage(body: str, needles: tuple[str, ...]) -> tuple[str, int] | None:
    """(snippet, line) of the line with the most distinct needles, the first such
    line (1-based), with the needles marked ``⟦`` ``⟧``; None when none occurs."""
    if not needles:
        return None
    # Each match is a spelling, which shows some needles: the first line that shows
    # them all is the answer (for a one-word query, the first line it is on).
    found = _best_line(_lowered(body), body, needles)
    return _passage(body, found[1], needles) if found[0] else None


def _best_line(text: str, written: str, needles: tuple[str, ...]) -> tuple[int, int]:
    """(needles shown, start) of the first line showing the most needles, among the
    first MAX_LINES lines of ``text`` (lower-cased ``written``) holding a spelling.

    Why ``str.find`` and not one regex of the spellings: a question's hits rarely
    have a line holding every word, so each body is scanned to MAX_LINES, and
    CPython's substring search skips ahead several times faster than a regex scan. A
    heap holds each spelling's next occurrence; a spelling is looked for again only
    past the line where it was found (no spelling holds a line break). Most lines
    hold one spelling: while the next one does too, the heap is left alone."""
    rules, coverage, wanted = _rules(needles), _coverage(needles), len(needles)
    spellings = tuple(rules)
    size = len(text)
    find_in = _finder(text, written, rules)

    def find(spelling: str, start: int) -> int:
        return find_in(spelling, start, size)

    newline = text.find
    heap = [(at, rank, s) for rank, s in enumerate(spellings) if (at := find(s, 0)) != -1]
    heapq.heapify(heap)
    best = start = lines = 0
    while heap and lines < MAX_LINES:
        at, rank, spelling = heapq.heappop(heap)
        end = newline("\n", at)
        line_end = size if end == -1 else end
        if not heap or heap[0][0] >= line_end:
            # Lines holding this spelling only, up to the next line holding another.
            width, limit = len(coverage[spelling]), heap[0][0] if heap else size + 1
            while True:
                lines += 1
                if width > best:
                    best, start = width, text.rfind("\n", 0, at) + 1
                    if best >= wanted:
                        return best, start
                at = find(spelling, line_end + 1)
                if at == -1 or lines >= MAX_LINES:
                    break
                if at >= limit:
                    heapq.heappush(heap, (at, rank, spelling))
                    break
                end = newline("\n", at)
                line_end = size if end == -1 else end
                if line_end > limit:  # the next spelling is on this line too
                    heapq.heappush(heap, (at, rank, spelling))
                    break
            continue
        lines += 1
        following = [(at, rank, spelling)]
        while heap and heap[0][0] < line_end:
            following.append(heapq.heappop(heap))
        present = {f[2] for f in following}
        if len(frozenset().union(*(coverage[s] for s in present))) > best:
            line_start = text.rfind("\n", 0, at) + 1
            on_line = _occurrences(text, written, rules, line_start, line_end)
            shown = len(frozenset().union(*(coverage[s] for _, _, s in on_line)))
            if shown > best:
                best, start = shown, line_start
                if best >= wanted:
                    break
        for _, rank, spelling in following:
            after = find(spelling, line_end + 1)
            if after != -1:
                heapq.heappush(heap, (after, rank, spelling))
    return best, start


def _passage(body: str, start: int, needles: tuple[str, ...]) -> tuple[str, int]:
    """(snippet, 1-based line) of the line of ``body`` at ``start``."""
    return _marked(_lines_from(body, start), needles), body.count("\n", 0, start) + 1


def _marked(text: str, needles: tuple[str, ...]) -> str:
    """At most MAX_CHARS of ``text`` around its first needle, needles marked. Words
    are checked in the whole text, so a window cut inside a word marks no part of it."""
    text = _unmarked(text)
    lowered, rules = _lowered(text), _rules(needles)
    first = next(_occurrences(lowered, text, rules, 0, len(text)), None)
    begin, end = _bounds(text, first[0] if first else 0)
    parts = [ELLIPSIS if begin > 0 else ""]
    pos = begin
    for at, stop, _ in _occurrences(lowered, text, rules, begin, end):
        stop = min(stop, end)
        parts += (text[pos:at], OPEN, text[at:stop], CLOSE)
        pos = stop
    parts += (text[pos:end], ELLIPSIS if end < len(text) else "")
    return clean("".join(parts))


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
    begin, end = _bounds(text, centre)
    return (ELLIPSIS if begin > 0 else "") + text[begin:end] + (ELLIPSIS if end < len(text) else "")


def _bounds(text: str, centre: int) -> tuple[int, int]:
    """(begin, end) of ``_window``."""
    if len(text) <= MAX_CHARS:
        return 0, len(text)
    begin = max(0, min(centre - MAX_CHARS // 3, len(text) - MAX_CHARS))
    end = begin + MAX_CHARS
    if begin > 0:
        space = text.find(" ", begin, begin + 40)
        begin = space + 1 if space != -1 and space < centre else begin
    if end < len(text):
        space = text.rfind(" ", end - 40, end)
        end = space if space > centre else end
    return begin, end


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
