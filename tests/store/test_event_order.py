"""The event logs under concurrent writers: a reader that resumes from its cursor sees every
committed event once, in one fixed order, each subject's events in version order.

Event ids follow the order in which writers got their transaction ids, not the order in which
they commit (`baton.store.eventlog`); a reader that passed an id a running transaction could
still write below would skip that event for good. This reader keeps nothing but its cursor
between reads, reads on fresh connections all through the writing (some writers commit a few
milliseconds after writing, as a slow commit does), and at the end what it saw must be exactly
the table. Without the horizon (ids read as they commit) it fails: the reader skips events.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest

from baton.live.hub import EventLog
from baton.live.logs import RUN_LOG, TASK_LOG
from baton.protocol.handoff import Actor, MoveName, TaskState, WaitingOn
from baton.protocol.pipeline import RunEvent
from baton.services.runs import RunService
from baton.services.tasks import SAVE_CHECKPOINT, MoveArgs, TaskService
from baton.store import tasks as store
from baton.store.db import Database
from baton.store.eventlog import writer_of
from baton.store.tasks import Change
from tests.helpers import World, agent
from tests.runs_helpers import Runs

TASK_WRITERS = 24  # each on a task of its own
SHARED_WRITERS = 4  # all on one task
RUN_WRITERS = 4  # each on runs of its own
ROUNDS = 12
READ_BATCH = 50  # the reader keeps up with the writers, so it reads at the head of the log

CHECKPOINT = {
    "progress": "half way",
    "decisions": ["use tables"],
    "files_touched": ["a.py"],
    "next_steps": [],
    "open_questions": [],
}


@pytest.fixture
async def wide(database_url: str, db: Database) -> AsyncIterator[Database]:
    """A pool with a connection for every writer and the reader (`db` migrated the database)."""
    pool = await Database.connect(
        database_url, max_size=TASK_WRITERS + SHARED_WRITERS + RUN_WRITERS + 4, acquire_timeout=30
    )
    yield pool
    await pool.close()


async def _slow_checkpoint(db: Database, world: World, task_id: str, seconds: float) -> None:
    """A checkpoint whose transaction commits `seconds` after writing: its event's id is drawn
    early and committed late, while faster writers commit larger ids."""
    change = Change(
        kind="checkpoint_saved",
        pairs=SAVE_CHECKPOINT,
        actor=Actor.ASSIGNEE,
        checkpoint=CHECKPOINT,
    )
    async with db.transaction() as conn:
        event = await store.change(
            conn, task_id, change, agent(world.assignee), expected_version=None
        )
        assert event is not None
        await asyncio.sleep(seconds)


async def _own_task(service: TaskService, world: World, task_id: str, n: int) -> None:
    """Checkpoints (every other one slow to commit), and pauses and resumes: one event each,
    all on one task."""
    assignee = agent(world.assignee)
    for round in range(ROUNDS):
        if (round + n) % 2:
            await _slow_checkpoint(service.db, world, task_id, 0.003 * (1 + (n * 7 + round) % 10))
        else:
            await service.save_checkpoint(assignee, task_id, CHECKPOINT)
        await service.move(
            assignee, MoveName.PAUSE, task_id, args=MoveArgs(waiting_on=WaitingOn.human)
        )
        await service.move(assignee, MoveName.RESUME, task_id)


async def _shared_task(service: TaskService, world: World, task_id: str) -> None:
    for _ in range(ROUNDS * 2):
        await service.save_checkpoint(agent(world.assignee), task_id, CHECKPOINT)


async def _runs(runs: Runs) -> None:
    """New runs, each interrupted and resumed."""
    for _ in range(ROUNDS // 3):
        run = await runs.new()
        for _ in range(3):
            run = await runs.event(run, RunEvent.USER_INTERRUPTED)
            run = await runs.event(run, RunEvent.USER_RESUMED)


class Reader:
    """Reads one log's events of one project after a cursor, on a fresh connection each
    time, keeping only the cursor between reads."""

    def __init__(self, db: Database, log: EventLog[Any], where: str, project: str) -> None:
        self.db, self.log, self.where, self.project = db, log, where, project
        self.cursor = 0
        self.seen: list[Any] = []
        self.reads = 0

    async def step(self) -> int:
        async with self.db.connection() as conn:
            events = await self.log.after(conn, self.cursor, READ_BATCH, self.where, [self.project])
        self.reads += 1
        if events:
            self.cursor = events[-1].id
            self.seen.extend(events)
        return len(events)


async def _table(db: Database, sql: str, project: str) -> list[tuple[int, str, int]]:
    rows = await db.fetch(sql, project)
    return [(int(r["id"]), str(r["subject"]), int(r["version"])) for r in rows]


def _check_versions(rows: Sequence[tuple[int, str, int]]) -> None:
    """Along the log's order, each subject's versions are 1, 2, 3, … with no hole."""
    last: dict[str, int] = defaultdict(int)
    for event_id, subject, version in rows:
        assert version == last[subject] + 1, (event_id, subject, version, last[subject])
        last[subject] = version


async def test_a_resuming_reader_sees_exactly_the_table_in_one_order_under_32_writers(
    wide: Database, world: World
) -> None:
    service = TaskService(wide)
    runs = Runs(RunService(wide))
    tasks = [await world.task_in(TaskState.working) for _ in range(TASK_WRITERS + 1)]
    shared = tasks.pop()
    task_reader = Reader(wide, TASK_LOG, "t.project = $3", world.project)
    run_reader = Reader(wide, RUN_LOG, "r.project = $3", runs.project)

    writers = [
        *(_own_task(service, world, task.id, n) for n, task in enumerate(tasks)),
        *(_shared_task(service, world, shared.id) for _ in range(SHARED_WRITERS)),
        *(_runs(runs) for _ in range(RUN_WRITERS)),
    ]
    assert len(writers) == 32
    writing = asyncio.gather(*writers)
    reads_while_writing = 0
    while not writing.done():
        await task_reader.step()
        await run_reader.step()
        reads_while_writing += 1
    await writing  # a writer's error fails the test here

    # Then until the readers have caught up with everything committed.
    for _ in range(2000):
        if await task_reader.step() == 0 and await run_reader.step() == 0:
            break
    task_rows = await _table(
        wide,
        "SELECT e.id, e.task_id AS subject, e.version FROM task_events e "
        "JOIN tasks t ON t.id = e.task_id WHERE t.project = $1 ORDER BY e.id",
        world.project,
    )
    run_rows = await _table(
        wide,
        "SELECT e.id, e.run_id AS subject, e.version FROM run_events e "
        "JOIN runs r ON r.id = e.run_id WHERE r.project = $1 ORDER BY e.id",
        runs.project,
    )

    per_task = 3 * ROUNDS
    assert len(task_rows) == (TASK_WRITERS + 1) * 4 + TASK_WRITERS * per_task + (
        SHARED_WRITERS * ROUNDS * 2
    )
    assert len(run_rows) == RUN_WRITERS * (ROUNDS // 3) * 7
    assert reads_while_writing > 5, "the reader must resume many times during the writing"
    # No gap, no duplicate, the table's order: what the readers saw is the table.
    assert [(e.id, e.task_id, e.version) for e in task_reader.seen] == task_rows
    assert [(e.id, e.run_id, e.version) for e in run_reader.seen] == run_rows
    # Each subject's events in version order, the one four writers shared included.
    _check_versions(task_rows)
    _check_versions(run_rows)
    assert sum(1 for _, subject, _ in task_rows if subject == shared.id) == 4 + (
        SHARED_WRITERS * ROUNDS * 2
    )
    # The writers really ran side by side: many transactions' events are interleaved, and ids
    # are drawn from transaction ids (events of this migration's scheme, not a counter).
    # Changes that wait for each other share a transaction (`baton.store.together`), so there
    # are fewer transactions than events, yet many more than one writer's rounds.
    writers_seen = {writer_of(event_id) for event_id, _, _ in task_rows}
    assert len(writers_seen) > 4 * ROUNDS
