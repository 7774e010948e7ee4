"""``plan.Filters`` as SQL conditions on ``kb_files f`` (pure: no database), as
``sqlite.filters`` does for SQLite: roots and kinds on the row, the modified time on
``mtime_ns``, tags, front matter values and dates as ``f.id IN`` a lookup of
``kb_fields``. Values compare without regard to case (``lower``, indexed)."""

from __future__ import annotations

from kbindex.daemon.index.plan import DATE_KEYS, DateRange, Filters

_NS = 1_000_000_000


def condition(filters: Filters, files: str = "f") -> tuple[str, list[object]]:
    """The SQL condition (``true`` for none) and its parameters."""
    parts: list[str] = []
    params: list[object] = []
    if filters.roots:
        parts.append(f"{files}.root = ANY(%s)")
        params.append(list(filters.roots))
    if filters.kinds:
        parts.append(f"{files}.kind = ANY(%s)")
        params.append(list(filters.kinds))
    for tag in filters.tags:
        parts.append(
            f"{files}.id IN (SELECT doc FROM kb_fields"
            " WHERE source = 'tag' AND key = '' AND lower(value) = lower(%s))"
        )
        params.append(tag)
    for key, value in filters.fields:
        parts.append(
            f"{files}.id IN (SELECT doc FROM kb_fields"
            " WHERE source = 'meta' AND key = %s AND lower(value) = lower(%s))"
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
            f"{files}.id IN (SELECT doc FROM kb_fields WHERE source = 'date'"
            f" AND key = ANY(%s) AND {span})"
        )
        params += [keys, *span_params]
    return (" AND ".join(parts) or "true"), params


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
