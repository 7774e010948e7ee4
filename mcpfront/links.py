"""The links between notes through MCP, without a tool of their own (tools/list has no
room for one): read_file's answer for a file ends with the files it links to and the
files that link to it, a few of each (``trailer``), which an agent meets by reading a
note; when there are more, that line names the ``where`` term of find_files that lists
them all (``listing``): ``links:PATH`` (the files PATH links to) and ``linked-from:PATH``
(the files that link to PATH). Both come from the daemon's Links request, the one
behind ``kbctl links``; broken links are named as such.
"""

from __future__ import annotations

import json
import logging
from typing import Any, Final

import anyio
from kbindex.mcpfront.backend import Backend
from kbindex.mcpfront.results import BUDGET
from kbindex.proto.messages import LinkInfo, LinksReply

log = logging.getLogger(__name__)

SHOWN: Final = 8
"""Files named in read_file's answer for each direction, at most."""
TERMS: Final = {"links": False, "linked-from": True}
"""The ``where`` terms of find_files, and whether each asks for backlinks."""


async def trailer(backend: Backend, path: str) -> list[str]:
    """Read_file's lines on the links of the file at ``path``: none when it has none, or
    when they cannot be had (an older daemon, a file not in the index)."""
    replies: dict[bool, LinksReply] = {}
    roots: list[str] = []

    async def ask(backlinks: bool) -> None:
        # The daemon sends the first SHOWN files only (an older one sends every link).
        replies[backlinks] = await backend.links(path, backlinks=backlinks, limit=SHOWN)

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(ask, False)
            tg.start_soon(ask, True)
        if not any(r.links for r in replies.values()):
            return []
        roots = [r.path for r in (await backend.status()).roots]
    except Exception as exc:
        log.debug("no links for %s: %s", path, exc)
        return []
    lines = []
    for backlinks, reply in sorted(replies.items()):
        if not reply.links:
            continue
        named = _distinct(reply.links, backlinks)
        shown = [_name(x, backlinks, roots) for x in named[:SHOWN]]
        head = "linked from" if backlinks else "links to"
        line = f"{head}: {', '.join(shown)}"
        files = len(named) if reply.files is None else reply.files
        if files > len(shown):
            term = "linked-from" if backlinks else "links"
            where = json.dumps(f"{term}:{reply.path}", ensure_ascii=False)
            line += f" (+{files - len(shown)} more: find_files(where={where}))"
        lines.append(line)
    return lines


async def listing(
    backend: Backend, path: str, backlinks: bool, limit: int, max_limit: int
) -> tuple[dict[str, Any], str]:
    """find_files' answer for ``links:PATH`` or ``linked-from:PATH``: the first ``limit``
    files, each once, in path order, with the line of its first link; broken links in
    the notes."""
    # The daemon sends the first ``limit`` files and counts them all (an older one sends
    # every link and no count).
    reply = await backend.links(path, backlinks=backlinks, limit=limit)
    roots = [r.path for r in (await backend.status()).roots] if reply.links else []
    named = _distinct(reply.links, backlinks)
    total = len(named) if reply.files is None else reply.files
    files: list[dict[str, Any]] = []
    lines: list[str] = []
    used = 0
    for x in named[:limit]:
        line = _name(x, backlinks, roots)
        if files and used + len(line) * 2 > BUDGET - 500:
            break
        files.append({"path": x.source if backlinks else x.target})
        lines.append(f"  {line}")
        used += len(line) * 2
    term = "linked-from" if backlinks else "links"
    notes = list(reply.notes)
    omitted = min(len(named), limit) - len(files)
    if omitted:
        notes.append(f"{omitted} more file(s) left out to keep this answer small.")
    if total > len(files) and not omitted and limit < max_limit:
        notes.append(f"{total - len(files)} more file(s): raise limit (max {max_limit}).")
    structured = {
        "glob": f"{term}:{path}",
        "files": files,
        "returned": len(files),
        "total": total,
        "truncated": len(files) < total,
        "notes": notes,
    }
    what = "Files that link to" if backlinks else "Files linked from"
    head = f"{what} {reply.path}: {total}"
    if reply.broken:
        head += f" ({reply.broken} broken link(s): the file is not there)"
    text = "\n".join([head, *lines, *(f"Note: {n}" for n in notes)])
    return structured, text


def _distinct(links: list[LinkInfo], backlinks: bool) -> list[LinkInfo]:
    """The first link of each file at the other end, in the daemon's order."""
    seen: dict[str, LinkInfo] = {}
    for x in links:
        seen.setdefault(x.source if backlinks else x.target, x)
    return list(seen.values())


def _name(x: LinkInfo, backlinks: bool, roots: list[str]) -> str:
    """The file at the other end of a link, relative to its root (as read_file takes
    it), with the line of the link in the linking file."""
    path = x.source if backlinks else x.target
    for root in sorted(roots, key=len, reverse=True):
        if path.startswith(root.rstrip("/") + "/"):
            path = path[len(root.rstrip("/")) + 1 :]
            break
    if backlinks:
        return f"{path}:{x.line}"
    return f"{path} (broken)" if x.broken else path
