"""MCP clients for the tests: the official SDK's own `Client`, over Streamable HTTP to a real
`baton serve` (both protocol eras) or over stdio through `baton mcp`."""

from __future__ import annotations

import asyncio
import os
import re
import secrets
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp.client.session import IncomingMessage
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp_types import CallToolResult

from baton.store.db import Database
from mcp import Client, StdioServerParameters
from tests.conftest import LiveServer, start_server, stop_server
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


# --- a server with small MCP bounds, and MCP spoken by hand --------------------------------

# The bounds of `bounded_server`: a process cap a test can reach; revocation noticed in 1 s.
BOUNDS = {
    "BATON_MCP_MAX_SESSIONS": "30",
    "BATON_MCP_MAX_SESSIONS_PER_TOKEN": "20",
    "BATON_MCP_MAX_SUBSCRIPTIONS": "100",
    "BATON_TOKEN_CHECK_SECONDS": "1",
}
HANDSHAKE = "2025-06-18"  # a handshake-era protocol version
ASGI_INCOMPLETE = "ASGI callable returned without"  # uvicorn's words for a response cut short


@dataclass
class BoundedServer(LiveServer):
    metrics_token: str = ""
    log: Path = Path()  # what the server logs (warnings and up)

    async def gauge(self, name: str) -> float:
        async with httpx.AsyncClient(base_url=self.url) as client:
            response = await client.get(
                "/metrics", headers={"Authorization": f"Bearer {self.metrics_token}"}
            )
        found = re.search(rf"^{name} (\S+)$", response.text, re.M)
        assert found is not None, response.text[:500]
        return float(found.group(1))

    async def gauge_becomes(self, name: str, value: float, within: float = 15.0) -> None:
        deadline = time.monotonic() + within
        while (now := await self.gauge(name)) != value:
            assert time.monotonic() < deadline, f"{name} is {now}, not {value}"
            await asyncio.sleep(0.05)


def _bounded(
    database_url: str, db: Database, log: Path, **env: str
) -> tuple[BoundedServer, subprocess.Popen[bytes]]:
    metrics_token = secrets.token_urlsafe(16)
    url, process = start_server(
        {
            "BATON_DATABASE_URL": database_url,
            "BATON_METRICS_TOKEN": metrics_token,
            **BOUNDS,
            **env,
        },
        log,
    )
    return BoundedServer(url, db, process, metrics_token, log), process


@pytest.fixture(scope="session")
def bounded_server(
    database_url: str, db: Database, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[BoundedServer]:
    """`baton serve` with the MCP bounds of `BOUNDS`; /metrics with `metrics_token`."""
    server, process = _bounded(database_url, db, tmp_path_factory.mktemp("mcp") / "serve.log")
    yield server
    stop_server(process)


@pytest.fixture(scope="session")
def idling_server(
    database_url: str, db: Database, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[BoundedServer]:
    """As `bounded_server`, with sessions ended after 1 s without a request."""
    log = tmp_path_factory.mktemp("mcp-idle") / "serve.log"
    server, process = _bounded(database_url, db, log, BATON_MCP_SESSION_IDLE_SECONDS="1")
    yield server
    stop_server(process)


def mcp_headers(token: str, session: str | None = None) -> dict[str, str]:
    headers = {
        "Authorization": f"Bearer {token}",
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
    }
    if session is not None:
        headers |= {"Mcp-Session-Id": session, "MCP-Protocol-Version": HANDSHAKE}
    return headers


INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {
        "protocolVersion": HANDSHAKE,
        "capabilities": {},
        "clientInfo": {"name": "tests", "version": "0"},
    },
}


async def initialize(client: httpx.AsyncClient, token: str) -> httpx.Response:
    """A handshake `initialize` with no session id, spoken by hand."""
    return await client.post("/mcp", json=INITIALIZE, headers=mcp_headers(token))


async def open_session(client: httpx.AsyncClient, token: str) -> str:
    """A session of `token`, initialized."""
    response = await initialize(client, token)
    assert response.status_code == 200, response.text
    session = response.headers["mcp-session-id"]
    notified = await client.post(
        "/mcp",
        json={"jsonrpc": "2.0", "method": "notifications/initialized"},
        headers=mcp_headers(token, session),
    )
    assert notified.status_code == 202, notified.text
    return session


async def call(
    client: httpx.AsyncClient, token: str, session: str, method: str, **params: Any
) -> httpx.Response:
    """One request on a session."""
    body = {"jsonrpc": "2.0", "id": secrets.randbelow(1 << 30), "method": method}
    if params:
        body["params"] = params
    return await client.post("/mcp", json=body, headers=mcp_headers(token, session))


async def close_session(client: httpx.AsyncClient, token: str, session: str) -> None:
    await client.delete("/mcp", headers=mcp_headers(token, session))


@asynccontextmanager
async def connections(url: str, n: int) -> AsyncIterator[list[httpx.AsyncClient]]:
    """`n` clients, each with its connection already open, so that requests sent together
    reach the server together."""
    async with AsyncExitStack() as stack:
        clients = [
            await stack.enter_async_context(httpx.AsyncClient(base_url=url, timeout=60))
            for _ in range(n)
        ]
        await asyncio.gather(*(c.get("/healthz") for c in clients))
        yield clients
