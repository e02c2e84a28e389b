"""Pipeline runs through the API: every event from every status, the invariants under random
event sequences, visibility, and the fields a run shows."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from baton.access.principals import ADMIN, SYSTEM
from baton.errors import InvalidInput
from baton.protocol.pipeline import (
    PARKED,
    PIPELINE,
    RunActor,
    RunCheckpoint,
    RunEvent,
    RunPhase,
    RunStatus,
)
from baton.services.runs import RunService
from baton.services.tasks import TaskService
from baton.store.db import Database
from baton.store.records import RunRecord
from tests.helpers import execute, execute_raw
from tests.runs_helpers import ARGS, Runs

RUN_FIELDS = "id status phase checkpoint version questions answers pullRequestUrl failureReason"


def argument_literals(args: dict[str, Any]) -> str:
    """The event's arguments as GraphQL literals (JSON strings are GraphQL strings)."""
    parts = []
    for key, value in args.items():
        literal = value.value if isinstance(value, RunCheckpoint) else json.dumps(value)
        parts.append(f"{key}: {literal}")
    return ", ".join(parts)


def mutation(name: RunEvent, args: dict[str, Any]) -> str:
    extra = argument_literals(args)
    field = PIPELINE.named(name)[0].mutation
    return f"""mutation($id: ID!) {{ {field}(input: {{id: $id{", " + extra if extra else ""}}}) {{
        __typename
        ... on RunMoveSuccess {{ run {{ {RUN_FIELDS} }} events {{ event fromStatus toStatus }} }}
        ... on InvalidRunStateError {{ code status allowedEvents }}
        ... on Error {{ code message }}
    }} }}"""


@pytest.fixture
def runs(db: Database) -> Runs:
    return Runs(RunService(db))


PAIRS = list(itertools.product(RunEvent, RunStatus))


@pytest.mark.parametrize(("name", "status"), PAIRS, ids=[f"{e.value}@{s.value}" for e, s in PAIRS])
async def test_each_event_from_each_status_is_allowed_exactly_where_the_table_says(
    service: TaskService, runs: Runs, name: RunEvent, status: RunStatus
) -> None:
    run = await runs.run_in(status)
    position = PIPELINE.position(run.status, phase=run.phase, checkpoint=run.checkpoint)
    args = ARGS.get(name, {})
    if name is RunEvent.CHECKPOINT_REACHED:
        args = {"checkpoint": RunCheckpoint.generation_complete}
    expected = None
    try:
        expected = PIPELINE.apply(position, name, args)
    except Exception:
        expected = None
    actor = {RunActor.RUNNER: runs.daemon, RunActor.OWNER: runs.owner}.get(
        PIPELINE.named(name)[0].actor, ADMIN
    )
    field = PIPELINE.named(name)[0].mutation
    answer = (await execute(service, actor, mutation(name, args), {"id": run.id}))[field]
    after = await runs.service.get(ADMIN, run.id)
    if expected is None:
        assert answer["__typename"] == "InvalidRunStateError", answer
        assert answer["status"] == status.value
        assert after == run  # nothing changed
        events = (await runs.service.events_of_many([run.id], 100, None))[run.id][0]
        assert len(events) == run.version  # no event written
        return
    assert answer["__typename"] == "RunMoveSuccess", answer
    got = answer["run"]
    assert (got["status"], got["phase"], got["checkpoint"]) == (
        expected.state.value,
        expected["phase"].value,
        expected["checkpoint"].value,
    )
    assert got["version"] == run.version + 1
    assert answer["events"] == [
        {"event": name.value, "fromStatus": status.value, "toStatus": expected.state.value}
    ]
    assert (after.status, after.phase, after.checkpoint) == (
        expected.state,
        expected["phase"],
        expected["checkpoint"],
    )


def check_invariants(run: RunRecord) -> None:
    position = PIPELINE.position(run.status, phase=run.phase, checkpoint=run.checkpoint)
    assert PIPELINE.broken(position) == (), run
    assert (run.status is RunStatus.completed) == (
        run.checkpoint is RunCheckpoint.notified and run.phase is RunPhase.done
    )
    if run.status is RunStatus.in_review:
        assert run.checkpoint is RunCheckpoint.pr_complete
    if run.status in PARKED:
        assert run.phase is RunPhase.idle


