"""Tool definitions as a model sees them: descriptions, input and output JSON Schemas, hints.

Descriptions are written for a model choosing a tool: what it is for, when to use it,
what comes back and what to call next. Input bounds mirror what the front end accepts
(it is a little more lenient, see arguments.py). Output schemas are validated by clients
against the structured content, so they are kept exactly in step with results.py.
"""

from __future__ import annotations

from typing import Any, Final

import mcp_types as types
from kbindex.proto.messages import MAX_LIMIT, MIN_LIMIT

_NULLABLE_STR: Final = {"type": ["string", "null"]}
_TIME: Final = {"type": ["string", "null"], "description": "ISO 8601 UTC time, or null."}
_NOTES: Final = {
    "type": "array",
    "items": {"type": "string"},
    "description": "Remarks about adjusted or ignored arguments.",
}


def _object(properties: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": required if required is not None else list(properties),
    }


_FRESHNESS: Final = _object(
    {
        "last_scan": _TIME,
        "scanning": {"type": "boolean"},
        "pending_changes": {"type": "integer", "description": "File changes not yet indexed."},
    }
)

_FILE_FIELDS: Final[dict[str, Any]] = {
    "path": {"type": "string", "description": "Absolute path; pass it to read_file."},
    "relpath": {"type": "string", "description": "Path relative to its indexed folder."},
    "root": {"type": "string", "description": "The indexed folder the file is in."},
    "size": {"type": "integer", "description": "Bytes."},
    "last_modified": _TIME,
    "uri": {"type": "string", "description": "Resource URI of the file (kbindex://file/...)."},
}

_HIT: Final = _object(
    {
        **_FILE_FIELDS,
        "title": {"type": "string", "description": "Document title, if it has one."},
        "line": {"type": "integer", "description": "1-based line of the best match."},
        "snippet": {"type": "string", "description": "Matching text, each match between ⟦ and ⟧."},
        "score": {"type": "number", "description": "Relevance; higher is better."},
    }
)

SEARCH: Final = types.Tool(
    name="search",
    title="Search the knowledge base",
    description=(
        "Full-text search of the user's local files (notes, documentation, code) indexed "
        "by kbindex. Use it whenever the answer may be in the user's own documents. "
        "Plain words match in any order (every word is required for short queries; longer "
        "natural-language questions rank files by how many words they contain); "
        '"quoted phrase" matches exactly, -word excludes, prefix* matches word starts. '
        "Returns the best files with the line of the best match and a snippet. Narrow with "
        "path_glob: a folder ('projects/') or a glob ('*.md', 'docs/*.py'), relative to the "
        "indexed folders. Then read around a hit with read_file(path, start_line=line)."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "query": {
                "type": "string",
                "minLength": 1,
                "maxLength": 2000,
                "description": 'Words, "phrases", -exclusions or prefix* terms.',
            },
            "limit": {
                "type": "integer",
                "minimum": MIN_LIMIT,
                "maximum": MAX_LIMIT,
                "default": 10,
                "description": "Maximum number of files to return.",
            },
            "path_glob": {
                **_NULLABLE_STR,
                "description": "Only files under this folder or matching this glob.",
            },
        },
        "required": ["query"],
    },
    output_schema=_object(
        {
            "query": {"type": "string"},
            "results": {"type": "array", "items": _HIT},
            "returned": {"type": "integer"},
            "total_hits": {"type": "integer", "description": "Matching files in the index."},
            "truncated": {"type": "boolean", "description": "More matches than returned."},
            "mode": {"type": "string", "description": "How the query was matched (all/any)."},
            "freshness": _FRESHNESS,
            "notes": _NOTES,
        }
    ),
    annotations=types.ToolAnnotations(
        title="Search the knowledge base",
        read_only_hint=True,
        destructive_hint=False,
        idempotent_hint=True,
        open_world_hint=False,
    ),
)

_ROOT: Final = _object(
    {
        "path": {"type": "string"},
        "state": {"type": "string", "description": "ok, missing, unreadable, live, polling..."},
        "files": {"type": "integer"},
        "detail": {"type": "string"},
        "last_scan": _TIME,
    }
)

STATS: Final = types.Tool(
    name="get_index_stats",
    title="Index status",
    description=(
        "Status of the kbindex index: which folders are indexed and their state, how many "
        "files, index size, when it was last updated, whether a scan is running, and recent "
        "errors. Use it to check coverage or freshness before trusting a search that found "
        "nothing, or to find the indexed folders."
    ),
    input_schema={"type": "object", "properties": {}},
    output_schema=_object(
        {
            "indexed_files": {"type": "integer"},
            "total_documents": {"type": "integer"},
            "index_size_mb": {"type": "number"},
            "last_scan": _TIME,
            "last_scan_seconds": {"type": ["number", "null"]},
            "scanning": {"type": "boolean"},
            "scan_progress": {
                "anyOf": [
                    {"type": "null"},
                    _object(
                        {
                            "phase": {"type": "string"},
                            "done": {"type": "integer"},
                            "total": {"type": "integer"},
                        }
                    ),
                ]
            },
            "errors_encountered": {"type": "integer"},
            "recent_errors": {
                "type": "array",
                "items": _object({"path": {"type": "string"}, "reason": {"type": "string"}}),
            },
            "skipped": {
                "type": "object",
                "additionalProperties": {"type": "integer"},
                "description": "Files seen but not indexed, by reason.",
            },
            "roots": {"type": "array", "items": _ROOT},
            "daemon": _object(
                {
                    "version": {"type": "string"},
                    "pid": {"type": "integer"},
                    "uptime_seconds": {"type": "number"},
                    "socket": {"type": "string"},
                }
            ),
            "index_recovered": {"type": "string"},
            "index_error": {"type": "string"},
        },
        required=["indexed_files", "total_documents", "index_size_mb", "roots"],
    ),
    annotations=types.ToolAnnotations(
        title="Index status",
        read_only_hint=True,
        destructive_hint=False,
        idempotent_hint=True,
        open_world_hint=False,
    ),
)

