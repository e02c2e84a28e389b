"""Bad requests for an event stream get a clear answer before any stream: an HTTP status with
the GraphQL error envelope in JSON, and nothing executed. A document refused before execution
is answered as the graphql-sse protocol requires (in the stream), or as GraphQL over HTTP does
for a client that also accepts JSON."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from tests.conftest import LiveServer
from tests.helpers import World
from tests.live.client import TASK_EVENTS
from tests.sse.client import subscribe

STREAM = {"Accept": "text/event-stream"}


async def post(
    server: LiveServer,
    token: str | None,
    content: bytes,
    headers: dict[str, str] | None = None,
    *,
    method: str = "POST",
) -> httpx.Response:
    sent = {**STREAM, "Content-Type": "application/json", **(headers or {})}
    if token is not None:
        sent["Authorization"] = f"Bearer {token}"
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
        return await client.request(method, "/graphql", content=content, headers=sent)


def error_of(response: httpx.Response) -> dict[str, Any]:
    assert response.headers["content-type"].startswith("application/json"), response.headers
    body = response.json()
    assert "data" not in body
    (error,) = body["errors"]
    return error  # type: ignore[no-any-return]


def hand_off_input(world: World, client_id: str) -> dict[str, Any]:
    return {
        "id": client_id,
        "project": world.project,
        "requester": world.requester,
        "assignee": world.assignee,
        "packet": {"task": "t", "deliverableType": "doc", "acceptanceCriteria": ["a"]},
    }


HAND_OFF = "mutation($input: HandOffInput!) { handOff(input: $input) { __typename } }"


async def task_exists(server: LiveServer, world: World, client_id: str) -> bool:
    found = await server.db.fetchval(
        "SELECT count(*) FROM tasks WHERE id = $1", f"{world.req_owner}_{client_id}"
    )
    return bool(found)


@pytest.mark.parametrize("token", [None, "baton_not-a-real-token", "garbage"])
async def test_without_a_valid_token_it_is_401_and_nothing_runs(
    live_server: LiveServer, world: World, token: str | None
) -> None:
    body = {"query": HAND_OFF, "variables": {"input": hand_off_input(world, "no-token")}}
    response = await post(live_server, token, json.dumps(body).encode())
    assert response.status_code == 401
    assert response.headers["www-authenticate"].startswith("Bearer")
    assert error_of(response)["extensions"]["code"] == "unauthenticated"
    assert not await task_exists(live_server, world, "no-token")


@pytest.mark.parametrize(
    ("content", "headers", "status", "words"),
    [
        (b'{"query": "{ viewer { handle } }"', {}, 400, "not valid JSON"),
        (b"[]", {}, 400, "batched requests are not supported"),
        (b'"a string"', {}, 400, "must be a JSON object"),
        (b'{"variables": {}}', {}, 400, "needs a query"),
        (b'{"query": "{ viewer { handle } }", "variables": [1]}', {}, 400, "variables"),
        (
            b'{"query": "{ viewer { handle } }"}',
            {"Content-Type": "text/plain"},
            415,
            "application/json",
        ),
    ],
)
async def test_a_request_that_is_not_a_graphql_request_is_refused_before_any_stream(
    live_server: LiveServer,
    world: World,
    content: bytes,
    headers: dict[str, str],
    status: int,
    words: str,
) -> None:
    token = await live_server.token(world.roles["requester"])
    response = await post(live_server, token, content, headers)
    assert response.status_code == status
    error = error_of(response)
    assert words in error["message"]
    assert error["extensions"]["code"] == "invalid_input"


async def test_a_body_past_the_limit_is_413_declared_or_streamed(
    live_server: LiveServer, world: World
) -> None:
    token = await live_server.token(world.roles["requester"])
    big = json.dumps({"query": "{ viewer { handle } }", "x": "y" * (1024 * 1024)}).encode()
    declared = await post(live_server, token, big)
    assert declared.status_code == 413
    assert error_of(declared)["extensions"]["code"] == "payload_too_large"

    async def chunks() -> Any:  # no Content-Length: refused as it streams in
        for start in range(0, len(big), 65536):
            yield big[start : start + 65536]

    async with httpx.AsyncClient(base_url=live_server.url, timeout=30) as client:
        streamed = await client.post(
            "/graphql",
            content=chunks(),
            headers={
                **STREAM,
                "Content-Type": "application/json",
                "Authorization": f"Bearer {token}",
            },
        )
    assert streamed.status_code == 413


@pytest.mark.parametrize("method", ["PUT", "DELETE", "PATCH"])
async def test_other_methods_are_405_single_connection_mode_included(
    live_server: LiveServer, world: World, method: str
) -> None:
    """graphql-sse's single connection mode reserves a stream with PUT: not served."""
    token = await live_server.token(world.roles["requester"])
    response = await post(live_server, token, b"", method=method)
    assert response.status_code == 405
    assert response.headers["allow"] == "GET, POST"
    assert error_of(response)["message"] == "use GET or POST"


