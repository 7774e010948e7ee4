"""``plan.Filters`` as SQL conditions on the files table (pure: no database).

Each filter is a condition on the files row ``f`` of a query, so it runs inside the
query, before any ranking or limit: roots and kinds on the row itself, the modified
time on its ``mtime_ns``, tags, front matter values and dates as ``f.id IN`` a lookup
of ``fields`` by its ``(source, key, value)`` or ``(source, key, number)`` index.
"""

from __future__ import annotations

from kbindex.daemon.backends.sqlite.documents import IN_JSON, as_json
from kbindex.daemon.index.plan import DATE_KEYS, DateRange, Filters

_NS = 1_000_000_000


def condition(filters: Filters, files: str = "f") -> tuple[str, list[object]]:
    """The SQL condition (``1`` for none) and its parameters."""
    parts: list[str] = []
    params: list[object] = []
    if filters.roots:
        parts.append(f"{files}.root IN {IN_JSON}")
        params.append(as_json(filters.roots))
    if filters.kinds:
        parts.append(f"{files}.kind IN {IN_JSON}")
        params.append(as_json(filters.kinds))
    for tag in filters.tags:
        parts.append(
            f"{files}.id IN (SELECT file FROM fields"
            " WHERE source = 'tag' AND key = '' AND value = ?)"
        )
        params.append(tag)
    for key, value in filters.fields:
        parts.append(
            f"{files}.id IN (SELECT file FROM fields"
            " WHERE source = 'meta' AND key = ? AND value = ? COLLATE NOCASE)"
        )
        params += [key, value]
    if filters.modified is not None:
        span, span_params = _span(f"{files}.mtime_ns", filters.modified, _NS)
        parts.append(span)
        params += span_params
    for dated in filters.dated:
        keys = [dated.key] if dated.key else list(DATE_KEYS)
        span, span_params = _span("number", dated, 1)
        parts.append(
            f"{files}.id IN (SELECT file FROM fields WHERE source = 'date'"
            f" AND key IN {IN_JSON} AND {span})"
        )
        params += [as_json(keys), *span_params]
    return (" AND ".join(parts) or "1"), params


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
