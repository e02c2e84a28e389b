"""Webhooks across process deaths and several processes: the outbox is the database."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from baton.access.principals import Principal, PrincipalKind
from baton.access.tokens import create_token
from baton.services.tasks import TaskService
from baton.store.db import Database
from tests.conftest import start_server, stop_server
from tests.helpers import World
from tests.webhooks.conftest import FAST, Receiver, create_endpoint, own_database
from tests.webhooks.test_delivery import event_ids, eventually, verified


def owner(handle: str) -> Principal:
    return Principal(PrincipalKind.OWNER, handle)


async def _start(database_url: str, log: Path, **extra: str) -> tuple[str, object]:
    env = {"BATON_DATABASE_URL": database_url, **FAST, **extra}
    return await asyncio.to_thread(start_server, env, log)


@pytest.fixture
async def own(server_url: str) -> AsyncIterator[tuple[str, Database, World]]:
    """A database for this test's servers alone (the session's webhook server would deliver
    its endpoints too), and a world committing there."""
    async with own_database(server_url) as (url, db):
        yield url, db, World(TaskService(db))


async def test_events_committed_while_baton_is_down_are_delivered_when_it_is_back(
    own: tuple[str, Database, World], receiver: Receiver, tmp_path: Path
) -> None:
    database_url, db, world = own
    url, process = await _start(database_url, tmp_path / "a.log")
    token = await create_token(db, owner(world.req_owner))
    made = await create_endpoint(f"{url}/graphql", token, receiver.at("/down"))
    await asyncio.to_thread(stop_server, process)  # type: ignore[arg-type]

    task = await world.hand_off()  # committed with no Baton running
    expected = await event_ids(db, task.id)
    assert receiver.got["/down"] == []

    url, process = await _start(database_url, tmp_path / "b.log")
    try:
        messages = await receiver.wait_for("/down", len(expected))
        ids = [int(verified(made["secret"], m)["data"]["taskEvents"]["id"]) for m in messages]
        assert ids == expected
    finally:
        await asyncio.to_thread(stop_server, process)  # type: ignore[arg-type]


async def test_kill_9_between_commit_and_acknowledgement_then_restart_delivers(
    own: tuple[str, Database, World], receiver: Receiver, tmp_path: Path
) -> None:
    """Baton sends, the receiver holds the request, Baton is killed (SIGKILL) before it learns
    the answer. After a restart the endpoint's lease runs out (2 x timeout + 10 s) and the
    message goes again: the one duplicate at-least-once allows, with the same webhook-id."""
    database_url, db, world = own
    url, process = await _start(database_url, tmp_path / "a.log")
    token = await create_token(db, owner(world.req_owner))
    made = await create_endpoint(f"{url}/graphql", token, receiver.at("/killed"))
    receiver.holds["/killed"] = asyncio.Event()
    task = await world.hand_off()
    expected = await event_ids(db, task.id)
    (first,) = await receiver.wait_for("/killed", 1)  # in flight, unanswered
    process.kill()  # type: ignore[attr-defined]
    await asyncio.to_thread(process.wait)  # type: ignore[attr-defined]
    receiver.holds["/killed"].set()  # the answer goes to a dead process

    url, process = await _start(database_url, tmp_path / "b.log")
    try:
        messages = await receiver.wait_for("/killed", len(expected) + 1, seconds=60)
        ids = [int(verified(made["secret"], m)["data"]["taskEvents"]["id"]) for m in messages]
        assert ids == [expected[0], *expected]
        assert messages[1].headers["webhook-id"] == first.headers["webhook-id"]
    finally:
        await asyncio.to_thread(stop_server, process)  # type: ignore[arg-type]


async def test_two_processes_acknowledge_every_event_and_count_duplicates(
    own: tuple[str, Database, World], receiver: Receiver, tmp_path: Path
) -> None:
    """Two `baton serve` processes on one database, each working on at most two endpoints at
    once, six endpoints, ten hand-offs (twenty events each endpoint must get). An endpoint is
    leased by one process at a time, so no message goes twice: a duplicate could only come
    from a lease lost mid-send (a process stalled past it or killed, as in the test above)."""
    database_url, db, world = own
    receiver.delay = 0.02  # each answer takes a little while, so both processes get work
    servers = [
        await _start(database_url, tmp_path / f"{n}.log", BATON_WEBHOOK_CONCURRENCY="2")
        for n in range(2)
    ]
    try:
        token = await create_token(db, owner(world.req_owner))
        made = [
            await create_endpoint(f"{servers[n % 2][0]}/graphql", token, receiver.at(f"/e{n}"))
            for n in range(6)
        ]
        expected: list[int] = []
        for _ in range(10):
            task = await world.hand_off()
            expected += await event_ids(db, task.id)
        for n, endpoint in enumerate(made):
            messages = await receiver.wait_for(f"/e{n}", len(expected), seconds=60)
            ids = [
                int(verified(endpoint["secret"], m)["data"]["taskEvents"]["id"]) for m in messages
            ]
            duplicates = Counter(m.headers["webhook-id"] for m in messages)
            assert sorted(set(ids)) == expected  # every event arrived
            assert [i for i, count in duplicates.items() if count > 1] == []
            assert ids == expected  # in order

        async def recorded() -> list[object]:
            # A batch's results are written after its last answer: wait for the last write.
            rows = await db.fetch(
                "SELECT status, attempted_by FROM webhook_deliveries WHERE endpoint_id = ANY($1)",
                [e["endpoint"]["id"] for e in made],
            )
            return rows if len(rows) == 6 * len(expected) else []

        rows = await eventually(recorded)
        assert {r["status"] for r in rows} == {"delivered"}
        assert len({r["attempted_by"] for r in rows}) == 2  # both processes delivered
    finally:
        for _, process in servers:
            await asyncio.to_thread(stop_server, process)  # type: ignore[arg-type]


async def test_a_stop_waits_on_no_receiver_and_hands_its_endpoints_back(
    own: tuple[str, Database, World], receiver: Receiver, tmp_path: Path
) -> None:
    """SIGINT while a receiver holds a request: the server stops by itself (not killed after
    the 15 s the fixture allows), and leaves the endpoint free at once, so the restarted
    server sends the unacknowledged message again without waiting for a lease to expire."""
    database_url, db, world = own
    url, process = await _start(database_url, tmp_path / "a.log")
    token = await create_token(db, owner(world.req_owner))
    made = await create_endpoint(f"{url}/graphql", token, receiver.at("/held"))
    receiver.holds["/held"] = asyncio.Event()
    await world.hand_off()
    await receiver.wait_for("/held", 1)
    await asyncio.to_thread(stop_server, process)  # type: ignore[arg-type]
    assert process.returncode == 0  # type: ignore[attr-defined]
    free = await db.fetchval(
        "SELECT lease_until <= now() FROM webhook_endpoints WHERE id = $1",
        made["endpoint"]["id"],
    )
    assert free is True
    receiver.holds["/held"].set()
    url, process = await _start(database_url, tmp_path / "b.log")
    try:
        messages = await receiver.wait_for("/held", 3)
        assert messages[0].headers["webhook-id"] == messages[1].headers["webhook-id"]
    finally:
        await asyncio.to_thread(stop_server, process)  # type: ignore[arg-type]
