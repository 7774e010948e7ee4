"""Links between files of a root in the shared index, as ``sqlite.links`` answers them
(a wikilink's name resolved here, the shortest matching path first, without regard to
case), among the rows of the machine whose disk holds the file."""

from __future__ import annotations

from typing import Literal

from kbindex.daemon.backends.postgres.connections import Connection
from kbindex.daemon.index.values import Linked, Links


def links(
    conn: Connection, machine: str, path: str, direction: Literal["out", "in"], limit: int | None
) -> Links:
    with conn.transaction():  # one snapshot for the links and the files they lead to
        if direction == "out":
            return _outgoing(conn, machine, path, limit)
        return _incoming(conn, machine, path, limit)


def _outgoing(conn: Connection, machine: str, path: str, limit: int | None) -> Links:
    # One file's links, each resolved here: a limit leaves out rows after the
    # resolving, which tells which files they lead to.
    rows = conn.execute(
        "SELECT l.target, l.wiki, l.text, l.line, f.root FROM kb_links l"
        " JOIN kb_files f ON f.id = l.doc WHERE f.machine = %s AND f.path = %s"
        " ORDER BY l.line, l.ctid",
        (machine, path),
    ).fetchall()
    resolved: dict[tuple[str, str, bool], str | None] = {}
    found = []
    for target, wiki, text, line, root in rows:
        key = (root, target, wiki)
        if key not in resolved:
            resolved[key] = _resolved(conn, machine, root, target, wiki)
        shown = f"{root}/{resolved[key] or target}"
        found.append(Linked(path, shown, text, line, resolved[key] is not None, bool(wiki)))
    return Links.first_of_each(found, limit)


def _resolved(conn: Connection, machine: str, root: str, target: str, wiki: bool) -> str | None:
    """Where a link of ``root`` leads (relative to it), or None: a broken link."""
    if wiki:
        return wiki_target(conn, machine, root, target)
    held = conn.execute(
        "SELECT 1 FROM kb_files WHERE machine = %s AND root = %s AND relpath = %s",
        (machine, root, target),
    ).fetchone()
    return target if held else None


def _incoming(conn: Connection, machine: str, path: str, limit: int | None) -> Links:
    row = conn.execute(
        "SELECT root, relpath FROM kb_files WHERE machine = %s AND path = %s", (machine, path)
    ).fetchone()
    if row is None:
        return Links([], 0)
    root, relpath = str(row[0]), str(row[1])
    parts = relpath.split("/")
    names = ["/".join(parts[i:]).lower() for i in range(len(parts))]
    # The wikilinks' spellings that lead here, each resolved once: a name two files
    # share leads to one of them only.
    spellings = [
        str(target)
        for (target,) in conn.execute(
            "SELECT DISTINCT l.target FROM kb_links l JOIN kb_files s ON s.id = l.doc"
            " WHERE s.machine = %s AND s.root = %s AND l.wiki AND lower(l.target) = ANY(%s)",
            (machine, root, names),
        ).fetchall()
        if wiki_target(conn, machine, root, str(target)) == relpath
    ]
    match = (
        "FROM kb_links l JOIN kb_files s ON s.id = l.doc WHERE s.machine = %s AND s.root = %s"
        " AND ((NOT l.wiki AND l.target = %s) OR (l.wiki AND l.target = ANY(%s)))"
    )
    params = (machine, root, relpath, spellings)
    counted = conn.execute(f"SELECT count(DISTINCT l.doc) {match}", params).fetchone()
    files = int(counted[0]) if counted else 0
    if limit is None:
        sql = f"SELECT s.path, l.wiki, l.text, l.line {match} ORDER BY s.path, l.line, l.ctid"
        rows = conn.execute(sql, params).fetchall()
    else:
        rows = conn.execute(
            "SELECT path, wiki, text, line FROM (SELECT s.path, l.wiki, l.text, l.line,"
            " row_number() OVER (PARTITION BY l.doc ORDER BY l.line, l.ctid) AS nth"
            f" {match}) AS first WHERE nth = 1 ORDER BY path LIMIT %s",
            (*params, limit),
        ).fetchall()
    found = [
        Linked(str(source), path, str(text), int(line), True, bool(wiki))
        for source, wiki, text, line in rows
    ]
    return Links(found, files)


def wiki_target(conn: Connection, machine: str, root: str, name: str) -> str | None:
    """The path (relative to ``root``) a wikilink's ``name`` leads to, or None."""
    pattern = "%/" + name.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    row = conn.execute(
        "SELECT relpath FROM kb_files WHERE machine = %s AND root = %s"
        " AND (lower(relpath) = lower(%s) OR relpath ILIKE %s)"
        " ORDER BY length(relpath), relpath LIMIT 1",
        (machine, root, name, pattern),
    ).fetchone()
    return None if row is None else str(row[0])
