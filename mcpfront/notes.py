"""The five note tools: what a model sees, the request each call becomes, the result.

Listed only when the daemon says some root is writable (its ``notes`` capability, see
server.py): a read-only install's tool list stays as small as it was. The hints are
honest: every one changes files (``readOnlyHint`` false); write, edit, move and delete
can replace or remove what is there (``destructiveHint``); append only adds. Write,
move and delete done twice change nothing more the second time (``idempotentHint``);
an edit or an append done twice may.

Refusals come back from the daemon with POSIX names (``EROFS``, ``ECONFLICT``, ...);
errors.py keeps that name at the front of the one sentence the model reads.
"""

from __future__ import annotations

from typing import Any, Final

import mcp_types as types
from kbindex.mcpfront.arguments import ArgumentError, Arguments
from kbindex.mcpfront.results import human_size
from kbindex.proto.messages import (
    AppendNote,
    DeleteNote,
    EditNote,
    MoveNote,
    NoteReply,
    WriteNote,
)

NoteRequest = WriteNote | EditNote | AppendNote | MoveNote | DeleteNote
Outcome = tuple[dict[str, Any], str]

_STR: Final = {"type": "string"}
_PATH: Final = {"type": "string", "minLength": 1}
"""A string that may not be empty (a path, the text an edit replaces)."""
_HASH: Final = {"type": ["string", "null"]}

OUTPUT: Final = {
    "type": "object",
    "properties": {
        "path": _STR,
        "hash": _STR,
        "lines": {"type": "integer"},
        "size": {"type": "integer"},
        "created": {"type": "boolean"},
        "notes": {"type": "array", "items": _STR},
    },
}
"""The same for every note tool: the note after the change (``hash`` "" once deleted)."""


def _hints(*, destructive: bool, idempotent: bool) -> types.ToolAnnotations:
    return types.ToolAnnotations(
        read_only_hint=False,
        destructive_hint=destructive,
        idempotent_hint=idempotent,
        open_world_hint=False,
    )


def _tool(
    name: str, title: str, description: str, properties: dict[str, Any], required: list[str]
) -> types.Tool:
    return types.Tool(
        name=name,
        title=title,
        description=description,
        input_schema={"type": "object", "properties": properties, "required": required},
        output_schema=OUTPUT,
        annotations=_hints(
            destructive=name != "append_note",
            idempotent=name in ("write_note", "move_note", "delete_note"),
        ),
    )


WRITE: Final = _tool(
    "write_note",
    "Write a note",
    "Create or replace a text note in a writable folder (get_index_stats marks them); "
    "path relative to it. Searchable once this returns. Returns the note's hash: pass it "
    'as if_match to refuse if the note changed meanwhile ("" = must not exist). title '
    "heads a Markdown note that has no # heading.",
    {"path": _PATH, "content": _STR, "if_match": _HASH, "title": _HASH},
    ["path", "content"],
)
EDIT: Final = _tool(
    "edit_note",
    "Edit a note",
    "Replace the one occurrence of old_text (copied exactly) with new_text in a note; "
    "none or several is an error saying where. if_match: the hash from your last write.",
    {"path": _PATH, "old_text": _PATH, "new_text": _STR, "if_match": _HASH},
    ["path", "old_text", "new_text"],
)
APPEND: Final = _tool(
    "append_note",
    "Append to a note",
    "Add text at the end of a note, on a line of its own; creates the note (a log, a "
    "journal, a list).",
    {"path": _PATH, "text": _STR},
    ["path", "text"],
)
MOVE: Final = _tool(
    "move_note",
    "Move a note",
    "Move or rename a note within the writable folders; an existing dst is replaced only "
    "with overwrite=true.",
    {"src": _PATH, "dst": _PATH, "overwrite": {"type": "boolean", "default": False}},
    ["src", "dst"],
)
DELETE: Final = _tool(
    "delete_note",
    "Delete a note",
    "Delete a note from a writable folder; with if_match, only if it still has that hash.",
    {"path": _PATH, "if_match": _HASH},
    ["path"],
)

TOOLS: Final = [WRITE, EDIT, APPEND, MOVE, DELETE]
NAMES: Final = frozenset(t.name for t in TOOLS)
ARGUMENTS: Final = {t.name: frozenset(t.input_schema["properties"]) for t in TOOLS}


def request(name: str, args: Arguments) -> NoteRequest:
    """The daemon request for a call of the note tool ``name``."""
    match name:
        case "write_note":
            return WriteNote(
                path=_path(args, "path"),
                content=_required(args, "content"),
                if_match=_if_match(args),
                title=args.string("title"),
            )
        case "edit_note":
            old_text = _required(args, "old_text")
            if not old_text:
                raise ArgumentError("old_text is empty: send the exact text to replace.")
            return EditNote(
                path=_path(args, "path"),
                old_text=old_text,
                new_text=_required(args, "new_text"),
                if_match=_if_match(args),
            )
        case "append_note":
            return AppendNote(path=_path(args, "path"), text=_required(args, "text"))
        case "move_note":
            return MoveNote(
                src=_path(args, "src"),
                dst=_path(args, "dst"),
                overwrite=args.boolean("overwrite", default=False),
            )
        case "delete_note":
            return DeleteNote(path=_path(args, "path"), if_match=_if_match(args))
    raise AssertionError(f"not a note tool: {name}")


def _path(args: Arguments, name: str) -> str:
    path = args.string(name, required=True)
    assert path is not None
    return path


def _required(args: Arguments, name: str) -> str:
    value = args.text(name, required=True)
    assert value is not None
    return value


def _if_match(args: Arguments) -> str | None:
    """Stripped, but "" kept: it means "the note must not exist yet"."""
    value = args.text("if_match")
    return None if value is None else value.strip()


def result(request: NoteRequest, reply: NoteReply, notes: list[str]) -> Outcome:
    structured = {
        "path": reply.path,
        "hash": reply.hash,
        "lines": reply.lines,
        "size": reply.size,
        "created": reply.created,
        "notes": list(notes),
    }
    facts = f"{reply.lines} line(s), {human_size(reply.size)}, hash {reply.hash}"
    match request:
        case DeleteNote():
            text = f"Deleted {reply.path}."
        case MoveNote():
            text = f"Moved {request.src} to {reply.path} ({facts})."
        case AppendNote():
            made = " (created)" if reply.created else ""
            text = f"Appended to {reply.path}{made}: {facts}; searchable now."
        case EditNote():
            text = f"Edited {reply.path}: {facts}; searchable now."
        case WriteNote():
            verb = "Created" if reply.created else "Replaced"
            text = f"{verb} {reply.path}: {facts}; searchable now."
    lines = [text, *(f"Note: {n}" for n in notes)]
    return structured, "\n".join(lines)
