"""Deliveries end to end: `baton serve` calls a real receiver, which checks every signature with
the `standardwebhooks` reference library."""

from __future__ import annotations

import itertools
import json
from typing import Any

import orjson
from standardwebhooks.webhooks import Webhook

from baton.access.principals import Principal, PrincipalKind
from baton.protocol.handoff import MoveName
from baton.store.db import Database
from tests.conftest import LiveServer
from tests.helpers import World, result
from tests.webhooks.conftest import Receiver, create_endpoint, graphql


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

    from baton.engine.runner import Outcome, Request
    from baton.live.hub import EventHub
    from baton.live.logs import TASK_LOG
    from baton.services.context import Context
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


DELIVERIES = """
query($id: ID!) { webhookEndpoint(id: $id) {
  enabled disabledReason failures nextAttemptAt
  deliveries(first: 50) { id kind status attempts responseStatus lastError eventId messageId
                          nextAttemptAt durationMs }
} }
"""


async def endpoint_state(server: LiveServer, token: str, id: str) -> dict[str, Any]:
    data = await graphql(server, token, DELIVERIES, {"id": id})
    return data["webhookEndpoint"]  # type: ignore[no-any-return]


async def eventually(check: Any, seconds: float = 30.0) -> Any:
    """Poll `check()` (async) until it returns something true."""
    import asyncio
    import time

    deadline = time.monotonic() + seconds
    while True:
        value = await check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"not true within {seconds} s: {check}")
        await asyncio.sleep(0.1)


async def test_a_receiver_failing_three_times_is_retried_with_backoff_then_acknowledged(
    webhook_server: LiveServer, world: World, receiver: Receiver
) -> None:
    token = await webhook_server.token(owner(world.req_owner))
    receiver.failures["/flaky"] = 3
    made = await create_endpoint(
        webhook_server, token, receiver.at("/flaky"), taskEvents={"states": ["requested"]}
    )
    endpoint_id = made["endpoint"]["id"]
    await world.hand_off()
    messages = await receiver.wait_for("/flaky", 4)
    # The same message each time: same webhook-id, each attempt signed.
    assert len({m.headers["webhook-id"] for m in messages}) == 1
    bodies = [verified(made["secret"], m) for m in messages]
    assert len({b["data"]["taskEvents"]["id"] for b in bodies}) == 1
    # Backoff: the n-th retry waits at least 0.8 x 0.05 s x 4^(n-1) (the jitter's low end).
    gaps = [b.at - a.at for a, b in itertools.pairwise(messages)]
    for n, gap in enumerate(gaps):
        assert gap >= 0.8 * 0.05 * 4**n, gaps
    assert gaps[2] > gaps[0]

    async def acknowledged() -> dict[str, Any] | None:
        state = await endpoint_state(webhook_server, token, endpoint_id)
        done = [d for d in state["deliveries"] if d["status"] == "DELIVERED"]
        return state if done else None

    state = await eventually(acknowledged)
    (delivery,) = state["deliveries"]  # one delivery, however many attempts
    assert delivery["attempts"] == 4 and delivery["responseStatus"] == 200
    assert delivery["lastError"] is None and delivery["nextAttemptAt"] is None
    assert state["enabled"] and state["failures"] == 0
    # Nothing more arrives: acknowledged once.
    await world.hand_off()  # a second task's `requested` event is the next message
    later = await receiver.wait_for("/flaky", 5)
    assert (
        verified(made["secret"], later[4])["data"]["taskEvents"]["id"]
        != bodies[0]["data"]["taskEvents"]["id"]
    )


async def test_an_answer_carrying_a_nul_is_recorded_and_its_message_not_sent_again(
    webhook_server: LiveServer, world: World, receiver: Receiver
) -> None:
    """PostgreSQL's text holds no NUL: stored as it came, the answer made the attempt's record
    fail, and the acknowledged message went again, for ever."""
    token = await webhook_server.token(owner(world.req_owner))
    receiver.bodies["/nul"] = b"ok\x00done"
    made = await create_endpoint(
        webhook_server, token, receiver.at("/nul"), taskEvents={"states": ["requested"]}
    )
    endpoint_id = made["endpoint"]["id"]
    await world.hand_off()
    await receiver.wait_for("/nul", 1)

    async def acknowledged() -> dict[str, Any] | None:
        data = await graphql(
            webhook_server,
            token,
            "query($id: ID!) { webhookEndpoint(id: $id) { failures "
            "deliveries(first: 5) { status attempts responseBody } } }",
            {"id": endpoint_id},
        )
        state = data["webhookEndpoint"]
        return state if state["deliveries"] else None

    state = await eventually(acknowledged)
    assert state["deliveries"] == [
        {"status": "DELIVERED", "attempts": 1, "responseBody": "ok\ufffddone"}
    ]
    assert state["failures"] == 0
    await world.hand_off()  # the next message is the second task's, not the first again
    messages = await receiver.wait_for("/nul", 2)
    ids = [verified(made["secret"], m)["data"]["taskEvents"]["id"] for m in messages]
    assert len(set(ids)) == 2, ids


