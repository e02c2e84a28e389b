"""Many writers at once: every subscriber gets exactly the committed events, in order."""

from __future__ import annotations

import asyncio
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from baton.access.gate import GateDecision
from tests.helpers import World
from tests.live.client import TASK_EVENTS, HTTPClient, WSClient, hand_off_via, move_mutation
from tests.live.conftest import OpenHTTP, OpenWS

WRITERS = 8
TASKS_EACH = 3
CYCLE = [
    ("acceptTask", ""),
    ("startTask", ""),
    ("pauseTask", ", waitingOn: human"),
    ("resumeTask", ""),
    ("pauseTask", ", waitingOn: agent"),
    ("resumeTask", ""),
]
# A hand-off writes two events (created, routed by the gate), then one per move of the cycle.
EVENTS = WRITERS * TASKS_EACH * (2 + len(CYCLE))


async def writer(client: HTTPClient, world: World) -> int:
    """Hand off `TASKS_EACH` tasks and move each through the cycle; how many events committed."""
    committed = 0
    for _ in range(TASKS_EACH):
        answer = await hand_off_via(client, world.project, world.requester, world.assignee)
        task_id = answer["task"]["id"]
        committed += len(answer["events"])
        for name, extra in CYCLE:
            result = (await client(move_mutation(name, extra), id=task_id))[name]
            assert result["__typename"] == "MoveSuccess", result
            committed += 1
    return committed


async def until_committed(engine: AsyncEngine, project: str, after: int, count: int) -> None:
    """Until at least `count` of the project's events after `after` have committed."""
    for _ in range(600):
        if len(await committed_ids(engine, project, after)) >= count:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"fewer than {count} events committed")


async def committed_ids(engine: AsyncEngine, project: str, after: int) -> list[int]:
    async with engine.connect() as conn:
        rows = await conn.execute(
            text(
                "SELECT e.id FROM task_events e JOIN tasks t ON t.id = e.task_id "
                "WHERE t.project = :project AND e.id > :after ORDER BY e.id"
            ),
            {"project": project, "after": after},
        )
        return [int(r[0]) for r in rows]


async def drain(ws: WSClient, count: int) -> list[dict[str, Any]]:
    return [e["taskEvents"] for e in await ws.collect(count, wait=20)]


async def test_every_subscriber_sees_every_committed_event_once_in_cursor_order(
    engine: AsyncEngine, world: World, ws_for: OpenWS, http_for: OpenHTTP
) -> None:
    await world.decide(GateDecision.ALLOW)
    async with engine.connect() as conn:
        start = int(
            (await conn.execute(text("SELECT coalesce(max(id), 0) FROM task_events"))).scalar_one()
        )
    variables = {"filter": {"projects": [world.project]}, "after": str(start)}
    early = await ws_for(world.roles["assignee_owner"], "graphql-transport-ws")
    await early.subscribe(TASK_EVENTS, variables)

    clients = [await http_for(world.roles["admin"]) for _ in range(WRITERS)]
    writing = asyncio.gather(*(writer(c, world) for c in clients))
    # Two more join while the writers run: they replay from the cursor, then go live.
    await until_committed(engine, world.project, start, EVENTS // 3)
    middle = await ws_for(world.roles["requester"], "graphql-ws")
    await middle.subscribe(TASK_EVENTS, variables)
    await until_committed(engine, world.project, start, 2 * EVENTS // 3)
    late = await ws_for(world.roles["admin"], "graphql-transport-ws")
    await late.subscribe(TASK_EVENTS, variables)
    total = sum(await writing)

    expected = await committed_ids(engine, world.project, start)
    assert len(expected) == total == EVENTS
    for ws in (early, middle, late):
        received = [int(e["id"]) for e in await drain(ws, len(expected))]
        assert received == expected
    # Nothing more arrives before the next event: no duplicates trailing behind.
    sentinel = await hand_off_via(clients[0], world.project, world.requester, world.assignee)
    for ws in (early, middle, late):
        assert (await ws.next())["taskEvents"]["id"] == sentinel["events"][0]["id"]  # type: ignore[index]
