"""The ``fields`` and ``links`` rows of documents (schema v10): written with a document,
removed with it. ``filters`` reads them."""

from __future__ import annotations

from collections.abc import Sequence

from kbindex.daemon.backends.sqlite.documents import IN_JSON, as_json
from kbindex.daemon.engine import sqlite
from kbindex.daemon.index.values import Structure, statements


def write(conn: sqlite.Connection, items: Sequence[tuple[int, Structure]]) -> None:
    """Add the rows of each ``(file id, structure)``; the file has none yet."""
    values: list[tuple[int, str, str, str, float | None]] = []
    links: list[tuple[int, str, int, str, int]] = []
    for file_id, found in items:
        front = found.front
        values.extend((file_id, "meta", key, value, None) for key, value in front.fields)
        values.extend((file_id, "tag", "", tag, None) for tag in front.tags)
        values.extend((file_id, "date", key, "", when) for key, when in front.dates)
        links.extend((file_id, x.target, int(x.wiki), x.text, x.line) for x in found.links)
    for chunk in statements(values, _chars):
        conn.execute(
            "INSERT INTO fields(file, source, key, value, number)"
            " SELECT value->>0, value->>1, value->>2, value->>3, value->>4 FROM json_each(?)",
            (as_json(chunk),),
        )
    for some in statements(links, _chars):
        conn.execute(
            "INSERT INTO links(file, target, wiki, text, line)"
            " SELECT value->>0, value->>1, value->>2, value->>3, value->>4 FROM json_each(?)",
            (as_json(some),),
        )


def remove(conn: sqlite.Connection, ids: Sequence[int]) -> None:
    if not ids:
        return
    listed = as_json(ids)
    conn.execute(f"DELETE FROM fields WHERE file IN {IN_JSON}", (listed,))
    conn.execute(f"DELETE FROM links WHERE file IN {IN_JSON}", (listed,))


def _chars(row: tuple[object, ...]) -> int:
    return sum(len(v) for v in row if isinstance(v, str)) + 16
