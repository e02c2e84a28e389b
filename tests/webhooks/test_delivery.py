"""Deliveries end to end: `baton serve` calls a real receiver, which checks every signature with
the `standardwebhooks` reference library."""

from __future__ import annotations

import json
from typing import Any

import orjson
from standardwebhooks.webhooks import Webhook

from baton.access.principals import Principal, PrincipalKind
from baton.protocol.handoff import MoveName
from baton.store.db import Database
from tests.conftest import LiveServer
from tests.helpers import World, result
from tests.webhooks.conftest import Receiver, create_endpoint


def owner(handle: str) -> Principal:
    return Principal(PrincipalKind.OWNER, handle)


def verified(secret: str, message: Any) -> dict[str, Any]:
    """The body, after the reference library checked its signature (raises otherwise)."""
    return Webhook(secret).verify(message.body, message.headers)  # type: ignore[no-any-return]


async def event_ids(db: Database, task_id: str) -> list[int]:
    rows = await db.fetch("SELECT id FROM task_events WHERE task_id = $1 ORDER BY id", task_id)
    return [r["id"] for r in rows]


async def test_a_hand_offs_events_arrive_signed_and_in_order(
    webhook_server: LiveServer, world: World, receiver: Receiver
) -> None:
    token = await webhook_server.token(owner(world.req_owner))
    made = await create_endpoint(webhook_server, token, receiver.at("/order"))
    assert made["__typename"] == "WebhookSecretSuccess", made
    secret = made["secret"]
    assert secret.startswith("whsec_")

    task = await world.hand_off()  # created, routed
    task = await world.move(task, MoveName.ACCEPT)
    task = await world.move(task, MoveName.START)
    await world.move(task, MoveName.SUBMIT_RESULT, result=result())  # verifying, completed
    expected = await event_ids(webhook_server.db, task.id)
    assert len(expected) == 6

    messages = await receiver.wait_for("/order", len(expected))
    bodies = [verified(secret, m) for m in messages]
    assert [int(b["data"]["taskEvents"]["id"]) for b in bodies] == expected
    assert [b["type"] for b in bodies] == ["taskEvents"] * 6
    assert [b["data"]["taskEvents"]["toState"] for b in bodies] == [
        "requested",
        "routed",
        "accepted",
        "working",
        "verifying",
        "completed",
    ]
    first = bodies[0]["data"]["taskEvents"]
    assert first["taskId"] == task.id and first["task"]["requester"] == world.requester
    assert first["task"]["protocolObject"]["packet"]["task"] == "Write the release notes"
    # Standard Webhooks headers; each event has its own id, stable for retries.
    ids = [m.headers["webhook-id"] for m in messages]
    assert len(set(ids)) == 6
    assert all(m.headers["content-type"] == "application/json" for m in messages)
    # The body's JSON is exactly what was signed and what the subscription selects.
    assert json.loads(messages[0].body) == bodies[0]


async def test_the_body_is_what_the_subscription_delivers(
    webhook_server: LiveServer, world: World, receiver: Receiver
) -> None:
    """The same document run as a subscription over the API for the owner gives the same
    `data` as the webhook body carries."""
    from baton.webhooks.render import TASK_EVENTS
    from tests.helpers import ENGINE
    from tests.helpers import owner as owner_principal

    token = await webhook_server.token(owner(world.req_owner))
    made = await create_endpoint(
        webhook_server, token, receiver.at("/same"), taskEvents={"projects": [world.project]}
    )
    task = await world.hand_off()
    messages = await receiver.wait_for("/same", 2)
    bodies = [verified(made["secret"], m) for m in messages]
    first_id = int(bodies[0]["data"]["taskEvents"]["id"])

    from baton.api.context import Context
    from baton.engine.runner import Outcome, Request
    from baton.live.hub import EventHub
    from baton.live.logs import TASK_LOG
    from baton.services.runs import RunService

    service = world.service
    hub = EventHub(service.db, _NoBroadcast(), TASK_LOG)  # type: ignore[arg-type]
    context = Context(owner_principal(world.req_owner), service, RunService(service.db), hub)
    stream = await ENGINE.subscribe(
        Request(TASK_EVENTS, {"filter": {"projects": [world.project]}, "after": str(first_id - 1)}),
        context,
    )
    assert not isinstance(stream, Outcome)
    try:
        subscribed = [orjson.loads(orjson.dumps((await anext(stream)).data)) for _ in range(2)]
    finally:
        await stream.aclose()
    assert [b["data"] for b in bodies] == subscribed
    assert subscribed[0]["taskEvents"]["taskId"] == task.id


class _NoBroadcast:
    """The replay path reads the log only; nothing is published or listened to here."""
