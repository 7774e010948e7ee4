"""Turning what a person or a model types into an FTS5 MATCH expression.

The forgiving syntax: words, "quoted phrases", ``-exclusion``, ``prefix*``. Every term
is emitted as FTS5 strings (double quotes, inner quotes doubled), so no input string
can produce an FTS5 syntax error: operators and punctuation typed by the user are
data, never syntax. ``raw`` mode passes FTS5 syntax through and reports its errors.

Modes: ``all`` requires every term (AND); ``any`` ranks documents by how many and how
rare the terms they match are (OR), so a natural-language question never returns
nothing just because one word is absent; ``auto`` picks ``any`` for questions of four
or more plain words and ``all`` otherwise (and the searcher falls back to ``any`` when
``all`` finds nothing).

Each word is searched in every spelling the index knows (``tokens``): an identifier
whole and by its parts (``parseHttpRequest`` also as the phrase ``parse http request``,
``max_file_size_mb`` also as ``maxfilesizemb``), a run of Chinese or Japanese as the
phrase of its character bigrams. A document holding the exact spelling matches every
alternative and so ranks first. A symbol term (``C++``, ``C#``, ``.NET``) is searched
as its own token only (``tokens.symbol_token``): never as the bare ``c`` or ``net``.

An expression is kept in pieces (``Expr``): FTS5 text, and the prefix terms
(``deprecat*``) whose words depend on what the index holds, which the searcher resolves
when it runs (see ``prefixes``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from kbindex.daemon.indexing import tokens
from kbindex.daemon.indexing.tokens import fts5_string

MODES: Final = ("auto", "all", "any", "raw")
MAX_QUERY_CHARS: Final = 2000
MAX_TERMS: Final = 64
MAX_RUN_BIGRAMS: Final = 64
"""A longer run of CJK text in a query is cut: a 2,000-character phrase helps no one."""
ANY_RUN_BIGRAMS: Final = 16
"""In ``any`` mode a run also matches by its single bigrams, the first this many."""
NATURAL_LANGUAGE_MIN_WORDS: Final = 4

_CONTROL_TO_SPACE: Final = {c: " " for c in range(32)}
_TOKEN = re.compile(r'(-?)"([^"]*)"?(\*?)|(\S+)')
# Punctuation around a word is not part of it: parseHttpRequest(), `max_file_size`,
# "see foo.bar." Inner punctuation stays (paths, dotted names, kebab-case).
_EDGE = re.compile(r"^[^\w]+|[^\w*]+$")
_AROUND_SYMBOL = re.compile(r"[^\w.]*(.*?)[^\w*+#]*")
"""The same around a symbol term, whose own ``.``, ``++`` or ``#`` stays (``(C++),``)."""
_TEXT_COLUMNS: Final = "name title body"
"""The columns holding the document's own text (not derived words)."""

STOPWORDS: Final = frozenset(
    """
    a about above after again against all am an and any are as at be because been before
    being below between both but by can could did do does doing down during each few for
    from further had has have having he her here hers herself him himself his how i if
    in into is it its itself just me more most my myself no nor not now of off on once
    only or other our ours ourselves out over own same she should so some such than that
    the their theirs them themselves then there these they this those through to too
    under until up very was we were what when where which while who whom why will with
    would you your yours yourself yourselves
    """.split()  # noqa: SIM905
)


class BadQuery(Exception):
    """The query cannot be run (raw syntax error, unknown mode, too long)."""


@dataclass(frozen=True, slots=True)
class Prefix:
    """A prefix term as typed, without its ``*``: it stands for the words the index
    holds that start with it, known only when a search runs (``prefixes``)."""

    text: str


Expr = tuple[str | Prefix, ...]
"""An FTS5 MATCH expression in pieces: FTS5 text, and prefix terms still to resolve.
Adjacent text is one piece (``_pieces``), so equal expressions are equal tuples."""


