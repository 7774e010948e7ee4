"""Filters as a client types them, taken apart once into ``index.plan.Filters``.

``kind``: one of ``indexing.kinds.KINDS`` (several: any of them). ``tag``: ``#x`` or
``x`` (several: all of them). ``field``: ``key=value`` of the front matter (several: all
of them). ``modified`` and ``date`` (a front matter date, ``created:``, ``date:`` or
``updated:`` before it to name one): a time span, ``A..B``, ``A..`` or ``..B``, or one
value, where a value is a time ago (``7d``, ``2 weeks``, ``3h``; alone it means since
then) or an ISO date or time (``2024``, ``2024-05``, ``2024-05-01``,
``2024-05-01T10:00``; a date alone means that year, month or day, a time alone since
then; without a zone, UTC). ``scope``: the name of a root (its ``name`` in the configuration, else
its folder's name).

A value that cannot be read is a ``BadFilter``, which says what is wrong and what
would be right.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Collection, Mapping, Sequence
from typing import Final

from kbindex.daemon.index.interface import BadQuery
from kbindex.daemon.index.plan import DATE_KEYS, DateRange, Filters
from kbindex.daemon.indexing.kinds import KINDS

_UNITS: Final = {
    "s": 1,
    "min": 60,
    "h": 3600,
    "d": 86400,
    "w": 7 * 86400,
    "mo": 30 * 86400,
    "y": 365 * 86400,
}
_AGO = re.compile(
    r"^(\d{1,6})\s*(s|sec|secs|seconds?|m|min|mins|minutes?|h|hrs?|hours?|d|days?|w|wks?|weeks?"
    r"|mo|mos|months?|y|yrs?|years?)(\s+ago)?$",
    re.I,
)
_PERIOD = re.compile(r"^(\d{4})(?:-(\d{2})(?:-(\d{2}))?)?$")
_ISO_START = re.compile(r"^\d{4}-?\d{2}")
_DATE_KEY = re.compile(rf"^({'|'.join(DATE_KEYS)}):(.*)$", re.I)
_OTHER_KEY = re.compile(r"^([a-z][\w.-]*):", re.I)
"""A key before a date span that is none of ``DATE_KEYS`` (no ISO date starts with a
letter)."""


class BadFilter(BadQuery):
    """A filter value that cannot be read."""


def build(
    *,
    kinds: Sequence[str] = (),
    tags: Sequence[str] = (),
    fields: Sequence[str] = (),
    modified: str | None = None,
    dates: Sequence[str] = (),
    scopes: Sequence[str] = (),
    named: Mapping[str, str],
    shared: Collection[str] = (),
    now: float,
) -> Filters:
    """The filters a request gives; ``named``: each scope name's root, ``shared``: the
    folder names of several roots (which name none), ``now``: the time relative spans
    count back from."""
    return Filters(
        roots=tuple(dict.fromkeys(_root(s, named, shared) for s in scopes)),
        kinds=tuple(dict.fromkeys(_kind(k) for k in kinds)),
        tags=tuple(dict.fromkeys(_tag(t) for t in tags)),
        fields=tuple(dict.fromkeys(_field(f) for f in fields)),
        modified=None if modified is None else span(modified, now, "modified"),
        dated=tuple(_dated(d, now) for d in dates),
    )


def _root(name: str, named: Mapping[str, str], shared: Collection[str]) -> str:
    root = named.get(name.strip())
    if root is None:
        known = ", ".join(sorted(named)) or "none"
        if name.strip() in shared:
            raise BadFilter(
                f"no root is named {name!r}: several roots' folders are, so none is; give"
                f" each a name in the configuration (scopes: {known})"
            )
        raise BadFilter(f"no root is named {name!r} (scopes: {known})")
    return root


def _kind(kind: str) -> str:
    kind = kind.strip().lower()
    if kind not in KINDS:
        raise BadFilter(f"unknown kind {kind!r}; the kinds are {', '.join(KINDS)}")
    return kind


def _tag(tag: str) -> str:
    tag = tag.strip().lstrip("#").lower()
    if not tag:
        raise BadFilter("an empty tag filters nothing: give a tag like 'project' or '#project'")
    return tag


def _field(field: str) -> tuple[str, str]:
    key, equals, value = field.partition("=")
    if not equals or not key.strip() or not value.strip():
        raise BadFilter(f"field filter {field!r} is not key=value (like status=draft)")
    return key.strip(), value.strip()


def _dated(text: str, now: float) -> DateRange:
    named = _DATE_KEY.match(text.strip())
    if named is None:
        other = _OTHER_KEY.match(text.strip())
        if other is not None:
            raise BadFilter(
                f"date filter {text!r}: {other.group(1)!r} is not a front matter date; name"
                f" one of {', '.join(DATE_KEYS)} (created:2024) or none (2024)"
            )
        return span(text, now, "date")
    found = span(named.group(2), now, f"{named.group(1).lower()} date")
    return DateRange(found.after, found.before, named.group(1).lower())


def span(text: str, now: float, what: str) -> DateRange:
    """``text`` (see the module) as a time span; ``what`` names the filter in errors."""
    text = text.strip()
    try:
        if ".." in text:
            first, _, last = text.partition("..")
            after = _point(first, now)[0] if first.strip() else None
            before = _point(last, now)[1] if last.strip() else None
            if after is None and before is None:
                raise ValueError("both ends are empty")
            if after is not None and before is not None and after >= before:
                raise ValueError("it ends before it begins")
            return DateRange(after, before)
        start, end = _point(text, now)
        return DateRange(start, end if end > start else None)
    except ValueError as exc:
        why = f" ({exc})" if str(exc) else ""
        raise BadFilter(
            f"{what} filter {text!r} is not a time span{why}: give a time ago (7d,"
            " '2 weeks'), an ISO date (2024-05-01) or a span (2024-01..2024-03, 30d..)"
        ) from None


def _unit(word: str) -> str:
    word = word.lower()
    if word.startswith("mo"):
        return "mo"
    if word == "m" or word.startswith("mi"):
        return "min"
    return word[0]


def _point(text: str, now: float) -> tuple[float, float]:
    """The start and the end of the moment or period ``text`` names."""
    text = text.strip()
    ago = _AGO.match(text)
    if ago is not None:
        when = now - int(ago.group(1)) * _UNITS[_unit(ago.group(2))]
        return when, when
    period = _PERIOD.match(text)
    if period is not None:
        year, month, day = (int(p) if p else None for p in period.groups())
        assert year is not None
        start = dt.datetime(year, month or 1, day or 1, tzinfo=dt.UTC)
        if day is not None:
            end = start + dt.timedelta(days=1)
        elif month is not None:
            end = dt.datetime(year + month // 12, month % 12 + 1, 1, tzinfo=dt.UTC)
        else:
            end = dt.datetime(year + 1, 1, 1, tzinfo=dt.UTC)
        return start.timestamp(), end.timestamp()
    if not _ISO_START.match(text):
        raise ValueError  # neither a time ago nor an ISO date: the message says what is
    moment = dt.datetime.fromisoformat(text)  # ValueError says why
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.UTC)
    return moment.timestamp(), moment.timestamp()
