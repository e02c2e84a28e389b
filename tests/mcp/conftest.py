"""MCP clients for the tests: the official SDK's own `Client`, over Streamable HTTP to a real
`baton serve` (both protocol eras) or over stdio through `baton mcp`."""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest
from mcp.client.session import IncomingMessage
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp_types import CallToolResult

from mcp import Client, StdioServerParameters
from tests.helpers import PACKET_INPUT

# The 2026-07-28 per-request era (what the SDK's client picks by default) and the handshake
# era most clients still speak (sessions, resources/subscribe).
ERAS = ("auto", "legacy")

Handler = Callable[[IncomingMessage], Awaitable[None]]


@asynccontextmanager
async def http_client(
    url: str, token: str, *, mode: str = "auto", on_message: Handler | None = None
) -> AsyncIterator[Client]:
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    async with (
        http,
        Client(
            streamable_http_client(f"{url}/mcp", http_client=http),
            mode=mode,
            message_handler=on_message,
            cache=None,
        ) as client,
    ):
        yield client


@asynccontextmanager
async def stdio_client(
    url: str, token: str, *, on_message: Handler | None = None, mode: str = "legacy"
) -> AsyncIterator[Client]:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "baton.cli", "mcp"],
        env={**os.environ, "BATON_URL": url, "BATON_TOKEN": token},
    )
    async with Client(params, mode=mode, message_handler=on_message, cache=None) as client:
        yield client


def ok(result: CallToolResult) -> dict[str, Any]:
    """The structured content of a successful call (the test fails on a tool error)."""
    assert not result.is_error, result.structured_content
    assert isinstance(result.structured_content, dict)
    return result.structured_content


async def handed_off(client: Client, requester: str, assignee: str) -> dict[str, Any]:
    """A task `requester` hands to `assignee` in project `web` through the `handOff` tool, as
    the tool answers it."""
    call = {"project": "web", "requester": requester, "assignee": assignee, "packet": PACKET_INPUT}
    task: dict[str, Any] = ok(await client.call_tool("handOff", call))["task"]
    return task


def refused(result: CallToolResult) -> dict[str, Any]:
    """The error of a refused call."""
    assert result.is_error, result.structured_content
    assert isinstance(result.structured_content, dict)
    return result.structured_content


@pytest.fixture(params=ERAS)
def era(request: pytest.FixtureRequest) -> str:
    return str(request.param)
