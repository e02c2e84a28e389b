"""GraphQL over Server-Sent Events against a running `baton serve`, with httpx-sse: queries and
mutations as one `next` and `complete`, subscriptions replayed from a cursor and then live."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from baton.access.gate import GateDecision
from tests.conftest import LiveServer
from tests.helpers import World
from tests.live.client import TASK_EVENTS, HTTPClient, hand_off_via, move_mutation
from tests.sse.client import Message, subscribe
from tests.sse.conftest import OpenHTTP

TASK_UPDATED = "subscription($id: ID!) { taskUpdated(id: $id) { state version } }"


async def hand_off(client: HTTPClient, world: World, **extra: Any) -> dict[str, Any]:
    await world.decide(GateDecision.ALLOW)
    answer = await hand_off_via(client, world.project, world.requester, world.assignee, **extra)
    assert answer["__typename"] == "HandOffSuccess", answer
    return answer  # type: ignore[no-any-return]


async def move(client: HTTPClient, name: str, task_id: str, extra: str = "") -> None:
    answer = (await client(move_mutation(name, extra), id=task_id))[name]
    assert answer["__typename"] == "MoveSuccess", answer


def before(event_id: str) -> str:
    return str(int(event_id) - 1)


async def event_ids(client: HTTPClient, task_id: str) -> list[int]:
    """Every event id of the task, from its history (oldest first)."""
    data = await client(
        "query($id: ID!) { task(id: $id) { events(first: 100) { edges { node { id } } } } }",
        id=task_id,
    )
    return [int(edge["node"]["id"]) for edge in data["task"]["events"]["edges"]]


@pytest.mark.parametrize("path", ["/graphql", "/graphql/stream"])
async def test_a_query_is_one_next_then_complete(
    live_server: LiveServer, world: World, path: str
) -> None:
    token = await live_server.token(world.roles["requester"])
    async with subscribe(live_server.url, token, "{ viewer { handle } }", path=path) as stream:
        assert stream.response.status_code == 200
        assert stream.response.headers["content-type"].startswith("text/event-stream")
        assert stream.response.headers["cache-control"] == "no-cache"
        messages = await stream.rest()
    assert messages == [
        Message("next", {"data": {"viewer": {"handle": world.requester}}}),
        Message("complete", None),
    ]


async def test_a_mutation_is_one_next_then_complete_and_its_change_is_made(
    live_server: LiveServer, world: World, http_on: OpenHTTP
) -> None:
    await world.decide(GateDecision.ALLOW)
    token = await live_server.token(world.roles["requester"])
    mutation = """mutation($input: HandOffInput!) { handOff(input: $input) {
        ... on HandOffSuccess { task { id state } } ... on Error { code message } } }"""
    task_input = {
        "id": f"sse-{world.tag}",
        "project": world.project,
        "requester": world.requester,
        "assignee": world.assignee,
        "packet": {"task": "t", "deliverableType": "doc", "acceptanceCriteria": ["a"]},
    }
    async with subscribe(live_server.url, token, mutation, {"input": task_input}) as stream:
        messages = await stream.rest()
    assert [m.event for m in messages] == ["next", "complete"]
    task = messages[0].data["data"]["handOff"]["task"]
    assert task["state"] == "routed"
    reader = await http_on(live_server, world.roles["requester"])
    read = await reader("query($id: ID!) { task(id: $id) { state } }", id=task["id"])
    assert read == {"task": {"state": "routed"}}


async def test_a_subscription_replays_from_its_cursor_then_goes_on_live(
    live_server: LiveServer, world: World, http_on: OpenHTTP
) -> None:
    requester = await http_on(live_server, world.roles["requester"])
    assignee = await http_on(live_server, world.roles["assignee"])
    handed = await hand_off(requester, world)
    task_id, created = handed["task"]["id"], handed["events"][0]["id"]
    token = await live_server.token(world.roles["requester"])
    variables = {"filter": {"taskIds": [task_id]}, "after": before(created)}
    async with subscribe(live_server.url, token, TASK_EVENTS, variables) as stream:
        # The replayed events arrive first, which also proves the stream is listening.
        replayed = [r["taskEvents"] for r in await stream.results(2)]
        assert [e["toState"] for e in replayed] == ["requested", "routed"]
        await move(assignee, "acceptTask", task_id)
        await move(assignee, "startTask", task_id)
        live = [r["taskEvents"] for r in await stream.results(2)]
    assert [(e["move"], e["toState"]) for e in live] == [
        ("ACCEPT", "accepted"),
        ("START", "working"),
    ]
    ids = [int(e["id"]) for e in replayed + live]
    assert ids == await event_ids(requester, task_id)


async def test_reconnecting_with_the_last_id_seen_misses_nothing_and_repeats_nothing(
    live_server: LiveServer, world: World, http_on: OpenHTTP
) -> None:
    """The connection is cut mid-stream while events keep coming; the client reconnects with
    `after` set to the last event id it saw."""
    requester = await http_on(live_server, world.roles["requester"])
    assignee = await http_on(live_server, world.roles["assignee"])
    handed = await hand_off(requester, world, verification="REVIEW")
    task_id = handed["task"]["id"]
    token = await live_server.token(world.roles["assignee"])
    variables = {"filter": {"taskIds": [task_id]}, "after": before(handed["events"][0]["id"])}

    seen: list[dict[str, Any]] = []
    async with subscribe(live_server.url, token, TASK_EVENTS, variables) as stream:
        seen += [r["taskEvents"] for r in await stream.results(2)]
        await move(assignee, "acceptTask", task_id)
        seen += [r["taskEvents"] for r in await stream.results(1)]
        await move(assignee, "startTask", task_id)  # committed as the connection goes away
    await move(assignee, "pauseTask", task_id, ", waitingOn: human")

    variables["after"] = seen[-1]["id"]
    async with subscribe(live_server.url, token, TASK_EVENTS, variables) as stream:
        missed = [r["taskEvents"] for r in await stream.results(2)]
        assert [e["move"] for e in missed] == ["START", "PAUSE"]
        await move(assignee, "resumeTask", task_id)
        live = [r["taskEvents"] for r in await stream.results(1)]
    assert [e["move"] for e in live] == ["RESUME"]
    ids = [int(e["id"]) for e in seen + missed + live]
    assert ids == await event_ids(requester, task_id)


async def test_a_subscription_that_completes_ends_the_stream_with_complete(
    live_server: LiveServer, world: World, http_on: OpenHTTP
) -> None:
    requester = await http_on(live_server, world.roles["requester"])
    task_id = (await hand_off(requester, world))["task"]["id"]
    token = await live_server.token(world.roles["requester"])
    async with subscribe(live_server.url, token, TASK_UPDATED, {"id": task_id}) as stream:
        assert await stream.results(1) == [{"taskUpdated": {"state": "routed", "version": 2}}]
        await move(requester, "cancelTask", task_id)
        rest = await stream.rest()
    assert rest == [
        Message("next", {"data": {"taskUpdated": {"state": "cancelled", "version": 3}}}),
        Message("complete", None),
    ]


async def test_a_subscription_failing_at_its_start_answers_its_errors_then_complete(
    live_server: LiveServer, world: World, http_on: OpenHTTP
) -> None:
    requester = await http_on(live_server, world.roles["requester"])
    task_id = (await hand_off(requester, world))["task"]["id"]
    token = await live_server.token(world.roles["outsider_agent"])
    async with subscribe(live_server.url, token, TASK_UPDATED, {"id": task_id}) as stream:
        messages = await stream.rest()
    assert [m.event for m in messages] == ["next", "complete"]
    assert messages[0].data["data"] is None
    assert messages[0].data["errors"][0]["extensions"]["code"] == "not_found"


async def test_filters_and_visibility_hold_as_over_websockets(
    live_server: LiveServer, service: Any, http_on: OpenHTTP
) -> None:
    """An owner watching everything it can see gets its own task's events, never another
    owner's, in the same order as they were committed."""
    ours, theirs = World(service), World(service)
    token = await live_server.token(ours.roles["requester_owner"])
    other = await http_on(live_server, theirs.roles["requester"])
    mine = await http_on(live_server, ours.roles["requester"])
    sentinel = await hand_off(mine, ours)  # its cursor is where the watch starts
    variables = {"after": sentinel["events"][-1]["id"]}
    async with subscribe(live_server.url, token, TASK_EVENTS, variables) as stream:
        for _ in range(3):
            await hand_off(other, theirs)
        last = await hand_off(mine, ours)
        received = [r["taskEvents"] for r in await stream.results(2)]
    assert {e["taskId"] for e in received} == {last["task"]["id"]}
    assert [e["id"] for e in received] == [e["id"] for e in last["events"]]


async def test_a_subscription_over_get_with_the_query_string(
    live_server: LiveServer, world: World, http_on: OpenHTTP
) -> None:
    requester = await http_on(live_server, world.roles["requester"])
    task_id = (await hand_off(requester, world))["task"]["id"]
    token = await live_server.token(world.roles["requester"])
    async with (
        httpx.AsyncClient(base_url=live_server.url, timeout=30) as client,
        client.stream(
            "GET",
            "/graphql",
            params={"query": TASK_UPDATED, "variables": f'{{"id": "{task_id}"}}'},
            headers={"Authorization": f"Bearer {token}", "Accept": "text/event-stream"},
        ) as response,
    ):
        assert response.status_code == 200
        first = b""
        async for chunk in response.aiter_bytes():
            first += chunk
            if b"\n\n" in first.removeprefix(b":\n\n"):
                break
    assert b'event: next\ndata: {"data":{"taskUpdated":{"state":"routed"' in first
