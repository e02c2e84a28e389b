"""The sweep removes exactly the finished work that is old enough, with everything of it, across
both lifecycles; and nothing open, however old."""

from __future__ import annotations

from baton.access.gate import GateDecision
from baton.access.principals import Principal
from baton.protocol.handoff import MoveName, TaskState, WaitingOn
from baton.protocol.pipeline import RunCheckpoint, RunEvent, RunStatus
from baton.services.tasks import HandOff
from baton.store.db import Connection
from baton.store.records import RunRecord
from tests.helpers import agent, owner, packet
from tests.retention.conftest import DAY, Place
from tests.runs_helpers import ARGS, Runs

OLD = 40 * DAY  # past the 30 days kept
YOUNG = 20 * DAY


async def _ids(conn: Connection, table: str, ids: list[str]) -> set[str]:
    rows = await conn.fetch(f"SELECT id FROM {table} WHERE id = ANY($1::text[])", ids)
    return {r["id"] for r in rows}


async def _events(conn: Connection, table: str, subject: str, ids: list[str]) -> dict[str, int]:
    rows = await conn.fetch(
        f"SELECT {subject} AS s, count(*) AS n FROM {table} WHERE {subject} = ANY($1::text[]) "
        f"GROUP BY {subject}",
        ids,
    )
    return {r["s"]: r["n"] for r in rows}


async def _event_ids(conn: Connection, table: str, subject: str, ids: list[str]) -> list[int]:
    rows = await conn.fetch(
        f"SELECT id FROM {table} WHERE {subject} = ANY($1::text[]) ORDER BY id", ids
    )
    return [r["id"] for r in rows]


async def _deliver(conn: Connection, endpoint: str, log: str, event_ids: list[int]) -> None:
    """A delivered message per event, as the webhook worker records one."""
    await conn.execute(
        "INSERT INTO webhook_deliveries (endpoint_id, kind, log, event_id, message_id, status, "
        "attempts, created_at, updated_at) SELECT $1, 'event', $2, e, 'msg_' || e, "
        "'delivered', 1, now(), now() FROM unnest($3::bigint[]) AS e",
        endpoint,
        log,
        event_ids,
    )


async def test_only_old_finished_tasks_and_runs_go_with_their_events_and_deliveries(
    place: Place,
) -> None:
    w = place.world()
    # A task in every state, all old: the three finished ones go, the seven open ones stay.
    every = {
        (state, waiting_on): await w.task_in(state, waiting_on)
        for state, waiting_on in [
            *((s, None) for s in TaskState if s is not TaskState.waiting),
            (TaskState.waiting, WaitingOn.owner_approval),
            (TaskState.waiting, WaitingOn.human),
        ]
    }
    finished = [t.id for (s, _), t in every.items() if s in FINISHED]
    open_ = [t.id for (s, _), t in every.items() if s not in FINISHED]
    assert len(finished) == 3 and len(open_) == 8
    # Finished and old, but kept: one an open task depends on, one an open run names.
    needed = await w.task_in(TaskState.completed)
    dependent = await w.hand_off(depends_on=[needed.id])  # routed: open
    named = await w.task_in(TaskState.completed)
    requester_owner = owner(w.req_owner)
    open_run = (
        await place.runs.create(requester_owner, project=w.project, title="T", task_id=named.id)
    ).run
    # Finished and old, named by a finished old run: both go.
    freed = await w.task_in(TaskState.cancelled)
    done_run = await _completed_run(place, requester_owner, w.project, freed.id)
    young = await w.task_in(TaskState.completed)  # finished 20 days ago: kept
    old_tasks = [*finished, *open_, needed.id, dependent.id, named.id, freed.id]
    await place.age("tasks", old_tasks, OLD)
    await place.age("tasks", [young.id], YOUNG)

    runs = Runs(place.runs)
    by_status = {status: await runs.run_in(status) for status in RunStatus}
    old_runs = [r.id for r in by_status.values()] + [open_run.id, done_run.id]
    young_run = await runs.run_in(RunStatus.completed)
    await place.age("runs", old_runs, OLD)
    await place.age("runs", [young_run.id], YOUNG)

    async with place.db.connection() as conn:
        gone_task_events = await _event_ids(conn, "task_events", "task_id", [*finished, freed.id])
        kept_task_events = await _events(conn, "task_events", "task_id", [*open_, needed.id])
        completed_run = by_status[RunStatus.completed].id
        gone_run_events = await _event_ids(
            conn, "run_events", "run_id", [completed_run, done_run.id]
        )
        endpoint = await _endpoint(conn, w.req_owner)
        kept_event = (await _event_ids(conn, "task_events", "task_id", [young.id]))[-1]
        await _deliver(conn, endpoint, "task", [*gone_task_events, kept_event])
        await _deliver(conn, endpoint, "run", gone_run_events)

    # Two subjects a batch: many batches, each its own transaction.
    swept = await place.sweep(batch=2)

    async with place.db.connection() as conn:
        all_tasks = [*old_tasks, young.id]
        assert await _ids(conn, "tasks", all_tasks) == {
            *open_,
            needed.id,
            dependent.id,
            named.id,
            young.id,
        }
        assert await _events(conn, "task_events", "task_id", [*open_, needed.id]) == (
            kept_task_events
        )
        assert not await _event_ids(conn, "task_events", "task_id", [*finished, freed.id])
        # Of the runs, only the old completed ones went: errored is not finished (it reruns).
        assert await _ids(conn, "runs", [*old_runs, young_run.id]) == {
            *(r.id for s, r in by_status.items() if s is not RunStatus.completed),
            open_run.id,
            young_run.id,
        }
        assert not await _event_ids(conn, "run_events", "run_id", [completed_run, done_run.id])
        left = await conn.fetch(
            "SELECT log, event_id FROM webhook_deliveries WHERE endpoint_id = $1", endpoint
        )
        assert [(r["log"], r["event_id"]) for r in left] == [("task", kept_event)]
        floors = {r["log"]: r["floor"] for r in await conn.fetch("SELECT * FROM retention_floors")}
    assert floors["task_events"] >= max(gone_task_events)
    assert floors["run_events"] >= max(gone_run_events)
    assert swept.subjects["task"] >= 4 and swept.subjects["run"] >= 2
    assert swept.batches > 3


