"""Live task events over both WebSocket subprotocols, against a running `baton serve`."""

from __future__ import annotations

import json
from typing import Any

import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from baton.access.gate import GateDecision
from tests.conftest import LiveServer
from tests.helpers import RESULT_INPUT, World
from tests.live.client import (
    PROTOCOLS,
    TASK_EVENTS,
    HTTPClient,
    SubscriptionError,
    WSClient,
    hand_off_via,
    move_mutation,
)
from tests.live.conftest import OpenHTTP, OpenWS


async def hand_off(client: HTTPClient, world: World, **extra: Any) -> dict[str, Any]:
    """Hand off in `world`, whose assignee owner's gate allows it."""
    await world.decide(GateDecision.ALLOW)
    answer = await hand_off_via(client, world.project, world.requester, world.assignee, **extra)
    assert answer["__typename"] == "HandOffSuccess", answer
    return answer  # type: ignore[no-any-return]


async def move(client: HTTPClient, name: str, task_id: str, extra: str = "", **v: Any) -> None:
    answer = (await client(move_mutation(name, extra), id=task_id, **v))[name]
    assert answer["__typename"] == "MoveSuccess", answer


def before(event_id: str) -> str:
    return str(int(event_id) - 1)


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_a_subscriber_receives_each_event_of_a_task_in_order(
    world: World, ws_for: OpenWS, http_for: OpenHTTP, protocol: str
) -> None:
    assignee = await http_for(world.roles["assignee"])
    requester = await http_for(world.roles["requester"])
    handed = await hand_off(requester, world)
    task_id, created_id = handed["task"]["id"], handed["events"][0]["id"]

    ws = await ws_for(world.roles["requester"], protocol)
    await ws.subscribe(TASK_EVENTS, {"filter": {"taskIds": [task_id]}, "after": before(created_id)})
    # The replayed events arrive first, which also proves the stream is listening.
    first = await ws.collect(2)
    assert [e["taskEvents"]["toState"] for e in first] == ["requested", "routed"]

    await move(assignee, "acceptTask", task_id)
    await move(assignee, "startTask", task_id)
    checkpoint = await assignee(
        """mutation($id: ID!) { saveCheckpoint(input: {id: $id, checkpoint: {progress: "half"}}) {
             __typename } }""",
        id=task_id,
    )
    assert checkpoint["saveCheckpoint"]["__typename"] == "MoveSuccess"
    submitted = await assignee(
        """mutation($id: ID!, $result: ResultInput!) {
             submitResult(input: {id: $id, result: $result}) { __typename } }""",
        id=task_id,
        result=RESULT_INPUT,
    )
    assert submitted["submitResult"]["__typename"] == "MoveSuccess"

    rest = [e["taskEvents"] for e in await ws.collect(5)]
    assert [(e["kind"], e["move"], e["toState"]) for e in rest] == [
        ("moved", "ACCEPT", "accepted"),
        ("moved", "START", "working"),
        ("checkpoint_saved", None, "working"),
        ("moved", "SUBMIT_RESULT", "verifying"),
        ("moved", "COMPLETE", "completed"),
    ]
    ids = [int(e["taskEvents"]["id"]) for e in first] + [int(e["id"]) for e in rest]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    assert [e["task"]["version"] for e in rest] == [3, 4, 5, 6, 7]


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_resubscribing_with_the_last_cursor_replays_every_missed_event_once(
    world: World, ws_for: OpenWS, http_for: OpenHTTP, protocol: str
) -> None:
    assignee = await http_for(world.roles["assignee"])
    requester = await http_for(world.roles["requester"])
    handed = await hand_off(requester, world, verification="REVIEW")
    task_id = handed["task"]["id"]
    variables = {"filter": {"taskIds": [task_id]}, "after": before(handed["events"][0]["id"])}

    ws = await ws_for(world.roles["assignee"], protocol)
    await ws.subscribe(TASK_EVENTS, variables)
    seen = [e["taskEvents"] for e in await ws.collect(2)]
    await ws.close()

    await move(assignee, "acceptTask", task_id)
    await move(assignee, "startTask", task_id)
    await move(assignee, "pauseTask", task_id, ", waitingOn: human")

    again = await ws_for(world.roles["assignee"], protocol)
    await again.subscribe(TASK_EVENTS, {**variables, "after": seen[-1]["id"]})
    missed = [e["taskEvents"] for e in await again.collect(3)]
    assert [e["move"] for e in missed] == ["ACCEPT", "START", "PAUSE"]
    await move(assignee, "resumeTask", task_id)
    live = [e["taskEvents"] for e in await again.collect(1)]
    assert [e["move"] for e in live] == ["RESUME"]
    ids = [int(e["id"]) for e in seen + missed + live]
    assert ids == sorted(set(ids))


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_task_updated_sends_the_task_then_each_change_and_completes_at_the_end(
    world: World, ws_for: OpenWS, http_for: OpenHTTP, protocol: str
) -> None:
    assignee = await http_for(world.roles["assignee"])
    requester = await http_for(world.roles["requester"])
    task_id = (await hand_off(requester, world))["task"]["id"]
    ws = await ws_for(world.roles["requester"], protocol)
    await ws.subscribe(
        "subscription($id: ID!) { taskUpdated(id: $id) { state version } }", {"id": task_id}
    )
    assert (await ws.next()) == {"taskUpdated": {"state": "routed", "version": 2}}
    await move(assignee, "acceptTask", task_id)
    assert (await ws.next()) == {"taskUpdated": {"state": "accepted", "version": 3}}
    await move(requester, "cancelTask", task_id)
    assert (await ws.next()) == {"taskUpdated": {"state": "cancelled", "version": 4}}
    assert (await ws.next()) is None  # completed by the server


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_task_updated_for_an_invisible_task_is_not_found(
    world: World, ws_for: OpenWS, http_for: OpenHTTP, protocol: str
) -> None:
    requester = await http_for(world.roles["requester"])
    task_id = (await hand_off(requester, world))["task"]["id"]
    ws = await ws_for(world.roles["outsider_agent"], protocol)
    await ws.subscribe("subscription($id: ID!) { taskUpdated(id: $id) { state } }", {"id": task_id})
    with pytest.raises(SubscriptionError) as refused:
        await ws.next()
    assert "not_found" in str(refused.value) or "no task" in str(refused.value)


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("token", [None, "baton_not-a-real-token", "garbage"])
async def test_a_websocket_without_a_valid_token_is_closed_with_4403(
    live_server: LiveServer, protocol: str, token: str | None
) -> None:
    with pytest.raises((ConnectionClosed, SubscriptionError)):
        client = await WSClient.open(live_server.url, token, protocol)
        await client.subscribe(TASK_EVENTS, {})
        await client.next(wait=5)
    # Open again by hand to read the close code itself.
    url = live_server.url.replace("http://", "ws://") + "/graphql"
    async with connect(url, subprotocols=[protocol]) as ws:  # type: ignore[list-item]
        payload = {"authorization": f"Bearer {token}"} if token else {}
        await ws.send(json.dumps({"type": "connection_init", "payload": payload}))
        with pytest.raises(ConnectionClosed):
            while True:
                message = json.loads(await ws.recv())
                assert message["type"] in ("connection_error", "ka")
    assert ws.close_code == 4403


