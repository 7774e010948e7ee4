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

from kbindex.daemon.backends.postgres.schema import CONFIG, EXACT
from kbindex.daemon.indexing import tokens
from kbindex.daemon.searching.query import MAX_TERMS, STOPWORDS, Compiled, Term, parse

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
        websearch = f"kb_either(websearch_to_tsquery('{CONFIG}', %s))"
        raw = Expr("{}", [Piece(websearch, _SHORT.sub(_marked, text))])
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
        return _piece(_STEMMED, symbol)
    if term.prefix:
        return _prefix(term)
    if not term.phrase:
        alternatives = tokens.identifier_alternatives(term.text)
        if alternatives:
            expr = Expr()
            for spelling in alternatives:
                expr.add("||", _piece(_STEMMED, spelling))
            return expr
    return _piece(_STEMMED, term.text)


def _prefix(term: Term) -> Expr:
    words = tokens.WORD.findall(term.text)
    if not words:
        return Expr()
    text = " <-> ".join(f"'{w.lower()}'" for w in words) + ":*"
    return Expr(exact=[text], ranked=[(f"to_tsquery('{CONFIG}', %s)", text)])


def _unsegmented(term: Term) -> Expr:
    expr = Expr()
    for run in tokens.unsegmented_runs(term.text):
        expr.add("&&", _piece(_SIMPLE, " ".join(tokens.run_bigrams(run))))
    rest = tokens.without_unsegmented(term.text)
    if any(ch.isalnum() for ch in rest):
        expr.add("&&", _piece(_STEMMED, rest))
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
                expr.add("||", _piece(_STEMMED, word))
            alternatives = tokens.identifier_alternatives(term.text)
            spelled = " ".join(w.lower() for w in words)
            for spelling in alternatives[1:] if alternatives else ():
                if spelling != spelled:
                    expr.add("||", _piece(_STEMMED, spelling))
    _exclude(expr, negative)
    return expr


def _exclude(expr: Expr, negative: list[Term]) -> None:
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
