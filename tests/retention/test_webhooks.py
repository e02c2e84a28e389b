"""A webhook endpoint whose outbox fell behind what is kept is told (`cursorExpired`, naming the
oldest cursor kept) before anything else, then goes on from there: it never skips silently."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator

import pytest

from baton.protocol.handoff import MoveName, TaskState
from baton.store.db import Connection
from tests.conftest import LiveServer, start_server, stop_server
from tests.helpers import owner
from tests.retention.conftest import DAY, Place
from tests.webhooks.conftest import FAST, Receiver, create_endpoint, graphql, receiver

__all__ = ["receiver"]  # the fixture, from the webhook tests

UPDATE = """
mutation($input: UpdateWebhookEndpointInput!) {
  updateWebhookEndpoint(input: $input) { __typename ... on Error { message } }
}
"""
DELIVERIES = """
query($id: ID!) { webhookEndpoint(id: $id) {
  deliveries(first: 10) { kind log eventId messageId status } } }
"""


@pytest.fixture(scope="module")
def server(
    own_url: str, place: Place, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiveServer]:
    log = tmp_path_factory.mktemp("retention-webhooks") / "serve.log"
    url, process = start_server({"BATON_DATABASE_URL": own_url, **FAST}, log)
    yield LiveServer(url, place.db, process)
    stop_server(process)


async def test_an_endpoint_behind_the_floor_is_told_then_goes_on(
    server: LiveServer, place: Place, receiver: Receiver
) -> None:
    w = place.world()
    token = await server.token(owner(w.req_owner))
    made = await create_endpoint(server, token, receiver.at("/hook"))
    endpoint = made["endpoint"]["id"]
    await graphql(server, token, UPDATE, {"input": {"id": endpoint, "enabled": False}})
    # While it is disabled, work is done and finishes, and is removed after the period.
    done = await w.task_in(TaskState.completed)
    await place.age("tasks", [done.id], 40 * DAY)
    swept = await place.sweep()
    oldest = swept.floors["task"]
    async with place.db.connection() as conn:
        cursor = await _cursor(conn, endpoint)
    assert cursor < oldest
    later = await w.hand_off()  # an event after the floor: it must still arrive
    await graphql(server, token, UPDATE, {"input": {"id": endpoint, "enabled": True}})

    got = await receiver.wait_for("/hook", 3)
    bodies = [json.loads(r.body) for r in got]
    assert bodies[0]["type"] == "cursorExpired"
    assert bodies[0]["data"]["cursorExpired"] == {
        "log": "task",
        "cursor": str(cursor),
        "oldestCursor": str(oldest),
    }
    assert got[0].headers["webhook-id"] == f"msg_{endpoint}_task_expired_{oldest}"
    rest = [b["data"]["taskEvents"] for b in bodies[1:]]
    assert all(int(e["id"]) > oldest for e in rest)
    assert {e["taskId"] for e in rest} == {later.id}
    data = await graphql(server, token, DELIVERIES, {"id": endpoint})
    found = data["webhookEndpoint"]
    notice = found["deliveries"][-1]  # the newest first
    assert (notice["eventId"], notice["status"]) == (str(oldest), "DELIVERED")
    await _moved_past(place, endpoint, oldest)


async def test_a_notice_that_fails_goes_again_with_its_id_before_any_event(
    server: LiveServer, place: Place, receiver: Receiver
) -> None:
    w = place.world()
    token = await server.token(owner(w.req_owner))
    receiver.failures["/stuck"] = 2  # the notice fails twice, then goes through
    made = await create_endpoint(server, token, receiver.at("/stuck"))
    endpoint = made["endpoint"]["id"]
    await graphql(server, token, UPDATE, {"input": {"id": endpoint, "enabled": False}})
    done = await w.move(await w.hand_off(), MoveName.CANCEL)
    await place.age("tasks", [done.id], 40 * DAY)
    oldest = (await place.sweep()).floors["task"]
    await graphql(server, token, UPDATE, {"input": {"id": endpoint, "enabled": True}})
    await w.hand_off()  # an event after the floor, to come after the notice
    got = await receiver.wait_for("/stuck", 5)
    types = [json.loads(r.body)["type"] for r in got]
    assert types == ["cursorExpired"] * 3 + ["taskEvents"] * 2
    assert len({r.headers["webhook-id"] for r in got[:3]}) == 1
    await _moved_past(place, endpoint, oldest)


async def _moved_past(place: Place, endpoint: str, oldest: int) -> None:
    for _ in range(100):  # the batch's results are written once it is sent
        async with place.db.connection() as conn:
            if await _cursor(conn, endpoint) > oldest:
                return
        await asyncio.sleep(0.1)
    raise AssertionError("the cursor never moved past the oldest kept")


async def _cursor(conn: Connection, endpoint: str) -> int:
    found = await conn.fetchval("SELECT task_cursor FROM webhook_endpoints WHERE id = $1", endpoint)
    return int(found)
