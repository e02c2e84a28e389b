"""Fixtures for GraphQL over SSE: a server with small stream limits, HTTP clients."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass

import pytest

from baton.access.principals import Principal
from baton.store.db import Database
from tests.conftest import LiveServer, start_server, stop_server
from tests.live.client import HTTPClient

OpenHTTP = Callable[[LiveServer, Principal], Awaitable[HTTPClient]]

# The limits of `sse_server`: small enough for a test to reach them.
LIMITS = {
    "BATON_TOKEN_CHECK_SECONDS": "1",
    "BATON_SSE_KEEP_ALIVE_SECONDS": "0.3",
    "BATON_SSE_MAX_STREAMS": "5",
    "BATON_SSE_MAX_STREAMS_PER_TOKEN": "3",
    "BATON_SSE_MAX_QUEUED_BYTES": "65536",
}


@dataclass
class SSEServer(LiveServer):
    metrics_token: str = ""


@pytest.fixture(scope="session")
def sse_server(
    database_url: str, db: Database, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[SSEServer]:
    """`baton serve` with the stream limits of `LIMITS`; /metrics with `metrics_token`."""
    log = tmp_path_factory.mktemp("sse") / "serve.log"
    metrics_token = secrets.token_urlsafe(16)
    env = {"BATON_DATABASE_URL": database_url, "BATON_METRICS_TOKEN": metrics_token, **LIMITS}
    url, process = start_server(env, log)
    yield SSEServer(url, db, process, metrics_token)
    stop_server(process)


@pytest.fixture
async def http_on() -> AsyncIterator[OpenHTTP]:
    """`http_on(server, principal)`: a GraphQL-over-HTTP client with a fresh token."""
    opened: list[HTTPClient] = []

    async def make(server: LiveServer, principal: Principal) -> HTTPClient:
        opened.append(HTTPClient(server.url, await server.token(principal)))
        return opened[-1]

    yield make
    for client in opened:
        await client.aclose()