async def test_a_second_sweep_finds_nothing_more_and_the_floors_stay(place: Place) -> None:
    w = place.world()
    task = await w.task_in(TaskState.rejected)
    await place.age("tasks", [task.id], OLD)
    await place.sweep()
    async with place.db.connection() as conn:
        before = await conn.fetch("SELECT log, floor FROM retention_floors ORDER BY log")
    again = await place.sweep()
    assert again.subjects == {"task": 0, "run": 0}
    async with place.db.connection() as conn:
        assert await conn.fetch("SELECT log, floor FROM retention_floors ORDER BY log") == before


async def test_a_removed_client_id_makes_a_new_task_when_handed_off_again(place: Place) -> None:
    w = place.world()
    await w.decide(GateDecision.ALLOW)
    hand_off = HandOff(w.project, w.requester, w.assignee, packet(), id="again")
    first = (await place.tasks.hand_off(agent(w.requester), hand_off)).task
    first = await w.move(first, MoveName.CANCEL)
    await place.age("tasks", [first.id], OLD)
    await place.sweep()
    second = (await place.tasks.hand_off(agent(w.requester), hand_off)).task
    assert second.id == first.id and second.state is TaskState.routed
    assert second.created_at > first.created_at


FINISHED = {TaskState.completed, TaskState.rejected, TaskState.cancelled}


async def _completed_run(place: Place, by: Principal, project: str, task_id: str) -> RunRecord:
    """A run of `by` (an owner) linked to `task_id`, driven to `completed` by its daemon."""
    daemon = agent(f"{by.handle}/daemon")
    run = (await place.runs.create(by, project=project, title="T", task_id=task_id)).run
    for name in (
        RunEvent.CLAIM,
        RunEvent.CHECKPOINT_REACHED,
        RunEvent.PR_OPENED,
        RunEvent.PR_MERGED,
    ):
        args = {**ARGS.get(name, {})}
        if name is RunEvent.CHECKPOINT_REACHED:
            args["checkpoint"] = RunCheckpoint.summary_complete
        run = (await place.runs.event(daemon, name, run.id, args=args)).run
    assert run.status is RunStatus.completed
    return run


async def _endpoint(conn: Connection, owner_handle: str) -> str:
    endpoint = f"we_{owner_handle}"
    await conn.execute(
        "INSERT INTO webhook_endpoints (id, owner, url, description, task_filter, secret, "
        "enabled, task_cursor, run_cursor, failures, created_at, updated_at) VALUES ($1, $2, "
        "'https://example.com/hook', '', '{}'::jsonb, 's', TRUE, 0, 0, 0, now(), now())",
        endpoint,
        owner_handle,
    )
    return endpoint
