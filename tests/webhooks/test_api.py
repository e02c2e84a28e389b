"""Managing endpoints over HTTP: who may, what is refused, what is shown."""

from __future__ import annotations

from typing import Any

import pytest

from baton.access.principals import ADMIN, Principal, PrincipalKind
from baton.store.webhooks import MAX_ENDPOINTS
from tests.conftest import LiveServer
from tests.helpers import World
from tests.webhooks.conftest import create_endpoint, graphql
from tests.webhooks.test_delivery import eventually


def owner(handle: str) -> Principal:
    return Principal(PrincipalKind.OWNER, handle)


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("https://127.0.0.1/hook", "loopback"),
        ("https://localhost:8443/hook", "loopback"),
        ("https://10.1.2.3/hook", "private"),
        ("https://192.168.0.10/hook", "private"),
        ("https://169.254.169.254/latest/meta-data", "link-local"),
        ("https://[::1]/hook", "loopback"),
        ("https://[::ffff:127.0.0.1]/hook", "loopback"),
        ("https://[fd00::1]/hook", "private"),
        ("https://0.0.0.0/hook", "unspecified"),
        ("http://example.com/hook", "https://"),
        ("ftp://example.com/hook", "https://"),
        ("https://user:pw@example.com/hook", "credentials"),
        ("not a url", "whitespace"),
    ],
)
async def test_a_url_baton_may_not_call_is_refused(
    live_server: LiveServer, world: World, url: str, why: str
) -> None:
    """`live_server` runs with the defaults: no private addresses, https only. Nothing is
    ever sent to these addresses: they are refused when the endpoint is saved."""
    token = await live_server.token(owner(world.req_owner))
    made = await create_endpoint(live_server, token, url)
    assert made["__typename"] == "InvalidInputError", made
    assert made["field"] == "url" and why in made["message"], made
    listed = await graphql(live_server, token, "{ webhookEndpoints { id } }")
    assert listed["webhookEndpoints"] == []


async def test_the_secret_is_shown_once_and_never_stored_as_given_in_answers(
    webhook_server: LiveServer, world: World
) -> None:
    token = await webhook_server.token(owner(world.req_owner))
    made = await create_endpoint(
        webhook_server,
        token,
        "http://127.0.0.1:9/hook",
        taskEvents={"projects": [world.project], "states": ["routed", "completed"]},
        runEvents={"events": ["CLAIM"]},
        description="CI",
    )
    assert made["__typename"] == "WebhookSecretSuccess"
    endpoint = made["endpoint"]
    assert endpoint["owner"] == world.req_owner and endpoint["enabled"]
    assert endpoint["taskEvents"] == {
        "projects": [world.project],
        "states": ["completed", "routed"],
    }
    assert endpoint["runEvents"] == {"events": ["CLAIM"]}
    listed = await graphql(
        webhook_server, token, "{ webhookEndpoints { id url description taskEvents } }"
    )
    assert [e["id"] for e in listed["webhookEndpoints"]] == [endpoint["id"]]
    schema_fields = await graphql(
        webhook_server, token, '{ __type(name: "WebhookEndpoint") { fields { name } } }'
    )
    assert "secret" not in {f["name"] for f in schema_fields["__type"]["fields"]}


async def test_who_may_manage_endpoints(webhook_server: LiveServer, world: World) -> None:
    alice = await webhook_server.token(owner(world.req_owner))
    agent = await webhook_server.token(Principal(PrincipalKind.AGENT, world.requester))
    other = await webhook_server.token(owner(f"x{world.tag}"))
    admin = await webhook_server.token(ADMIN)
    made = await create_endpoint(webhook_server, alice, "http://127.0.0.1:9/a")
    id = made["endpoint"]["id"]

    refused = await create_endpoint(webhook_server, agent, "http://127.0.0.1:9/a")
    assert refused["__typename"] == "ForbiddenError"
    refused = await create_endpoint(webhook_server, admin, "http://127.0.0.1:9/a")
    assert refused["__typename"] == "InvalidInputError" and refused["field"] == "owner"
    by_admin = await create_endpoint(
        webhook_server, admin, "http://127.0.0.1:9/b", owner=world.req_owner
    )
    assert by_admin["endpoint"]["owner"] == world.req_owner

    ping = "mutation($id: ID!) { pingWebhookEndpoint(input: {id: $id}) { __typename } }"
    for token, expected in ((other, "NotFoundError"), (agent, "ForbiddenError")):
        answer = await graphql(webhook_server, token, ping, {"id": id})
        assert answer["pingWebhookEndpoint"]["__typename"] == expected
    one = "query($id: ID!) { webhookEndpoint(id: $id) { id } }"
    assert (await graphql(webhook_server, other, one, {"id": id}))["webhookEndpoint"] is None
    assert (await graphql(webhook_server, admin, one, {"id": id}))["webhookEndpoint"]
    everyone = await graphql(
        webhook_server,
        admin,
        "query($o: String) { webhookEndpoints(owner: $o) { id } }",
        {"o": world.req_owner},
    )
    assert len(everyone["webhookEndpoints"]) == 2

    delete = "mutation($id: ID!) { deleteWebhookEndpoint(input: {id: $id}) { __typename } }"
    answer = await graphql(webhook_server, other, delete, {"id": id})
    assert answer["deleteWebhookEndpoint"]["__typename"] == "NotFoundError"
    answer = await graphql(webhook_server, alice, delete, {"id": id})
    assert answer["deleteWebhookEndpoint"]["__typename"] == "WebhookEndpointSuccess"
    assert (await graphql(webhook_server, alice, one, {"id": id}))["webhookEndpoint"] is None