EVENT_ARGS = st.fixed_dictionaries(
    {},
    optional={
        "checkpoint": st.sampled_from(list(RunCheckpoint)),
        "questions": st.lists(st.text(min_size=0, max_size=5), max_size=3),
        "answers": st.lists(st.text(min_size=0, max_size=5), max_size=3),
        "url": st.sampled_from(["https://example.com/pull/1", "not a url", ""]),
        "reason": st.sampled_from(["broke", "", "   "]),
    },
)


@pytest.mark.parametrize("text", ["nul\x00here", "lone \ud800 surrogate"])
@pytest.mark.parametrize("field", ["questions", "reason"])
async def test_text_postgresql_cannot_store_is_invalid_input_and_changes_nothing(
    db: Database, text: str, field: str
) -> None:
    runs = Runs(RunService(db))
    run = await runs.new()
    name, args = (
        (RunEvent.PLAN_NEEDS_INPUT, {"questions": [text]})
        if field == "questions"
        else (RunEvent.FAILED, {"reason": text})
    )
    with pytest.raises(InvalidInput) as refused:
        await runs.service.event(runs.daemon, name, run.id, args=args)
    assert refused.value.field == field
    assert await runs.service.get(ADMIN, run.id) == run


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    steps=st.lists(
        st.tuples(st.sampled_from(list(RunEvent)), EVENT_ARGS, st.booleans()),
        min_size=1,
        max_size=25,
    )
)
async def test_random_event_sequences_never_break_an_invariant(
    db: Database, steps: list[tuple[RunEvent, dict[str, Any], bool]]
) -> None:
    """Random events with random (often illegal) arguments, as the owner or as the daemon:
    after every step the run returned and the row read back obey every invariant, and the
    version rises by one exactly when an event was recorded."""
    runs = Runs(RunService(db))
    run = await runs.new()
    for name, args, as_owner in steps:
        before = await runs.service.get(ADMIN, run.id)
        principal = runs.owner if as_owner else runs.daemon
        if name is RunEvent.HOST_OFFLINE:
            principal = SYSTEM
        try:
            outcome = await runs.service.event(principal, name, run.id, args=dict(args))
        except Exception as exc:  # a typed refusal: nothing changed
            assert getattr(exc, "code", None) in (
                "invalid_state",
                "invalid_input",
                "forbidden",
                "lease_lost",
            )
            after = await runs.service.get(ADMIN, run.id)
            assert after == before
            continue
        check_invariants(outcome.run)
        after = await runs.service.get(ADMIN, run.id)
        check_invariants(after)
        assert after.version == before.version + 1
        assert outcome.run == after


async def test_another_owners_run_is_not_found_everywhere(service: TaskService, runs: Runs) -> None:
    run = await runs.run_in(RunStatus.in_progress)
    outsider = runs.outsider
    data = await execute(
        service, outsider, "query($id: ID!) { run(id: $id) { id } }", {"id": run.id}
    )
    assert data == {"run": None}
    listed = await execute(service, outsider, "{ runs { totalCount edges { node { id } } } }")
    assert run.id not in {e["node"]["id"] for e in listed["runs"]["edges"]}
    for name in RunEvent:
        field = PIPELINE.named(name)[0].mutation
        if name is RunEvent.CLAIM:
            continue
        answer = (
            await execute(service, outsider, mutation(name, ARGS.get(name, {})), {"id": run.id})
        )[field]
        assert answer["__typename"] == "NotFoundError", (name, answer)
    beat = await execute(
        service,
        outsider,
        "mutation($id: ID!) { runHeartbeat(input: {id: $id}) { __typename } }",
        {"id": run.id},
    )
    assert beat["runHeartbeat"]["__typename"] == "NotFoundError"
    claim = await execute(
        service,
        outsider,
        "mutation($id: ID!) { claimRun(input: {id: $id}) { __typename } }",
        {"id": run.id},
    )
    assert claim["claimRun"]["__typename"] == "NotFoundError"


