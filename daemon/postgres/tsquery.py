"""A search's query as PostgreSQL ``tsquery`` expressions, from what was typed.

The same forgiving syntax and modes as the SQLite index (``searching.query``: words,
"phrases", -exclusions, prefix*; ``all``, ``any`` and ``raw``), built from the parsed
terms as calls to ``phraseto_tsquery`` and ``websearch_to_tsquery`` combined with the
``&&``, ``||`` and ``!!`` operators, every piece of text a bound parameter: no input
can make a syntax error.

Prefix terms match the words as written, on the unstemmed ``exact`` column (as
``docs_exact`` in SQLite): the stem of a prefix can be longer than the stem of the
words it starts (``universi*``: "universities" is stemmed to ``univers``). Their
stemmed form only adds to the ranking. Their tsquery text is built from word
characters alone, each quoted, so it cannot break either.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from kbindex.daemon.indexing import tokens
from kbindex.daemon.postgres.schema import CONFIG, EXACT
from kbindex.daemon.searching.query import MAX_TERMS, STOPWORDS, Compiled, Term, parse

_STEMMED = f"phraseto_tsquery('{CONFIG}', kb_stemmable(%s))"
_SIMPLE = "phraseto_tsquery('simple', %s)"
_SHORT = re.compile(r"\b[^\W\d_]{1,2}\b")
"""A word of one or two letters: marked as ``kb_stemmable`` marks it, in raw mode's text."""


def _marked(word: re.Match[str]) -> str:
    text = word.group()
    return text if text.lower() == "or" else text + "0"  # "or" is websearch's operator


@dataclass
class Expr:
    """A match: a document's ``words`` satisfy ``words`` (SQL for a tsquery) and its
    ``exact`` satisfy ``exact`` (tsquery texts), or either one when ``either``; and none
    of ``not_words`` (SQL) and ``excluded`` (tsquery texts on ``exact``). ``ranked``
    (SQL and its parameter) adds to the ranking only."""

    words: str = ""
    params: list[object] = field(default_factory=list)
    exact: list[str] = field(default_factory=list)
    ranked: list[tuple[str, object]] = field(default_factory=list)
    excluded: list[str] = field(default_factory=list)
    not_words: list[str] = field(default_factory=list)
    not_params: list[object] = field(default_factory=list)
    either: bool = False

    def add(self, op: str, other: Expr) -> None:
        """Combine ``other`` into this one: ``&&`` (both) or ``||`` (either)."""
        if other.words:
            self.words = f"({self.words} {op} {other.words})" if self.words else other.words
            self.params += other.params
        self.exact += other.exact
        self.ranked += other.ranked


@dataclass(frozen=True, slots=True)
class Plan:
    """What to run: ``main`` first; ``fallback`` (``any``) when ``main`` finds nothing."""

    main: Expr | None
    mode: str
    fallback: Expr | None = None


def plan(compiled: Compiled) -> Plan:
    if compiled.mode == "raw":
        text = compiled.source.strip()
        if not text:
            return Plan(None, "raw")
        raw = Expr(f"websearch_to_tsquery('{CONFIG}', %s)", [_SHORT.sub(_marked, text)])
        return Plan(raw, "raw")
    terms = parse(compiled.source)[:MAX_TERMS]
    positive = [t for t in terms if not t.negated]
    negative = [t for t in terms if t.negated]
    if not positive:
        return Plan(None, compiled.mode)
    loose = _any(positive, negative)
    if compiled.mode == "any":
        return Plan(loose, "any")
    strict = Expr()
    for term in positive:
        strict.add("&&", _strict(term))
    _exclude(strict, negative)
    return Plan(strict, "all", loose if compiled.alternatives is not None else None)


def _strict(term: Term) -> Expr:
    """A term whole: a phrase of its words, any of an identifier's spellings."""
    if tokens.has_unsegmented(term.text):
        return _unsegmented(term)
    symbol = tokens.symbol_token(term.text)
    if symbol:
        return Expr(_STEMMED, [symbol])
    if term.prefix:
        return _prefix(term)
    if not term.phrase:
        alternatives = tokens.identifier_alternatives(term.text)
        if alternatives:
            return Expr(f"({_STEMMED} || {_STEMMED} || {_STEMMED})", list(alternatives))
    return Expr(_STEMMED, [term.text])


