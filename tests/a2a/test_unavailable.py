"""A saturated database during an A2A request answers a typed `unavailable` error: HTTP 503
with `Retry-After` on both bindings, never `internal` or 500 (the door in process, on a pool
of one connection that a test holds)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Collection

import httpx
import pytest

from baton.a2a.handler import BatonHandler
from baton.a2a.http import A2ADoor
from baton.a2a.streams import StreamLimits, Streams
from baton.access.grants import TokenCache
from baton.access.principals import ADMIN, Principal
from baton.access.tokens import Grant
from baton.services.context import Context
from baton.services.runs import RunService
from baton.services.task_contexts import TaskContexts
from baton.services.tasks import TaskService
from baton.store.db import Database
from tests.a2a.conftest import A2A_VERSION

BASE = "/a2a/agents/bob/coder"


@pytest.fixture
async def tiny(database_url: str, db: Database) -> AsyncIterator[Database]:
    """A pool of one connection that gives up waiting for it after 0.2 s."""
    pool = await Database.connect(database_url, min_size=1, max_size=1, acquire_timeout=0.2)
    yield pool
    await pool.close()


def door(db: Database, *, token_lookups_fail: bool = False) -> A2ADoor:
    async def resolve(token: str) -> Grant | None:
        if token_lookups_fail:
            async with db.connection():
                pass
        return Grant(1, ADMIN, None)

    async def working(tokens: Collection[str]) -> set[str]:
        return set(tokens)

    def context(principal: Principal) -> Context:
        return Context(principal, TaskService(db), RunService(db))

    tokens = TokenCache(resolve, working)
    handler = BatonHandler(context, lambda: TaskContexts(db))
    return A2ADoor(handler, tokens, max_body_bytes=1 << 20, streams=Streams(tokens, StreamLimits()))


async def get_task(client: httpx.AsyncClient, binding: str) -> httpx.Response:
    headers = {"Authorization": "Bearer baton_x", **A2A_VERSION}
    if binding == "JSONRPC":
        body = {"jsonrpc": "2.0", "id": 3, "method": "GetTask", "params": {"id": "bob_t"}}
        return await client.post(BASE, json=body, headers=headers)
    return await client.get(f"{BASE}/tasks/bob_t", headers=headers)


def code_of(binding: str, response: httpx.Response) -> str:
    error = response.json()["error"]
    details = error["data"] if binding == "JSONRPC" else error["details"]
    return str(details[0]["metadata"]["code"])


@pytest.mark.parametrize("in_token_lookup", [False, True])
async def test_a_saturated_database_answers_503_unavailable(
    tiny: Database, binding: str, in_token_lookup: bool
) -> None:
    app = door(tiny, token_lookups_fail=in_token_lookup)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://baton") as client:
        async with tiny.connection():  # the only connection, held
            response = await get_task(client, binding)
        assert response.status_code == 503, response.text
        assert int(response.headers["retry-after"]) > 0
        assert code_of(binding, response) == "unavailable"

        released = await get_task(client, binding)  # a task nobody has: found missing
        assert released.status_code == (200 if binding == "JSONRPC" else 404), released.text
        assert code_of(binding, released) == "not_found"
