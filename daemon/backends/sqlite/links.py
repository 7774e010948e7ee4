"""Links between files of a root, answered from the ``links`` table (schema v10).

A Markdown link's target was resolved at index time (``indexing.links``); a wikilink's
name is resolved here, as Obsidian does: the file of the root whose path is the name or
ends with ``/`` and the name, the shortest such path first (then in path order),
without regard to case. So a note moved to another folder keeps the wikilinks to it,
and one added later is found by the links written before it.
"""

from __future__ import annotations

from typing import Literal

from kbindex.daemon.backends.sqlite.documents import IN_JSON, as_json
from kbindex.daemon.engine import sqlite
from kbindex.daemon.index.values import Linked


def links(conn: sqlite.Connection, path: str, direction: Literal["out", "in"]) -> list[Linked]:
    conn.execute("BEGIN")  # one snapshot for the links and the files they lead to
    try:
        return outgoing(conn, path) if direction == "out" else incoming(conn, path)
    finally:
        conn.execute("ROLLBACK")


def outgoing(conn: sqlite.Connection, path: str) -> list[Linked]:
    rows = conn.execute(
        "SELECT l.target, l.wiki, l.text, l.line, f.root FROM links l"
        " JOIN files f ON f.id = l.file WHERE f.path = ? ORDER BY l.line, l.rowid",
        (path,),
    ).fetchall()
    found = []
    for target, wiki, text, line, root in rows:
        resolved = wiki_target(conn, root, target) if wiki else _held(conn, root, target)
        shown = f"{root}/{resolved or target}"
        found.append(Linked(path, shown, text, line, resolved is not None, bool(wiki)))
    return found


def incoming(conn: sqlite.Connection, path: str) -> list[Linked]:
    row = conn.execute("SELECT root, relpath FROM files WHERE path = ?", (path,)).fetchone()
    if row is None:
        return []
    root, relpath = row
    parts = relpath.split("/")
    names = ["/".join(parts[i:]).lower() for i in range(len(parts))]
    rows = conn.execute(
        "SELECT s.path, l.target, l.wiki, l.text, l.line FROM links l"
        " JOIN files s ON s.id = l.file WHERE s.root = ? AND ("
        f" (l.wiki = 0 AND l.target = ?) OR (l.wiki = 1 AND lower(l.target) IN {IN_JSON}))"
        " ORDER BY s.path, l.line, l.rowid",
        (root, relpath, as_json(names)),
    ).fetchall()
    return [
        Linked(source, path, text, line, True, bool(wiki))
        for source, target, wiki, text, line in rows
        # A name two files share leads to one of them only.
        if not wiki or wiki_target(conn, root, target) == relpath
    ]


def wiki_target(conn: sqlite.Connection, root: str, name: str) -> str | None:
    """The path (relative to ``root``) a wikilink's ``name`` leads to, or None."""
    pattern = "%/" + name.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    row = conn.execute(
        "SELECT relpath FROM files WHERE root = ? AND (lower(relpath) = lower(?)"
        " OR relpath LIKE ? ESCAPE '\\') ORDER BY length(relpath), relpath LIMIT 1",
        (root, name, pattern),
    ).fetchone()
    return None if row is None else str(row[0])


def _held(conn: sqlite.Connection, root: str, relpath: str) -> str | None:
    row = conn.execute(
        "SELECT 1 FROM files WHERE root = ? AND relpath = ?", (root, relpath)
    ).fetchone()
    return None if row is None else relpath
