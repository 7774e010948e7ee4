"""Tool definitions as a model sees them: descriptions, input and output JSON Schemas, hints.

Every client sends tools/list to the model on every turn, so it has a budget (under 7,000
characters as sent, compact JSON, and as the SDK's own client returns it; 10,800 with the
note tools: tests/test_mcp_budget.py). Descriptions say what a tool is for, when to use
it and what to call next; output schemas give each field's type (clients validate the
structured content against them, so they are kept exactly in step with results.py and
matches.py) and a description only where the name does not say it. Input bounds mirror
what the front end accepts (it is a little more lenient, see arguments.py).
"""

from __future__ import annotations

from typing import Any, Final

import mcp_types as types
from kbindex.proto.messages import (
    MAX_CONTEXT,
    MAX_GREP_LIMIT,
    MAX_LIMIT,
    MAX_PATTERN_CHARS,
    MIN_LIMIT,
)

SEARCH_MODES: Final = ("auto", "words", "semantic")
"""auto: words and meaning fused where the daemon has meaning, else words."""
FIND_LIMIT: Final = 50
GREP_LIMIT: Final = 100
MAX_FIND_LIMIT: Final = 200

_STR: Final = {"type": "string"}
_INT: Final = {"type": "integer"}
_NUM: Final = {"type": "number"}
_BOOL: Final = {"type": "boolean"}
_TIME: Final = {"type": ["string", "null"]}
"""ISO 8601 UTC time, or null; the shape of every time in the structured results."""
_STRINGS: Final = {"type": "array", "items": _STR}


def _object(properties: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": properties}


_WHERE: Final = {
    "type": "string",
    "description": "kind:doc tag:x k=v modified:7d scope:ROOT prefer:recent",
}
"""search's, grep's and find_files' ``where`` (``where.py``)."""


def _list(item: dict[str, Any]) -> dict[str, Any]:
    return {"type": "array", "items": _object(item)}


def _hints(*, read_only: bool = True) -> types.ToolAnnotations:
    # refresh_index changes only kbindex's own index, never a user file, and running it
    # twice is harmless: not read-only, but neither destructive nor open-world. The spec
    # gives idempotentHint a meaning only for tools that are not read-only: the others
    # leave it out (it cost every tools/list 22 characters a tool).
    return types.ToolAnnotations(
        read_only_hint=read_only,
        destructive_hint=False,
        idempotent_hint=None if read_only else True,
        open_world_hint=False,
    )


SEARCH: Final = types.Tool(
    name="search",
    title="Search files",
    description=(
        "Ranked search of the user's files (notes, docs, code): words in any order, "
        '"exact phrase", -exclude, prefix*; meaning too if on. '
        "Each result: path, line, snippet (matches in ⟦ ⟧); then "
        "read_file(path, start_line=line-5)."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "query": {"type": "string", "minLength": 1, "maxLength": 2000},
            "limit": {"type": "integer", "minimum": MIN_LIMIT, "maximum": MAX_LIMIT, "default": 10},
            "path_glob": {
                "type": ["string", "null"],
                "description": "A folder ('notes/') or glob ('docs/*.md').",
            },
            "mode": {"enum": list(SEARCH_MODES)},
            "where": _WHERE,
        },
        "required": ["query"],
    },
    output_schema=_object(
        {
            "query": _STR,
            "results": _list(
                {
                    "path": _STR,
                    "relpath": _STR,
                    "root": _STR,
                    "title": _STR,
                    "line": _INT,
                    "snippet": _STR,
                    "score": _NUM,
                    "last_modified": _TIME,
                    "size": _INT,
                    "uri": _STR,
                    "machine": _STR,
                }
            ),
            "returned": _INT,
            "total_hits": _INT,
            "truncated": _BOOL,
            "mode": _STR,
            "freshness": _object({"last_scan": _TIME, "scanning": _BOOL, "pending_changes": _INT}),
            "notes": _STRINGS,
        }
    ),
    annotations=_hints(),
)

