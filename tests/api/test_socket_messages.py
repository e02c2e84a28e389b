"""What a WebSocket client may send and what the server answers, on both subprotocols and
against a real `baton serve`: messages that are not JSON objects (4400), ping and pong, a
second `connection_init` (4429), an operation before the acknowledgement (4401), and the cap
of 100 operations at once (the 101st gets an `error`, the others keep running)."""

from __future__ import annotations

import ast
import asyncio
import json
from typing import Any

import pytest
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from baton.web.graphql_ws import SocketLimits, shown
from tests.api.test_stream_cursors import cursors
from tests.conftest import LiveServer
from tests.helpers import World

TRANSPORT, LEGACY = "graphql-transport-ws", "graphql-ws"
PROTOCOLS = (TRANSPORT, LEGACY)
TASK_EVENTS = "subscription($filter: TaskEventFilter) { taskEvents(filter: $filter) { id } }"
TASK_EVENTS_AFTER = (
    "subscription($filter: TaskEventFilter, $after: ID) "
    "{ taskEvents(filter: $filter, after: $after) { id } }"
)
CAP = SocketLimits().max_operations


def opened(server: LiveServer, protocol: str) -> connect:
    url = server.url.replace("http://", "ws://") + "/graphql"
    return connect(url, subprotocols=[protocol])  # type: ignore[list-item]


async def send(ws: ClientConnection, message: dict[str, Any]) -> None:
    await ws.send(json.dumps(message))


async def received(ws: ClientConnection, wait: float = 10) -> dict[str, Any]:
    """The next message other than the legacy keep-alive."""
    async with asyncio.timeout(wait):
        while True:
            message: dict[str, Any] = json.loads(await ws.recv())
            if message["type"] != "ka":
                return message


async def close_code(ws: ClientConnection, wait: float = 10) -> int | None:
    """The code the server closes `ws` with (what it sends before is skipped)."""
    with pytest.raises(ConnectionClosed):
        async with asyncio.timeout(wait):
            while True:
                await ws.recv()
    return ws.close_code


async def logged_in(ws: ClientConnection, token: str) -> None:
    await send(ws, {"type": "connection_init", "payload": {"authorization": f"Bearer {token}"}})
    assert (await received(ws))["type"] == "connection_ack"


def subscribe(protocol: str, op_id: str, query: str, variables: dict[str, Any]) -> dict[str, Any]:
    kind = "subscribe" if protocol == TRANSPORT else "start"
    return {"id": op_id, "type": kind, "payload": {"query": query, "variables": variables}}


NOT_OBJECTS = {
    "not JSON": "{type: connection_init",
    "a JSON list": '[{"type": "connection_init"}]',
    "no type": '{"payload": {}}',
    "a type that is not a string": '{"type": 3}',
    "an unknown type": '{"type": "hello"}',
}


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("text", list(NOT_OBJECTS.values()), ids=list(NOT_OBJECTS))
@pytest.mark.parametrize("when", ["before init", "after init"])
async def test_a_message_that_is_not_a_json_object_with_a_type_closes_with_4400(
    live_server: LiveServer, world: World, protocol: str, text: str, when: str
) -> None:
    async with opened(live_server, protocol) as ws:
        if when == "after init":
            await logged_in(ws, await live_server.token(world.roles["requester"]))
        await ws.send(text)
        assert await close_code(ws) == 4400


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_a_binary_message_closes_with_4400(
    live_server: LiveServer, world: World, protocol: str
) -> None:
    async with opened(live_server, protocol) as ws:
        await logged_in(ws, await live_server.token(world.roles["requester"]))
        await ws.send(json.dumps({"type": "ping"}).encode())  # valid JSON, in a binary frame
        assert await close_code(ws) == 4400


@pytest.mark.parametrize("when", ["before init", "after init"])
async def test_ping_is_answered_with_pong_and_a_pong_needs_no_answer(
    live_server: LiveServer, world: World, when: str
) -> None:
    async with opened(live_server, TRANSPORT) as ws:
        if when == "after init":
            await logged_in(ws, await live_server.token(world.roles["requester"]))
        await send(ws, {"type": "pong"})  # unsolicited: allowed, ignored
        await send(ws, {"type": "ping", "payload": {"at": 1}})
        assert await received(ws) == {"type": "pong"}
        # Still open and in the same state: another ping, another pong.
        await send(ws, {"type": "ping"})
        assert await received(ws) == {"type": "pong"}


