"""Turning what a person or a model types into an FTS5 MATCH expression.

The forgiving syntax: words, "quoted phrases", ``-exclusion``, ``prefix*``. Every term
is emitted as an FTS5 string (double quotes, inner quotes doubled), so no input string
can produce an FTS5 syntax error: operators and punctuation typed by the user are
data, never syntax. ``raw`` mode passes FTS5 syntax through and reports its errors.

Modes: ``all`` requires every term (AND); ``any`` ranks documents by how many and how
rare the terms they match are (OR), so a natural-language question never returns
nothing just because one word is absent; ``auto`` picks ``any`` for questions of four
or more plain words and ``all`` otherwise (and the searcher falls back to ``any`` when
``all`` finds nothing).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

MODES: Final = ("auto", "all", "any", "raw")
MAX_QUERY_CHARS: Final = 2000
MAX_TERMS: Final = 64
NATURAL_LANGUAGE_MIN_WORDS: Final = 4

_TOKEN = re.compile(r'(-?)"([^"]*)"?(\*?)|(\S+)')

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
class Term:
    text: str
    phrase: bool = False
    prefix: bool = False
    negated: bool = False

    def fts(self) -> str:
        quoted = '"' + self.text.replace('"', '""') + '"'
        return quoted + ("*" if self.prefix else "")


@dataclass(frozen=True, slots=True)
class Compiled:
    match: str | None
    """The MATCH expression, or None when nothing can match (no positive term)."""
    mode: str
    terms: tuple[str, ...] = ()
    """The positive terms' texts (used to find the best line for a snippet)."""
    fallback: str | None = None
    """An ``any`` expression to try when ``all`` finds nothing."""


def parse(query: str) -> list[Term]:
    """Split forgiving syntax into terms. Never raises."""
    terms: list[Term] = []
    for match in _TOKEN.finditer(query):
        neg, phrase_text, star, word = match.groups()
        if word is not None:
            negated = word.startswith("-") and len(word) > 1
            body = word[1:] if negated else word
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
    if mode == "raw":
        stripped = query.strip()
        return Compiled(stripped or None, "raw", tuple(_plain_words(stripped)))
    terms = parse(query)[:MAX_TERMS]
    positive = [t for t in terms if not t.negated]
    negative = [t for t in terms if t.negated]
    if not positive:
        return Compiled(None, "all" if mode == "auto" else mode)
    texts = tuple(t.text for t in positive)
    if mode == "auto":
        natural = len(terms) >= NATURAL_LANGUAGE_MIN_WORDS and all(
            not (t.phrase or t.prefix or t.negated) for t in terms
        )
        mode = "any" if natural else "all"
    any_expr = _join_any(positive, negative)
    if mode == "any":
        return Compiled(any_expr, "any", texts)
    all_expr = " ".join(t.fts() for t in positive)
    if negative:
        all_expr = f"({all_expr})" + "".join(f" NOT {t.fts()}" for t in negative)
    fallback = any_expr if len(positive) > 1 else None
    return Compiled(all_expr, "all", texts, fallback)


def _join_any(positive: list[Term], negative: list[Term]) -> str:
    # Stop words add cost and noise to an OR query; keep them only if nothing else is left.
    meaningful = [t for t in positive if t.phrase or t.text.lower() not in STOPWORDS]
    chosen = meaningful or positive
    expr = " OR ".join(t.fts() for t in chosen)
    if negative:
        expr = f"({expr})" + "".join(f" NOT {t.fts()}" for t in negative)
    return expr


def _plain_words(query: str) -> list[str]:
    return [w for w in re.findall(r"\w+", query) if w.upper() not in ("AND", "OR", "NOT", "NEAR")]
