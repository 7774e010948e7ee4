"""``plan.Filters`` as SQL conditions on the files table (pure: no database).

Each filter is a condition on the files row ``f`` of a query, so it runs inside the
query, before any ranking or limit: roots and kinds on the row itself, the modified
time on its ``mtime_ns``, tags, front matter values and dates as a membership in the
ids a lookup of ``fields`` gives, by its ``(source, key, value)`` or ``(source, key,
number)`` index.

In a search, each membership is checked on the full-text table's rowid, as FTS5 hands
a match over, before the match's files row is read; a statement that finds few matches
checks a field or date on each match's own ``fields`` rows instead (``few``).

A search first looks up where the ids its filters admit lie (``lookups``, ``Admitted``):
the first and last id of its roots, and, for each filter an index lists (a path's
names, a tag, a date span), its ids when they are few (``listings``). FTS5 takes each
stretch of ids as the part of each doclist to read: files are mostly indexed folder by
folder, so a small root or a folder is a short stretch, and a filter that admits few
files, wherever they lie, a few short ones. When they are many, or spread over the
index, the one stretch of the roots (or none) is read and the conditions rule the
matches out as FTS5 hands them over.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from kbindex.daemon.backends.sqlite.documents import IN_JSON, as_json
from kbindex.daemon.index.plan import DATE_KEYS, DateRange, Filters

_NS = 1_000_000_000
_CASED = 5
"""Letters of a front matter value whose cases are spelled out (``_nocase``)."""
_UPPER = str.maketrans({c: c.upper() for c in "abcdefghijklmnopqrstuvwxyz"})
_LOWER = str.maketrans({c: c.lower() for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZ"})


LISTED: Final = 256
"""A path filter's ids are listed no further than this: more than that, and they bound
nothing (``Admitted``). Each search whose folder holds more pays for the list and
gets nothing from it: most folders hold fewer."""
LISTED_FIELDS: Final = 64
"""A tag's or date span's ids are listed no further than this. They lie spread over the
index unless their files were written together (a folder indexed at once, the notes of
one week in a live index): spread ids fill the stretches and cover most of it, so a
longer list would cost more to read than it ever saves."""
STRETCHES: Final = 8
"""At most this many stretches of ids: a statement runs once for each."""
SPREAD: Final = 0.25
"""Stretches that cover more than this share of the ids they would replace are not used:
reading a doclist's parts costs a statement each, reading it whole costs one."""
SPAN: Final = "SELECT (SELECT min(id) FROM files), (SELECT max(id) FROM files)"
"""The ids of the whole index, which the stretches of a listing are weighed against."""


@dataclass(frozen=True, slots=True)
class Admitted:
    """Where the ids a search's filters admit lie, looked up before its statements run."""

    stretches: tuple[tuple[int, int], ...]
    """Every admitted id lies in one of these (first, last) stretches, in ascending order,
    which do not overlap; none: no bound."""
    nothing: bool = False
    """No id at all is admitted."""
    listed: bool = False
    """The stretches hold the ids of a listing: a few hundred at most."""

    @staticmethod
    def of(bounds: Sequence[tuple[int | None, int | None]]) -> Admitted:
        """From the rows of ``lookups`` (each a first and a last id)."""
        first: int | None = None
        last: int | None = None
        for low, high in bounds:
            if low is None or high is None:
                return Admitted((), nothing=True)
            first = low if first is None else max(first, low)
            last = high if last is None else min(last, high)
        if first is None or last is None:
            return Admitted(())
        return Admitted(((first, last),)) if first <= last else Admitted((), nothing=True)

    def narrowed(
        self, listed: Sequence[Sequence[int] | None], span: tuple[int | None, int | None]
    ) -> Admitted:
        """These stretches narrowed to the ids of the lists of ``listings`` (None: more
        than it lists), when they lie in few enough; ``span``: the first and last id of
        the index (``SPAN``), which they are weighed against without a bound."""
        whole = [set(ids) for ids in listed if ids is not None]
        if self.nothing or not whole:
            return self
        low, high = self.hull() or span
        ids = sorted(
            i
            for i in set.intersection(*whole)
            if (low is None or i >= low) and (high is None or i <= high)
        )
        if not ids:
            return Admitted((), nothing=True)
        stretches = _stretches(ids)
        covered = sum(end - start + 1 for start, end in stretches)
        if low is not None and high is not None and covered > SPREAD * (high - low + 1):
            return self
        return Admitted(stretches, listed=True)

    def hull(self) -> tuple[int, int] | None:
        """The one stretch that holds every admitted id (None: no bound)."""
        if not self.stretches:
            return None
        return self.stretches[0][0], self.stretches[-1][1]


