"""Webhook fixtures: a real receiver (Starlette on 127.0.0.1, in the test's event loop) and
`baton serve` processes that may call it."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import defaultdict
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from baton.access.principals import Principal
from baton.services.tasks import TaskService
from baton.store import migrate
from baton.store.db import Database
from tests.conftest import LiveServer, start_server, stop_server
from tests.helpers import World, fresh_database, uvicorn_serving

# Short delays so retries and leases play out within a test.
FAST = {
    "BATON_WEBHOOK_ALLOW_PRIVATE": "true",
    "BATON_WEBHOOK_ALLOW_HTTP": "true",
    "BATON_WEBHOOK_RETRY_SECONDS": "0.05",
    "BATON_WEBHOOK_TIMEOUT_SECONDS": "2",
    "BATON_WEBHOOK_MAX_ATTEMPTS": "5",
    "BATON_POLL_SECONDS": "0.2",
}


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes
    at: float  # time.monotonic() on arrival


@dataclass
class Receiver:
    """Records every POST by path. Per path: answer `status` with `bodies`, fail `failures`
    times with 500 first, or hold requests until `holds[path]` is set. A held request whose
    client goes away first (Baton's attempt timed out, or was cancelled) is recorded in
    `ended`, with the time it went."""

    url: str = ""
    got: dict[str, list[Received]] = field(default_factory=lambda: defaultdict(list))
    status: dict[str, int] = field(default_factory=dict)
    failures: dict[str, int] = field(default_factory=dict)
    holds: dict[str, asyncio.Event] = field(default_factory=dict)
    ended: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    delay: float = 0.0  # seconds every answer takes
    bodies: dict[str, bytes] = field(default_factory=dict)  # per path, the answer's body
    arrived: asyncio.Event = field(default_factory=asyncio.Event)

    def at(self, path: str) -> str:
        return f"{self.url}{path}"

    async def handle(self, request: Request) -> Response:
        path = request.url.path
        body = await request.body()
        self.got[path].append(Received(path, dict(request.headers), body, time.monotonic()))
        self.arrived.set()
        hold = self.holds.get(path)
        if hold is not None:
            released = asyncio.ensure_future(hold.wait())
            gone = asyncio.ensure_future(request.receive())  # http.disconnect, after the body
            await asyncio.wait({released, gone}, return_when=asyncio.FIRST_COMPLETED)
            answered = released.done()
            for waiting in (released, gone):
                waiting.cancel()
            if not answered:
                self.ended[path].append(time.monotonic())
                return Response("gone", 499)  # nobody reads it
        if self.delay:
            await asyncio.sleep(self.delay)
        if self.failures.get(path, 0) > 0:
            self.failures[path] -= 1
            return Response("not yet", 500)
        return Response(self.bodies.get(path, b"ok"), self.status.get(path, 200))

    async def wait_for(self, path: str, count: int, seconds: float = 30.0) -> list[Received]:
        deadline = time.monotonic() + seconds
        while len(self.got[path]) < count:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(
                    f"{path}: {len(self.got[path])} of {count} messages within {seconds} s"
                )
            self.arrived.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.arrived.wait(), min(left, 0.5))
        return self.got[path]


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    receiver = Receiver()
    app = Starlette(routes=[Route("/{path:path}", receiver.handle, methods=["POST"])])
    async with uvicorn_serving(app, timeout_graceful_shutdown=1) as port:
        receiver.url = f"http://127.0.0.1:{port}"
        yield receiver
        for hold in receiver.holds.values():
            hold.set()


@asynccontextmanager
async def own_database(server_url: str) -> AsyncIterator[tuple[str, Database]]:
    """A fresh, migrated database of its own. Every `baton serve` on a database delivers its
    endpoints: webhook tests keep theirs apart from the other tests' servers (whose settings
    refuse the receiver's loopback address) and from each other's."""
    async with fresh_database(server_url, "baton_wh") as url:
        await migrate.upgrade_url(url)
        db = await Database.connect(url, min_size=1, max_size=4)
        try:
            yield url, db
        finally:
            await db.close()


@pytest.fixture(scope="session")
async def webhook_database(server_url: str) -> AsyncIterator[tuple[str, Database]]:
    async with own_database(server_url) as found:
        yield found


@pytest.fixture
def world(webhook_database: tuple[str, Database]) -> World:
    """Tasks in the webhook tests' database (this directory's tests commit events there)."""
    return World(TaskService(webhook_database[1]))


@pytest.fixture(scope="session")
def webhook_server(
    webhook_database: tuple[str, Database], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiveServer]:
    """`baton serve` that may call the receiver (loopback, http) and retries quickly."""
    url, db = webhook_database
    log = tmp_path_factory.mktemp("webhooks") / "serve.log"
    address, process = start_server({"BATON_DATABASE_URL": url, **FAST}, log)
    yield LiveServer(address, db, process)
    stop_server(process)


async def graphql(
    server: LiveServer | str, token: str, query: str, variables: dict[str, Any] | None = None
) -> dict[str, Any]:
    """POST one operation; fail on GraphQL errors; return `data`."""
    url = server if isinstance(server, str) else server.graphql
    async with httpx.AsyncClient(timeout=30) as client:
        response = await client.post(
            url,
            json={"query": query, "variables": variables or {}},
            headers={"authorization": f"Bearer {token}"},
        )
    assert response.status_code == 200, response.text
    payload = response.json()
    assert "errors" not in payload, payload
    return payload["data"]  # type: ignore[no-any-return]


CREATE = """
mutation($input: CreateWebhookEndpointInput!) {
  createWebhookEndpoint(input: $input) {
    __typename
    ... on WebhookSecretSuccess { secret endpoint { id owner url enabled taskEvents runEvents } }
    ... on Error { code message }
    ... on InvalidInputError { field }
  }
}
"""


async def create_endpoint(
    server: LiveServer | str, token: str, url: str, **fields: Any
) -> dict[str, Any]:
    """Create an endpoint taking every task event its owner sees unless told otherwise."""
    if "taskEvents" not in fields and "runEvents" not in fields:
        fields["taskEvents"] = {}
    data = await graphql(server, token, CREATE, {"input": {"url": url, **fields}})
    return data["createWebhookEndpoint"]  # type: ignore[no-any-return]


async def token_for(server: LiveServer, principal: Principal) -> str:
    return await server.token(principal)
