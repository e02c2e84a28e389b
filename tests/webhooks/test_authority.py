"""Who may act on an endpoint is settled first: another owner's endpoint answers exactly as a
missing one, an agent gets what the schema says, and no URL is looked up for anyone who may
not manage the endpoint (the server is no resolver of internal names)."""

from __future__ import annotations

import secrets
from typing import Any

import httpx

from baton.access.principals import ADMIN, Principal, PrincipalKind
from tests.conftest import LiveServer
from tests.helpers import World
from tests.webhooks.conftest import Receiver, create_endpoint, graphql
from tests.webhooks.test_delivery import eventually

INTERNAL = "http://billing-db.corp.internal.test:5432/"  # a name only a look-up could tell about

UPDATE_URL = """mutation($id: ID!, $url: String!) {
    updateWebhookEndpoint(input: {id: $id, url: $url}) {
        __typename ... on Error { code message } ... on InvalidInputError { field } } }"""


def owner(handle: str) -> Principal:
    return Principal(PrincipalKind.OWNER, handle)


def agent(handle: str) -> Principal:
    return Principal(PrincipalKind.AGENT, handle)


async def lookups(server: LiveServer) -> float:
    """Host names the server's webhook URL checks have looked up (`baton_webhook_lookups`)."""
    headers = {"Authorization": f"Bearer {await server.token(ADMIN)}"}
    async with httpx.AsyncClient(headers=headers) as client:
        text = (await client.get(f"{server.url}/metrics")).text
    return sum(
        float(line.split()[-1])
        for line in text.splitlines()
        if line.startswith("baton_webhook_lookups_total{")
    )


def missing_id() -> str:
    return "wh_" + secrets.token_hex(10)


def without(answer: dict[str, Any], *ids: str) -> dict[str, Any]:
    """The answer with the ids it names blanked, to compare answers about different ids."""
    text = repr(answer)
    for id in ids:
        text = text.replace(id, "<id>")
    return {"answer": text}


async def test_another_owner_cannot_use_an_update_to_look_up_an_internal_name(
    webhook_server: LiveServer, world: World
) -> None:
    alice = await webhook_server.token(owner(world.req_owner))
    mallory = await webhook_server.token(owner(f"x{world.tag}"))
    made = await create_endpoint(webhook_server, alice, "http://127.0.0.1:9/a")
    existing, missing = made["endpoint"]["id"], missing_id()
    before = await lookups(webhook_server)

    theirs = await graphql(webhook_server, mallory, UPDATE_URL, {"id": existing, "url": INTERNAL})
    nothing = await graphql(webhook_server, mallory, UPDATE_URL, {"id": missing, "url": INTERNAL})
    assert theirs["updateWebhookEndpoint"]["__typename"] == "NotFoundError"
    assert without(theirs, existing) == without(nothing, missing)
    assert "corp" not in repr(theirs)
    assert await lookups(webhook_server) == before  # no look-up was made for either

    # The owner's own change is looked up (and refused: the name does not resolve): the
    # counter sees look-ups.
    own = await graphql(webhook_server, alice, UPDATE_URL, {"id": existing, "url": INTERNAL})
    assert own["updateWebhookEndpoint"]["__typename"] == "InvalidInputError"
    assert own["updateWebhookEndpoint"]["field"] == "url"
    assert await lookups(webhook_server) == before + 1


async def test_an_agent_is_refused_before_any_look_up(
    webhook_server: LiveServer, world: World
) -> None:
    alice = await webhook_server.token(owner(world.req_owner))
    bot = await webhook_server.token(agent(world.requester))
    made = await create_endpoint(webhook_server, alice, "http://127.0.0.1:9/a")
    before = await lookups(webhook_server)
    created = await create_endpoint(webhook_server, bot, INTERNAL)
    assert created["__typename"] == "ForbiddenError"
    for id in (made["endpoint"]["id"], missing_id()):
        changed = await graphql(webhook_server, bot, UPDATE_URL, {"id": id, "url": INTERNAL})
        assert changed["updateWebhookEndpoint"]["__typename"] == "ForbiddenError"
    # Admin naming an owner that cannot be is refused before the URL is looked up, too.
    admin = await webhook_server.token(ADMIN)
    refused = await create_endpoint(webhook_server, admin, INTERNAL, owner="no such/owner")
    assert refused["__typename"] == "InvalidInputError" and refused["field"] == "owner"
    assert await lookups(webhook_server) == before


