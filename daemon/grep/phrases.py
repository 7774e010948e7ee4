"""What a literal grep pattern requires of a file's words, as a phrase query on ``docs``.

The trigram index says a file holds every trigram of ``Invalid number of channels``,
not that it holds them in that order. ``docs`` indexes each file's words with their
positions, so a phrase of the literal's words narrows the candidates to the files
holding those words in a row. That is a superset of the files holding the literal
only where ``docs``'s tokenizer (unicode61, then porter) cuts the file's text into
exactly those words, which holds for a word of ASCII letters and digits with an
ASCII character that is neither on each side inside the literal:

- unicode61 splits at every ASCII character but a letter or digit (``_`` too: the
  words of ``tty_port_tty_hangup`` are tty, port, tty, hangup), and those bytes mean
  the same in every encoding the index reads (UTF-8, cp1252; a UTF-16 file is read
  as text by ripgrep too);
- case (``-i`` included: unicode61 folds the Kelvin sign and the long s, which
  ripgrep's ``-i`` matches to k and s) and stems only make a phrase match more.

A run with a non-ASCII character is left out and breaks the phrase (unicode61 may or
may not split there). A word at the literal's edge may be glued to what precedes or
follows the match in the file (``xInvalid``), so it cannot count, and then no phrase
is asked for: the inner words alone are mostly common ones, which rule out few files
for the cost of their phrase query. With ``-w`` an edge word is
whole for ripgrep, but not always for unicode61: ripgrep takes ``²``, a private-use
character or a byte that is not UTF-8 for a non-word character, unicode61 a character
of a word. So with ``-w`` the edge words count and the files where the literal's edge
meets a non-ASCII byte (``unless``, a trigram query) stay candidates.

Only patterns that are literals count (``-F``, or a regex with no metacharacter).
"""

from __future__ import annotations

import re
from typing import Final

from kbindex.daemon.index.tokens import fts5_string
from kbindex.daemon.index.values import Words as Words
from kbindex.daemon.indexing.grams import tokens

MAX_WORDS: Final = 32
"""Words a query keeps, at most: a 4 KB literal needs no 600-word phrase, and fewer
words only ever admit more files."""
MAX_WORD_CHARS: Final = 64
"""Longer runs are left out: past this porter leaves a word as it is, and nothing is
gained from a hash-like word the trigrams do not already pin down."""
_RUN: Final = re.compile(r"[^\x00-/:-@\[-`{-\x7f]+")
"""A run of characters between ASCII characters that are not letters or digits."""
_METACHARACTERS: Final = frozenset("\\.+*?()|[]{}^$")


def required(pattern: str, *, fixed: bool, word: bool, ignore_case: bool) -> Words | None:
    """The phrases every file with a match of ``pattern`` holds in ``docs`` (as
    ripgrep matches it with ``-F``, ``-w``, ``-i``), or None when its words do not
    cover it."""
    if not fixed and any(ch in _METACHARACTERS for ch in pattern):
        return None
    if "\n" in pattern or "\r" in pattern:
        return None  # ripgrep reads a line break as a second pattern (or refuses it)
    # A ``-w`` edge needs two ASCII-folded bytes for ``unless``; under ``-i`` the
    # file's bytes there could be a Kelvin sign or a long s instead.
    edges = word and not ignore_case and len(pattern) >= 2
    phrases: list[list[str]] = [[]]
    count = 0
    front = back = False
    for m in _RUN.finditer(pattern):
        run = m.group()
        at_start, at_end = m.start() == 0, m.end() == len(pattern)
        if not edges and (at_start or at_end):
            return None
        if run.isascii() and len(run) <= MAX_WORD_CHARS and count < MAX_WORDS:
            phrases[-1].append(run.lower())
            count += 1
            front, back = front or at_start, back or at_end
        elif phrases[-1]:
            phrases.append([])
    kept = [fts5_string(" ".join(p)) for p in phrases if p]
    if not kept:
        return None
    match = " AND ".join(f"body : {p}" for p in kept)
    return Words(match, _next_to_non_ascii(pattern, front, back))


def _next_to_non_ascii(pattern: str, front: bool, back: bool) -> str | None:
    """The trigrams of a non-ASCII byte before the literal's first two bytes (when
    ``front``) or after its last two (``back``), ORed. After them, as 8 prefixes of the
    tokens' hex digits (``"6c6f8" *`` for ``lo`` and 0x80-0x8f), not 128 tokens: FTS5
    looks each one up, and most are in no file."""
    data = pattern.encode().lower()
    grams = [f'"{tokens(bytes([b]) + data[:2])[0]}"' for b in range(0x80, 0x100)] if front else []
    grams += [f'"{data[-2:].hex()}{digit}" *' for digit in "89abcdef"] if back else []
    return " OR ".join(grams) if grams else None