def _pieces(parts: Iterable[str | Prefix]) -> Expr:
    pieces: list[str | Prefix] = []
    for part in parts:
        if isinstance(part, str) and pieces and isinstance(pieces[-1], str):
            pieces[-1] += part
        elif part != "":
            pieces.append(part)
    return tuple(pieces)


def join(separator: str, exprs: Iterable[Expr]) -> Expr:
    parts: list[str | Prefix] = []
    for i, expr in enumerate(exprs):
        if i:
            parts.append(separator)
        parts += expr
    return _pieces(parts)


def grouped(expr: Expr, after: str) -> Expr:
    """``(expr)`` followed by ``after`` (exclusions)."""
    return _pieces(["(", *expr, ")" + after])


def has_prefix(expr: Expr) -> bool:
    return any(isinstance(piece, Prefix) for piece in expr)


def render(expr: Expr) -> str:
    """The expression as FTS5 text; it must hold no prefix term."""
    if has_prefix(expr):
        raise ValueError(f"{expr!r} holds a prefix term still to resolve")
    return "".join(str(piece) for piece in expr)


@dataclass(frozen=True, slots=True)
class Term:
    text: str
    phrase: bool = False
    prefix: bool = False
    negated: bool = False

    def fts(self) -> Expr:
        """This term as a strict FTS5 expression (``all`` mode, exclusions): any one of
        its spellings, each whole."""
        return (Prefix(self.text),) if self.exact_prefix else (self._strict(),)

    def _strict(self) -> str:
        if tokens.has_unsegmented(self.text):
            items = self._unsegmented(loose=False)
            return items[0] if len(items) == 1 else "(" + " AND ".join(items) + ")"
        symbol = tokens.symbol_token(self.text)
        if symbol:
            return fts5_string(symbol)
        if not self.phrase:
            alternatives = tokens.identifier_alternatives(self.text)
            if alternatives:
                # The spelling as typed counts only where the text really has it: in
                # the derived subwords column, "max_file_size_mb" would also match the
                # parts of maxFileSizeMb, and the exact spelling would not rank first.
                typed, parts, joined = alternatives
                spellings = [f"{{{_TEXT_COLUMNS}}}: {fts5_string(typed)}", fts5_string(parts)]
                return "(" + " OR ".join([*spellings, fts5_string(joined)]) + ")"
        return fts5_string(self.text)

    @property
    def exact_prefix(self) -> bool:
        """A prefix term run by its whole words (``prefixes``): all but CJK runs, whose
        bigrams porter never touches."""
        return (
            self.prefix
            and not tokens.has_unsegmented(self.text)
            and not tokens.symbol_token(self.text)
        )

    def loose(self) -> list[Expr]:
        """This term as items of a ranked OR (``any`` mode): the words it is made of, each
        on its own, plus the spellings that join or split them."""
        if tokens.has_unsegmented(self.text):
            return [(item,) for item in self._unsegmented(loose=True)]
        if self.phrase or self.prefix or tokens.symbol_token(self.text):
            return [self.fts()]
        # A question's "0-dimensional", "IL-10" or "max_file_size" becomes separate
        # words, not one phrase: a document with "dimensional" alone still scores for
        # it, as a reader who asks a question expects.
        words = tokens.WORD.findall(self.text)
        kept = [w for w in words if w.lower() not in STOPWORDS] or words
        items = [fts5_string(w) for w in kept]
        alternatives = tokens.identifier_alternatives(self.text)
        if alternatives:
            # The spellings the words alone do not cover: camelCase parts, or the
            # joined form of snake_case and kebab-case.
            spelled = {" ".join(w.lower() for w in words)}
            items += [fts5_string(a) for a in alternatives[1:] if a not in spelled]
        return [(item,) for item in items]

    def _unsegmented(self, *, loose: bool) -> list[str]:
        # Runs of unsegmented script are matched by their bigrams (the grams column);
        # whatever else the term holds (Latin letters, digits) is matched as words.
        # Only in the grams column: the body holds whole runs as single tokens, so a
        # bigram phrase could match there two separate runs ("東京。京都" for "東京都").
        items = []
        for run in tokens.unsegmented_runs(self.text):
            grams = tokens.run_bigrams(run[: MAX_RUN_BIGRAMS + 1])
            if len(grams) == 1 and len(grams[0]) == 1:
                items.append(f"{{grams}}: {fts5_string(grams[0])}*")  # the first of a token
            elif loose and len(grams) > 1:
                # The whole run ranks first; its bigrams alone find near misses.
                items.append(f"{{grams}}: {fts5_string(' '.join(grams))}")
                items += [f"{{grams}}: {fts5_string(g)}" for g in grams[:ANY_RUN_BIGRAMS]]
            else:
                items.append(f"{{grams}}: {fts5_string(' '.join(grams))}")
        rest = tokens.without_unsegmented(self.text)
        if loose:
            items += [fts5_string(w) for w in tokens.WORD.findall(rest)]
        elif any(ch.isalnum() for ch in rest):
            items.append(fts5_string(rest) + ("*" if self.prefix else ""))
        return items

    def needles(self) -> list[str]:
        """Lower-cased strings whose occurrence in a document shows this term there."""
        if tokens.has_unsegmented(self.text):
            runs = tokens.unsegmented_runs(self.text)
            rest = re.findall(r"\w+", tokens.without_unsegmented(self.text))
            return [r.lower() for r in runs] + [w.lower() for w in rest]
        text = self.text.lower()
        if tokens.symbol_token(self.text):
            return [text]  # not its word alone: "c" would mark every c
        # A phrase matches across punctuation and line breaks, so its words are
        # needles too (after the phrase itself, which wins where it occurs as typed).
        parts = [w.lower() for w in tokens.WORD.findall(self.text)] if self.phrase else []
        parts += tokens.split_identifier(self.text) if not self.phrase else []
        found = [text, *(p for p in dict.fromkeys(parts) if p != text and len(p) > 1)]
        if self.prefix:  # the last word takes any rest (``passages``)
            found = [n + "*" if n == text or text.endswith(" " + n) else n for n in found]
        return found


