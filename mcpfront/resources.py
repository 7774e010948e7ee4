"""Indexed files as MCP resources: ``kbindex://file/{+path}``.

The URI carries the absolute path without its leading slash, percent-encoded
(``/home/me/notes/a b.md`` -> ``kbindex://file/home/me/notes/a%20b.md``), so it
round-trips through any client. Reading goes through the daemon's ReadFile, which
enforces "inside the roots"; the front end never opens a file itself.

resources/list lists the notes of the writable roots only, the first LISTED_NOTES by
path: those are the knowledge base's own notes, few and what an agent writes and reads
again (and may subscribe to). The other roots are left out on purpose: an index can
hold a hundred thousand files and the protocol offers no filter, so they are found with
the search and find_files tools (search results carry each file's URI) and read
through the template, like any note past the first LISTED_NOTES.
"""

from __future__ import annotations

import functools
import json
import logging
import mimetypes
import posixpath
from typing import Any, Final
from urllib.parse import unquote

import mcp_types as types
from kbindex.mcpfront.backend import Backend
from kbindex.mcpfront.errors import describe
from kbindex.mcpfront.results import URI_PREFIX, file_uri, read_file
from kbindex.proto.client import DaemonError
from kbindex.proto.messages import ErrorCode
from kbindex.proto.report import iso
from mcp.shared.exceptions import MCPError

log = logging.getLogger(__name__)

LISTED_NOTES: Final = 100
"""Notes listed by resources/list at most (about 150 characters each)."""
RESOURCE_NOT_FOUND: Final = -32002
"""The MCP spec's error code for an unknown resource."""

TEMPLATE: Final = types.ResourceTemplate(
    name="indexed-file",
    title="Indexed file",
    uri_template=URI_PREFIX + "{+path}",
    description=(
        "A file from the kbindex index, by absolute path without the leading slash "
        "(kbindex://file/home/me/notes/todo.md). search results carry each file's URI."
    ),
)


@functools.cache
def _builtin_types() -> mimetypes.MimeTypes:
    # Built on first use: constructing it reads the system tables, a few ms of startup.
    return mimetypes.MimeTypes(filenames=())


# The platform tables (/etc/mime.types) differ between machines and map source files
# oddly (.ts is a Qt translation, .rs an XML format): the table below comes first, then
# Python's built-in table (never the platform's), keeping only textual answers.
_TEXT_TYPES: Final = {
    ".md": "text/markdown",
    ".markdown": "text/markdown",
    ".rst": "text/x-rst",
    ".org": "text/x-org",
    ".adoc": "text/x-asciidoc",
    ".tex": "text/x-tex",
    ".py": "text/x-python",
    ".pyi": "text/x-python",
    ".ts": "text/x-typescript",
    ".tsx": "text/x-typescript",
    ".jsx": "text/javascript",
    ".rs": "text/x-rust",
    ".go": "text/x-go",
    ".java": "text/x-java",
    ".kt": "text/x-kotlin",
    ".rb": "text/x-ruby",
    ".sh": "text/x-sh",
    ".toml": "application/toml",
    ".yaml": "application/yaml",
    ".yml": "application/yaml",
    ".ini": "text/plain",
    ".cfg": "text/plain",
    ".log": "text/plain",
}
_TEXTUAL_APPLICATION: Final = frozenset(
    {
        "application/json",
        "application/xml",
        "application/javascript",
        "application/toml",
        "application/yaml",
        "application/x-sh",
        "application/sql",
    }
)


def mime_type(path: str) -> str:
    """A MIME type for an indexed (always textual) file; ``text/plain`` when unsure."""
    suffix = posixpath.splitext(path)[1].lower()
    known = _TEXT_TYPES.get(suffix)
    if known is not None:
        return known
    guessed, _ = _builtin_types().guess_type(path, strict=False)
    if guessed and (guessed.startswith("text/") or guessed in _TEXTUAL_APPLICATION):
        return guessed
    return "text/plain"


