"""``plan.Filters`` as SQL conditions on the files table (pure: no database).

Each filter is a condition on the files row ``f`` of a query, so it runs inside the
query, before any ranking or limit: roots and kinds on the row itself, the modified
time on its ``mtime_ns``, tags, front matter values and dates as a membership in the
ids a lookup of ``fields`` gives, by its ``(source, key, value)`` or ``(source, key,
number)`` index.

In a search, each membership is checked on the full-text table's rowid, as FTS5 hands
a match over, before the match's files row is read. A search first looks up what needs
it, once for all its statements (``lookups``, ``Admitted``): the ids its dates admit,
in ascending order (its statements each build their list from that far faster than
from the index's order, by date), and the first and last id its roots and dates
admit, so that FTS5 reads only that stretch of each doclist (a root's files are mostly
indexed together: a small root is a short stretch).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

from kbindex.daemon.backends.sqlite.documents import IN_JSON, as_json
from kbindex.daemon.index.plan import DateRange, Filters
from kbindex.daemon.indexing.frontmatter import DATE_KEYS

_NS = 1_000_000_000
_CASED = 5
"""Letters of a front matter value whose cases are spelled out (``_nocase``)."""
_UPPER = str.maketrans({c: c.upper() for c in "abcdefghijklmnopqrstuvwxyz"})
_LOWER = str.maketrans({c: c.lower() for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZ"})


@dataclass(frozen=True, slots=True)
class Admitted:
    """What a search's filters admit, looked up before its statements run."""

    ids: str | None
    """The ids its tags, fields and dates admit, a JSON array in ascending order (None:
    it has none of those filters)."""
    first: int | None
    """No id below this one is admitted (None: no bound)."""
    last: int | None
    nothing: bool = False
    """No id at all is admitted."""

    @staticmethod
    def of(rows: Sequence[tuple[str | None, int | None, int | None]]) -> Admitted:
        """From the rows of ``lookups`` (each an id list or None, a first and a last id)."""
        ids = next((listed for listed, _, _ in rows if listed is not None), None)
        first: int | None = None
        last: int | None = None
        for _, low, high in rows:
            if low is None or high is None:
                return Admitted(ids, None, None, nothing=True)
            first = low if first is None else max(first, low)
            last = high if last is None else min(last, high)
        return Admitted(ids, first, last)


def lookups(filters: Filters) -> list[tuple[str, list[object]]]:
    """The queries whose rows make a search's ``Admitted`` (none when no filter needs
    one): one for its dates, one for its roots."""
    queries: list[tuple[str, list[object]]] = []
    sets = _dated(filters)
    if sets:
        # The index gives a date's files by date: the list a statement builds from
        # them in ascending order costs a fraction of one in that order.
        admitted = " INTERSECT ".join(sql for sql, _ in sets)
        queries.append(
            (
                f"SELECT json_group_array(id), min(id), max(id) FROM ({admitted} ORDER BY 1)",
                [p for _, set_params in sets for p in set_params],
            )
        )
    if filters.roots:
        queries.append(
            (
                f"SELECT NULL, min(id), max(id) FROM files WHERE root IN {IN_JSON}",
                [as_json(filters.roots)],
            )
        )
    return queries


def condition(
    filters: Filters, files: str = "f", admitted: Admitted | None = None, rowid: str = "d.rowid"
) -> tuple[str, list[object]]:
    """The SQL condition (``1`` for none) and its parameters; with ``admitted`` (what
    ``lookups`` found), for a query whose full-text table's ``rowid`` is the files
    row's id."""
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
    # The unary +: a ``rowid IN`` that SQLite hands to FTS5 becomes one MATCH per
    # listed row; checked on the rowid, a list rules a match out before its files row
    # is read.
    member = f"{files}.id IN" if admitted is None else f"+{rowid} IN"
    for sql, set_params in _sets(filters) + (_dated(filters) if admitted is None else []):
        parts.append(f"{member} ({sql})")
        params += set_params
    if admitted is not None and admitted.nothing:
        parts.append("0")
    elif admitted is not None:
        if admitted.first is not None and admitted.last is not None:
            parts.append(f"{rowid} >= ? AND {rowid} <= ?")  # FTS5 reads only this stretch
            params += [admitted.first, admitted.last]
        if admitted.ids is not None:
            parts.append(f"{member} {IN_JSON}")
            params.append(admitted.ids)
    return (" AND ".join(parts) or "1"), params


def _sets(filters: Filters) -> list[tuple[str, list[object]]]:
    """The query of the ids (``id``) each tag and field filter admits, in ascending
    order (the index's, within a value)."""
    sets: list[tuple[str, list[object]]] = []
    for tag in filters.tags:
        sets.append(
            ("SELECT file AS id FROM fields WHERE source = 'tag' AND key = '' AND value = ?", [tag])
        )
    for key, value in filters.fields:
        # The index keeps values as written: the spellings that differ only in case are
        # found by ranges of it (``_nocase``), each then compared without regard to case.
        sets.append(
            (
                "SELECT v.file AS id FROM json_each(?) r JOIN fields v ON v.source = 'meta'"
                " AND v.key = ? AND v.value BETWEEN r.value->>0 AND r.value->>1"
                " WHERE v.value = ? COLLATE NOCASE",
                [as_json(_nocase(value)), key, value],
            )
        )
    return sets


def _dated(filters: Filters) -> list[tuple[str, list[object]]]:
    """The query of the ids (``id``) each date filter admits."""
    sets: list[tuple[str, list[object]]] = []
    for dated in filters.dated:
        keys = [dated.key] if dated.key else list(DATE_KEYS)
        span, span_params = _span("number", dated, 1)
        sets.append(
            (
                f"SELECT file AS id FROM fields WHERE source = 'date' AND key IN {IN_JSON}"
                f" AND {span}",
                [as_json(keys), *span_params],
            )
        )
    return sets


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
