"""What a turn costs the database: the round trips of one endpoint's turn that sends a batch of
events, its rendering aside (an endpoint of the same owner and filter rendered them already)."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

import pytest
from broadcaster import Broadcast

from baton.access.principals import Principal
from baton.live.hub import EventHub
from baton.live.logs import RUN_LOG, TASK_LOG
from baton.protocol.handoff import TaskState
from baton.services.context import Context
from baton.services.runs import RunService
from baton.services.tasks import TaskService
from baton.services.webhook_secrets import SecretBox
from baton.store import webhooks as store
from baton.store.db import Database
from baton.webhooks import attempt
from baton.webhooks.worker import DeliveryWorker
from tests.helpers import ENGINE, World, counting_statements
from tests.webhooks.conftest import Receiver, own_database
from tests.webhooks.scoped import KEY, SETTINGS

# The batch's read (horizon, floor and matching events in one statement) and its record (the
# endpoint's row with the lease handed back and the attempts, in one statement): no event came
# after the read, so none is looked for, and the lease needs no statement of its own.
TURN_STATEMENTS = 2


@pytest.fixture
async def db(server_url: str) -> AsyncIterator[Database]:
    async with own_database(server_url) as (_, found):
        yield found


async def test_a_turn_that_sends_a_batch_reads_once_and_writes_once(
    db: Database, receiver: Receiver
) -> None:
    broadcast = Broadcast("memory://")
    await broadcast.connect()
    hubs = (EventHub(db, broadcast, TASK_LOG), EventHub(db, broadcast, RUN_LOG))
    service = TaskService(db)
    box = SecretBox(KEY)

    def context(principal: Principal) -> Context:
        return Context(principal, service, RunService(db), *hubs)

    # Not started: its turns are run here, one at a time, with nothing else on the database.
    worker = DeliveryWorker(db, ENGINE, context, hubs, box, SETTINGS)
    worker._http = attempt.client(2)
    world = World(service)
    ids = []
    async with db.transaction() as conn:
        for n in range(2):
            ids.append(f"wh_turn_{n}")
            await store.insert_endpoint(
                conn,
                id=ids[-1],
                owner=world.req_owner,
                url=receiver.at(f"/{n}"),
                description="",
                task_filter={},
                run_filter=None,
                secret=box.seal("whsec_" + "a" * 32, ids[-1]),
                allow_private=True,
            )
    await world.task_in(TaskState.working)
    try:
        counts = []
        for n, endpoint_id in enumerate(ids):
            ((endpoint, manual),) = await store.lease(
                db, worker.holder, SETTINGS.lease_seconds, [endpoint_id]
            )
            # As a claim leaves it, and trusted for the whole turn: the check before a message
            # once the last look is `RECHECK_SECONDS` old is `test_recheck`'s, not counted here.
            worker._seen[endpoint_id] = (time.monotonic() + 3600, worker._changes)
            with counting_statements() as count:
                await worker._turn(endpoint, manual, time.monotonic() + SETTINGS.lease_seconds)
                counts.append(count())
            sent = await receiver.wait_for(f"/{n}", 1)
            assert sent
        row = await db.fetchrow(
            "SELECT lease_until <= now() AS free FROM webhook_endpoints WHERE id = $1",
            ids[1],
        )
        assert row is not None and row["free"]  # the lease was handed back
        got = receiver.got["/1"]
        assert len(got) == len(receiver.got["/0"]) >= 3  # the task's events, one message each
        assert counts[1] == TURN_STATEMENTS, counts
    finally:
        if worker._http is not None:
            worker._http.close()
        await broadcast.disconnect()