async def test_a_subscriber_never_receives_events_of_tasks_it_cannot_read(
    service: Any, ws_for: OpenWS, http_for: OpenHTTP
) -> None:
    ours, theirs = World(service), World(service)
    watcher = await ws_for(ours.roles["requester_owner"], "graphql-transport-ws")
    await watcher.subscribe(TASK_EVENTS, {})
    other = await http_for(theirs.roles["requester"])
    for _ in range(3):
        await hand_off(other, theirs)
    # A sentinel of our own, after theirs: everything before it was already read and filtered.
    mine = await hand_off(await http_for(ours.roles["requester"]), ours)
    received = [e["taskEvents"] for e in await watcher.collect(2)]
    assert {e["taskId"] for e in received} == {mine["task"]["id"]}


async def test_without_a_cursor_a_subscriber_gets_only_what_commits_after_it_joined(
    world: World, ws_for: OpenWS, http_for: OpenHTTP
) -> None:
    """Also after a stretch with no subscribers at all, when the server stops reading the
    log: the first to join again starts from the log's end, not from where reading stopped."""
    requester = await http_for(world.roles["requester"])
    earlier = (await hand_off(requester, world))["task"]["id"]
    await move(await http_for(world.roles["assignee"]), "acceptTask", earlier)
    ws = await ws_for(world.roles["requester"], "graphql-transport-ws")
    await ws.subscribe(TASK_EVENTS, {"filter": {"projects": [world.project]}})
    # Hand off until the subscription shows it is listening; whatever it then received was
    # committed after it joined, none of it the earlier task's.
    later: set[str] = set()
    received: list[dict[str, Any]] = []
    while not received:
        later.add((await hand_off(requester, world))["task"]["id"])
        try:
            received.append(await ws.next(wait=1))
        except TimeoutError:
            continue
    received += await ws.collect(2 * len(later) - 1)
    assert {e["taskEvents"]["taskId"] for e in received} <= later


RUN_EVENTS_AFTER = "subscription($after: ID) { runEvents(after: $after) { id } }"
TASK_EVENTS_AFTER = "subscription($after: ID) { taskEvents(after: $after) { id } }"
NOT_CURSORS = {
    "beyond bigint after leading zeros": "0" * 24 + "9" * 30,
    "5,000 digits": "9" * 5000,
    "an Arabic-Indic digit": "\u0661",
    "a superscript two": "\u00b2",
    "negative": "-1",
    "empty": "",
}


@pytest.mark.parametrize("document", [TASK_EVENTS_AFTER, RUN_EVENTS_AFTER], ids=["task", "run"])
@pytest.mark.parametrize("after", list(NOT_CURSORS.values()), ids=list(NOT_CURSORS))
async def test_a_subscription_after_what_is_not_an_event_cursor_is_invalid_input(
    world: World, ws_for: OpenWS, document: str, after: str
) -> None:
    ws = await ws_for(world.roles["requester"], PROTOCOLS[0])
    await ws.subscribe(document, {"after": after})
    with pytest.raises(SubscriptionError) as refused:
        await ws.next()
    # refused before it starts: the operation's `error` message, with the errors
    errors, kind = refused.value.args
    assert kind == "error"
    assert [e["extensions"]["code"] for e in errors] == ["invalid_input"]
    assert errors[0]["message"].startswith("after:")


async def test_a_cursor_with_leading_zeros_is_the_same_cursor(
    world: World, ws_for: OpenWS, http_for: OpenHTTP
) -> None:
    requester = await http_for(world.roles["requester"])
    handed = await hand_off(requester, world)
    task_id, created_id = handed["task"]["id"], handed["events"][0]["id"]
    ws = await ws_for(world.roles["requester"], PROTOCOLS[0])
    padded = before(created_id).zfill(40)
    await ws.subscribe(TASK_EVENTS, {"filter": {"taskIds": [task_id]}, "after": padded})
    assert [e["taskEvents"]["id"] for e in await ws.collect(1)] == [created_id]
