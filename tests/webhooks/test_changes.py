"""An owner's change to an endpoint holds from the next message, even in the middle of a turn;
an attempt on its way when the change is made counts for nothing against the endpoint."""

from __future__ import annotations

import asyncio
from typing import Any

from baton.access.principals import Principal, PrincipalKind
from tests.conftest import LiveServer
from tests.helpers import World
from tests.webhooks.conftest import Receiver, create_endpoint, graphql
from tests.webhooks.test_delivery import endpoint_state, event_ids, eventually, verified

UPDATE = """mutation($input: UpdateWebhookEndpointInput!) { updateWebhookEndpoint(input: $input) {
    __typename ... on WebhookEndpointSuccess { endpoint { url enabled taskEvents } } } }"""


def owner(handle: str) -> Principal:
    return Principal(PrincipalKind.OWNER, handle)


async def update(server: LiveServer, token: str, **fields: Any) -> dict[str, Any]:
    answer = await graphql(server, token, UPDATE, {"input": fields})
    result: dict[str, Any] = answer["updateWebhookEndpoint"]
    assert result["__typename"] == "WebhookEndpointSuccess", result
    return result


async def queued(
    server: LiveServer, world: World, receiver: Receiver, path: str, **fields: Any
) -> tuple[str, dict[str, Any], list[int]]:
    """An endpoint at `path` whose first message hangs there, with three more events queued
    behind it in the same turn: (the owner's token, the endpoint made, the four event ids)."""
    token = await server.token(owner(world.req_owner))
    receiver.holds[path] = asyncio.Event()
    made = await create_endpoint(server, token, receiver.at(path), **fields)
    first = await world.hand_off()
    await receiver.wait_for(path, 1)  # the turn is sending (and waiting on) the first one
    second = await world.hand_off()
    ids = await event_ids(server.db, first.id) + await event_ids(server.db, second.id)
    return token, made, ids


async def test_after_a_new_url_is_answered_nothing_more_goes_to_the_old_one(
    webhook_server: LiveServer, world: World, receiver: Receiver
) -> None:
    token, made, ids = await queued(webhook_server, world, receiver, "/was")
    await update(webhook_server, token, id=made["endpoint"]["id"], url=receiver.at("/now"))
    receiver.holds["/was"].set()  # the message on its way is answered 200 at the old URL
    messages = await receiver.wait_for("/now", 3)
    # In order: had the old URL had another message, it would have been before these.
    got = [int(verified(made["secret"], m)["data"]["taskEvents"]["id"]) for m in messages]
    assert got == ids[1:]
    assert len(receiver.got["/was"]) == 1
    assert (
        int(verified(made["secret"], receiver.got["/was"][0])["data"]["taskEvents"]["id"])
        == (ids[0])
    )


async def test_a_narrower_filter_holds_from_the_next_message_of_the_running_turn(
    webhook_server: LiveServer, world: World, receiver: Receiver
) -> None:
    token, made, ids = await queued(webhook_server, world, receiver, "/narrow")
    # The events: requested, routed, requested, routed. From now on: routed ones only.
    await update(
        webhook_server, token, id=made["endpoint"]["id"], taskEvents={"states": ["routed"]}
    )
    receiver.holds["/narrow"].set()
    messages = await receiver.wait_for("/narrow", 3)
    states = [verified(made["secret"], m)["data"]["taskEvents"]["toState"] for m in messages]
    assert states == ["requested", "routed", "routed"]  # the second `requested` was not sent
    got = [int(verified(made["secret"], m)["data"]["taskEvents"]["id"]) for m in messages]
    assert got == [ids[0], ids[1], ids[3]]


async def test_an_attempt_on_its_way_when_the_owner_disables_counts_for_nothing(
    webhook_server: LiveServer, world: World, receiver: Receiver
) -> None:
    """Disabled while its message hangs, which is then answered 410: the endpoint stays
    disabled by its owner (not by the 410), with no failure counted, and nothing more is sent
    until it is enabled; then the unacknowledged message goes again, then the rest."""
    token, made, ids = await queued(webhook_server, world, receiver, "/paused")
    endpoint_id = made["endpoint"]["id"]
    await update(webhook_server, token, id=endpoint_id, enabled=False)
    receiver.status["/paused"] = 410
    receiver.holds["/paused"].set()

    async def attempted() -> dict[str, Any] | None:
        state = await endpoint_state(webhook_server, token, endpoint_id)
        return state if state["deliveries"] else None

    state = await eventually(attempted)  # the answer is in its history
    assert state["deliveries"][0]["responseStatus"] == 410
    assert not state["enabled"] and state["disabledReason"] == "disabled by its owner"
    assert state["failures"] == 0 and state["nextAttemptAt"] is None
    assert len(receiver.got["/paused"]) == 1
    receiver.status["/paused"] = 200
    await update(webhook_server, token, id=endpoint_id, enabled=True)
    messages = await receiver.wait_for("/paused", 5)
    got = [int(verified(made["secret"], m)["data"]["taskEvents"]["id"]) for m in messages]
    assert got == [ids[0], *ids]


async def test_a_deleted_endpoint_gets_nothing_more_from_its_running_turn(
    webhook_server: LiveServer, world: World, receiver: Receiver
) -> None:
    token, made, _ = await queued(webhook_server, world, receiver, "/deleted")
    witness = await create_endpoint(webhook_server, token, receiver.at("/witness"))
    answer = await graphql(
        webhook_server,
        token,
        "mutation($id: ID!) { deleteWebhookEndpoint(input: {id: $id}) { __typename } }",
        {"id": made["endpoint"]["id"]},
    )
    assert answer["deleteWebhookEndpoint"]["__typename"] == "WebhookEndpointSuccess"
    receiver.holds["/deleted"].set()
    # A message the worker sends after the deleted endpoint's answer came back: by then the
    # old turn would have gone on to its next message.
    await asyncio.sleep(0.5)
    await world.hand_off()
    await receiver.wait_for("/witness", 2)
    assert witness["__typename"] == "WebhookSecretSuccess"
    assert len(receiver.got["/deleted"]) == 1