async def test_a_refusal_names_no_address_a_host_name_resolved_to(
    live_server: LiveServer, world: World
) -> None:
    """`live_server` refuses private addresses: the owner learns the kind, not the address."""
    token = await live_server.token(owner(world.req_owner))
    made = await create_endpoint(live_server, token, "https://localhost:8443/hook")
    assert made["__typename"] == "InvalidInputError" and made["field"] == "url"
    assert "localhost resolves to a loopback address" in made["message"]
    assert "127.0.0.1" not in made["message"] and "::1" not in made["message"]


ONE = "query($id: ID!) { webhookEndpoint(id: $id) { id url } }"


async def test_an_agent_reading_an_endpoint_gets_null_as_the_schema_says(
    webhook_server: LiveServer, world: World
) -> None:
    alice = await webhook_server.token(owner(world.req_owner))
    bot = await webhook_server.token(agent(world.requester))
    mallory = await webhook_server.token(owner(f"x{world.tag}"))
    made = await create_endpoint(webhook_server, alice, "http://127.0.0.1:9/a")
    for token in (bot, mallory):
        for id in (made["endpoint"]["id"], missing_id()):
            answer = await graphql(webhook_server, token, ONE, {"id": id})
            assert answer == {"webhookEndpoint": None}
    listed = await graphql(webhook_server, mallory, "{ webhookEndpoints { id } }")
    assert listed == {"webhookEndpoints": []}
    mine = await graphql(webhook_server, alice, ONE, {"id": made["endpoint"]["id"]})
    assert mine["webhookEndpoint"]["id"] == made["endpoint"]["id"]


REDELIVER = """mutation($id: ID!) { redeliverWebhook(input: {deliveryId: $id}) {
    __typename ... on Error { code message } } }"""


async def test_another_owners_delivery_answers_as_a_missing_one(
    webhook_server: LiveServer, world: World, receiver: Receiver
) -> None:
    alice = await webhook_server.token(owner(world.req_owner))
    mallory = await webhook_server.token(owner(f"x{world.tag}"))
    bot = await webhook_server.token(agent(world.requester))
    made = await create_endpoint(
        webhook_server, alice, receiver.at("/owned"), taskEvents={"states": ["requested"]}
    )
    await world.hand_off()
    await receiver.wait_for("/owned", 1)

    async def delivered() -> int | None:
        value = await webhook_server.db.fetchval(
            "SELECT max(id) FROM webhook_deliveries WHERE endpoint_id = $1",
            made["endpoint"]["id"],
        )
        return int(value) if value is not None else None

    existing = str(await eventually(delivered))
    missing = str(10**15 + secrets.randbelow(10**6))
    theirs = await graphql(webhook_server, mallory, REDELIVER, {"id": existing})
    nothing = await graphql(webhook_server, mallory, REDELIVER, {"id": missing})
    assert theirs["redeliverWebhook"]["__typename"] == "NotFoundError"
    assert without(theirs, existing) == without(nothing, missing)
    # An agent is refused alike whether the delivery exists or not.
    for id in (existing, missing):
        answer = await graphql(webhook_server, bot, REDELIVER, {"id": id})
        assert answer["redeliverWebhook"]["__typename"] == "ForbiddenError"
    ping = """mutation($id: ID!) { pingWebhookEndpoint(input: {id: $id}) {
        __typename ... on Error { code message } } }"""
    endpoint, absent = made["endpoint"]["id"], missing_id()
    theirs = await graphql(webhook_server, mallory, ping, {"id": endpoint})
    nothing = await graphql(webhook_server, mallory, ping, {"id": absent})
    assert without(theirs, endpoint) == without(nothing, absent)