def _stretches(ids: Sequence[int]) -> tuple[tuple[int, int], ...]:
    """``ids`` (ascending, distinct) as at most ``STRETCHES`` stretches, cut at the
    widest gaps between them."""
    widest = sorted(range(1, len(ids)), key=lambda i: ids[i] - ids[i - 1], reverse=True)
    cuts = sorted(i for i in widest[: STRETCHES - 1] if ids[i] - ids[i - 1] > 1)
    starts, ends = [0, *cuts], [*cuts, len(ids)]
    return tuple((ids[start], ids[end - 1]) for start, end in zip(starts, ends, strict=True))


def lookups(filters: Filters) -> list[tuple[str, list[object]]]:
    """The queries whose rows bound a search's ``Admitted``: the first and last id of
    its roots (none without a root filter)."""
    if not filters.roots:
        return []
    roots: list[object] = [as_json(filters.roots)]
    return [(f"SELECT min(id), max(id) FROM files WHERE root IN {IN_JSON}", roots)]


def listings(filters: Filters) -> list[tuple[str, list[object], int]]:
    """The queries that list the ids a filter admits, by an index, each a JSON array,
    with the most ids it lists (it stops one further: then they bound nothing). A path's
    names are listed by a range of them (a few more than it admits). A front matter
    value is not listed: its lookup without regard to case (``_nocase``) costs a
    statement's time whatever it finds."""
    listed = [(sql, p, LISTED) for sql, p in _path_list(filters)]
    listed += [(sql, p, LISTED_FIELDS) for sql, p in _tag_lists(filters) + _date_lists(filters)]
    json_array = "WITH l(id) AS ({} LIMIT ?) SELECT json_group_array(id) FROM l"
    return [(json_array.format(sql), [*p, most + 1], most) for sql, p, most in listed]


def _path_list(filters: Filters) -> list[tuple[str, list[object]]]:
    """The query of the ids whose path lies in the range of names a path filter's
    literal start holds (none when it has none: a glob starting with ``*``)."""
    path = filters.path
    if path is None:
        return []
    if path.glob:
        cut = min((i for i, c in enumerate(path.glob) if c in "*?["), default=len(path.glob))
        start = path.glob[:cut]
        if not start or ord(start[-1]) >= 0xD7FF:
            return []
        # Every name that starts with ``start`` sorts before its last letter's next.
        end = start[:-1] + chr(ord(start[-1]) + 1)
    else:
        start, end = path.stem, path.stem + "0"  # the stem, and what lies under it: '0' follows '/'
    if path.absolute:
        return [("SELECT id FROM files WHERE path >= ? AND path < ?", [start, end])]
    if filters.roots:
        roots, roots_params = IN_JSON, [as_json(filters.roots)]
    else:
        # Each root by a seek of the index, not a scan of its entries.
        roots_params = []
        roots = (
            "(WITH RECURSIVE r(root) AS (SELECT min(root) FROM files UNION ALL"
            " SELECT (SELECT min(root) FROM files WHERE root > r.root) FROM r"
            " WHERE r.root IS NOT NULL) SELECT root FROM r)"
        )
    return [
        (
            f"SELECT id FROM files WHERE root IN {roots} AND relpath >= ? AND relpath < ?",
            [*roots_params, start, end],
        )
    ]


