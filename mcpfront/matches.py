"""Grep replies turned into tool results, within the same size budget as every result.

The structured form groups lines by file (an absolute path said once per file, not once
per line); the text form is ripgrep's ``path:line:text`` (``path-line-text`` for
context, ``--`` between groups), with each indexed folder named once and paths relative
to it, as find_files shows them: a relative path is what read_file takes. Lines that do
not fit are left out from the end, and the answer says so.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

import msgspec
from kbindex.mcpfront.results import BUDGET, freshness_text
from kbindex.proto.messages import GrepLine, GrepReply

ROOM: Final = BUDGET - 500
"""For the lines; the rest is for the frame (counts, pattern, notes)."""

_json = msgspec.json.Encoder()


def root_of(path: str, roots: Sequence[str]) -> str | None:
    """The innermost of ``roots`` holding ``path``, or None."""
    best: str | None = None
    for root in roots:
        base = root.rstrip("/") + "/"
        if path.startswith(base) and (best is None or len(root) > len(best)):
            best = root
    return best


def _fit(lines: list[GrepLine], roots: Sequence[str]) -> int:
    """How many of ``lines`` fit the budget in both forms (at least one)."""
    used_json = used_text = 0
    path = root = None
    for n, g in enumerate(lines):
        cost_json = len(_json.encode(g.text)) + 30  # {"line":N,"text":…,"match":true}
        cost_text = len(g.path) + len(g.text) + 12
        if g.extracted:
            cost_json += 32  # ,"page":N,"extracted":true
            cost_text += 24
        if g.path != path:
            cost_json += len(_json.encode(g.path)) + 25  # {"path":…,"lines":[…]}
            here = root_of(g.path, roots)
            if here != root:
                cost_text += len(here or "") + 2
                root = here
            path = g.path
        if n and (used_json + cost_json > ROOM or used_text + cost_text > ROOM):
            return n
        used_json += cost_json
        used_text += cost_text
    return len(lines)


def _text_lines(lines: list[GrepLine], roots: Sequence[str], context: bool) -> list[str]:
    out: list[str] = []
    root: str | None = None
    previous: GrepLine | None = None
    for g in lines:
        here = root_of(g.path, roots)
        if here is not None and here != root:
            out.append(here.rstrip("/") + "/")
        root = here
        touches = previous is not None and (previous.path, previous.page, previous.line + 1) == (
            g.path,
            g.page,
            g.line,
        )
        if context and previous is not None and not touches:
            out.append("  --")
        shown = g.path[len(here.rstrip("/")) + 1 :] if here is not None else g.path
        mark = ":" if g.match else "-"
        out.append(f"  {shown}{mark}{g.line}{mark}{_extracted(g)}{g.text}")
        previous = g
    return out


def _files(lines: list[GrepLine]) -> list[dict[str, Any]]:
    files: list[dict[str, Any]] = []
    for g in lines:
        if not files or files[-1]["path"] != g.path:
            files.append({"path": g.path, "lines": []})
        line: dict[str, Any] = {"line": g.line, "text": g.text, "match": g.match}
        if g.extracted:
            line |= {"page": g.page, "extracted": True}
        files[-1]["lines"].append(line)
    return files


def _extracted(g: GrepLine) -> str:
    """Before a line of a document's extracted text (numbered within its page): not a
    line of the file's bytes."""
    if not g.extracted:
        return ""
    return f"[extracted, page {g.page}] " if g.page else "[extracted] "


def grep(
    reply: GrepReply,
    pattern: str,
    roots: Sequence[str],
    *,
    context: bool,
    limit: int,
    max_limit: int,
    notes: list[str],
) -> tuple[dict[str, Any], str]:
    kept = reply.lines[: _fit(reply.lines, roots)]
    if len(kept) < len(reply.lines):
        # Cut inside a group: context after its last match is all that can be lost, and
        # context before a match that was left out says nothing.
        while kept and not kept[-1].match:
            kept.pop()
    returned = sum(g.match for g in kept)
    omitted = sum(g.match for g in reply.lines) - returned
    truncated = reply.truncated or returned < reply.total
    if omitted:
        notes = [*notes, f"{omitted} more matching line(s) left out to keep this answer small."]
    structured = {
        "pattern": pattern,
        "files": _files(kept),
        "returned": returned,
        "total": reply.total,
        "truncated": truncated,
        "complete": reply.complete,
        "scanned_all": reply.scanned_all,
        "notes": notes,
    }
    at_least = "" if reply.complete else "at least "
    if not kept:
        text_lines = [
            f"No lines match {pattern!r} ({freshness_text(reply.freshness)}).",
            "The pattern is a regex (ripgrep syntax): escape . ( [ * + ? with \\ or set "
            "fixed_strings=true; try case_sensitive=false, or drop path_glob.",
        ]
    else:
        text_lines = [
            f"{at_least}{reply.total} matching line(s) in {at_least}{reply.files} file(s) "
            f"for {pattern!r}, showing {returned}:",
            *_text_lines(kept, roots, context),
        ]
        if truncated:
            more = "More matches exist: narrow path_glob or the pattern"
            if not omitted and limit < max_limit:
                more += f", or raise limit (max {max_limit})"
            text_lines.append(more + ".")
    if not reply.complete:
        text_lines.append("The search stopped at its deadline: there may be more matches.")
    if reply.scanned_all:
        text_lines.append(
            f"The pattern has no literal the index can use, so all {reply.candidates} files "
            "were read: a literal in the pattern makes it faster."
        )
    text_lines.extend(f"Note: {note}" for note in notes)
    return structured, "\n".join(text_lines)
