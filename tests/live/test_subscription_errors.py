"""A subscription whose source fails ends with an `error` message (graphql-transport-ws; the
legacy protocol's `error` carries one error), not with `next` and `data: null`; the socket and
its other operations go on, and the id may be used again. Against a real `baton serve`."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from tests.conftest import LiveServer
from tests.helpers import World
from tests.live.client import PROTOCOLS, WSClient

TASK_UPDATED = "subscription($id: ID!) { taskUpdated(id: $id) { state version } }"
EVENTS_AFTER = "subscription($after: ID) { taskEvents(after: $after) { id } }"


async def send(ws: WSClient, op_id: str, query: str, variables: dict[str, Any]) -> None:
    kind = "subscribe" if ws.protocol == PROTOCOLS[0] else "start"
    payload = {"query": query, "variables": variables}
    await ws.ws.send(json.dumps({"id": op_id, "type": kind, "payload": payload}))


async def received(ws: WSClient, wait: float = 10) -> dict[str, Any]:
    """The next message other than keep-alives."""
    async with asyncio.timeout(wait):
        while True:
            message: dict[str, Any] = json.loads(await ws.ws.recv())
            if message["type"] not in ("ka", "ping", "pong"):
                return message


def codes(message: dict[str, Any], protocol: str) -> list[str]:
    errors = message["payload"] if protocol == PROTOCOLS[0] else [message["payload"]]
    assert isinstance(errors, list)
    return [e["extensions"]["code"] for e in errors]


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_a_subscription_whose_source_fails_ends_with_an_error_message(
    live_server: LiveServer, world: World, protocol: str
) -> None:
    """`taskUpdated` on a task that does not exist: its source raises `not_found`. No
    `complete` follows the `error`, and another operation on the socket still runs."""
    mine = (await world.hand_off()).id
    ws = await WSClient.open(
        live_server.url, await live_server.token(world.roles["requester"]), protocol
    )
    try:
        await send(ws, "1", TASK_UPDATED, {"id": f"{world.req_owner}_missing"})
        await send(ws, "2", TASK_UPDATED, {"id": mine})
        first, second = await received(ws), await received(ws)
        by_id = {first["id"]: first, second["id"]: second}
        assert by_id["1"]["type"] == "error"
        assert codes(by_id["1"], protocol) == ["not_found"]
        assert by_id["2"]["type"] == ("next" if protocol == PROTOCOLS[0] else "data")
        assert by_id["2"]["payload"]["data"]["taskUpdated"]["version"] == 2
    finally:
        await ws.close()


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_an_invisible_task_ends_the_operation_and_its_id_is_free_again(
    live_server: LiveServer, world: World, protocol: str
) -> None:
    """A task the caller may not see, then a cursor that is not one: each ends its operation
    with an `error`, and the id is free again after the first."""
    task_id = (await world.hand_off()).id
    ws = await WSClient.open(
        live_server.url, await live_server.token(world.roles["outsider_agent"]), protocol
    )
    try:
        await send(ws, "same", TASK_UPDATED, {"id": task_id})
        error = await received(ws)
        assert (error["id"], error["type"]) == ("same", "error")
        assert codes(error, protocol) == ["not_found"]
        # Ended: the id may run again (a running one would close the socket with 4409).
        await send(ws, "same", EVENTS_AFTER, {"after": "not a cursor"})
        again = await received(ws)
        assert (again["id"], again["type"]) == ("same", "error")
        assert codes(again, protocol) == ["invalid_input"]
    finally:
        await ws.close()
