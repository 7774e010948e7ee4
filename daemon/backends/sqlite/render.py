"""A query plan (``index.plan``) as FTS5 MATCH expressions: pure functions, no database.

Every phrase is written as an FTS5 string (double quotes, inner quotes doubled), so no
plan can produce an FTS5 syntax error; only ``raw`` mode's text is FTS5 syntax.

An expression is kept in pieces (``Expr``): FTS5 text, and the prefix terms
(``deprecat*``) whose words depend on what the index holds, which the searcher resolves
when it runs (see ``prefixes``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from kbindex.daemon.index import tokens
from kbindex.daemon.index.plan import Phrase, Plan, Spelling, Term
from kbindex.daemon.index.tokens import fts5_string

MAX_RUN_BIGRAMS: Final = 64
"""A longer run of CJK text in a query is cut: a 2,000-character phrase helps no one."""
ANY_RUN_BIGRAMS: Final = 16
"""In ``any`` mode a run also matches by its single bigrams, the first this many."""
_COLUMNS: Final = {"any": "", "text": "{name title body}: ", "grams": "{grams}: "}
"""``text``: the columns holding the document's own text (not derived words)."""


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
class Match:
    """A plan as the searcher runs it on ``docs``."""

    expr: Expr | None
    """The MATCH expression, or None when nothing can match (no positive term)."""
    mode: str
    required_prefixes: tuple[str, ...] = ()
    """Prefix terms every document ``expr`` finds must hold exactly (``all`` mode)."""
    excluded_prefixes: tuple[str, ...] = ()
    """Prefix terms no document found may hold (``-deprecat*``), in either expression."""
    alternatives: Alternatives | None = None
    """The ``any`` expression by its parts: ``expr`` itself in ``any`` mode; in ``all``
    mode the fallback to try when ``expr`` finds nothing (None: no fallback)."""


def match(plan: Plan) -> Match:
    if plan.empty:
        return Match(None, plan.mode)
    if plan.mode == "raw":
        return Match((plan.raw,), "raw")
    excluded = tuple(p for t in plan.excluded if (p := t.exact_prefix) is not None)
    negatives = _exclusions(plan.excluded) if plan.excluded else ""
    alternatives = Alternatives(tuple(i for t in plan.alternatives for i in _loose(t)), negatives)
    if plan.mode == "any":
        return Match(alternatives.expression(), "any", (), excluded, alternatives)
    expr = join(" AND ", (_whole(t) for t in plan.terms))
    if plan.excluded:
        expr = grouped(expr, negatives)
    required = tuple(p for t in plan.terms if (p := t.exact_prefix) is not None)
    fallback = alternatives if plan.fallback else None
    return Match(expr, "all", required, excluded, fallback)


def _whole(term: Term) -> Expr:
    """A term as a strict FTS5 expression (``all`` mode): any one of its spellings,
    each whole."""
    prefix = term.exact_prefix
    return (Prefix(prefix),) if prefix is not None else (_strict(term),)


def _strict(term: Term) -> str:
    spellings = [_spelling(s) for s in term.spellings]
    return spellings[0] if len(spellings) == 1 else "(" + " OR ".join(spellings) + ")"


def _spelling(spelling: Spelling) -> str:
    items = [_phrase(p) for p in spelling.phrases]
    return items[0] if len(items) == 1 else "(" + " AND ".join(items) + ")"


def _phrase(phrase: Phrase) -> str:
    if phrase.where == "grams":
        return _run(phrase.text, loose=False)[0]
    # A prefix beside a run of unsegmented script (the only one rendered here; others
    # are ``Prefix``) is FTS5's own, on the stemmed words.
    return _COLUMNS[phrase.where] + fts5_string(phrase.text) + ("*" if phrase.prefix else "")


def _run(run: str, *, loose: bool) -> list[str]:
    # Only in the grams column: the body holds whole runs as single tokens, so a
    # bigram phrase could match there two separate runs ("東京。京都" for "東京都").
    grams = tokens.run_bigrams(run[: MAX_RUN_BIGRAMS + 1])
    if len(grams) == 1 and len(grams[0]) == 1:
        return [f"{{grams}}: {fts5_string(grams[0])}*"]  # the first of a token
    whole = f"{{grams}}: {fts5_string(' '.join(grams))}"
    if loose and len(grams) > 1:
        # The whole run ranks first; its bigrams alone find near misses.
        return [whole, *(f"{{grams}}: {fts5_string(g)}" for g in grams[:ANY_RUN_BIGRAMS])]
    return [whole]


def _loose(term: Term) -> list[Expr]:
    """A term as items of a ranked OR (``any`` mode): a term matched by parts gives
    each run (whole, and by its bigrams) and each other word; any other one is whole."""
    if not term.by_parts:
        return [_whole(term)]
    items: list[str] = []
    for phrase in term.spellings[0].phrases:
        if phrase.where == "grams":
            items += _run(phrase.text, loose=True)
        else:
            items += [fts5_string(w) for w in tokens.WORD.findall(phrase.text)]
    return [(item,) for item in items]


def _exclusions(negative: Iterable[Term]) -> str:
    # A stemmed form of an excluded prefix would also exclude words that merely share
    # its stem: those go to ``Match.excluded_prefixes``, checked on the exact index.
    return "".join(f" NOT {_strict(t)}" for t in negative if t.exact_prefix is None)
