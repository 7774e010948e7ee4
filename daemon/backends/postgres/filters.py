"""``plan.Filters`` as SQL on ``kb_files f`` (pure: no database), as ``sqlite.filters``
does for SQLite: roots and kinds on the row, the modified time on ``mtime_ns``, tags,
front matter values and dates as sets of documents from ``kb_fields``. Values compare
without regard to case (``lower``, indexed)."""

from __future__ import annotations

from typing import NamedTuple

from kbindex.daemon.index.plan import DATE_KEYS, DateRange, Filters

_NS = 1_000_000_000


class Split(NamedTuple):
    """The filters in two parts: ``row``, a condition on the files row (``true`` for
    none), and ``sets``, each a ``SELECT doc FROM kb_fields`` a document must be in; each
    with its parameters."""

    row: str
    row_params: list[object]
    sets: list[tuple[str, list[object]]]


def condition(filters: Filters, files: str = "f") -> tuple[str, list[object]]:
    """The SQL condition (``true`` for none) and its parameters."""
    split = parts(filters, files)
    conds = [] if split.row == "true" else [split.row]
    params = list(split.row_params)
    for sql, set_params in split.sets:
        conds.append(f"{files}.id IN ({sql})")
        params += set_params
    return (" AND ".join(conds) or "true"), params


def parts(filters: Filters, files: str = "f") -> Split:
    """``condition``'s pieces, for a search that intersects the sets with its matches
    (``reads``) instead of testing each match against them."""
    conds: list[str] = []
    params: list[object] = []
    sets: list[tuple[str, list[object]]] = []
    if filters.roots:
        conds.append(f"{files}.root = ANY(%s)")
        params.append(list(filters.roots))
    if filters.kinds:
        conds.append(f"{files}.kind = ANY(%s)")
        params.append(list(filters.kinds))
    if filters.modified is not None:
        span, span_params = _span(f"{files}.mtime_ns", filters.modified, _NS)
        conds.append(span)
        params += span_params
    for tag in filters.tags:
        sets.append(
            (
                "SELECT doc FROM kb_fields"
                " WHERE source = 'tag' AND key = '' AND lower(value) = lower(%s)",
                [tag],
            )
        )
    for key, value in filters.fields:
        sets.append(
            (
                "SELECT doc FROM kb_fields"
                " WHERE source = 'meta' AND key = %s AND lower(value) = lower(%s)",
                [key, value],
            )
        )
    for dated in filters.dated:
        keys = [dated.key] if dated.key else list(DATE_KEYS)
        span, span_params = _span("number", dated, 1)
        sets.append(
            (
                f"SELECT doc FROM kb_fields WHERE source = 'date' AND key = ANY(%s) AND {span}",
                [keys, *span_params],
            )
        )
    return Split(" AND ".join(conds) or "true", params, sets)


def _span(column: str, span: DateRange, scale: int) -> tuple[str, list[object]]:
    parts: list[str] = []
    params: list[object] = []
    if span.after is not None:
        parts.append(f"{column} >= %s")
        params.append(int(span.after * scale) if scale > 1 else span.after)
    if span.before is not None:
        parts.append(f"{column} < %s")
        params.append(int(span.before * scale) if scale > 1 else span.before)
    return (" AND ".join(parts) or "true"), params