async def test_a_hanging_receiver_does_not_delay_another_endpoint(
    webhook_server: LiveServer, world: World, receiver: Receiver
) -> None:
    import asyncio

    token = await webhook_server.token(owner(world.req_owner))
    receiver.holds["/hang"] = asyncio.Event()  # answers only when the test says so
    await create_endpoint(webhook_server, token, receiver.at("/hang"))
    fast = await create_endpoint(webhook_server, token, receiver.at("/fast"))
    await world.hand_off()
    await receiver.wait_for("/hang", 1)
    # While the first endpoint's request hangs, the other gets both events.
    messages = await receiver.wait_for("/fast", 2)
    assert [verified(fast["secret"], m)["data"]["taskEvents"]["toState"] for m in messages] == [
        "requested",
        "routed",
    ]
    assert len(receiver.got["/hang"]) == 1  # still the one hanging request
    receiver.holds["/hang"].set()


async def test_rotation_signs_with_both_secrets_during_the_grace_period(
    webhook_server: LiveServer, world: World, receiver: Receiver
) -> None:
    token = await webhook_server.token(owner(world.req_owner))
    made = await create_endpoint(
        webhook_server, token, receiver.at("/rotate"), taskEvents={"states": ["requested"]}
    )
    old = made["secret"]
    rotated = await graphql(
        webhook_server,
        token,
        """mutation($id: ID!) { rotateWebhookSecret(input: {id: $id, graceSeconds: 3600}) {
             ... on WebhookSecretSuccess { secret endpoint { previousSecretExpiresAt } } } }""",
        {"id": made["endpoint"]["id"]},
    )
    new = rotated["rotateWebhookSecret"]["secret"]
    assert new != old and rotated["rotateWebhookSecret"]["endpoint"]["previousSecretExpiresAt"]
    await world.hand_off()
    (message,) = await receiver.wait_for("/rotate", 1)
    assert len(message.headers["webhook-signature"].split(" ")) == 2
    assert verified(new, message) == verified(old, message)
    # A third secret, with no grace: only it signs.
    await graphql(
        webhook_server,
        token,
        """mutation($id: ID!) { rotateWebhookSecret(input: {id: $id, graceSeconds: 0}) {
             ... on WebhookSecretSuccess { secret } } }""",
        {"id": made["endpoint"]["id"]},
    )
    import pytest
    from standardwebhooks.webhooks import WebhookVerificationError

    await world.hand_off()
    second = (await receiver.wait_for("/rotate", 2))[1]
    assert len(second.headers["webhook-signature"].split(" ")) == 1
    with pytest.raises(WebhookVerificationError):
        verified(new, second)


async def test_410_disables_the_endpoint_and_enabling_resumes_where_it_stopped(
    webhook_server: LiveServer, world: World, receiver: Receiver
) -> None:
    token = await webhook_server.token(owner(world.req_owner))
    receiver.status["/gone"] = 410
    made = await create_endpoint(
        webhook_server, token, receiver.at("/gone"), taskEvents={"states": ["requested"]}
    )
    endpoint_id = made["endpoint"]["id"]
    await world.hand_off()
    await receiver.wait_for("/gone", 1)

    async def disabled() -> dict[str, Any] | None:
        state = await endpoint_state(webhook_server, token, endpoint_id)
        return state if not state["enabled"] else None

    state = await eventually(disabled)
    assert "410" in state["disabledReason"]
    (delivery,) = state["deliveries"]
    assert delivery["status"] == "PENDING" and delivery["responseStatus"] == 410
    await world.hand_off()  # committed while disabled: kept for later
    receiver.status["/gone"] = 200
    await graphql(
        webhook_server,
        token,
        "mutation($id: ID!) { updateWebhookEndpoint(input: {id: $id, enabled: true}) "
        "{ __typename } }",
        {"id": endpoint_id},
    )
    messages = await receiver.wait_for("/gone", 3)
    ids = [m.headers["webhook-id"] for m in messages]
    assert ids[0] == ids[1] != ids[2]  # the failed one again, then the next


