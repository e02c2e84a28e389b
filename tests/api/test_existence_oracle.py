"""A task or run the caller may not see is, in answer and in cost, one that does not exist.

Client ids are scoped to their owner (`alice_build-42`), so they can be guessed: if a refused
move on an existing id cost a statement, a round trip or a row lock more than one on a missing
id, timing it would tell whether `alice` has a task `build-42`.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from baton.errors import NotFound
from baton.protocol.handoff import MoveName, TaskState
from baton.protocol.pipeline import RunEvent, RunStatus
from baton.services.runs import RunService
from baton.services.tasks import TaskService
from baton.store.db import Database
from tests.conftest import LiveServer
from tests.helpers import World, agent, owner
from tests.runs_helpers import Runs


@dataclass
class Logged:
    """The statements a one-connection pool sent, as (SQL, arguments) pairs."""

    db: Database
    sent: list[tuple[str, tuple[Any, ...]]]


@pytest.fixture
async def logged(database_url: str) -> AsyncIterator[Logged]:
    db = await Database.connect(database_url, min_size=1, max_size=1)
    sent: list[tuple[str, tuple[Any, ...]]] = []
    async with db.connection() as conn:  # the pool's one connection, kept afterwards
        conn.raw.add_query_logger(lambda record: sent.append((record.query, tuple(record.args))))
    yield Logged(db, sent)
    await db.close()


Call = Callable[[str], Awaitable[Any]]
LEASE_ID = re.compile(r"'l[0-9a-f]{24}'")  # a claim draws one per call


async def statements_of(logged: Logged, call: Call, subject_id: str) -> list[str]:
    """The SQL `call(subject_id)` sent (it must answer NotFound), with the id masked."""
    await asyncio.sleep(0)  # asyncpg calls query loggers soon after, not during, a statement
    logged.sent.clear()
    with pytest.raises(NotFound):
        await call(subject_id)
    await asyncio.sleep(0)
    texts = []
    for sql, args in logged.sent:
        shown = f"{sql} -- {args!r}".replace(subject_id, "<id>")
        texts.append(LEASE_ID.sub("<a new lease id>", shown))
    assert texts
    return texts


async def same_path(logged: Logged, call: Call, existing: str) -> None:
    missing = existing[:-1] + ("x" if existing[-1] != "x" else "y")
    assert await statements_of(logged, call, existing) == await statements_of(logged, call, missing)


async def test_task_moves_and_checkpoints_take_one_path_for_hidden_and_missing_ids(
    logged: Logged, service: TaskService
) -> None:
    world = World(service)
    task = await world.task_in(TaskState.working)
    tasks = TaskService(logged.db)
    for caller in (world.roles["outsider_agent"], world.roles["outsider_owner"]):

        async def move(task_id: str, caller: Any = caller) -> Any:
            return await tasks.move(caller, MoveName.CANCEL, task_id)

        async def checkpoint(task_id: str, caller: Any = caller) -> Any:
            return await tasks.save_checkpoint(
                caller,
                task_id,
                {
                    "progress": "x",
                    "decisions": [],
                    "files_touched": [],
                    "next_steps": [],
                    "open_questions": [],
                },
            )

        await same_path(logged, move, task.id)
        await same_path(logged, checkpoint, task.id)


async def test_run_events_heartbeats_and_claims_take_one_path_for_hidden_and_missing_ids(
    logged: Logged, db: Database
) -> None:
    runs = Runs(RunService(db))
    run = await runs.run_in(RunStatus.in_progress)
    queued = await runs.new()
    service = RunService(logged.db)
    for caller in (runs.outsider, agent(f"{runs.outsider.handle}/daemon")):

        async def fail(run_id: str, caller: Any = caller) -> Any:
            return await service.event(caller, RunEvent.FAILED, run_id, args={"reason": "x"})

        async def beat(run_id: str, caller: Any = caller) -> Any:
            return await service.heartbeat(caller, run_id)

        async def claim(run_id: str, caller: Any = caller) -> Any:
            return await service.claim(caller, run_id=run_id)

        await same_path(logged, fail, run.id)
        await same_path(logged, beat, run.id)
        await same_path(logged, claim, queued.id)


async def test_a_run_linked_to_a_hidden_task_is_refused_like_one_linked_to_a_missing_task(
    logged: Logged, service: TaskService
) -> None:
    world = World(service)
    task = await world.task_in(TaskState.routed)
    runs = RunService(logged.db)

    async def create(task_id: str) -> Any:
        return await runs.create(owner(f"x{world.tag}"), project="p", title="t", task_id=task_id)

    await same_path(logged, create, task.id)


# --- against a real server: the hidden row is not even locked -----------------------------

REFUSALS = {
    "task": """mutation($id: ID!) { cancelTask(input: {id: $id, reason: "mine now"}) {
        __typename } }""",
    "run": """mutation($id: ID!) { failRun(input: {id: $id, reason: "mine now"}) {
        __typename } }""",
}


@pytest.mark.parametrize("kind", ["task", "run"])
async def test_an_outsiders_move_does_not_wait_for_a_hidden_row_another_transaction_holds(
    live_server: LiveServer, service: TaskService, db: Database, kind: str
) -> None:
    """Were the refused statement to lock the row first, it would wait here for as long as the
    holder keeps it (and a row free of locks would answer sooner: a timing oracle)."""
    world = World(service)
    if kind == "task":
        subject = (await world.task_in(TaskState.working)).id
        table = "tasks"
    else:
        subject = (await Runs(RunService(db)).run_in(RunStatus.in_progress)).id
        table = "runs"
    token = await live_server.token(world.roles["outsider_owner"])
    async with httpx.AsyncClient(base_url=live_server.url, timeout=30) as client:

        async def refuse() -> str:
            response = await client.post(
                "/graphql",
                json={"query": REFUSALS[kind], "variables": {"id": subject}},
                headers={"Authorization": f"Bearer {token}"},
            )
            return str(next(iter(response.json()["data"].values()))["__typename"])

        async with db.transaction() as holder:
            await holder.execute(f"SELECT 1 FROM {table} WHERE id = $1 FOR UPDATE", subject)
            # Generous: the row stays held until this answers or the bound runs out.
            assert await asyncio.wait_for(refuse(), 10) == "NotFoundError"
