"""The MCP server object: tools, resources and subscriptions wired to one Backend.

Built on the SDK's low-level ``Server`` rather than ``MCPServer``: the tool schemas are
hand-written (schemas.py) and argument handling is deliberately lenient (arguments.py),
which the decorator API would replace with pydantic validation and its multi-line
error messages. Startup is lighter too: no per-tool pydantic model is built.

The tool list is asked for each time: the note tools are in it only while the daemon
says some root is writable (a reload can change that).
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import Any

import mcp_types as types
from kbindex.mcpfront import notes, resources, schemas
from kbindex.mcpfront.backend import Backend
from kbindex.mcpfront.subscriptions import Subscriptions
from kbindex.mcpfront.tools import Toolbox
from mcp.server import Server, ServerRequestContext

NAME = "kbindex"
INSTRUCTIONS = (
    "kbindex gives read access to the user's local knowledge base (notes, documents, code), "
    "kept indexed by the kbindexd daemon. Use search to find content, find_files to find "
    "files by name, read_file to read them; get_index_stats shows which folders are indexed "
    "and how fresh the index is. The index follows file changes by itself. When a folder "
    "is writable, the note tools (write_note, edit_note, ...) change notes there."
)


def _version() -> str:
    try:
        return version("kbindex")
    except PackageNotFoundError:
        return "0+unknown"


def build(backend: Backend) -> Server[Any]:
    toolbox = Toolbox(backend)
    subscriptions = Subscriptions(backend)
    input_schemas = {tool.name: tool.input_schema for tool in [*schemas.TOOLS, *notes.TOOLS]}
    lists = {
        writable: types.ListToolsResult(tools=toolbox.definitions(writable=writable))
        for writable in (False, True)
    }

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return lists[await toolbox.writable()]

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        async def progress(value: float, total: float | None, message: str | None) -> None:
            # A no-op unless the client sent a progressToken with this request.
            await ctx.session.report_progress(value, total, message)

        return await toolbox.call(params.name, params.arguments, progress)

    async def list_resources(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        return await resources.listing(backend)

    async def list_templates(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        return resources.templates()

    async def read_resource(
        ctx: ServerRequestContext[Any], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        return await resources.read(backend, str(params.uri))

    return Server(
        NAME,
        version=_version(),
        title="kbindex knowledge base",
        instructions=INSTRUCTIONS,
        get_tool_input_schema=input_schemas.get,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_list_resource_templates=list_templates,
        on_read_resource=read_resource,
        on_subscribe_resource=subscriptions.subscribe,
        on_unsubscribe_resource=subscriptions.unsubscribe,
        on_subscriptions_listen=subscriptions.listen,
    )
