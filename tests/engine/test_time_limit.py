"""An operation is held to `Limits.max_seconds`: past it, a typed `timeout` error, and the
engine answers the next operation as before."""

from __future__ import annotations

import asyncio
import time

from baton.api.schema import schema
from baton.engine.limits import Limits
from baton.engine.runner import Engine, Request
from baton.services.tasks import TaskService
from tests.helpers import World, context

LIMIT = 0.3
QUERY = "{ tasks(first: 5) { edges { node { id } } } }"


async def test_an_operation_past_its_time_limit_ends_with_a_timeout_error(
    service: TaskService, world: World
) -> None:
    engine = Engine(schema, Limits(max_seconds=LIMIT))
    asker = context(world.roles["requester"], service)
    async with service.db.transaction() as holding:
        # The read waits for the lock until the limit ends it.
        await holding.execute("LOCK TABLE tasks IN ACCESS EXCLUSIVE MODE")
        started = time.monotonic()
        outcome = await asyncio.wait_for(engine.execute(Request(QUERY), asker), 10)
        took = time.monotonic() - started
    assert outcome.data is None
    assert outcome.errors == [
        {
            "message": f"the operation ran longer than {LIMIT:g} seconds",
            "extensions": {"code": "timeout"},
        }
    ]
    assert LIMIT <= took < LIMIT + 2.0  # a tick late at most, and a busy machine's slack
    again = await asyncio.wait_for(engine.execute(Request(QUERY), asker), 10)
    assert again.errors == [] and again.data is not None
