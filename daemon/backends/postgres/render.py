"""A query plan (``index.plan``) as PostgreSQL ``tsquery`` expressions: pure functions.

The plan's terms become calls to ``phraseto_tsquery`` (``websearch_to_tsquery`` for
``raw`` mode's text) combined with the ``&&``, ``||`` and ``!!`` operators, every
piece of text a bound parameter: no plan can make a syntax error.

Prefix terms match the words as written, on the unstemmed ``exact`` column (as
``docs_exact`` in SQLite): the stem of a prefix can be longer than the stem of the
words it starts (``universi*``: "universities" is stemmed to ``univers``). Their
stemmed form only adds to the ranking. Their tsquery text is built from word
characters alone, each quoted, so it cannot break either.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from kbindex.daemon.backends.postgres.schema import CONFIG, EXACT
from kbindex.daemon.index import tokens
from kbindex.daemon.index.plan import Phrase, Plan, Term

_STEMMED = f"kb_either(phraseto_tsquery('{CONFIG}', kb_stemmable(%s)))"
_SIMPLE = "phraseto_tsquery('simple', %s)"
_LOOSE = {
    _STEMMED: f"kb_either(plainto_tsquery('{CONFIG}', kb_stemmable(%s)))",
    _SIMPLE: "plainto_tsquery('simple', %s)",
}
"""A phrase's words without their order: what a document holding the phrase holds."""
_SHORT = re.compile(r"\b[^\W\d_]{1,2}\b")
"""A word of one or two letters: marked as ``kb_stemmable`` marks it, in raw mode's text."""
_TOKENS = re.compile(r"[^\W_]+")
"""The words ``kb_plain`` leaves of a text (a count too high only costs time)."""


def _marked(word: re.Match[str]) -> str:
    text = word.group()
    return text if text.lower() == "or" else text + "0"  # "or" is websearch's operator


@dataclass(frozen=True, slots=True)
class Piece:
    """One ``tsquery`` of the expression: SQL with one parameter, ``param``."""

    sql: str
    param: object
    phrase: bool = False
    """More than one word: matched by position, which a limited document lost."""

    @property
    def loose(self) -> str:
        return _LOOSE.get(self.sql, self.sql) if self.phrase else self.sql


def _piece(sql: str, text: str) -> Expr:
    return Expr("{}", [Piece(sql, text, len(_TOKENS.findall(text)) > 1)])


@dataclass
class Expr:
    """A match: a document's ``words`` satisfy ``form`` (its ``pieces``, each ``{}``, with
    the tsquery operators ``&&`` and ``||``) and its ``exact`` satisfy ``exact`` (tsquery
    texts), or either one when ``either``; and none of ``negated`` and ``excluded``
    (tsquery texts on ``exact``). ``ranked`` (SQL and its parameter) adds to the ranking
    only."""

    form: str = ""
    pieces: list[Piece] = field(default_factory=list)
    exact: list[str] = field(default_factory=list)
    ranked: list[tuple[str, object]] = field(default_factory=list)
    excluded: list[str] = field(default_factory=list)
    negated: list[Expr] = field(default_factory=list)
    either: bool = False

    @property
    def words(self) -> str:
        """SQL for the tsquery on ``words`` (parameters: ``params``)."""
        return self.form.format(*(p.sql for p in self.pieces))

    @property
    def params(self) -> list[object]:
        return [p.param for p in self.pieces]

    @property
    def phrased(self) -> bool:
        """A phrase anywhere, excluded ones too: limited documents need their segments."""
        return any(p.phrase for p in self.pieces) or any(n.phrased for n in self.negated)

    def add(self, op: str, other: Expr) -> None:
        """Combine ``other`` into this one: ``&&`` (both) or ``||`` (either)."""
        if other.form:
            self.form = f"({self.form} {op} {other.form})" if self.form else other.form
            self.pieces += other.pieces
        self.exact += other.exact
        self.ranked += other.ranked


@dataclass(frozen=True, slots=True)
class Query:
    """What to run: ``main`` first; ``fallback`` (``any``) when ``main`` finds nothing."""

    main: Expr | None
    mode: str
    fallback: Expr | None = None


def query(plan: Plan) -> Query:
    if plan.empty:
        return Query(None, plan.mode)
    if plan.mode == "raw":
        websearch = f"kb_either(websearch_to_tsquery('{CONFIG}', %s))"
        raw = Expr("{}", [Piece(websearch, _SHORT.sub(_marked, plan.raw))])
        return Query(raw, "raw")
    loose = _any(plan)
    if plan.mode == "any":
        return Query(loose, "any")
    strict = Expr()
    for term in plan.terms:
        strict.add("&&", _strict(term))
    _exclude(strict, plan.excluded)
    return Query(strict, "all", loose if plan.fallback else None)


def _strict(term: Term) -> Expr:
    """A term whole: any of its spellings, each a phrase of its words."""
    if term.by_parts:
        return _by_parts(term)
    prefix = term.exact_prefix
    if prefix is not None:
        return _prefix(prefix)
    expr = Expr()
    for spelling in term.spellings:
        (phrase,) = spelling.phrases
        expr.add("||", _piece(_STEMMED, phrase.text))
    return expr


def _prefix(text: str) -> Expr:
    words = tokens.WORD.findall(text)
    if not words:
        return Expr()
    text = " <-> ".join(f"'{w.lower()}'" for w in words) + ":*"
    return Expr(exact=[text], ranked=[(f"to_tsquery('{CONFIG}', %s)", text)])


