"""A change to an endpoint that a delivery turn holds answers only once any turn, in whichever
process, has looked at its endpoint again: a turn trusts its last look for
`TURN_TRUSTS_SECONDS` (the worker checks once per that, not before every message), so the
change waits that long, and only then is it true that nothing more goes out as it was."""

from __future__ import annotations

import time

from baton.services.task_webhooks import TURN_TRUSTS_SECONDS
from baton.store import webhooks as store
from tests.conftest import LiveServer
from tests.helpers import World
from tests.webhooks.conftest import Receiver, create_endpoint, graphql, token_for
from tests.webhooks.test_changes import owner, queued, update
from tests.webhooks.test_delivery import eventually

DELETE = """mutation($id: ID!) { deleteWebhookEndpoint(input: {id: $id}) { __typename } }"""


async def test_a_change_to_an_endpoint_a_turn_holds_waits_out_the_turns_trust(
    webhook_server: LiveServer, world: World, receiver: Receiver
) -> None:
    token, made, _ = await queued(webhook_server, world, receiver, "/held")
    id = made["endpoint"]["id"]
    async with webhook_server.db.connection() as conn:
        assert await store.leased(conn, [id])
    started = time.monotonic()
    await update(webhook_server, token, id=id, description="changed while a turn holds it")
    assert time.monotonic() - started >= TURN_TRUSTS_SECONDS
    started = time.monotonic()
    answer = await graphql(webhook_server, token, DELETE, {"id": id})
    assert answer["deleteWebhookEndpoint"]["__typename"] == "WebhookEndpointSuccess"
    assert time.monotonic() - started >= TURN_TRUSTS_SECONDS
    receiver.holds["/held"].set()


async def test_an_endpoint_no_turn_holds_is_not_leased(
    webhook_server: LiveServer, world: World, receiver: Receiver
) -> None:
    token = await token_for(webhook_server, owner(world.req_owner))
    made = await create_endpoint(webhook_server, token, receiver.at("/idle"))
    id = made["endpoint"]["id"]
    await world.hand_off()
    await receiver.wait_for("/idle", 2)  # requested, routed: the turn ends with nothing left

    async def released() -> bool:
        async with webhook_server.db.connection() as conn:
            return not await store.leased(conn, [id])

    await eventually(released)
