"""Links between files of a root in the shared index, as ``sqlite.links`` answers them
(a wikilink's name resolved here, the shortest matching path first, without regard to
case), among the rows of the machine whose disk holds the file."""

from __future__ import annotations

from typing import Literal

from kbindex.daemon.backends.postgres.connections import Connection
from kbindex.daemon.index.values import Linked


def links(
    conn: Connection, machine: str, path: str, direction: Literal["out", "in"]
) -> list[Linked]:
    with conn.transaction():  # one snapshot for the links and the files they lead to
        if direction == "out":
            return _outgoing(conn, machine, path)
        return _incoming(conn, machine, path)


def _outgoing(conn: Connection, machine: str, path: str) -> list[Linked]:
    rows = conn.execute(
        "SELECT l.target, l.wiki, l.text, l.line, f.root FROM kb_links l"
        " JOIN kb_files f ON f.id = l.doc WHERE f.machine = %s AND f.path = %s"
        " ORDER BY l.line, l.ctid",
        (machine, path),
    ).fetchall()
    found = []
    for target, wiki, text, line, root in rows:
        if wiki:
            resolved = wiki_target(conn, machine, root, target)
        else:
            held = conn.execute(
                "SELECT 1 FROM kb_files WHERE machine = %s AND root = %s AND relpath = %s",
                (machine, root, target),
            ).fetchone()
            resolved = target if held else None
        shown = f"{root}/{resolved or target}"
        found.append(Linked(path, shown, text, line, resolved is not None, bool(wiki)))
    return found


def _incoming(conn: Connection, machine: str, path: str) -> list[Linked]:
    row = conn.execute(
        "SELECT root, relpath FROM kb_files WHERE machine = %s AND path = %s", (machine, path)
    ).fetchone()
    if row is None:
        return []
    root, relpath = str(row[0]), str(row[1])
    parts = relpath.split("/")
    names = ["/".join(parts[i:]).lower() for i in range(len(parts))]
    rows = conn.execute(
        "SELECT s.path, l.target, l.wiki, l.text, l.line FROM kb_links l"
        " JOIN kb_files s ON s.id = l.doc WHERE s.machine = %s AND s.root = %s AND ("
        " (NOT l.wiki AND l.target = %s) OR (l.wiki AND lower(l.target) = ANY(%s)))"
        " ORDER BY s.path, l.line, l.ctid",
        (machine, root, relpath, names),
    ).fetchall()
    return [
        Linked(str(source), path, str(text), int(line), True, bool(wiki))
        for source, target, wiki, text, line in rows
        if not wiki or wiki_target(conn, machine, root, str(target)) == relpath
    ]


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
