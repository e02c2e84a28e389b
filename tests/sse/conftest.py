"""Fixtures for GraphQL over SSE: a server with small stream limits, HTTP clients."""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

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
    log: Path = Path()  # what the server logs (warnings and up)


@pytest.fixture(scope="session")
def sse_server(
    database_url: str, db: Database, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[SSEServer]:
    """`baton serve` with the stream limits of `LIMITS`; /metrics with `metrics_token`."""
    log = tmp_path_factory.mktemp("sse") / "serve.log"
    metrics_token = secrets.token_urlsafe(16)
    env = {"BATON_DATABASE_URL": database_url, "BATON_METRICS_TOKEN": metrics_token, **LIMITS}
    url, process = start_server(env, log)
    yield SSEServer(url, db, process, metrics_token, log)
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


GRAPHQL_SSE = {"graphql-sse": "2.6.1", "graphql": "16.15.0"}  # the client and its peer
CLIENT_SCRIPT = Path(__file__).with_name("graphql_sse_client.mjs")


@pytest.fixture(scope="session")
def graphql_sse_client(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """graphql-sse's npm client installed with npm into a temporary folder; the script that
    runs it is copied beside its node_modules. Without npm or the registry the tests that
    use it skip, except under CI, where that is a failure."""
    folder = tmp_path_factory.mktemp("graphql-sse")
    (folder / "package.json").write_text('{"private": true}\n')
    packages = [f"{name}@{version}" for name, version in GRAPHQL_SSE.items()]
    try:
        done = subprocess.run(
            ["npm", "install", "--no-audit", "--no-fund", "--loglevel=error", *packages],
            cwd=folder,
            capture_output=True,
            text=True,
            timeout=180,
        )
        problem = done.stderr.strip()[-2000:] if done.returncode != 0 else None
    except (OSError, subprocess.TimeoutExpired) as exc:
        problem = str(exc)
    if problem is not None:
        if os.environ.get("CI"):
            pytest.fail(f"cannot install graphql-sse with npm: {problem}")
        pytest.skip(f"cannot install graphql-sse with npm: {problem}")
    script = folder / CLIENT_SCRIPT.name
    shutil.copyfile(CLIENT_SCRIPT, script)
    return script
