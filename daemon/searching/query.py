"""Turning what a person or a model types into a query plan (``index.plan``).

The forgiving syntax: words, "quoted phrases", ``-exclusion``, ``prefix*``. Operators
and punctuation typed by the user are data, never syntax: each backend writes every
phrase of the plan as quoted text of its own syntax, so no input string can produce a
syntax error. ``raw`` mode passes the backend's syntax through and reports its errors.

Modes: ``all`` requires every term (AND); ``any`` ranks documents by how many and how
rare the terms they match are (OR), so a natural-language question never returns
nothing just because one word is absent; ``auto`` picks ``any`` for questions of four
or more plain words and ``all`` otherwise (and the search falls back to ``any`` when
``all`` finds nothing).

Each word is searched in every spelling the index knows (``tokens``): an identifier
whole and by its parts (``parseHttpRequest`` also as the phrase ``parse http request``,
``max_file_size_mb`` also as ``maxfilesizemb``), a run of Chinese or Japanese by its
character bigrams. A document holding the exact spelling matches every alternative and
so ranks first. A symbol term (``C++``, ``C#``, ``.NET``) is searched as its own token
only (``tokens.symbol_token``): never as the bare ``c`` or ``net``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from kbindex.daemon.index import tokens
from kbindex.daemon.index.interface import BadQuery
from kbindex.daemon.index.plan import NO_FILTERS, Filters, Phrase, Plan, Spelling, Term, term

MODES: Final = ("auto", "all", "any", "raw")
MAX_QUERY_CHARS: Final = 2000
MAX_TERMS: Final = 64
NATURAL_LANGUAGE_MIN_WORDS: Final = 4

_CONTROL_TO_SPACE: Final = {c: " " for c in range(32)}
_TOKEN = re.compile(r'(-?)"([^"]*)"?(\*?)|(\S+)')
# Punctuation around a word is not part of it: parseHttpRequest(), `max_file_size`,
# "see foo.bar." Inner punctuation stays (paths, dotted names, kebab-case).
_EDGE = re.compile(r"^[^\w]+|[^\w*]+$")
_AROUND_SYMBOL = re.compile(r"[^\w.]*(.*?)[^\w*+#]*")
"""The same around a symbol term, whose own ``.``, ``++`` or ``#`` stays (``(C++),``)."""

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


@dataclass(frozen=True, slots=True)
class Typed:
    """A term as typed: its text and what marks it."""

    text: str
    phrase: bool = False
    prefix: bool = False
    negated: bool = False

    @property
    def by_parts(self) -> bool:
        return tokens.has_unsegmented(self.text)

    def planned(self) -> Term:
        """This term's spellings: any one of them, each whole."""
        if self.by_parts:
            # Runs of unsegmented script are matched by their bigrams; whatever else
            # the term holds (Latin letters, digits) as words.
            phrases = [Phrase(run, "grams") for run in tokens.unsegmented_runs(self.text)]
            rest = tokens.without_unsegmented(self.text)
            if any(ch.isalnum() for ch in rest):
                phrases.append(Phrase(rest, prefix=self.prefix))
            return Term(self.text, (Spelling(tuple(phrases)),), by_parts=True)
        symbol = tokens.symbol_token(self.text)
        if symbol:
            return Term(self.text, (Spelling((Phrase(symbol),)),))
        if self.prefix:
            return term(self.text, prefix=True)
        alternatives = None if self.phrase else tokens.identifier_alternatives(self.text)
        if alternatives:
            # The spelling as typed counts only where the text really has it: in the
            # derived subwords, "max_file_size_mb" would also match the parts of
            # maxFileSizeMb, and the exact spelling would not rank first.
            typed, parts, joined = alternatives
            spellings = (Phrase(typed, "text"), Phrase(parts), Phrase(joined))
            return Term(self.text, tuple(Spelling((p,)) for p in spellings))
        return term(self.text)

    def loose(self) -> list[Term]:
        """This term as alternatives of ``any`` mode: the words it is made of, each on
        its own, plus the spellings that join or split them."""
        if self.phrase or self.prefix or self.by_parts or tokens.symbol_token(self.text):
            return [self.planned()]
        # A question's "0-dimensional", "IL-10" or "max_file_size" becomes separate
        # words, not one phrase: a document with "dimensional" alone still scores for
        # it, as a reader who asks a question expects.
        words = tokens.WORD.findall(self.text)
        kept = [w for w in words if w.lower() not in STOPWORDS] or words
        items = [term(w) for w in kept]
        alternatives = tokens.identifier_alternatives(self.text)
        if alternatives:
            # The spellings the words alone do not cover: camelCase parts, or the
            # joined form of snake_case and kebab-case.
            spelled = {" ".join(w.lower() for w in words)}
            items += [term(a) for a in alternatives[1:] if a not in spelled]
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


def parse(query: str) -> list[Typed]:
    """Split forgiving syntax into terms. Never raises."""
    terms: list[Typed] = []
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
            typed = Typed(body, phrase=False, prefix=prefix, negated=negated)
        else:
            typed = Typed(phrase_text, phrase=True, prefix=bool(star), negated=bool(neg))
        if _has_token_chars(typed.text):
            terms.append(typed)
    return terms


def _has_token_chars(text: str) -> bool:
    return any(ch.isalnum() for ch in text)


def to_plan(
    query: str, mode: str = "auto", *, limit: int = 10, filters: Filters = NO_FILTERS
) -> Plan:
    """What ``query`` asks for, in ``mode`` (``MODES``). Raises ``BadQuery``."""
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
        return Plan("raw", raw=stripped, needles=words, filters=filters, limit=limit)
    terms = parse(query)[:MAX_TERMS]
    positive = [t for t in terms if not t.negated]
    negative = [t for t in terms if t.negated]
    if not positive:
        return Plan("any" if mode == "any" else "all", filters=filters, limit=limit)
    found = list(dict.fromkeys(n for t in positive for n in t.needles()))
    needles = tuple(n for n in found if n not in STOPWORDS) or tuple(found)
    if mode == "auto":
        natural = len(terms) >= NATURAL_LANGUAGE_MIN_WORDS and all(
            not (t.phrase or t.prefix or t.negated) for t in terms
        )
        mode = "any" if natural else "all"
    # Stop words add cost and noise to an OR query; keep them only if nothing else is left.
    meaningful = [t for t in positive if t.phrase or t.text.lower() not in STOPWORDS]
    planned = [t.planned() for t in positive]
    return Plan(
        "any" if mode == "any" else "all",
        terms=tuple(planned),
        alternatives=tuple(item for t in meaningful or positive for item in t.loose()),
        excluded=tuple(t.planned() for t in negative),
        fallback=mode == "all" and _widens(planned),
        needles=needles,
        filters=filters,
        limit=limit,
    )


def _widens(terms: list[Term]) -> bool:
    """Whether the ``any`` form of these terms finds more than their ``all`` form: more
    than one term, or one matched by parts that has more than one (a run of three
    characters or more is matched by its bigrams one by one)."""
    if len(terms) > 1:
        return True
    (only,) = terms
    if not only.by_parts:
        return False
    (spelling,) = only.spellings
    (phrase, *others) = spelling.phrases
    return bool(others) or phrase.where != "grams" or len(phrase.text) > 2


def _plain_words(query: str) -> list[str]:
    words = re.findall(r"\w+\*?", query)
    return [w.lower() for w in words if w.upper() not in ("AND", "OR", "NOT", "NEAR")]
