"""Fixtures for live tests: HTTP clients and WebSocket clients against real servers."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from baton.access.principals import Principal
from tests.conftest import LiveServer
from tests.live.client import HTTPClient, WSClient

OpenWS = Callable[[Principal, str], Awaitable[WSClient]]
OpenHTTP = Callable[[Principal], Awaitable[HTTPClient]]


@pytest.fixture
async def ws_for(live_server: LiveServer) -> AsyncIterator[OpenWS]:
    opened: list[WSClient] = []

    async def make(principal: Principal, protocol: str) -> WSClient:
        client = await WSClient.open(live_server.url, await live_server.token(principal), protocol)
        opened.append(client)
        return client

    yield make
    for client in opened:
        await client.close()


@pytest.fixture
async def http_for(live_server: LiveServer) -> AsyncIterator[OpenHTTP]:
    opened: list[HTTPClient] = []

    async def make(principal: Principal) -> HTTPClient:
        opened.append(HTTPClient(live_server.url, await live_server.token(principal)))
        return opened[-1]

    yield make
    for client in opened:
        await client.aclose()
