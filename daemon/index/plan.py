"""The neutral query plan: what a search asks of an index, before any backend's syntax.

``searching.query`` turns what was typed into a ``Plan``; each backend renders it as
its own full-text query (``backends.sqlite.render``: FTS5 MATCH strings;
``backends.postgres.render``: tsquery pieces), so neither re-parses the other's text.

A ``Term`` is held by a document that holds one of its ``Spelling``s; a spelling is
held where every one of its ``Phrase``s is. A phrase is words in order, as typed: the
backend's tokenizer splits them, as it split the documents. ``Filters`` restrict the
documents before the ranking is cut, never after.

Imports nothing else from the daemon: every backend and the searching layer read it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final, Literal

Mode = Literal["all", "any", "raw"]
Where = Literal["any", "text", "grams"]
"""Where a phrase may match: ``any`` column; ``text``, the document's own words (name,
title, body: not the spellings derived from them); ``grams``, a run of a script written
without spaces (Chinese, Japanese, Thai...), matched by its character bigrams."""

_GLOB_CHARS: Final = frozenset("*?[")
DATE_KEYS: Final = ("created", "date", "updated")
"""The front matter keys that hold a file's dates (``indexing.frontmatter``), the ones a
date filter without a key looks at."""


@dataclass(frozen=True, slots=True)
class Phrase:
    text: str
    """Words in this order, as typed (for ``grams``: the run itself)."""
    where: Where = "any"
    prefix: bool = False
    """Its last word stands for every word it begins (``deprecat*``)."""


@dataclass(frozen=True, slots=True)
class Spelling:
    """One way a term is written: a document holds it when it holds every phrase."""

    phrases: tuple[Phrase, ...]


@dataclass(frozen=True, slots=True)
class Term:
    text: str
    """As typed, without ``-`` or ``*``."""
    spellings: tuple[Spelling, ...]
    """A document holds the term when it holds one of them."""
    by_parts: bool = False
    """Written in a script without spaces: in ``any`` mode a backend may match its
    phrases one by one, and a run by its single bigrams."""

    @property
    def exact_prefix(self) -> str | None:
        """The text of a prefix term matched on the words as written (a backend resolves
        it on its unstemmed vocabulary: a stem can be longer than the stems of the words
        it begins), or None."""
        if self.by_parts or len(self.spellings) != 1 or len(self.spellings[0].phrases) != 1:
            return None
        (phrase,) = self.spellings[0].phrases
        return phrase.text if phrase.prefix else None


def term(text: str, where: Where = "any", *, prefix: bool = False) -> Term:
    """A term of one phrase."""
    return Term(text, (Spelling((Phrase(text, where, prefix),)),))


@dataclass(frozen=True, slots=True)
class PathFilter:
    """The one path rule (``serving.scopes``) taken apart, for each backend to write as
    its own SQL: a glob (``*`` also crosses ``/``), or a path and anything under it; on
    the absolute path or the one relative to its root."""

    typed: str
    """As given, for messages and for the calls that still take a filter as text."""
    absolute: bool
    glob: str = ""
    stem: str = ""

    @staticmethod
    def parse(typed: str | None) -> PathFilter | None:
        """A path filter as typed (``docs/*.md``, ``**/*.py``, ``docs/``, ``/abs/dir``),
        or None when it filters nothing."""
        if not typed:
            return None
        raw = typed.strip()
        absolute = raw.startswith("/")
        if not absolute:
            raw = raw.removeprefix("./")
        if _GLOB_CHARS & set(raw):
            glob = raw.replace("**/", "*").replace("/**", "/*")
            return PathFilter(typed, absolute, glob=glob)
        stem = raw.rstrip("/")
        return PathFilter(typed, absolute, stem=stem) if stem else None


@dataclass(frozen=True, slots=True)
class DateRange:
    """A time span in POSIX seconds: ``after`` inclusive, ``before`` exclusive; None is
    open on that side."""

    after: float | None = None
    before: float | None = None
    key: str = ""
    """For a front matter date: which one (``created``, ``date``, ``updated``), or ""
    for any of them."""


@dataclass(frozen=True, slots=True)
class Filters:
    """What a document must be to be found, applied inside the query (before the
    ranking's cut: a small collection's hits are never hidden by a large one's). Built
    from what a client typed by ``searching.filters``; each backend renders it."""

    path: PathFilter | None = None
    roots: tuple[str, ...] = ()
    """Files of one of these roots (absolute paths): named scopes."""
    kinds: tuple[str, ...] = ()
    """Files of one of these kinds (``indexing.kinds``)."""
    tags: tuple[str, ...] = ()
    """Files holding every one of these tags (lower case, no ``#``)."""
    fields: tuple[tuple[str, str], ...] = ()
    """Files whose front matter has every ``(key, value)`` (values compared without
    regard to case)."""
    modified: DateRange | None = None
    """Files last modified in this span."""
    dated: tuple[DateRange, ...] = ()
    """Files with a front matter date in each span."""

    @property
    def structured(self) -> bool:
        """Any filter besides the path: on roots, kinds, tags, fields or dates."""
        return bool(
            self.roots or self.kinds or self.tags or self.fields or self.modified or self.dated
        )


NO_FILTERS: Final = Filters()


@dataclass(frozen=True, slots=True)
class Plan:
    mode: Mode
    """``all``: every term; ``any``: one of the ``alternatives``, ranked by how many and
    how rare; ``raw``: ``raw`` in the backend's own syntax."""
    terms: tuple[Term, ...] = ()
    """The terms every document found holds (``all`` mode); none: nothing can match."""
    alternatives: tuple[Term, ...] = ()
    """``any`` mode's terms: a question's words one by one, stop words left out, and the
    other spellings of its identifiers. A word typed twice counts twice."""
    excluded: tuple[Term, ...] = ()
    """Terms no document found holds, in either mode."""
    fallback: bool = False
    """``all`` mode: when it finds nothing, find the ``alternatives`` (``any``)."""
    raw: str = ""
    needles: tuple[str, ...] = ()
    """Lower-cased strings that show where a term matched (to place the snippet and
    mark it); one ending in ``*`` is a prefix, its last word taking any rest."""
    filters: Filters = field(default=NO_FILTERS)
    limit: int = 10
    recency: float = 0.0
    """A preference for recent files, as a half-life in seconds (0: none): each score is
    multiplied by 0.5 ** (age / recency), the age counted from the file's latest front
    matter date, else from its modified time (one dated ahead counts as new)."""
    boosts: tuple[tuple[str, float], ...] = ()
    """How much each kind of file counts in ranking: (kind, factor) pairs, each factor at
    most 1 (``values.Boosts``; the kinds' rules in force, a reload's included)."""

    @property
    def empty(self) -> bool:
        """Nothing can match: no positive term, or no raw text."""
        return not self.raw if self.mode == "raw" else not self.terms