REFRESH: Final = types.Tool(
    name="refresh_index",
    title="Refresh the index",
    description=(
        "Bring the index up to date with the files on disk now, and wait until it is done. "
        "The index normally follows file changes by itself within seconds; call this only "
        "when a file was just written and search does not show it yet, or the user asks. "
        "Give filepath (a file or folder) to re-check only that, which is fast; without it "
        "every indexed folder is re-checked."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "filepath": {
                **_NULLABLE_STR,
                "description": "A file or folder inside the indexed folders; omit for all.",
            }
        },
    },
    output_schema=_object(
        {
            "success": {"type": "boolean", "description": "The refresh ran to completion."},
            "scope": {"type": "string"},
            "files_processed": {"type": "integer"},
            "files_changed": {"type": "integer"},
            "files_removed": {"type": "integer"},
            "errors": {"type": "integer", "description": "Files that could not be indexed."},
            "seconds": {"type": "number"},
        }
    ),
    # It changes only kbindex's own index, never a user file, and running it twice
    # is harmless: not read-only, but neither destructive nor open-world.
    annotations=types.ToolAnnotations(
        title="Refresh the index",
        read_only_hint=False,
        destructive_hint=False,
        idempotent_hint=True,
        open_world_hint=False,
    ),
)

READ_FILE: Final = types.Tool(
    name="read_file",
    title="Read an indexed file",
    description=(
        "Read lines of a file from the indexed folders, with line numbers. Use after search "
        "or find_files to see a hit in context: start_line a few lines before the hit's "
        "line. Long files come back in pieces of about 12 KB: when the answer is truncated, "
        "call again with start_line=next_start_line. Paths may be absolute or relative to "
        "an indexed folder; files outside the indexed folders cannot be read."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "path": {"type": "string", "minLength": 1, "description": "File path."},
            "start_line": {
                "type": ["integer", "null"],
                "minimum": 1,
                "description": "First line to read (1-based); default 1.",
            },
            "end_line": {
                "type": ["integer", "null"],
                "minimum": 1,
                "description": "Last line to read, inclusive; default the end of the file.",
            },
        },
        "required": ["path"],
    },
    output_schema=_object(
        {
            "path": {"type": "string"},
            "start_line": {"type": "integer"},
            "end_line": {"type": "integer"},
            "total_lines": {"type": "integer"},
            "truncated": {"type": "boolean"},
            "next_start_line": {"type": ["integer", "null"]},
            "text": {"type": "string", "description": "The lines, without numbers."},
            "uri": {"type": "string"},
            "notes": _NOTES,
        }
    ),
    annotations=types.ToolAnnotations(
        title="Read an indexed file",
        read_only_hint=True,
        destructive_hint=False,
        idempotent_hint=True,
        open_world_hint=False,
    ),
)

FIND_FILES: Final = types.Tool(
    name="find_files",
    title="Find indexed files by name",
    description=(
        "List indexed files whose path matches a glob, with size and modification time. "
        "Use it to find a file by name or to see what a folder holds, when you know the "
        "name rather than the content (for content, use search). Globs are relative to "
        "the indexed folders and '*' also crosses '/': '*.md', 'notes/*', '*readme*'; a "
        "folder path without wildcards lists that folder."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "glob": {
                "type": "string",
                "default": "*",
                "description": "Glob or folder, relative to the indexed folders or absolute.",
            },
            "limit": {
                "type": "integer",
                "minimum": 1,
                "maximum": 500,
                "default": 100,
                "description": "Maximum number of files to list.",
            },
        },
    },
    output_schema=_object(
        {
            "glob": {"type": "string"},
            "files": {"type": "array", "items": _object(dict(_FILE_FIELDS))},
            "returned": {"type": "integer"},
            "total": {"type": "integer", "description": "Matching files in the index."},
            "truncated": {"type": "boolean"},
            "notes": _NOTES,
        }
    ),
    annotations=types.ToolAnnotations(
        title="Find indexed files by name",
        read_only_hint=True,
        destructive_hint=False,
        idempotent_hint=True,
        open_world_hint=False,
    ),
)

TOOLS: Final = [SEARCH, STATS, REFRESH, READ_FILE, FIND_FILES]
