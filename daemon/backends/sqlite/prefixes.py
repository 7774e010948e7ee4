"""Prefix terms (``deprecat*``), resolved against the words the index holds.

Porter stems the text of ``docs``: "deprecation" is indexed as "deprec", so the
prefix ``deprecat*`` run there finds nothing, and ``universi*`` would find "universe"
(stemmed "univers", like "university"). The exact index (``docs_exact``, see
``schema``) knows every word as written. A prefix term is resolved in two parts when a search runs:

- Ranking and phrases: the words the exact index holds that start with the prefix,
  each as a whole word on ``docs`` (``"deprecation" OR "deprecated"``). Porter stems
  each as it stemmed the text, so they match, rank by their counts, and keep their
  place in a phrase (``"foo ba"*`` becomes ``"foo bar" OR "foo baz"``).
- Exactness: ``docs_exact MATCH '"deprecat"*'``, the documents holding such a word,
  which a whole word's stem alone could widen ("universe" for ``universi*``). In
  ``all`` mode a document must be among them; an excluded prefix (``-deprecat*``)
  removes them, in every mode. In ``any`` mode a prefix is one alternative among
  others and is not checked this way: a stem-mate of one of its words also counts.

A prefix held by more than MAX_WORDS words (``a*``) also runs as FTS5's own prefix
of stems, with the first MAX_WORDS words: stems of words that begin with a short
prefix begin with it too, and the exactness check still applies.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from kbindex.daemon.backends.sqlite.render import Expr
from kbindex.daemon.backends.sqlite.schema import VOCABULARY
from kbindex.daemon.engine import sqlite
from kbindex.daemon.index import tokens
from kbindex.daemon.index.tokens import fts5_string

MAX_WORDS: Final = 64
"""Whole words a prefix becomes at most; each is one more phrase bm25 scores per match."""
NOTHING: Final = '"\ue000\ue001"'
"""A prefix no word of the index starts with: a phrase of private-use characters,
which no text holds in practice (and the exactness check removes any that does)."""


@dataclass(frozen=True, slots=True)
class Resolved:
    match: str
    """The MATCH expression for ``docs``, prefix terms replaced by whole words."""
    require: str | None
    """A MATCH for ``docs_exact`` every document found must satisfy, if any."""
    exclude: str | None
    """A MATCH for ``docs_exact`` no document found may satisfy, if any."""


def resolve(
    conn: sqlite.Connection, match: Expr, required: Sequence[str], excluded: Sequence[str]
) -> Resolved:
    """``match`` with its prefix terms expanded on the exact index, and the exactness
    checks of the ``required`` and ``excluded`` terms."""
    expanded = "".join(p if isinstance(p, str) else _expand(conn, p.text) for p in match)
    if not (required or excluded):
        return Resolved(expanded, None, None)
    require = " AND ".join(_exact(t) for t in required) or None
    exclude = " OR ".join(f"({_exact(t)})" for t in excluded) or None
    return Resolved(expanded, require, exclude)


def _expand(conn: sqlite.Connection, text: str) -> str:
    """The expression for the prefix term ``text``."""
    found = list(tokens.WORD.finditer(text))
    if not found:
        return NOTHING
    last = found[-1]
    head = text[: last.start()]  # words before the prefix, matched as a phrase with it
    words = conn.execute(
        f"SELECT term FROM {VOCABULARY} WHERE term >= ? AND term < ? LIMIT ?",
        (*_bounds(fold(last.group())), MAX_WORDS + 1),
    ).fetchall()
    phrases = [fts5_string(head + w) for (w,) in words[:MAX_WORDS]]
    if len(words) > MAX_WORDS:
        phrases.insert(0, fts5_string(head + last.group()) + "*")
    return "(" + " OR ".join(phrases) + ")" if phrases else NOTHING


def _exact(text: str) -> str:
    """The prefix term ``text`` as a document-level MATCH on ``docs_exact`` (which has
    no positions): each word of it, the last as a prefix."""
    words = tokens.WORD.findall(text)
    if not words:
        return NOTHING
    return " AND ".join([*map(fts5_string, words[:-1]), fts5_string(words[-1]) + "*"])


def _bounds(prefix: str) -> tuple[str, str]:
    """The range of terms that start with ``prefix``, in the index's (byte) order."""
    return prefix, prefix + "\U0010ffff"


def fold(word: str) -> str:
    """``word`` as unicode61 (``remove_diacritics 2``) indexes it: lower case, accents
    taken off Latin letters (``Café`` → ``cafe``)."""
    word = word.lower()
    if word.isascii():
        return word
    out = []
    for ch in word:
        base = unicodedata.normalize("NFD", ch)[0]
        out.append(base if base.isascii() and base.isalpha() else ch)
    return "".join(out)