async def test_a_mutation_over_get_is_405_and_not_run(
    live_server: LiveServer, world: World
) -> None:
    token = await live_server.token(world.roles["requester"])
    variables = json.dumps({"input": hand_off_input(world, "over-get")})
    async with httpx.AsyncClient(base_url=live_server.url, timeout=30) as client:
        response = await client.get(
            "/graphql/stream",
            params={"query": HAND_OFF, "variables": variables},
            headers={"Authorization": f"Bearer {token}"},
        )
    assert response.status_code == 405
    assert response.headers["allow"] == "POST"
    assert not await task_exists(live_server, world, "over-get")


REFUSED = [
    pytest.param("subscription { taskEvents(", {}, "Syntax Error", id="syntax"),
    pytest.param("subscription { taskEvents { nope } }", {}, "nope", id="validation"),
    pytest.param(
        TASK_EVENTS,
        {"filter": {"taskIds": [str(n) for n in range(101)]}},
        "more than 100 values",
        id="arguments",
    ),
    pytest.param(TASK_EVENTS, {"after": "not-a-cursor"}, "after", id="cursor"),
]


@pytest.mark.parametrize(("query", "variables", "words"), REFUSED)
async def test_a_subscription_refused_before_execution_is_one_next_with_errors_then_complete(
    live_server: LiveServer, world: World, query: str, variables: dict[str, Any], words: str
) -> None:
    """As PROTOCOL.md requires: a client that accepts only text/event-stream (graphql-sse's
    own) gets the errors in the stream it asked for, with no data."""
    token = await live_server.token(world.roles["requester"])
    async with subscribe(live_server.url, token, query, variables) as stream:
        assert stream.response.status_code == 200
        messages = await stream.rest()
    assert [m.event for m in messages] == ["next", "complete"]
    result = messages[0].data
    assert "data" not in result
    assert words in json.dumps(result["errors"])
    assert {e["extensions"]["code"] for e in result["errors"]} == {"invalid_input"}


@pytest.mark.parametrize(("query", "variables", "words"), REFUSED)
async def test_a_subscription_refused_before_execution_is_400_for_a_client_accepting_json(
    live_server: LiveServer, world: World, query: str, variables: dict[str, Any], words: str
) -> None:
    """GraphQL over HTTP's answer for a client that also accepts its JSON media type."""
    token = await live_server.token(world.roles["requester"])
    body = json.dumps({"query": query, "variables": variables}).encode()
    accept = {"Accept": "text/event-stream, application/graphql-response+json"}
    response = await post(live_server, token, body, accept)
    assert response.status_code == 400
    assert response.headers["content-type"].startswith("application/graphql-response+json")
    errors = response.json()["errors"]
    assert words in json.dumps(errors)
    assert "data" not in response.json()


async def test_a_refused_mutation_writes_nothing(live_server: LiveServer, world: World) -> None:
    token = await live_server.token(world.roles["requester"])
    task_input = hand_off_input(world, "refused")
    task_input["packet"]["deliverableType"] = "not-a-type"
    async with subscribe(live_server.url, token, HAND_OFF, {"input": task_input}) as stream:
        messages = await stream.rest()
    assert [m.event for m in messages] == ["next", "complete"]
    assert messages[0].data["errors"][0]["extensions"]["code"] == "invalid_input"
    assert not await task_exists(live_server, world, "refused")


async def test_a_subscription_posted_without_asking_for_a_stream_is_told_what_to_do(
    live_server: LiveServer, world: World
) -> None:
    """Plain GraphQL over HTTP (no `Accept: text/event-stream`) still refuses subscriptions."""
    token = await live_server.token(world.roles["requester"])
    body = json.dumps({"query": TASK_EVENTS}).encode()
    response = await post(live_server, token, body, {"Accept": "application/json"})
    assert response.status_code == 200
    assert "a subscription needs a stream" in response.json()["errors"][0]["message"]


async def test_the_stream_path_needs_no_accept_header(
    live_server: LiveServer, world: World
) -> None:
    """On /graphql/stream any Accept gets the event stream; here are its exact bytes."""
    token = await live_server.token(world.roles["requester"])
    async with httpx.AsyncClient(base_url=live_server.url, timeout=30) as client:
        response = await client.post(
            "/graphql/stream",
            json={"query": "{ viewer { handle } }"},
            headers={"Authorization": f"Bearer {token}", "Accept": "*/*"},
        )
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/event-stream; charset=utf-8"
    assert response.text == (
        f'event: next\ndata: {{"data":{{"viewer":{{"handle":"{world.requester}"}}}}}}\n\n'
        "event: complete\ndata:\n\n"
    )
