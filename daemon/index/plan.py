"""The neutral parts of a query that every backend renders as its own SQL.

``Filters`` restricts a search, a grep's candidates or a file listing to the files that
pass every filter given, inside the query: the best ``limit`` are taken among those
files, so a small collection's hits are never hidden by a large one's. Built from what
a client typed by ``searching.filters``; the backends render it (``sqlite.filters``).
"""

from __future__ import annotations

from dataclasses import dataclass


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

    def __bool__(self) -> bool:
        return bool(
            self.roots or self.kinds or self.tags or self.fields or self.modified or self.dated
        )


NO_FILTERS = Filters()