def condition(
    filters: Filters,
    files: str = "f",
    admitted: Admitted | None = None,
    rowid: str = "d.rowid",
    few: bool = False,
) -> tuple[str, list[object]]:
    """The SQL condition (``1`` for none) and its parameters; with ``admitted`` (what
    ``lookups`` found), for a query whose full-text table's ``rowid`` is the files
    row's id, and ``few``: that finds few matches (``searcher.FEW_MATCHES``)."""
    parts: list[str] = []
    params: list[object] = []
    if filters.roots:
        parts.append(f"{files}.root IN {IN_JSON}")
        params.append(as_json(filters.roots))
    if filters.kinds:
        parts.append(f"{files}.kind IN {IN_JSON}")
        params.append(as_json(filters.kinds))
    if filters.modified is not None:
        span, span_params = _span(f"{files}.mtime_ns", filters.modified, _NS)
        parts.append(span)
        params += span_params
    listed = _tag_lists(filters)
    if admitted is not None and few:
        # A lookup per match by the file's own rows costs less than a list of the
        # thousands of ids a field or date may admit (built by each statement).
        for where, check_params in _checks(filters):
            parts.append(
                f"EXISTS (SELECT 1 FROM fields INDEXED BY fields_file WHERE file = {rowid}"
                f" AND {where})"
            )
            params += check_params
    else:
        listed += _field_lists(filters) + _date_lists(filters)
    # The unary +: a ``rowid IN`` that SQLite hands to FTS5 becomes one MATCH per
    # listed row; checked on the rowid, a list rules a match out before its files row
    # is read.
    member = f"{files}.id IN" if admitted is None else f"+{rowid} IN"
    for sql, list_params in listed:
        parts.append(f"{member} ({sql})")
        params += list_params
    hull = None if admitted is None else admitted.hull()
    if admitted is not None and admitted.nothing:
        parts.append("0")
    elif hull is not None:
        parts.append(f"{rowid} >= ? AND {rowid} <= ?")  # FTS5 reads only this stretch
        params += list(hull)
    return (" AND ".join(parts) or "1"), params


def _tag_lists(filters: Filters) -> list[tuple[str, list[object]]]:
    """The query of the ids each tag filter admits (in ascending order: the index's)."""
    where = "source = 'tag' AND key = '' AND value = ?"
    return [(f"SELECT file FROM fields WHERE {where}", [tag]) for tag in filters.tags]


def _field_lists(filters: Filters) -> list[tuple[str, list[object]]]:
    """The query of the ids each field filter admits."""
    # The index keeps values as written: the spellings that differ only in case are
    # found by ranges of it (``_nocase``), each then compared without regard to case.
    return [
        (
            "SELECT v.file FROM json_each(?) r JOIN fields v ON v.source = 'meta'"
            " AND v.key = ? AND v.value BETWEEN r.value->>0 AND r.value->>1"
            " WHERE v.value = ? COLLATE NOCASE",
            [as_json(_nocase(value)), key, value],
        )
        for key, value in filters.fields
    ]


def _date_lists(filters: Filters) -> list[tuple[str, list[object]]]:
    """The query of the ids each date filter admits."""
    return [(f"SELECT file FROM fields WHERE {where}", p) for where, p in _dates(filters)]


def _checks(filters: Filters) -> list[tuple[str, list[object]]]:
    """The condition on a ``fields`` row of each field and date filter."""
    where = "source = 'meta' AND key = ? AND value = ? COLLATE NOCASE"
    fields: list[tuple[str, list[object]]] = [(where, [k, v]) for k, v in filters.fields]
    return fields + _dates(filters)


def _dates(filters: Filters) -> list[tuple[str, list[object]]]:
    conditions: list[tuple[str, list[object]]] = []
    for dated in filters.dated:
        keys = [dated.key] if dated.key else list(DATE_KEYS)
        span, span_params = _span("number", dated, 1)
        conditions.append(
            (f"source = 'date' AND key IN {IN_JSON} AND {span}", [as_json(keys), *span_params])
        )
    return conditions


def _nocase(value: str) -> list[tuple[str, str]]:
    """Ranges (first, last) of text that hold every string equal to ``value`` without
    regard to case (SQLite's NOCASE: ASCII letters only): the first ``_CASED`` letters
    spelled in every case, the rest from all upper to all lower case (in the order of
    bytes, 'A' < 'a', so every mix of the rest's cases lies between)."""
    cased = [i for i, c in enumerate(value) if c.isascii() and c.isalpha()][:_CASED]
    cut = cased[-1] + 1 if cased else 0
    head, rest = value[:cut], value[cut:]
    first, last = rest.translate(_UPPER), rest.translate(_LOWER)
    ranges = []
    for cases in itertools.product((str.upper, str.lower), repeat=len(cased)):
        spelled = list(head)
        for i, case in zip(cased, cases, strict=True):
            spelled[i] = case(spelled[i])
        ranges.append(("".join(spelled) + first, "".join(spelled) + last))
    return ranges


def _span(column: str, span: DateRange, scale: int) -> tuple[str, list[object]]:
    parts: list[str] = []
    params: list[object] = []
    if span.after is not None:
        parts.append(f"{column} >= ?")
        params.append(int(span.after * scale) if scale > 1 else span.after)
    if span.before is not None:
        parts.append(f"{column} < ?")
        params.append(int(span.before * scale) if scale > 1 else span.before)
    return (" AND ".join(parts) or "1"), params
