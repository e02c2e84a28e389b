"""`streamCursors` gives a starting point for a whole log that nothing committing later can
precede, where an event id read from a task's own history may be passed by an older
transaction's event of another task; against a real `baton serve`, over HTTP and WebSocket."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import asyncpg  # type: ignore[import-untyped]
import httpx
from websockets.asyncio.client import connect

from baton.protocol.handoff import MoveName
from baton.store.db import libpq_url
from baton.store.eventlog import SEQ_BITS
from tests.conftest import LiveServer
from tests.helpers import World, agent

CURSORS = "{ streamCursors { taskEvents runEvents } }"
EVENTS = "subscription($after: ID) { taskEvents(after: $after) { id taskId version } }"


async def ask(server: LiveServer, token: str | None, query: str) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx.AsyncClient() as client:
        response = await client.post(server.graphql, json={"query": query}, headers=headers)
    body: dict[str, Any] = response.json()
    return body


async def cursors(server: LiveServer, token: str) -> tuple[int, int]:
    body = await ask(server, token, CURSORS)
    assert "errors" not in body, body
    found = body["data"]["streamCursors"]
    return int(found["taskEvents"]), int(found["runEvents"])


async def test_a_stream_started_from_the_cursor_gets_an_event_an_older_transaction_held_back(
    live_server: LiveServer, world: World, database_url: str
) -> None:
    token = await live_server.token(world.roles["admin"])
    task = await world.hand_off()

    # An older transaction holds a transaction id while a move commits after it.
    blocker = await asyncpg.connect(libpq_url(database_url))
    blocking = blocker.transaction()
    await blocking.start()
    try:
        older = int(await blocker.fetchval("SELECT pg_current_xact_id()::text::bigint"))
        outcome = await world.service.move(agent(world.assignee), MoveName.ACCEPT, task.id)
        moved, newest = outcome.task, outcome.events[-1].id
        assert newest >> SEQ_BITS > older  # a cursor taken from the move would pass the older
        start, _ = await cursors(live_server, token)
        assert start < older << SEQ_BITS  # the cursor stays below what the older one may write
    finally:
        await blocking.rollback()
        await blocker.close()

    url = live_server.url.replace("http://", "ws://") + "/graphql"
    async with connect(url, subprotocols=["graphql-transport-ws"]) as ws:  # type: ignore[list-item]
        init = {"type": "connection_init", "payload": {"authorization": f"Bearer {token}"}}
        await ws.send(json.dumps(init))
        assert json.loads(await ws.recv())["type"] == "connection_ack"
        subscribe = {"query": EVENTS, "variables": {"after": str(start)}}
        await ws.send(json.dumps({"id": "1", "type": "subscribe", "payload": subscribe}))
        seen: list[tuple[str, int]] = []
        async with asyncio.timeout(15):
            while (task.id, moved.version) not in seen:
                message = json.loads(await ws.recv())
                assert message["type"] == "next", message
                event = message["payload"]["data"]["taskEvents"]
                seen.append((event["taskId"], event["version"]))

    # Once nothing older runs, the cursor has passed the move.
    assert (await cursors(live_server, token))[0] >= newest


async def test_the_cursors_need_a_token(live_server: LiveServer) -> None:
    body = await ask(live_server, None, CURSORS)
    assert body.get("data") is None
    assert body["errors"][0]["extensions"]["code"] == "unauthenticated"


async def test_any_principal_may_ask_and_both_logs_answer(
    live_server: LiveServer, world: World
) -> None:
    token = await live_server.token(agent(world.requester))
    task_cursor, run_cursor = await cursors(live_server, token)
    assert task_cursor >= 0 and run_cursor >= 0