@dataclass(frozen=True, slots=True)
class Alternatives:
    """An ``any`` expression by its parts: a document matches when it holds one of the
    items and none of the exclusions. The searcher may leave out items too common to
    select anything (``frequency``)."""

    items: tuple[Expr, ...]
    exclusions: str = ""
    """`` NOT ...`` for each excluded term (never a prefix term: see ``_exclusions``)."""

    def expression(self, items: tuple[Expr, ...] | None = None) -> Expr:
        """The MATCH expression of ``items`` (by default all of them)."""
        expr = join(" OR ", self.items if items is None else items)
        return grouped(expr, self.exclusions) if self.exclusions else expr


@dataclass(frozen=True, slots=True)
class Compiled:
    match: Expr | None
    """The MATCH expression for ``docs``, or None when nothing can match (no positive
    term)."""
    mode: str
    terms: tuple[str, ...] = ()
    """Lower-cased strings that show where a term matched (to place the snippet and
    mark it); one ending in ``*`` is a prefix, its last word taking any rest."""
    required_prefixes: tuple[str, ...] = ()
    """Prefix terms every document ``match`` finds must hold exactly (``all`` mode)."""
    excluded_prefixes: tuple[str, ...] = ()
    """Prefix terms no document found may hold (``-deprecat*``), in either expression."""
    alternatives: Alternatives | None = None
    """The ``any`` expression by its parts: ``match`` itself in ``any`` mode; in ``all``
    mode the fallback to try when ``match`` finds nothing (None: no fallback)."""
    source: str = ""
    """The query as typed (control characters as spaces): a backend whose full-text
    syntax is not FTS5's builds its own expression from it (``postgres``)."""