def _prefix(term: Term) -> Expr:
    words = tokens.WORD.findall(term.text)
    if not words:
        return Expr()
    text = " <-> ".join(f"'{w.lower()}'" for w in words) + ":*"
    return Expr(exact=[text], ranked=[(f"to_tsquery('{CONFIG}', %s)", text)])


def _unsegmented(term: Term) -> Expr:
    expr = Expr()
    for run in tokens.unsegmented_runs(term.text):
        expr.add("&&", Expr(_SIMPLE, [" ".join(tokens.run_bigrams(run))]))
    rest = tokens.without_unsegmented(term.text)
    if any(ch.isalnum() for ch in rest):
        expr.add("&&", Expr(_STEMMED, [rest]))
    return expr


def _any(positive: list[Term], negative: list[Term]) -> Expr:
    """Any of the terms' words (stop words only when nothing else is left)."""
    meaningful = [t for t in positive if t.phrase or t.text.lower() not in STOPWORDS]
    expr = Expr(either=True)
    for term in meaningful or positive:
        if term.phrase or term.prefix or tokens.symbol_token(term.text):
            expr.add("||", _strict(term))
        elif tokens.has_unsegmented(term.text):
            expr.add("||", _unsegmented(term))
        else:
            words = tokens.WORD.findall(term.text)
            for word in [w for w in words if w.lower() not in STOPWORDS] or words:
                expr.add("||", Expr(_STEMMED, [word]))
            alternatives = tokens.identifier_alternatives(term.text)
            spelled = " ".join(w.lower() for w in words)
            for spelling in alternatives[1:] if alternatives else ():
                if spelling != spelled:
                    expr.add("||", Expr(_STEMMED, [spelling]))
    _exclude(expr, negative)
    return expr


def _exclude(expr: Expr, negative: list[Term]) -> None:
    for term in negative:
        excluded = _strict(term)
        expr.excluded += excluded.exact
        if excluded.words:
            expr.not_words.append(excluded.words)
            expr.not_params += excluded.params


def condition(expr: Expr) -> tuple[str, list[object], str]:
    """``expr`` for a query over ``kb_docs d`` and a one-row CTE ``q``: the columns of
    ``q`` (``w`` words, ``e`` exact, ``r`` ranking, ``n`` and ``x`` excluded words and
    prefixes) with their parameters, and the WHERE condition on ``d``. The condition
    reads them as scalar subqueries: computed once, they are constants to the planner,
    which then uses the GIN indexes (a join with ``q`` scanned every document)."""
    columns: list[str] = []
    params: list[object] = []
    tests = []
    if expr.words:
        columns.append(f"{expr.words} AS w")
        params += expr.params
        tests.append("d.words @@ (SELECT w FROM q)")
    if expr.exact:
        columns.append(f"to_tsquery('{EXACT}', %s) AS e")
        params.append((" | " if expr.either else " & ").join(f"({e})" for e in expr.exact))
        tests.append("d.exact @@ (SELECT e FROM q)")
    ranking = [expr.words] if expr.words else []
    params += expr.params
    for sql, param in expr.ranked:
        ranking.append(sql)
        params.append(param)
    columns.append(f"{' || '.join(ranking)} AS r")
    where = "(" + (" OR " if expr.either else " AND ").join(tests) + ")"
    if expr.not_words:
        columns.append(f"{' || '.join(expr.not_words)} AS n")
        params += expr.not_params
        where += " AND NOT d.words @@ (SELECT n FROM q)"
    if expr.excluded:
        columns.append(f"to_tsquery('{EXACT}', %s) AS x")
        params.append(" | ".join(f"({e})" for e in expr.excluded))
        where += " AND NOT d.exact @@ (SELECT x FROM q)"
    return ", ".join(columns), params, where
