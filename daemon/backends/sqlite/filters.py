"""``plan.Filters`` as SQL conditions on the files table (pure: no database).

Each filter is a condition on the files row ``f`` of a query, so it runs inside the
query, before any ranking or limit: roots and kinds on the row itself, the modified
time on its ``mtime_ns``, tags, front matter values and dates as a membership in the
ids a lookup of ``fields`` gives, by its ``(source, key, value)`` or ``(source, key,
number)`` index.

In a search, each membership is checked on the full-text table's rowid, as FTS5 hands
a match over, before the match's files row is read; a statement that finds few matches
checks a field or date on each match's own ``fields`` rows instead (``few``). A search
first looks up the first and last id of its roots (``lookups``, ``Admitted``), which
FTS5 takes as the stretch of each doclist to read: a root's files are mostly indexed
together, so a small root is a short stretch.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

from kbindex.daemon.backends.sqlite.documents import IN_JSON, as_json
from kbindex.daemon.index.plan import DATE_KEYS, DateRange, Filters

_NS = 1_000_000_000
_CASED = 5
"""Letters of a front matter value whose cases are spelled out (``_nocase``)."""
_UPPER = str.maketrans({c: c.upper() for c in "abcdefghijklmnopqrstuvwxyz"})
_LOWER = str.maketrans({c: c.lower() for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZ"})


@dataclass(frozen=True, slots=True)
class Admitted:
    """The stretch of ids a search's roots admit, looked up before its statements run."""

    first: int | None
    """No id below this one is admitted (None: no bound)."""
    last: int | None
    nothing: bool = False
    """No id at all is admitted."""

    @staticmethod
    def of(rows: Sequence[tuple[int | None, int | None]]) -> Admitted:
        """From the rows of ``lookups`` (each a first and a last id)."""
        first: int | None = None
        last: int | None = None
        for low, high in rows:
            if low is None or high is None:
                return Admitted(None, None, nothing=True)
            first = low if first is None else max(first, low)
            last = high if last is None else min(last, high)
        return Admitted(first, last)


def lookups(filters: Filters) -> list[tuple[str, list[object]]]:
    """The queries whose rows make a search's ``Admitted``: the first and last id of
    its roots (none without a root filter)."""
    if not filters.roots:
        return []
    roots: list[object] = [as_json(filters.roots)]
    return [(f"SELECT min(id), max(id) FROM files WHERE root IN {IN_JSON}", roots)]


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
    if admitted is not None and admitted.nothing:
        parts.append("0")
    elif admitted is not None and admitted.first is not None and admitted.last is not None:
        parts.append(f"{rowid} >= ? AND {rowid} <= ?")  # FTS5 reads only this stretch
        params += [admitted.first, admitted.last]
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