def path_of(uri: str) -> str:
    """The absolute path named by a ``kbindex://file/...`` URI; raises MCPError otherwise."""
    if not uri.startswith(URI_PREFIX):
        raise MCPError(
            code=RESOURCE_NOT_FOUND,
            message=f"Unknown resource {uri!r}; kbindex serves {URI_PREFIX}{{path}} only.",
        )
    relative = unquote(uri[len(URI_PREFIX) :]).lstrip("/")
    if not relative or "\x00" in relative:
        raise MCPError(code=RESOURCE_NOT_FOUND, message=f"No file path in resource {uri!r}.")
    # Normalised so ``..`` cannot climb: the daemon checks the roots on the result anyway.
    return posixpath.normpath("/" + relative)


async def read(backend: Backend, uri: str) -> types.ReadResourceResult:
    path = path_of(uri)
    try:
        reply = await backend.read_file(path)
    except DaemonError as exc:
        code = (
            RESOURCE_NOT_FOUND
            if exc.code in (ErrorCode.NOT_FOUND, ErrorCode.OUTSIDE_ROOTS)
            else types.INTERNAL_ERROR
        )
        raise MCPError(code=code, message=describe(exc, subject=path)) from None
    except Exception as exc:
        raise MCPError(code=types.INTERNAL_ERROR, message=describe(exc, subject=path)) from None
    # The same piece the read_file tool returns (results.BUDGET), so a resource costs an
    # agent no more than the tool; the text ends with the exact call that reads on.
    part, _ = read_file(reply, [])
    text = part["text"]
    if part["truncated"]:
        text += "\n" + continuation(part)
    meta = {
        "total_lines": reply.total_lines,
        "end_line": part["end_line"],
        "truncated": part["truncated"],
        "next_start_line": part["next_start_line"],
    }
    return types.ReadResourceResult(
        contents=[
            types.TextResourceContents(
                uri=uri, mime_type=mime_type(reply.path), text=text, _meta=meta
            )
        ],
        # Files change under the index: a client must not serve a cached copy.
        ttl_ms=0,
    )


def continuation(part: dict[str, Any]) -> str:
    """The line that ends a truncated resource read: where it stopped and how to go on."""
    first, last = part["start_line"], part["end_line"]
    shown = f"lines {first}-{last}" if last >= first else f"line {first} is too long to show"
    head = f"[kbindex: truncated, {shown} of {part['total_lines']}"
    nxt = part["next_start_line"]
    if nxt is None:
        return head + ".]"
    path = json.dumps(part["path"], ensure_ascii=False)
    return f"{head}; read on with read_file(path={path}, start_line={nxt}).]"


def templates() -> types.ListResourceTemplatesResult:
    return types.ListResourceTemplatesResult(resource_templates=[TEMPLATE])


async def listing(backend: Backend) -> types.ListResourcesResult:
    """The notes of the writable roots, in path order, at most LISTED_NOTES; none while
    the daemon cannot be asked (as the tools are listed without it)."""
    notes: list[types.Resource] = []
    try:
        roots = [r.path for r in (await backend.status()).roots if r.writable]
        for root in roots:
            prefix = root.rstrip("/") + "/"
            reply = await backend.find_files(prefix, LISTED_NOTES - len(notes))
            notes.extend(
                types.Resource(
                    uri=file_uri(f.path),
                    name=f.relpath,
                    mime_type=mime_type(f.path),
                    size=f.size,
                    annotations=types.Annotations(last_modified=iso(f.last_modified)),
                )
                # A root whose name holds glob characters is matched as a glob: keep
                # only what is really under it.
                for f in reply.files
                if f.path.startswith(prefix)
            )
            if len(notes) >= LISTED_NOTES:
                break
    except Exception as exc:
        log.info("could not list the notes: %s", exc)
        return types.ListResourcesResult(resources=[], ttl_ms=0)
    return types.ListResourcesResult(resources=notes, ttl_ms=0)