async def test_the_legacy_protocol_has_no_ping(live_server: LiveServer, world: World) -> None:
    async with opened(live_server, LEGACY) as ws:
        await logged_in(ws, await live_server.token(world.roles["requester"]))
        await send(ws, {"type": "ping"})
        assert await close_code(ws) == 4400


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("first", ["acknowledged", "refused token"])
async def test_a_second_connection_init_closes_with_4429(
    live_server: LiveServer, world: World, protocol: str, first: str
) -> None:
    async with opened(live_server, protocol) as ws:
        if first == "acknowledged":
            await logged_in(ws, await live_server.token(world.roles["requester"]))
            await send(ws, {"type": "connection_init", "payload": {}})
            assert await close_code(ws) == 4429
        else:  # the first is refused and closes the socket: the second is never read
            await send(ws, {"type": "connection_init", "payload": {"authorization": "nope"}})
            await send(ws, {"type": "connection_init", "payload": {}})
            assert await close_code(ws) == 4403


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_an_operation_before_connection_init_closes_with_4401(
    live_server: LiveServer, protocol: str
) -> None:
    async with opened(live_server, protocol) as ws:
        await send(ws, subscribe(protocol, "1", TASK_EVENTS, {}))
        assert await close_code(ws) == 4401


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_the_operation_past_the_cap_gets_an_error_and_the_others_keep_running(
    live_server: LiveServer, world: World, protocol: str
) -> None:
    token = await live_server.token(world.roles["requester"])
    # Each operation starts in its own task: the 101st is refused before the others have all
    # begun streaming. Starting from a cursor taken now, one that begins after the hand-off
    # below still gets its events (from the log rather than live).
    start, _ = await cursors(live_server, token)
    async with opened(live_server, protocol) as ws:
        await logged_in(ws, token)
        variables = {"filter": {"projects": [world.project]}, "after": str(start)}
        for n in range(CAP):
            await send(ws, subscribe(protocol, str(n), TASK_EVENTS_AFTER, variables))
        await send(ws, subscribe(protocol, "extra", TASK_EVENTS_AFTER, variables))
        refused = await received(ws)
        assert (refused["id"], refused["type"]) == ("extra", "error")
        errors = refused["payload"] if protocol == TRANSPORT else [refused["payload"]]
        assert [e["extensions"]["code"] for e in errors] == ["invalid_input"]
        assert f"at most {CAP} operations" in errors[0]["message"]

        # Every one of the hundred still runs: each gets the task's two events.
        await world.hand_off()
        counts: dict[str, int] = {}
        while sum(counts.values()) < 2 * CAP:
            message = await received(ws, wait=15)
            assert message["type"] == ("next" if protocol == TRANSPORT else "data"), message
            counts[message["id"]] = counts.get(message["id"], 0) + 1
        assert counts == {str(n): 2 for n in range(CAP)}

        # Ending one makes room for one more.
        await send(ws, {"id": "0", "type": "complete" if protocol == TRANSPORT else "stop"})
        await send(ws, subscribe(protocol, "extra", TASK_EVENTS_AFTER, variables))
        await world.hand_off()
        ids: set[str] = set()
        while "extra" not in ids:
            ids.add((await received(ws, wait=15))["id"])
        assert "0" not in ids


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_a_close_reason_quoting_the_client_fits_the_protocol(
    live_server: LiveServer, world: World, protocol: str
) -> None:
    """A running operation's id sent again closes with 4409, its reason quoting the id: cut
    to the protocol's 123 bytes however many bytes the id's characters take (too long a
    reason used to make the close fail, and the socket dropped without a code)."""
    op_id = "\U0001f600" * 80  # 320 bytes of UTF-8
    async with opened(live_server, protocol) as ws:
        await logged_in(ws, await live_server.token(world.roles["requester"]))
        variables = {"filter": {"projects": [world.project]}}
        await send(ws, subscribe(protocol, op_id, TASK_EVENTS, variables))
        await send(ws, subscribe(protocol, op_id, TASK_EVENTS, variables))
        assert await close_code(ws) == 4409
        assert ws.close_reason is not None
        assert ws.close_reason.startswith("Subscriber for \U0001f600")
        assert len(ws.close_reason.encode()) <= 123


HOSTILE = {
    "a newline": "op\nINFO forged line",
    "a carriage return": "op\r\nERROR forged",
    "a line separator": "op\u2028forged",
    "an escape sequence": "op\x1b[2Jcleared",
    "very long": "x" * 10_000,
}


@pytest.mark.parametrize("text", list(HOSTILE.values()), ids=list(HOSTILE))
def test_client_text_in_a_log_line_is_escaped_and_bounded(text: str) -> None:
    """Operation ids reach the log through `shown`: nothing in them can start a line or drive
    a terminal, and a long one is cut."""
    line = shown(text)
    assert line.isprintable()
    assert len(line) <= 10 * 81 + 2  # 80 characters and an ellipsis, each escaped at worst
    assert ast.literal_eval(line) == (text if len(text) <= 80 else text[:80] + "…")
