"""What a grep pattern requires of a file's text, as a query on the trigram index.

A regex match is a run of characters; whatever the pattern's literal parts force into
every match, every matching file contains, and so do its trigrams (three consecutive
characters). This module turns a pattern into an AND/OR of trigrams that every file
holding a match satisfies, after Russ Cox, "Regular Expression Matching with a Trigram
Index" (2012): each part of the pattern has a set of exact strings it can match (when
small) and a query its matches satisfy; concatenation multiplies exact sets, alternation
unites them, and a set too large or with a string too short becomes a query.

The rule that keeps it correct: when in doubt, require less. A construct this parser
does not know (verbose mode, byte mode, an unknown escape, a malformed pattern) gives
the query ``ANY``: every file is a candidate and ripgrep, which matches the candidates,
is the judge of the syntax and reports its errors. The parser follows the syntax of
Rust's regex crate, which ripgrep uses.

The index holds byte trigrams with ASCII letters folded to lower case (``grams``), so
the strings here are folded the same way. In a case-insensitive part, an ASCII letter
stands for its case variants, which fold alike, except ``k`` and ``s``: the Kelvin sign
and the long s match them too and are not ASCII; those two, and any other letter with
case, count as any character there.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from typing import Final

from kbindex.daemon.index.values import And as And
from kbindex.daemon.index.values import Or as Or
from kbindex.daemon.index.values import Query as Query
from kbindex.daemon.indexing.grams import tokens

MAX_EXACT: Final = 16
"""Most strings an exact set holds before it becomes a query (Cox uses 16 too)."""
MAX_TRIGRAMS: Final = 32
"""Most trigrams one string contributes: a 4 KB literal needs no 4,000-term AND, and
fewer constraints only ever admit more candidates."""
_CLASS_LIMIT: Final = 8
"""A bracketed class of at most this many (folded) characters keeps an exact set."""
MAX_DEPTH: Final = 16
"""Deepest AND/OR nesting a query keeps: FTS5's expression parser overflows its stack
past about 30 levels, which nested alternations ripgrep accepts reach."""


ANY: Final[Query] = None


def both(a: Query, b: Query) -> Query:
    if a is None:
        return b
    if b is None or a == b:
        return a
    parts = (a.parts if isinstance(a, And) else {a}) | (b.parts if isinstance(b, And) else {b})
    return And(frozenset(parts))


def either(a: Query, b: Query) -> Query:
    if a is None or b is None:
        return ANY
    if a == b:
        return a
    parts = (a.parts if isinstance(a, Or) else {a}) | (b.parts if isinstance(b, Or) else {b})
    return Or(frozenset(parts))


def bounded(query: Query, depth: int = MAX_DEPTH) -> Query:
    """``query`` with what nests deeper than ``depth`` cut off: a part that requires
    nothing only ever admits more candidates."""
    if not isinstance(query, And | Or):
        return query
    if depth == 0:
        return ANY
    combine = both if isinstance(query, And) else either
    parts = [bounded(p, depth - 1) for p in query.parts]
    result = parts[0]
    for part in parts[1:]:
        result = combine(result, part)
    return result


def of_string(s: str) -> Query:
    """The trigrams of ``s`` (ANY if it has none), at most MAX_TRIGRAMS of them, spread
    over its length."""
    try:
        grams = tokens(s.encode("utf-8").lower())
    except UnicodeEncodeError:  # a lone surrogate: no file's text holds one
        return ANY
    if len(grams) > MAX_TRIGRAMS:
        grams = _spaced(grams, MAX_TRIGRAMS)
    query: Query = ANY
    for gram in grams:
        query = both(query, gram)
    return query


def spread(query: Query, literal: str, most: int) -> Query:
    """``query``, the AND of the trigrams of ``literal``, cut to ``most`` of them spread
    over it, its first and last kept (any other query as it is). Fewer trigrams only
    ever admit more files; each one listed costs a read of its doclist at every
    candidate, so where the literal's words already narrow the files (``phrases``), a
    few do."""
    if not isinstance(query, And) or len(query.parts) <= most:
        return query
    if not all(isinstance(p, str) for p in query.parts):
        return query
    try:
        ordered = list(dict.fromkeys(tokens(literal.encode("utf-8").lower())))
    except UnicodeEncodeError:
        return query
    ordered = [g for g in ordered if g in query.parts]
    if len(ordered) <= most:
        return query
    return And(frozenset(_spaced(ordered, most)))


def _spaced(grams: list[str], most: int) -> list[str]:
    """``most`` of ``grams`` (more than that many), evenly spaced, the first and last
    among them."""
    step = (len(grams) - 1) / (most - 1)
    return [grams[round(i * step)] for i in range(most)]


def of_set(strings: frozenset[str]) -> Query:
    query: Query = None
    first = True
    for s in strings:
        q = of_string(s)
        query, first = (q if first else either(query, q)), False
        if query is None:
            return ANY
    return query


@dataclass(frozen=True, slots=True)
class _Info:
    exact: frozenset[str] | None
    """Every string this part can match, when known and small."""
    need: Query
    """What any of its matches satisfies beyond ``exact``."""

    def settled(self) -> Query:
        return self.need if self.exact is None else both(self.need, of_set(self.exact))


_EMPTY: Final = _Info(frozenset({""}), ANY)
_ANYTHING: Final = _Info(None, ANY)


def _concat(a: _Info, b: _Info) -> _Info:
    if a.exact is not None and b.exact is not None and len(a.exact) * len(b.exact) <= MAX_EXACT:
        exact = frozenset(x + y for x in a.exact for y in b.exact)
        return _Info(exact, both(a.need, b.need))
    return _Info(None, both(a.settled(), b.settled()))


def _alternate(a: _Info, b: _Info) -> _Info:
    if a.exact is not None and b.exact is not None and len(a.exact | b.exact) <= MAX_EXACT:
        return _Info(a.exact | b.exact, either(a.need, b.need))
    return _Info(None, either(a.settled(), b.settled()))


class _Unsupported(Exception):
    """A construct this parser does not model: the pattern requires nothing."""


def required(pattern: str, *, fixed: bool = False, ignore_case: bool = False) -> Query:
    """The trigram query every file with a match of ``pattern`` satisfies (as ripgrep
    matches it with ``-F`` for ``fixed`` and ``-i`` for ``ignore_case``; ``-w`` only
    narrows matches, so it requires nothing more)."""
    if fixed:
        # Runs of characters with one folded form each; one that -i lets match a
        # character outside ASCII (``k``: the Kelvin sign) ends a run and requires nothing.
        query: Query = ANY
        run: list[str] = []
        for ch in pattern:
            piece = _literal(ch, ignore_case)
            if piece.exact is None:
                query, run = both(query, of_string("".join(run))), []
            else:
                run += piece.exact
        return bounded(both(query, of_string("".join(run))))
    try:
        parser = _Parser(pattern, ignore_case)
        info = parser.alternation()
        if parser.pos != len(pattern):
            raise _Unsupported
    except (_Unsupported, IndexError, ValueError, RecursionError):
        # RecursionError: groups nested past Python's stack (ripgrep refuses past 250).
        return ANY
    return bounded(info.settled())


def _literal(ch: str, ignore_case: bool) -> _Info:
    if not ignore_case or _uncased(ch) or (ch.isascii() and ch not in "KkSs"):
        return _Info(frozenset({ch.lower() if ch.isascii() else ch}), ANY)
    return _ANYTHING


def _uncased(ch: str) -> bool:
    """Whether no other character is ``ch`` in a case-insensitive match: letters with no
    case (CJK), digits, punctuation, symbols. Marks are left out: U+0345 folds to iota."""
    category = unicodedata.category(ch)
    return (
        category == "Lo" or category[0] in "NPSZ"
    ) and ch.lower() == ch.upper() == ch == ch.casefold()


_ESCAPED_CHARS: Final = {"n": "\n", "t": "\t", "r": "\r", "f": "\f", "v": "\v", "a": "\a"}
_CLASS_ESCAPES: Final = frozenset("dDwWsS")
_ASSERTIONS: Final = frozenset("bBAz<>")
_HEX: Final = {"x": 2, "u": 4, "U": 8}
_QUANTIFIERS: Final = frozenset("*?+{")


class _Parser:
    """Recursive descent over the regex crate's syntax, computing ``_Info`` as it goes."""

    def __init__(self, pattern: str, ignore_case: bool) -> None:
        self.p = pattern
        self.pos = 0
        self.ignore_case = ignore_case

    def peek(self) -> str:
        return self.p[self.pos] if self.pos < len(self.p) else ""

    def take(self) -> str:
        ch = self.p[self.pos]
        self.pos += 1
        return ch

    def alternation(self) -> _Info:
        # A flag set in one branch ("a(?i)b|c") stays set in the next ones until the
        # group ends: at worst more of the pattern counts as case-insensitive, which
        # only ever requires less.
        info = self.concatenation()
        while self.peek() == "|":
            self.pos += 1
            info = _alternate(info, self.concatenation())
        return info

    def concatenation(self) -> _Info:
        # ``run``: the exact strings of the pieces since the last one with no exact
        # set; ``need``: what the pieces before it require.
        need: Query = ANY
        run = _EMPTY
        whole = True
        while self.peek() not in ("", "|", ")"):
            piece = self.repetition()
            if piece.exact is None:
                need = both(both(need, run.settled()), piece.need)
                run, whole = _EMPTY, False
            elif run.exact is not None and len(run.exact) * len(piece.exact) <= MAX_EXACT:
                run = _concat(run, piece)
            else:
                need = both(need, run.settled())
                run, whole = piece, False
        if whole:
            return run
        return _Info(None, both(need, run.settled()))

    def repetition(self) -> _Info:
        atom = self.atom()
        if self.peek() not in _QUANTIFIERS:
            return atom
        low, high = self.quantifier()
        if self.peek() == "?":
            self.pos += 1  # lazy: matches the same strings
        if self.peek() in _QUANTIFIERS:
            raise _Unsupported  # "a**" is an error for the regex crate
        if low == 0:
            return _ANYTHING
        if low == high == 1:
            return atom
        return _Info(None, atom.settled())

    def quantifier(self) -> tuple[int, int | None]:
        ch = self.take()
        if ch in ("*", "?"):
            return 0, None
        if ch == "+":
            return 1, None
        end = self.p.index("}", self.pos)
        low_text, comma, high_text = self.p[self.pos : end].partition(",")
        self.pos = end + 1
        low = int(low_text.strip())
        if not comma:
            return low, low
        return low, int(high_text) if high_text.strip() else None

    def atom(self) -> _Info:
        ch = self.take()
        if ch == "(":
            return self.group()
        if ch == "[":
            return self.bracket()
        if ch == ".":
            return _ANYTHING
        if ch in ("^", "$"):
            return _EMPTY
        if ch == "\\":
            return self.escape()
        if (ch in _QUANTIFIERS and ch != "{") or ch == ")":
            raise _Unsupported
        return _literal(ch, self.ignore_case)

    def group(self) -> _Info:
        saved = self.ignore_case
        if self.peek() == "?":
            self.pos += 1
            if self.peek() in ("P", "<"):
                self.pos = self.p.index(">", self.pos) + 1
            elif not self.flags():
                return _EMPTY  # "(?i)": applies to the rest of the enclosing group
        info = self.alternation()
        if self.take() != ")":
            raise _Unsupported
        self.ignore_case = saved
        return info

    def flags(self) -> bool:
        """Reads ``i-s:`` or ``i)``; returns whether a group body follows (``:``)."""
        on = True
        while True:
            ch = self.take()
            if ch == ":":
                return True
            if ch == ")":
                return False
            if ch == "-":
                on = False
            elif ch == "i":
                self.ignore_case = on
            elif ch == "x" or (ch == "u" and not on):
                raise _Unsupported  # verbose and byte modes change what a literal is
            elif ch not in "msUuR":
                raise _Unsupported

    def escape(self) -> _Info:
        ch = self.take()
        if ch in _ESCAPED_CHARS:
            return _literal(_ESCAPED_CHARS[ch], self.ignore_case)
        if ch in _CLASS_ESCAPES:
            return _ANYTHING
        if ch in ("p", "P"):
            if self.take() == "{":
                self.pos = self.p.index("}", self.pos) + 1
            return _ANYTHING
        if ch in _ASSERTIONS:
            if ch == "b" and self.peek() == "{":
                self.pos = self.p.index("}", self.pos) + 1
            return _EMPTY
        if ch in _HEX:
            return _literal(self.hex_char(_HEX[ch]), self.ignore_case)
        if ch.isascii() and not ch.isalnum() and ch not in (" ", "\t", "\n"):
            return _literal(ch, self.ignore_case)
        raise _Unsupported

    def hex_char(self, digits: int) -> str:
        if self.peek() == "{":
            end = self.p.index("}", self.pos)
            code = int(self.p[self.pos + 1 : end], 16)
            self.pos = end + 1
        else:
            code = int(self.p[self.pos : self.pos + digits], 16)
            if len(self.p[self.pos : self.pos + digits]) != digits:
                raise _Unsupported
            self.pos += digits
        if 0xD800 <= code <= 0xDFFF or code > 0x10FFFF:
            raise _Unsupported
        return chr(code)

    def bracket(self) -> _Info:
        """A class ``[...]``: its characters when few and plain, else any character.
        Nested classes, ``[:alpha:]``, ``&&``/``--``/``~~`` and escapes are only skipped
        over (any character)."""
        negated = self.peek() == "^"
        if negated:
            self.pos += 1
        chars: set[str] = set()
        plain = not negated
        first = True
        while True:
            ch = self.take()
            if ch == "]" and not first:
                break
            first = False
            if ch == "[":
                self.skip_nested()
                plain = False
            elif ch == "\\":
                esc = self.take()
                if esc.isascii() and not esc.isalnum():
                    chars.add(esc)
                else:
                    plain = False
                    if esc in ("p", "P", "x", "u", "U") and self.peek() == "{":
                        self.pos = self.p.index("}", self.pos) + 1
            elif ch in "&-~" and self.peek() == ch:
                plain = False
            elif self.peek() == "-" and self.p[self.pos + 1] != "]":
                self.pos += 1
                high = self.take()
                if high in ("\\", "["):
                    raise _Unsupported
                if ord(high) - ord(ch) > _CLASS_LIMIT:
                    plain = False
                chars.update(chr(c) for c in range(ord(ch), ord(high) + 1))
            else:
                chars.add(ch)
        if not plain:
            return _ANYTHING
        folded: set[str] = set()
        for c in chars:
            info = _literal(c, self.ignore_case)
            if info.exact is None:
                return _ANYTHING
            folded |= info.exact
        return _Info(frozenset(folded), ANY) if len(folded) <= _CLASS_LIMIT else _ANYTHING

    def skip_nested(self) -> None:
        depth = 1
        while depth:
            ch = self.take()
            if ch == "\\":
                self.pos += 1
            elif ch == "[":
                depth += 1
            elif ch == "]":
                depth -= 1