def parse(query: str) -> list[Term]:
    """Split forgiving syntax into terms. Never raises."""
    terms: list[Term] = []
    for match in _TOKEN.finditer(query):
        neg, phrase_text, star, word = match.groups()
        if word is not None:
            # "--verbose" is an option someone looks for and "-2" a number, not exclusions.
            negated = len(word) > 1 and word[0] == "-" and (word[1].isalpha() or word[1] == "_")
            body = word[1:] if negated else word
            symbol = _AROUND_SYMBOL.fullmatch(body)
            if symbol and tokens.symbol_token(symbol.group(1)):
                body, prefix = symbol.group(1), False
            else:
                body = _EDGE.sub("", body)
                prefix = body.endswith("*")
                body = body.rstrip("*")
            term = Term(body, phrase=False, prefix=prefix, negated=negated)
        else:
            term = Term(phrase_text, phrase=True, prefix=bool(star), negated=bool(neg))
        if _has_token_chars(term.text):
            terms.append(term)
    return terms


def _has_token_chars(text: str) -> bool:
    return any(ch.isalnum() for ch in text)


def compile_query(query: str, mode: str = "auto") -> Compiled:
    if mode not in MODES:
        raise BadQuery(f"unknown search mode {mode!r}; use one of {', '.join(MODES)}")
    if len(query) > MAX_QUERY_CHARS:
        raise BadQuery(f"query is {len(query)} characters long; the limit is {MAX_QUERY_CHARS}")
    # SQLite ends a string at NUL ("unterminated string"): control characters are
    # never meaningful in a query, so they become spaces.
    query = query.translate(_CONTROL_TO_SPACE)
    if mode == "raw":
        stripped = query.strip()
        words = tuple(_plain_words(stripped))
        return Compiled((stripped,) if stripped else None, "raw", words, source=stripped)
    terms = parse(query)[:MAX_TERMS]
    positive = [t for t in terms if not t.negated]
    negative = [t for t in terms if t.negated]
    if not positive:
        return Compiled(None, "all" if mode == "auto" else mode, source=query)
    found = list(dict.fromkeys(n for t in positive for n in t.needles()))
    needles = tuple(n for n in found if n not in STOPWORDS) or tuple(found)
    excluded = tuple(t.text for t in negative if t.exact_prefix)
    if mode == "auto":
        natural = len(terms) >= NATURAL_LANGUAGE_MIN_WORDS and all(
            not (t.phrase or t.prefix or t.negated) for t in terms
        )
        mode = "any" if natural else "all"
    alternatives = _join_any(positive, negative)
    any_expr = alternatives.expression()
    if mode == "any":
        return Compiled(
            any_expr,
            "any",
            needles,
            excluded_prefixes=excluded,
            alternatives=alternatives,
            source=query,
        )
    all_expr = join(" AND ", (t.fts() for t in positive))
    if negative:
        all_expr = grouped(all_expr, _exclusions(negative))
    # One CJK word of three or more characters also deserves a second chance: the
    # ``any`` form matches its bigrams one by one.
    loose = len(positive) > 1 or tokens.has_unsegmented(positive[0].text)
    fallback = alternatives if loose and any_expr != all_expr else None
    required = tuple(t.text for t in positive if t.exact_prefix)
    return Compiled(all_expr, "all", needles, required, excluded, fallback, source=query)


def _join_any(positive: list[Term], negative: list[Term]) -> Alternatives:
    # Stop words add cost and noise to an OR query; keep them only if nothing else is left.
    meaningful = [t for t in positive if t.phrase or t.text.lower() not in STOPWORDS]
    chosen = meaningful or positive
    # A word typed twice counts twice, as query term frequency does in BM25.
    items = tuple(item for t in chosen for item in t.loose())
    return Alternatives(items, _exclusions(negative) if negative else "")


def _exclusions(negative: list[Term]) -> str:
    # A stemmed form of an excluded prefix would also exclude words that merely share
    # its stem: those go to ``Compiled.excluded_prefixes``, checked on the exact index.
    return "".join(f" NOT {t._strict()}" for t in negative if not t.exact_prefix)


def _plain_words(query: str) -> list[str]:
    words = re.findall(r"\w+\*?", query)
    return [w.lower() for w in words if w.upper() not in ("AND", "OR", "NOT", "NEAR")]
