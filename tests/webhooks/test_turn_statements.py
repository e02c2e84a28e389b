"""What a turn costs the database: the round trips of one endpoint's turn that sends a batch of
events, its rendering aside (an endpoint of the same owner and filter rendered them already),
and of what turns asking at once ask together: that their endpoints are unchanged, and the
writes of their batches."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import orjson
import pytest
from broadcaster import Broadcast

from baton.access.principals import Principal, PrincipalKind
from baton.live.hub import EventHub
from baton.live.logs import RUN_LOG, TASK_LOG
from baton.protocol.handoff import TaskState
from baton.services.context import Context
from baton.services.runs import RunService
from baton.services.tasks import TaskService
from baton.services.webhook_secrets import SecretBox
from baton.store import webhooks as store
from baton.store.db import Database
from baton.webhooks import attempt, render
from baton.webhooks.worker import DeliveryWorker
from tests.helpers import ENGINE, World, counting_statements
from tests.webhooks.conftest import Receiver, own_database
from tests.webhooks.scoped import KEY, SETTINGS

# The batch's read (horizon, floor and matching events in one statement) and its record (the
# endpoint's row with the lease handed back and the attempts, in one statement): no event came
# after the read, so none is looked for, and the lease needs no statement of its own.
TURN_STATEMENTS = 2


async def _made(db: Database, box: SecretBox, owner: str, urls: dict[str, str]) -> None:
    """Endpoints of `owner` taking every task event, by id, each at its URL."""
    async with db.transaction() as conn:
        for endpoint_id, url in urls.items():
            await store.insert_endpoint(
                conn,
                id=endpoint_id,
                owner=owner,
                url=url,
                description="",
                task_filter={},
                run_filter=None,
                secret=box.seal("whsec_" + "a" * 32, endpoint_id),
                allow_private=True,
            )


async def _leased(
    db: Database, worker: DeliveryWorker, ids: list[str]
) -> list[store.EndpointRecord]:
    """`ids` leased by `worker`, in id order."""
    claimed = await store.lease(db, worker.holder, SETTINGS.lease_seconds, ids)
    return sorted((endpoint for endpoint, _ in claimed), key=lambda e: e.id)


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
    ids = [f"wh_turn_{n}" for n in range(2)]
    await _made(db, box, world.req_owner, {i: receiver.at(f"/{n}") for n, i in enumerate(ids)})
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


async def test_turns_reading_and_checking_their_endpoints_at_once_ask_in_one_round_trip(
    db: Database, receiver: Receiver
) -> None:
    box = SecretBox(KEY)
    service = TaskService(db)
    worker = DeliveryWorker(db, ENGINE, lambda _: None, (None, None), box, SETTINGS)  # type: ignore[arg-type]
    world = World(service)
    ids = [f"wh_check_{n}" for n in range(3)]
    await _made(db, box, world.req_owner, {i: receiver.at("/check") for i in ids})
    endpoints = await _leased(db, worker, ids)
    assert [e.id for e in endpoints] == ids
    # No look of theirs is trusted: each asks the database.
    with counting_statements() as count:
        found = await asyncio.gather(*(worker._unchanged(e) for e in endpoints))
    assert found == [True, True, True]
    assert count() == 1
    # One changed by its owner, one whose lease ran out: each answered for itself.
    await db.execute("UPDATE webhook_endpoints SET updated_at = now() WHERE id = $1", ids[0])
    await db.execute("UPDATE webhook_endpoints SET lease_until = now() WHERE id = $1", ids[2])
    worker._seen.clear()
    with counting_statements() as count:
        found = await asyncio.gather(*(worker._unchanged(e) for e in endpoints))
    assert found == [False, True, False]
    assert count() == 1
    # Endpoints of one owner and filter at the same cursor read the new events together.
    await world.task_in(TaskState.working)
    principal = Principal(PrincipalKind.OWNER, world.req_owner)
    context = Context(principal, service, RunService(db), None, None)  # type: ignore[arg-type]
    assert len({e.task_cursor for e in endpoints}) == 1
    with counting_statements() as count:
        reads = await asyncio.gather(
            *(worker._read_shared(context, e, "task", {}, e.task_cursor) for e in endpoints)
        )
    assert count() == 1
    assert reads[0][1].ids and all(read == reads[0] for read in reads)


async def test_turns_writing_their_batches_at_once_write_in_one_statement(
    db: Database, receiver: Receiver
) -> None:
    """Each endpoint's batch is written or not on its own: one counted, one kept in the
    history only (its owner changed it), one not written (its lease was lost)."""
    box = SecretBox(KEY)
    service = TaskService(db)
    worker = DeliveryWorker(db, ENGINE, lambda _: None, (None, None), box, SETTINGS)  # type: ignore[arg-type]
    world = World(service)
    ids = [f"wh_write_{n}" for n in range(3)]
    await _made(db, box, world.req_owner, {i: receiver.at("/write") for i in ids})
    endpoints = await _leased(db, worker, ids)
    await db.execute("UPDATE webhook_endpoints SET updated_at = now() WHERE id = $1", ids[1])
    await db.execute("UPDATE webhook_endpoints SET lease_until = now() WHERE id = $1", ids[2])
    now = datetime.now(UTC)

    def done(n: int) -> list[store.Attempted]:
        return [store.Attempted("task", 7, f"msg_{n}", True, 200, "ok", 3, None, now)]

    with counting_statements() as count:
        recorded = await asyncio.gather(
            *(
                worker._record(e, done(n), store.Outcome(7, 0, 0, None), last=True)
                for n, e in enumerate(endpoints)
            )
        )
    assert count() == 1
    assert recorded == [store.Recorded.COUNTED, store.Recorded.CHANGED, store.Recorded.LOST]
    rows = await db.fetch(
        "SELECT w.id, w.task_cursor, w.lease_until <= now() AS free, count(d.id) AS written "
        "FROM webhook_endpoints w LEFT JOIN webhook_deliveries d ON d.endpoint_id = w.id "
        "WHERE w.id = ANY($1::text[]) GROUP BY w.id ORDER BY w.id",
        ids,
    )
    assert [(r["task_cursor"], r["free"], r["written"]) for r in rows] == [
        (7, True, 1),  # counted, the lease handed back
        (7, True, 1),  # changed: the attempt kept, the cursor past what was acknowledged
        (0, True, 0),  # lost: nothing written
    ]


async def test_a_batch_that_cannot_be_written_fails_no_other_endpoints(
    db: Database, receiver: Receiver
) -> None:
    """The statement fails whole; each batch is then written alone, so only that one fails
    (here, a NUL that no answer now carries: `attempt.storable`)."""
    box = SecretBox(KEY)
    worker = DeliveryWorker(db, ENGINE, lambda _: None, (None, None), box, SETTINGS)  # type: ignore[arg-type]
    world = World(TaskService(db))
    ids = [f"wh_apart_{n}" for n in range(2)]
    await _made(db, box, world.req_owner, {i: receiver.at("/apart") for i in ids})
    good, bad = await _leased(db, worker, ids)
    now = datetime.now(UTC)
    written = [
        worker._record(
            endpoint,
            [store.Attempted("task", 9, f"msg_{n}", True, 200, body, 3, None, now)],
            store.Outcome(9, 0, 0, None),
        )
        for n, (endpoint, body) in enumerate([(good, "ok"), (bad, "o\x00k")])
    ]
    with counting_statements() as count:
        outcomes = await asyncio.gather(*written, return_exceptions=True)
    assert count() == 3  # both together, then each alone
    assert outcomes[0] is store.Recorded.COUNTED
    assert isinstance(outcomes[1], Exception)
    cursors = await db.fetch(
        "SELECT id, task_cursor FROM webhook_endpoints WHERE id = ANY($1::text[]) ORDER BY id",
        ids,
    )
    assert [r["task_cursor"] for r in cursors] == [9, 0]


async def test_endpoints_at_different_cursors_render_an_event_they_both_lack_once(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One endpoint has rendered the first event, another is past it: both then need the
    second, and it is rendered once, from the first on, for both; each gets what rendering
    its own events alone gives."""
    broadcast = Broadcast("memory://")
    await broadcast.connect()
    hubs = (EventHub(db, broadcast, TASK_LOG), EventHub(db, broadcast, RUN_LOG))
    service = TaskService(db)

    def context(principal: Principal) -> Context:
        return Context(principal, service, RunService(db), *hubs)

    worker = DeliveryWorker(db, ENGINE, context, hubs, SecretBox(KEY), SETTINGS)
    world = World(service)
    await world.task_in(TaskState.working)
    own = context(Principal(PrincipalKind.OWNER, world.req_owner))
    first, second, *_ = (await worker._read(own, "task", {}, 0)).ids
    await _made(db, worker.box, world.req_owner, {"wh_render": "http://127.0.0.1:9/"})
    (endpoint,) = await _leased(db, worker, ["wh_render"])
    renders: list[tuple[int, list[int]]] = []
    rendering = render.render

    async def counted(*args: Any) -> list[dict[str, Any]]:
        renders.append((args[4], list(args[5])))
        return await rendering(*args)

    monkeypatch.setattr(render, "render", counted)
    try:
        alone = await worker._rendered(own, endpoint, "task", {}, 0, [first])
        lagging, ahead = await asyncio.gather(
            worker._rendered(own, endpoint, "task", {}, 0, [first, second]),
            worker._rendered(own, endpoint, "task", {}, first, [second]),
        )
        assert renders == [(0, [first]), (first, [second])]
        fresh = DeliveryWorker(db, ENGINE, context, hubs, SecretBox(KEY), SETTINGS)
        assert lagging == await fresh._rendered(own, endpoint, "task", {}, 0, [first, second])
        assert ahead == lagging[1:] and alone == lagging[:1]
        # Another turn's render of more events fails (here: one that is not there): this
        # one's event is rendered alone.
        failing = asyncio.create_task(
            worker._render(own, "task", {}, 0, [first, second, second + 1])
        )
        await asyncio.gather(failing, return_exceptions=True)
        assert isinstance(failing.exception(), render.RenderFailed)
        worker._renders.clear()
        worker._rendering[(world.req_owner, "task", b"{}", 0)] = (
            [first, second, second + 1],
            failing,
        )
        assert await worker._rendered(own, endpoint, "task", {}, 0, [first]) == alone
        events = [orjson.loads(body)["data"]["taskEvents"] for body in lagging]
        assert [int(event["id"]) for event in events] == [first, second]
    finally:
        await broadcast.disconnect()
