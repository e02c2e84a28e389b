"""A saturated database during a request answers a typed `unavailable` error: HTTP 503 with
`Retry-After`, never `internal` or 500 (the handler in process, on a pool of one connection
that a test holds)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Collection

import httpx
import pytest

from baton.access.grants import TokenCache
from baton.access.principals import ADMIN, Principal
from baton.access.tokens import Grant
from baton.api.schema import schema
from baton.engine.limits import DEFAULT_LIMITS
from baton.engine.runner import Engine
from baton.services.context import Context
from baton.services.runs import RunService
from baton.services.tasks import TaskService
from baton.store.db import Database
from baton.web.graphql_http import GraphQLHTTP


@pytest.fixture
async def tiny(database_url: str, db: Database) -> AsyncIterator[Database]:
    """A pool of one connection that gives up waiting for it after 0.2 s."""
    pool = await Database.connect(database_url, min_size=1, max_size=1, acquire_timeout=0.2)
    yield pool
    await pool.close()


def handler(db: Database, *, token_lookups_fail: bool = False) -> GraphQLHTTP:
    async def resolve(token: str) -> Grant | None:
        if token_lookups_fail:
            async with db.connection():
                pass
        return Grant(1, ADMIN, None)

    async def working(tokens: Collection[str]) -> set[str]:
        return set(tokens)

    def context(principal: Principal) -> Context:
        return Context(principal, TaskService(db), RunService(db))

    return GraphQLHTTP(
        Engine(schema, DEFAULT_LIMITS), TokenCache(resolve, working), context, 1 << 20
    )


@pytest.mark.parametrize("accept", ["application/json", "application/graphql-response+json"])
@pytest.mark.parametrize("in_token_lookup", [False, True])
async def test_a_saturated_database_answers_503_unavailable(
    tiny: Database, accept: str, in_token_lookup: bool
) -> None:
    app = handler(tiny, token_lookups_fail=in_token_lookup)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://baton") as client:
        async with tiny.connection():  # the only connection, held
            response = await client.post(
                "/graphql",
                json={"query": "{ tasks(first: 1) { totalCount } }"},
                headers={"Authorization": "Bearer baton_x", "Accept": accept},
            )
        assert response.status_code == 503, response.text
        assert int(response.headers["retry-after"]) > 0
        codes = [e["extensions"]["code"] for e in response.json()["errors"]]
        assert codes == ["unavailable"]

        released = await client.post(
            "/graphql",
            json={"query": "{ tasks(first: 1) { totalCount } }"},
            headers={"Authorization": "Bearer baton_x"},
        )
        assert released.status_code == 200, released.text
