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
from kbindex.daemon.index.values import Linked, Links


def links(
    conn: sqlite.Connection, path: str, direction: Literal["out", "in"], limit: int | None
) -> Links:
    conn.execute("BEGIN")  # one snapshot for the links and the files they lead to
    try:
        return outgoing(conn, path, limit) if direction == "out" else incoming(conn, path, limit)
    finally:
        conn.execute("ROLLBACK")


def outgoing(conn: sqlite.Connection, path: str, limit: int | None) -> Links:
    # One file's links, each resolved here: a limit leaves out rows after the
    # resolving, which tells which files they lead to.
    rows = conn.execute(
        "SELECT l.target, l.wiki, l.text, l.line, f.root FROM links l"
        " JOIN files f ON f.id = l.file WHERE f.path = ? ORDER BY l.line, l.rowid",
        (path,),
    ).fetchall()
    resolved: dict[tuple[str, str, int], str | None] = {}
    found = []
    for target, wiki, text, line, root in rows:
        key = (root, target, wiki)
        if key not in resolved:
            resolved[key] = wiki_target(conn, root, target) if wiki else _held(conn, root, target)
        shown = f"{root}/{resolved[key] or target}"
        found.append(Linked(path, shown, text, line, resolved[key] is not None, bool(wiki)))
    return Links.first_of_each(found, limit)


def incoming(conn: sqlite.Connection, path: str, limit: int | None) -> Links:
    row = conn.execute("SELECT root, relpath FROM files WHERE path = ?", (path,)).fetchone()
    if row is None:
        return Links([], 0)
    root, relpath = row
    parts = relpath.split("/")
    names = ["/".join(parts[i:]).lower() for i in range(len(parts))]
    # The wikilinks' spellings that lead here, each resolved once: a name two files
    # share leads to one of them only.
    spellings = [
        target
        for (target,) in conn.execute(
            "SELECT DISTINCT l.target FROM links l JOIN files s ON s.id = l.file"
            f" WHERE s.root = ? AND l.wiki = 1 AND lower(l.target) IN {IN_JSON}",
            (root, as_json(names)),
        )
        if wiki_target(conn, root, target) == relpath
    ]
    match = (
        "FROM links l JOIN files s ON s.id = l.file WHERE s.root = ?"
        f" AND ((l.wiki = 0 AND l.target = ?) OR (l.wiki = 1 AND l.target IN {IN_JSON}))"
    )
    params = (root, relpath, as_json(spellings))
    (files,) = conn.execute(f"SELECT count(DISTINCT l.file) {match}", params).fetchone()
    if limit is None:
        sql = f"SELECT s.path, l.wiki, l.text, l.line {match} ORDER BY s.path, l.line, l.rowid"
        rows = conn.execute(sql, params).fetchall()
    else:
        rows = conn.execute(
            "SELECT path, wiki, text, line FROM (SELECT s.path, l.wiki, l.text, l.line,"
            " row_number() OVER (PARTITION BY l.file ORDER BY l.line, l.rowid) AS nth"
            f" {match}) WHERE nth = 1 ORDER BY path LIMIT ?",
            (*params, limit),
        ).fetchall()
    found = [
        Linked(source, path, text, line, True, bool(wiki)) for source, wiki, text, line in rows
    ]
    return Links(found, files)


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
