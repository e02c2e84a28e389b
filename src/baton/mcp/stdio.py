"""`baton mcp`: the MCP door over stdio, for clients that launch a local command.

It talks to a running Baton (`BATON_URL`, with the token in `BATON_TOKEN`) over Streamable
HTTP and serves the same tools and resources on its stdin and stdout, one to one: the list, the
calls, their results and refusals are the server's, so authorization, validation and events stay
in the one implementation there. Resource subscriptions are forwarded, and the server's
`notifications/resources/updated` relayed to the client. Logs go to stderr.
"""

from __future__ import annotations

import logging
import warnings
from typing import Any

import anyio
import mcp_types as types
from mcp.client.session import IncomingMessage
from mcp.client.streamable_http import streamable_http_client
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.session import ServerSession
from mcp.server.stdio import stdio_server
from mcp.shared._httpx_utils import create_mcp_http_client

from baton.mcp.server import INSTRUCTIONS
from mcp import Client

log = logging.getLogger("baton.mcp")


class Relay:
    """Forwards each request to the upstream client; relays resource updates back."""

    def __init__(self) -> None:
        self.upstream: Client | None = None
        # Who subscribed to what, to tell them when the server says it changed.
        self.subscribers: dict[str, set[ServerSession]] = {}

    @property
    def client(self) -> Client:
        assert self.upstream is not None, "the upstream client is connected first"
        return self.upstream

    async def on_upstream(self, message: IncomingMessage) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            uri = str(message.params.uri)
            for session in list(self.subscribers.get(uri, ())):
                await session.send_resource_updated(uri)
        elif isinstance(message, Exception):
            log.warning("baton mcp: the server's stream failed: %s", message)

    def server(self) -> Server[Any]:
        async def list_tools(
            ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
        ) -> types.ListToolsResult:
            return await self.client.list_tools(cursor=params.cursor if params else None)

        async def call_tool(
            ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
        ) -> types.CallToolResult:
            return await self.client.call_tool(params.name, params.arguments)

        async def list_resources(
            ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
        ) -> types.ListResourcesResult:
            return await self.client.list_resources(cursor=params.cursor if params else None)

        async def templates(
            ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
        ) -> types.ListResourceTemplatesResult:
            return await self.client.list_resource_templates(
                cursor=params.cursor if params else None
            )

        async def read(
            ctx: ServerRequestContext[Any, Any], params: types.ReadResourceRequestParams
        ) -> types.ReadResourceResult:
            return await self.client.read_resource(params.uri)

        async def subscribe(
            ctx: ServerRequestContext[Any, Any], params: types.SubscribeRequestParams
        ) -> types.EmptyResult:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # the handshake era's subscribe, on purpose
                await self.client.subscribe_resource(params.uri)
            self.subscribers.setdefault(params.uri, set()).add(ctx.session)
            return types.EmptyResult()

        async def unsubscribe(
            ctx: ServerRequestContext[Any, Any], params: types.UnsubscribeRequestParams
        ) -> types.EmptyResult:
            self.subscribers.pop(params.uri, None)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                await self.client.unsubscribe_resource(params.uri)
            return types.EmptyResult()

        return Server(
            "baton",
            title="Baton",
            instructions=INSTRUCTIONS,
            on_list_tools=list_tools,
            on_call_tool=call_tool,
            on_list_resources=list_resources,
            on_list_resource_templates=templates,
            on_read_resource=read,
            on_subscribe_resource=subscribe,
            on_unsubscribe_resource=unsubscribe,
        )


async def serve(url: str, token: str) -> None:
    """Serve stdin/stdout until the client closes them, through the Baton at `url`."""
    relay = Relay()
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    endpoint = url.rstrip("/") + "/mcp"
    # The handshake era upstream: one session whose stream carries resource updates.
    async with (
        http,
        Client(
            streamable_http_client(endpoint, http_client=http),
            mode="legacy",
            message_handler=relay.on_upstream,
            cache=None,
        ) as upstream,
    ):
        relay.upstream = upstream
        server = relay.server()
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())


def run(url: str, token: str) -> None:
    anyio.run(serve, url, token)
