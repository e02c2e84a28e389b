"""A stream cut by its server stopping resumes on a new server on the same database: no gap, no
repeat. The updates come from the event log, so what happened while no server ran is there."""

from __future__ import annotations

import asyncio
from pathlib import Path

from baton.access.tokens import create_token
from baton.protocol.handoff import MoveName, TaskState
from baton.store.db import Database
from tests.a2a.sse import Update, subscribe
from tests.a2a.test_streams import AFTER_WORK, PROGRESS, ids
from tests.conftest import start_server, stop_server
from tests.helpers import World, agent, checkpoint, result


async def test_a_stream_cut_by_a_restart_resumes_on_the_new_server_with_nothing_missed(
    database_url: str, db: Database, tmp_path: Path, world: World, binding: str
) -> None:
    task = await world.task_in(TaskState.routed)
    token = await create_token(db, world.roles["requester"])
    env = {"BATON_DATABASE_URL": database_url}
    url, process = start_server(env, tmp_path / "first.log")
    base = f"{url}/a2a/agents/{world.assignee}"
    try:
        async with subscribe(base, token, binding, task.id) as cut:
            seen = await cut.take(1)
            assert seen[0].kind == "task"
            await world.move(task, MoveName.ACCEPT)
            seen += await cut.take(1)
            await asyncio.to_thread(stop_server, process)
            ending = await cut.rest()
    finally:
        await asyncio.to_thread(stop_server, process)
    # The stopping server ended the stream as it was, with no error: resume, don't give up.
    assert [u.event for u in ending if u.event == "error"] == []
    seen += ending

    # What the assignee did while no server ran.
    task = await world.move(task, MoveName.START)
    await world.service.save_checkpoint(
        agent(world.assignee), task.id, checkpoint(progress=PROGRESS)
    )
    await world.move(task, MoveName.SUBMIT_RESULT, result=result())

    url, process = start_server(env, tmp_path / "second.log")
    base = f"{url}/a2a/agents/{world.assignee}"
    try:
        async with subscribe(base, token, binding, task.id, last_event_id=seen[-1].id) as again:
            resumed: list[Update] = await again.rest()
    finally:
        await asyncio.to_thread(stop_server, process)

    whole = seen + resumed
    assert [u.label for u in whole[1:]] == AFTER_WORK
    assert ids(whole) == sorted(ids(whole)) and len(set(ids(whole))) == len(whole)
    events = [
        r["id"]
        for r in await db.fetch(
            "SELECT id FROM task_events WHERE task_id = $1 ORDER BY id", task.id
        )
    ]
    assert sorted({event for event, _ in ids(whole[1:])}) == [
        e for e in events if e > int(whole[0].id)
    ]