def _by_parts(term: Term) -> Expr:
    """Every phrase of a term in a script without spaces: a run as the phrase of its
    bigrams (the ``grams`` column), other words as words; matched whole in every mode,
    a prefix as the whole word."""
    expr = Expr()
    for phrase in term.spellings[0].phrases:
        expr.add("&&", _part(phrase))
    return expr


def _part(phrase: Phrase) -> Expr:
    if phrase.where == "grams":
        return _piece(_SIMPLE, " ".join(tokens.run_bigrams(phrase.text)))
    return _piece(_STEMMED, phrase.text)


def _any(plan: Plan) -> Expr:
    """Any of the plan's alternatives."""
    expr = Expr(either=True)
    for term in plan.alternatives:
        expr.add("||", _strict(term))
    _exclude(expr, plan.excluded)
    return expr


def _exclude(expr: Expr, negative: tuple[Term, ...]) -> None:
    for term in negative:
        excluded = _strict(term)
        expr.excluded += excluded.exact
        if excluded.form:
            expr.negated.append(excluded)


@dataclass(frozen=True, slots=True)
class Condition:
    """``Expr`` as SQL over ``kb_docs d`` and a one-row CTE ``q``: the columns of ``q``
    with their parameters, and the WHERE condition on ``d``; ``limited``, when the
    expression holds a phrase, the condition for limited documents (``where`` then
    leaves them out)."""

    columns: str
    params: list[object]
    where: str
    limited: str | None = None
    phrases: tuple[int, ...] = ()
    """The phrases to rank by their own frequency, as SQLite does: ``q``'s ``p`` columns."""


def condition(expr: Expr) -> Condition:
    """The columns of ``q``: ``w`` words, ``e`` exact, ``r`` ranking, ``n`` and ``x``
    excluded words and prefixes, and for a phrase ``l`` (its words in any order) and
    ``p0``... (each piece). The conditions read them as scalar subqueries: computed once,
    they are constants to the planner, which then uses the GIN indexes (a join with
    ``q`` scanned every document)."""
    columns: list[str] = []
    params: list[object] = []
    tests, limited_tests = [], []
    phrased = expr.phrased
    if expr.form:
        columns.append(f"{expr.words} AS w")
        params += expr.params
        tests.append("d.words @@ (SELECT w FROM q)")
    if phrased and expr.form:
        columns.append(f"{expr.form.format(*(p.loose for p in expr.pieces))} AS l")
        params += expr.params
        limited_tests.append(f"(d.words @@ (SELECT l FROM q) AND {_segmented(expr, 0)})")
    if expr.exact:
        columns.append(f"to_tsquery('{EXACT}', %s) AS e")
        params.append((" | " if expr.either else " & ").join(f"({e})" for e in expr.exact))
        tests.append("d.exact @@ (SELECT e FROM q)")
        limited_tests.append(tests[-1])
    # Words rank by their postings; phrases by their own frequency (``reads``).
    ranking = [p.sql for p in expr.pieces if not p.phrase]
    params += [p.param for p in expr.pieces if not p.phrase]
    for sql, param in expr.ranked:
        ranking.append(sql)
        params.append(param)
    columns.append(f"{' || '.join(ranking) or 'NULL::tsquery'} AS r")
    glue = " OR " if expr.either else " AND "
    where = "(" + glue.join(tests) + ")"
    limited = "(" + glue.join(limited_tests) + ")"
    if expr.negated:
        columns.append(f"{' || '.join(n.words for n in expr.negated)} AS n")
        params += [p for n in expr.negated for p in n.params]
        where += " AND NOT d.words @@ (SELECT n FROM q)"
        first = len(expr.pieces)
        negated = []
        for n in expr.negated:
            negated.append(_segmented(n, first))
            first += len(n.pieces)
        limited += f" AND NOT ({' OR '.join(negated)})"
    if expr.excluded:
        columns.append(f"to_tsquery('{EXACT}', %s) AS x")
        params.append(" | ".join(f"({e})" for e in expr.excluded))
        where += " AND NOT d.exact @@ (SELECT x FROM q)"
        limited += " AND NOT d.exact @@ (SELECT x FROM q)"
    if not phrased:
        return Condition(", ".join(columns), params, where)
    for i, piece in enumerate([*expr.pieces, *(p for n in expr.negated for p in n.pieces)]):
        columns.append(f"{piece.sql} AS p{i}")
        params.append(piece.param)
    phrases = tuple(i for i, p in enumerate(expr.pieces) if p.phrase)
    return Condition(", ".join(columns), params, f"{where} AND NOT d.limited", limited, phrases)


def _segmented(expr: Expr, first: int) -> str:
    """``expr`` as a boolean on a limited document, its pieces numbered from ``first``: a
    phrase is looked for in its segments, where positions are exact (``schema``); a word
    in ``words``, which holds every word (a position or more of each)."""
    tests = []
    for i, piece in enumerate(expr.pieces, first):
        if piece.phrase:
            tests.append(
                f"d.id IN (SELECT s.doc FROM kb_segments s WHERE s.words @@ (SELECT p{i} FROM q))"
            )
        else:
            tests.append(f"d.words @@ (SELECT p{i} FROM q)")
    return expr.form.replace("&&", "AND").replace("||", "OR").format(*tests)