GREP: Final = types.Tool(
    name="grep",
    title="Grep files",
    description=(
        "Lines matching a regex (ripgrep syntax) or a literal in the indexed files, "
        "as rg finds them: path:line:text, paths relative to the folder above "
        "them. For topics use search."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "pattern": {"type": "string", "minLength": 1, "maxLength": MAX_PATTERN_CHARS},
            "fixed_strings": {"type": "boolean", "default": False},
            "case_sensitive": {"type": "boolean", "default": True},
            "word": {"type": "boolean", "default": False},
            "path_glob": {"type": ["string", "null"]},
            "where": _STR,
            "context": {"type": "integer", "minimum": 0, "maximum": MAX_CONTEXT, "default": 0},
            "limit": {
                "type": "integer",
                "minimum": 1,
                "maximum": MAX_GREP_LIMIT,
                "default": GREP_LIMIT,
            },
        },
        "required": ["pattern"],
    },
    output_schema=_object(
        {
            "pattern": _STR,
            "files": _list(
                {"path": _STR, "lines": _list({"line": _INT, "text": _STR, "match": _BOOL})}
            ),
            "returned": _INT,
            "total": _INT,
            "truncated": _BOOL,
            "complete": _BOOL,
            "scanned_all": _BOOL,
            "notes": _STRINGS,
        }
    ),
    annotations=_hints(),
)
GREP_ARGUMENTS: Final = frozenset(GREP.input_schema["properties"])

STATS: Final = types.Tool(
    name="get_index_stats",
    title="Index status",
    description=(
        "Indexed folders (state, files, writable), last scan, errors: check before "
        "trusting an empty result."
    ),
    input_schema={"type": "object", "properties": {}},
    output_schema=_object(
        {
            "indexed_files": _INT,
            "total_documents": _INT,
            "index_size_mb": _NUM,
            "last_scan": _TIME,
            "last_scan_seconds": {"type": ["number", "null"]},
            "scanning": _BOOL,
            "scan_progress": {
                "type": ["object", "null"],
                "properties": {"phase": _STR, "done": _INT, "total": _INT},
            },
            "watch": _STR,
            "pending_changes": _INT,
            "last_event": _TIME,
            "errors_encountered": _INT,
            "recent_errors": _list({"path": _STR, "reason": _STR}),
            "skipped": {"type": "object", "additionalProperties": _INT},
            "roots": _list(
                {
                    "path": _STR,
                    "state": _STR,
                    "files": _INT,
                    "detail": _STR,
                    "last_scan": _TIME,
                    "warning": _STR,
                    "writable": _BOOL,
                }
            ),
            "daemon": _object(
                {"version": _STR, "pid": _INT, "uptime_seconds": _NUM, "socket": _STR}
            ),
            "index_recovered": _STR,
            "index_error": _STR,
            "config_error": _STR,
            "unconfigured": _BOOL,
        }
    ),
    annotations=_hints(),
)

REFRESH: Final = types.Tool(
    name="refresh_index",
    title="Refresh the index",
    description=(
        "Re-index now and wait. Changes are indexed within seconds anyway: only for a "
        "file just written and not found; filepath narrows it."
    ),
    input_schema={"type": "object", "properties": {"filepath": {"type": ["string", "null"]}}},
    output_schema=_object(
        {
            "success": _BOOL,
            "scope": _STR,
            "files_processed": _INT,
            "files_changed": _INT,
            "files_removed": _INT,
            "errors": _INT,
            "seconds": _NUM,
        }
    ),
    annotations=_hints(read_only=False),
)

READ_FILE: Final = types.Tool(
    name="read_file",
    title="Read a file",
    description=(
        "Numbered lines of an indexed file (absolute or relative to an indexed "
        "folder), ~12 KB a call, then start_line=next_start_line (PDF: "
        "page=next_page)."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "path": {"type": "string", "minLength": 1},
            "start_line": {"type": ["integer", "null"], "minimum": 1},
            "end_line": {"type": ["integer", "null"], "minimum": 1},
            "page": _INT,  # a document's (a PDF...): start_line and end_line then unset
        },
        "required": ["path"],
    },
    output_schema=_object(
        {
            "path": _STR,
            "start_line": _INT,
            "end_line": _INT,
            "total_lines": _INT,
            "truncated": _BOOL,
            "next_start_line": {"type": ["integer", "null"]},
            "text": _STR,
            "uri": _STR,
            "notes": _STRINGS,
        }
    ),
    annotations=_hints(),
)

FIND_FILES: Final = types.Tool(
    name="find_files",
    title="Find files by name",
    description=(
        "Indexed files under a folder or matching a glob, relative to an indexed folder "
        "or absolute; '*' crosses '/': 'notes/', '*.md'."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "glob": {"type": "string", "default": "*"},
            "where": _STR,
            "limit": {
                "type": "integer",
                "minimum": 1,
                "maximum": MAX_FIND_LIMIT,
                "default": FIND_LIMIT,
            },
        },
    },
    output_schema=_object(
        {
            "glob": _STR,
            "files": _list({"path": _STR, "size": _INT, "last_modified": _TIME}),
            "returned": _INT,
            "total": _INT,
            "truncated": _BOOL,
            "notes": _STRINGS,
        }
    ),
    annotations=_hints(),
)

TOOLS: Final = [SEARCH, GREP, STATS, REFRESH, READ_FILE, FIND_FILES]