async def test_the_owner_alone_answers_interrupts_and_reruns(
    service: TaskService, runs: Runs
) -> None:
    """OWNER events are a person's decisions: the daemon agent may not make them."""
    run = await runs.run_in(RunStatus.awaiting_user)
    answer = (
        await execute(
            service,
            runs.daemon,
            mutation(RunEvent.USER_ANSWERED, ARGS[RunEvent.USER_ANSWERED]),
            {"id": run.id},
        )
    )["provideUserInput"]
    assert answer["__typename"] == "ForbiddenError", answer
    ok = (
        await execute(
            service,
            runs.owner,
            mutation(RunEvent.USER_ANSWERED, ARGS[RunEvent.USER_ANSWERED]),
            {"id": run.id},
        )
    )["provideUserInput"]
    assert ok["__typename"] == "RunMoveSuccess"
    assert ok["run"]["answers"] == ["PostgreSQL"] and ok["run"]["questions"] == ["Which database?"]


@pytest.mark.parametrize(
    ("name", "args", "field"),
    [
        (RunEvent.CHECKPOINT_REACHED, {}, "checkpoint"),
        (RunEvent.CHECKPOINT_REACHED, {"checkpoint": RunCheckpoint.pr_complete}, "checkpoint"),
        (RunEvent.PLAN_NEEDS_INPUT, {"questions": []}, "questions"),
        (RunEvent.PLAN_NEEDS_INPUT, {"questions": ["x" * 2001]}, "questions"),
        (RunEvent.PR_OPENED, {"url": "ftp://example.com/x"}, "url"),
        (RunEvent.FAILED, {"reason": "  "}, "reason"),
    ],
)
async def test_bad_event_arguments_are_invalid_input_naming_the_field(
    runs: Runs, name: RunEvent, args: dict[str, Any], field: str
) -> None:
    run = await runs.run_in(RunStatus.in_progress)
    with pytest.raises(Exception) as refused:
        await runs.service.event(runs.daemon, name, run.id, args=args)
    assert getattr(refused.value, "code", None) == "invalid_input"
    assert getattr(refused.value, "field", None) == field
    assert await runs.service.get(ADMIN, run.id) == run


async def test_a_checkpoint_not_later_than_the_current_one_is_invalid_state(runs: Runs) -> None:
    run = await runs.run_in(RunStatus.in_progress)
    run = await runs.event(
        run, RunEvent.CHECKPOINT_REACHED, checkpoint=RunCheckpoint.generation_complete
    )
    with pytest.raises(Exception) as refused:
        await runs.event(run, RunEvent.CHECKPOINT_REACHED, checkpoint=RunCheckpoint.plans_complete)
    assert getattr(refused.value, "code", None) == "invalid_state"


async def test_a_run_links_to_its_task_and_the_task_lists_its_runs(
    service: TaskService, world: Any, db: Database
) -> None:
    from baton.protocol.handoff import TaskState

    task = await world.task_in(TaskState.working)
    runs = RunService(db)
    created = await runs.create(
        world.roles["assignee_owner"], project=world.project, title="Do it", task_id=task.id
    )
    data = await execute(
        service,
        world.roles["assignee_owner"],
        """query($id: ID!) { run(id: $id) { taskId task { id state } }
             task(id: $id2) { runs { id title } } }""".replace("$id2", f'"{task.id}"'),
        {"id": created.run.id},
    )
    assert data["run"] == {"taskId": task.id, "task": {"id": task.id, "state": "working"}}
    assert data["task"]["runs"] == [{"id": created.run.id, "title": "Do it"}]
    # A task the creator cannot see cannot be linked.
    refused = await execute_raw(
        service,
        world.roles["outsider_owner"],
        """mutation($t: ID!) { createRun(input: {project: "p", title: "t", taskId: $t}) {
             __typename } }""",
        {"t": task.id},
    )
    assert refused.data == {"createRun": {"__typename": "NotFoundError"}}