async def test_bad_input_is_a_typed_error(webhook_server: LiveServer, world: World) -> None:
    token = await webhook_server.token(owner(world.req_owner))

    async def refused(**fields: Any) -> dict[str, Any]:
        made = await create_endpoint(webhook_server, token, "http://127.0.0.1:9/x", **fields)
        assert made["__typename"] == "InvalidInputError", made
        return made

    assert (await refused(taskEvents=None, runEvents=None))["field"] == "taskEvents"
    assert (await refused(description="x" * 501))["field"] == "description"
    made = await refused(taskEvents={"projects": [f"p{i}" for i in range(101)]})
    assert made["field"] == "filter.projects"
    made = await create_endpoint(webhook_server, token, "http://127.0.0.1:9/x")
    rotate = """mutation($id: ID!, $g: Int!) {
        rotateWebhookSecret(input: {id: $id, graceSeconds: $g}) {
            __typename ... on InvalidInputError { field } } }"""
    answer = await graphql(
        webhook_server, token, rotate, {"id": made["endpoint"]["id"], "g": 10**7}
    )
    assert answer["rotateWebhookSecret"] == {
        "__typename": "InvalidInputError",
        "field": "graceSeconds",
    }
    redeliver = """mutation($id: ID!) { redeliverWebhook(input: {deliveryId: $id})
        { __typename ... on InvalidInputError { field } } }"""
    answer = await graphql(webhook_server, token, redeliver, {"id": "nope"})
    assert answer["redeliverWebhook"]["__typename"] == "InvalidInputError"
    answer = await graphql(webhook_server, token, redeliver, {"id": "999999999"})
    assert answer["redeliverWebhook"]["__typename"] == "NotFoundError"


async def test_an_owner_has_a_bounded_number_of_endpoints(
    webhook_server: LiveServer, world: World
) -> None:
    token = await webhook_server.token(owner(f"m{world.tag}"))
    for _ in range(MAX_ENDPOINTS):
        made = await create_endpoint(webhook_server, token, "http://127.0.0.1:9/x")
        assert made["__typename"] == "WebhookSecretSuccess"
    made = await create_endpoint(webhook_server, token, "http://127.0.0.1:9/x")
    assert made["__typename"] == "InvalidInputError" and made["field"] == "owner"


async def test_update_changes_what_is_given(webhook_server: LiveServer, world: World) -> None:
    token = await webhook_server.token(owner(world.req_owner))
    made = await create_endpoint(webhook_server, token, "http://127.0.0.1:9/x")
    update = """mutation($input: UpdateWebhookEndpointInput!) {
        updateWebhookEndpoint(input: $input) {
        __typename ... on WebhookEndpointSuccess { endpoint { url description enabled
        disabledReason taskEvents runEvents } } ... on InvalidInputError { field } } }"""
    id = made["endpoint"]["id"]
    answer = await graphql(
        webhook_server,
        token,
        update,
        {"input": {"id": id, "description": "new", "runEvents": {}, "enabled": False}},
    )
    endpoint = answer["updateWebhookEndpoint"]["endpoint"]
    assert endpoint["description"] == "new" and endpoint["url"] == "http://127.0.0.1:9/x"
    assert endpoint["taskEvents"] == {} and endpoint["runEvents"] == {}
    assert not endpoint["enabled"] and endpoint["disabledReason"] == "disabled by its owner"
    answer = await graphql(
        webhook_server, token, update, {"input": {"id": id, "taskEvents": None, "runEvents": None}}
    )
    assert answer["updateWebhookEndpoint"]["__typename"] == "InvalidInputError"
    answer = await graphql(
        webhook_server, token, update, {"input": {"id": id, "taskEvents": None, "enabled": True}}
    )
    endpoint = answer["updateWebhookEndpoint"]["endpoint"]
    assert endpoint["taskEvents"] is None and endpoint["enabled"]
    answer = await graphql(webhook_server, token, update, {"input": {"id": id, "url": "ftp://x/"}})
    assert answer["updateWebhookEndpoint"]["field"] == "url"


async def test_a_server_without_endpoints_follows_no_event_log_for_them(
    live_server: LiveServer, webhook_server: LiveServer, world: World
) -> None:
    """With no endpoint in its database a server's webhook worker holds no live stream (so its
    hub reads nothing per commit for it); with endpoints it follows both logs."""
    import httpx

    async def streams(server: LiveServer) -> float:
        headers = {"Authorization": f"Bearer {await server.token(ADMIN)}"}  # /metrics needs it
        async with httpx.AsyncClient(headers=headers) as client:
            text = (await client.get(f"{server.url}/metrics")).text
        (line,) = [x for x in text.splitlines() if x.startswith("baton_live_subscriptions ")]
        return float(line.split()[1])

    assert await live_server.db.fetchval("SELECT count(*) FROM webhook_endpoints") == 0
    assert await streams(live_server) == 0
    token = await webhook_server.token(owner(f"s{world.tag}"))
    await create_endpoint(webhook_server, token, "http://127.0.0.1:9/x")

    async def following() -> bool:
        return await streams(webhook_server) >= 2

    await eventually(following)