async def test_repeated_failure_disables_the_endpoint_and_says_so(
    webhook_server: LiveServer, world: World, receiver: Receiver
) -> None:
    token = await webhook_server.token(owner(world.req_owner))
    receiver.status["/down"] = 503
    made = await create_endpoint(
        webhook_server, token, receiver.at("/down"), taskEvents={"states": ["requested"]}
    )
    endpoint_id = made["endpoint"]["id"]
    await world.hand_off()

    async def disabled() -> dict[str, Any] | None:
        state = await endpoint_state(webhook_server, token, endpoint_id)
        return state if not state["enabled"] else None

    state = await eventually(disabled)
    assert len(receiver.got["/down"]) == 5  # BATON_WEBHOOK_MAX_ATTEMPTS in the fixture
    assert state["disabledReason"].startswith("5 attempts in a row failed")
    assert "HTTP 503" in state["disabledReason"]
    assert state["deliveries"][0]["attempts"] == 5


async def test_redirects_are_not_followed(
    webhook_server: LiveServer, world: World, receiver: Receiver
) -> None:
    token = await webhook_server.token(owner(world.req_owner))
    receiver.status["/moved"] = 302
    made = await create_endpoint(
        webhook_server, token, receiver.at("/moved"), taskEvents={"states": ["requested"]}
    )
    await world.hand_off()
    await receiver.wait_for("/moved", 1)

    async def failed() -> dict[str, Any] | None:
        state = await endpoint_state(webhook_server, token, made["endpoint"]["id"])
        return state if state["deliveries"] else None

    state = await eventually(failed)
    assert "redirects are not followed" in state["deliveries"][0]["lastError"]
    assert state["deliveries"][0]["status"] == "PENDING"


async def test_ping_and_redelivery(
    webhook_server: LiveServer, world: World, receiver: Receiver
) -> None:
    token = await webhook_server.token(owner(world.req_owner))
    made = await create_endpoint(
        webhook_server, token, receiver.at("/manual"), taskEvents={"states": ["requested"]}
    )
    endpoint_id = made["endpoint"]["id"]
    pinged = await graphql(
        webhook_server,
        token,
        "mutation($id: ID!) { pingWebhookEndpoint(input: {id: $id}) "
        "{ ... on WebhookDeliverySuccess { delivery { id kind status } } } }",
        {"id": endpoint_id},
    )
    assert pinged["pingWebhookEndpoint"]["delivery"]["kind"] == "PING"
    (ping,) = await receiver.wait_for("/manual", 1)
    assert verified(made["secret"], ping)["type"] == "ping"

    await world.hand_off()
    event = (await receiver.wait_for("/manual", 2))[1]

    async def delivered() -> dict[str, Any] | None:
        state = await endpoint_state(webhook_server, token, endpoint_id)
        found = [d for d in state["deliveries"] if d["kind"] == "EVENT"]
        return found[0] if found and found[0]["status"] == "DELIVERED" else None

    delivery = await eventually(delivered)
    again = await graphql(
        webhook_server,
        token,
        "mutation($id: ID!) { redeliverWebhook(input: {deliveryId: $id}) "
        "{ ... on WebhookDeliverySuccess { delivery { kind messageId eventId } } } }",
        {"id": delivery["id"]},
    )
    assert again["redeliverWebhook"]["delivery"]["kind"] == "REDELIVERY"
    redelivered = (await receiver.wait_for("/manual", 3))[2]
    assert redelivered.headers["webhook-id"] == event.headers["webhook-id"]
    assert verified(made["secret"], redelivered) == verified(made["secret"], event)


async def test_an_endpoint_sees_only_what_its_owner_may_see(
    webhook_server: LiveServer, world: World, receiver: Receiver
) -> None:
    mine = await webhook_server.token(owner(world.req_owner))
    outsider = await webhook_server.token(owner(f"x{world.tag}"))
    await create_endpoint(webhook_server, mine, receiver.at("/mine"))
    theirs = await create_endpoint(
        webhook_server, outsider, receiver.at("/theirs"), taskEvents={"taskIds": []}
    )
    everything = await create_endpoint(webhook_server, outsider, receiver.at("/all"))
    task = await world.hand_off()
    await receiver.wait_for("/mine", 2)
    last = (await event_ids(webhook_server.db, task.id))[-1]

    async def passed(endpoint_id: str) -> bool:
        cursor = await webhook_server.db.fetchval(
            "SELECT task_cursor FROM webhook_endpoints WHERE id = $1", endpoint_id
        )
        return int(cursor) >= last

    # The outsider's endpoints have read past the events without sending any.
    await eventually(lambda: passed(everything["endpoint"]["id"]))
    await eventually(lambda: passed(theirs["endpoint"]["id"]))
    assert receiver.got["/all"] == [] and receiver.got["/theirs"] == []
