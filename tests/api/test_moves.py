"""Every protocol move over GraphQL: the 22 allowed pairs, every refused one, and the details.

The allowed pairs come from `HANDOFF.moves` (the table); the refused pairs are its complement,
each tried as admin so that only the protocol, never authorization, can refuse them.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from baton.access.principals import ADMIN, Principal
from baton.protocol.handoff import (
    HANDOFF,
    REQUIRES_WAITING_ON,
    Actor,
    MoveName,
    TaskState,
    Verification,
    WaitingOn,
)
from baton.protocol.machine import Move
from baton.services.tasks import TaskService
from baton.store.records import TaskRecord
from tests.helpers import RESULT_INPUT, World, execute

S, M = TaskState, MoveName

# --- GraphQL documents -----------------------------------------------------------------------

OUTCOME_FIELDS = """
  __typename
  ... on Error { code message }
  ... on MoveSuccess {
    task {
      id state waitingOn version
      result { returnedBy returnedAt }
      latestCheckpoint { progress decisions filesTouched nextSteps openQuestions }
    }
    events { kind move fromState toState actor reason version }
  }
  ... on InvalidStateError { state move allowedMoves }
  ... on NotFoundError { id }
  ... on VersionConflictError { expectedVersion actualVersion }
  ... on InvalidInputError { field }
"""

TASK_QUERY = """
query Task($id: ID!) {
  task(id: $id) {
    id state waitingOn version
    events(first: 100) { edges { node { kind move fromState toState actor } } }
  }
}
"""

CHECKPOINT = {
    "progress": "half way",
    "decisions": ["use PostgreSQL"],
    "filesTouched": ["src/a.py"],
    "nextSteps": ["write tests"],
    "openQuestions": ["which version?"],
}


def mutation_document(mutation: str) -> str:
    input_type = mutation[0].upper() + mutation[1:] + "Input"
    selection = f"{mutation}(input: $input) {{ {OUTCOME_FIELDS} }}"
    return f"mutation Call($input: {input_type}!) {{ {selection} }}"


async def call(
    service: TaskService, principal: Principal, mutation: str, **input: Any
) -> dict[str, Any]:
    """Run one move (or saveCheckpoint) mutation; its union result as a dict."""
    data = await execute(service, principal, mutation_document(mutation), {"input": input})
    outcome: dict[str, Any] = data[mutation]
    return outcome


async def read(service: TaskService, task_id: str, principal: Principal = ADMIN) -> Any:
    """The task with its full event list, as `principal` sees it (None when it cannot)."""
    data = await execute(service, principal, TASK_QUERY, {"id": task_id})
    return data["task"]


def event_nodes(task: dict[str, Any]) -> list[dict[str, Any]]:
    return [edge["node"] for edge in task["events"]["edges"]]


# --- the table, read as an oracle ------------------------------------------------------------

# Who makes each move in the "allowed" walk: one principal per protocol actor.
ACTOR_ROLE: dict[Actor, str] = {
    Actor.GATE: "assignee_owner",
    Actor.ASSIGNEE: "assignee",
    Actor.VERIFIER: "requester",
    Actor.REQUESTER: "requester",
    Actor.REQUESTER_OWNER: "requester_owner",
}

MOVE_NAMES: list[MoveName] = list(HANDOFF.names())
MUTATION_OF: dict[MoveName, str] = {m.name: m.mutation for m in HANDOFF.moves}

# Every situation a task can be in: the 10 states, with `waiting` split by what it waits on.
SITUATIONS: list[tuple[TaskState, WaitingOn | None]] = [
    *((s, None) for s in TaskState if s is not S.waiting),
    (S.waiting, WaitingOn.owner_approval),
    (S.waiting, WaitingOn.human),
    (S.waiting, WaitingOn.agent),
]


def table_allows(state: TaskState, waiting_on: WaitingOn | None, name: MoveName) -> bool:
    listed = any(m.source is state and m.name is name for m in HANDOFF.moves)
    required = REQUIRES_WAITING_ON.get(name)
    return listed and (required is None or waiting_on in required)


REFUSED: list[tuple[TaskState, WaitingOn | None, MoveName]] = [
    (state, waiting_on, name)
    for state, waiting_on in SITUATIONS
    for name in MOVE_NAMES
    if not table_allows(state, waiting_on, name)
]


def situation_id(state: TaskState, waiting_on: WaitingOn | None) -> str:
    return f"{state.value}[{waiting_on.value}]" if waiting_on else state.value


def inputs_for(name: MoveName) -> dict[str, Any]:
    """The inputs a move needs besides `id`, all valid."""
    if name is M.PAUSE:
        return {"waitingOn": "human"}
    if name is M.SUBMIT_RESULT:
        return {"result": RESULT_INPUT}
    if name in (M.SEND_BACK, M.REQUEST_CHANGES):
        return {"reason": "needs another pass"}
    return {}


# --- driving tasks ---------------------------------------------------------------------------


async def working_task(world: World, verification: Verification) -> TaskRecord:
    task = await world.hand_off(verification=verification)
    task = await world.move(task, M.ACCEPT)
    return await world.move(task, M.START)


async def task_for(world: World, move: Move[TaskState, MoveName, Actor]) -> TaskRecord:
    """A fresh task in `move.source`, set up so that the move is allowed."""
    if move.source is S.waiting:
        waiting_on = WaitingOn.human if move.name is M.RESUME else WaitingOn.owner_approval
        return await world.task_in(S.waiting, waiting_on)
    if move.name is M.SUBMIT_RESULT:
        # REVIEW rests in verifying, so the call makes exactly this one move.
        return await working_task(world, Verification.REVIEW)
    return await world.task_in(move.source)


# --- every allowed move ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "move",
    HANDOFF.moves,
    ids=[f"{m.mutation}:{m.source.value}->{m.target.value}" for m in HANDOFF.moves],
)
async def test_each_allowed_move_succeeds_and_records_one_moved_event(
    service: TaskService, world: World, move: Move[TaskState, MoveName, Actor]
) -> None:
    task = await task_for(world, move)
    assert task.state is move.source
    principal = world.roles[ACTOR_ROLE[move.actor]]
    before = await read(service, task.id)

    # Every move takes an optional reason, kept on its event.
    inputs = {"reason": f"why {move.mutation}", **inputs_for(move.name)}

    outcome = await call(service, principal, move.mutation, id=task.id, **inputs)

    assert outcome["__typename"] == "MoveSuccess", outcome
    moved = outcome["task"]
    assert moved["state"] == move.target.value
    expected_waiting_on = {M.PAUSE: "human", M.HOLD: "owner_approval"}.get(move.name)
    assert moved["waitingOn"] == expected_waiting_on
    assert outcome["events"] == [
        {
            "kind": "moved",
            "move": move.name.value,
            "fromState": move.source.value,
            "toState": move.target.value,
            "actor": principal.handle,
            "reason": inputs["reason"],
            "version": before["version"] + 1,
        }
    ]
    assert moved["version"] == before["version"] + len(outcome["events"])
    after = await read(service, task.id)
    assert after["state"] == move.target.value
    assert after["version"] == moved["version"]
    appended = [
        {k: e[k] for k in ("kind", "move", "fromState", "toState", "actor")}
        for e in outcome["events"]
    ]
    assert event_nodes(after) == event_nodes(before) + appended


# --- every refused (state, move) pair ---------------------------------------------------------


def test_the_refused_walk_is_every_situation_and_move_the_table_does_not_allow() -> None:
    """12 situations x 16 move names, minus what is allowed: the seed's 22 pairs, with the four
    moves out of `waiting` counted once per reason they may wait on (approve and deny:
    owner_approval; resume: human and agent; cancel: all three), 22 - 4 + 7. A test, not a
    module-level assert, so a table change fails here rather than stopping collection."""
    assert len(SITUATIONS) == 12 and len(MOVE_NAMES) == 16
    assert len(REFUSED) == 12 * 16 - (22 - 4 + 7)
    assert len(set(REFUSED)) == len(REFUSED)


@pytest.mark.parametrize(
    ("state", "waiting_on", "name"),
    REFUSED,
    ids=[f"{situation_id(s, w)}-{MUTATION_OF[n]}" for s, w, n in REFUSED],
)
async def test_a_move_the_table_does_not_allow_is_invalid_state_and_changes_nothing(
    service: TaskService,
    world: World,
    state: TaskState,
    waiting_on: WaitingOn | None,
    name: MoveName,
) -> None:
    task = await world.task_in(state, waiting_on)
    before = await read(service, task.id)

    outcome = await call(service, ADMIN, MUTATION_OF[name], id=task.id, **inputs_for(name))

    assert outcome["__typename"] == "InvalidStateError", outcome
    assert outcome["code"] == "invalid_state"
    assert outcome["state"] == state.value
    assert outcome["move"] == name.value
    allowed_now = {n.value for n in MOVE_NAMES if table_allows(state, waiting_on, n)}
    assert set(outcome["allowedMoves"]) == allowed_now
    assert await read(service, task.id) == before


# --- verification modes ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("verification", "trail"),
    [
        (
            Verification.AUTO,
            [(M.SUBMIT_RESULT, S.working, S.verifying), (M.COMPLETE, S.verifying, S.completed)],
        ),
        (
            Verification.SIGN_OFF,
            [
                (M.SUBMIT_RESULT, S.working, S.verifying),
                (M.REQUEST_SIGN_OFF, S.verifying, S.approval),
            ],
        ),
        (Verification.REVIEW, [(M.SUBMIT_RESULT, S.working, S.verifying)]),
    ],
    ids=["AUTO", "SIGN_OFF", "REVIEW"],
)
async def test_submit_result_goes_as_far_as_the_verification_mode_allows(
    service: TaskService,
    world: World,
    verification: Verification,
    trail: list[tuple[MoveName, TaskState, TaskState]],
) -> None:
    task = await working_task(world, verification)
    assignee = world.roles["assignee"]

    outcome = await call(service, assignee, "submitResult", id=task.id, result=RESULT_INPUT)

    assert outcome["__typename"] == "MoveSuccess", outcome
    assert [(e["move"], e["fromState"], e["toState"]) for e in outcome["events"]] == [
        (name.value, source.value, target.value) for name, source, target in trail
    ]
    # The submit is the assignee's; what the verification mode then does is the server's.
    assert [e["actor"] for e in outcome["events"]] == [assignee.handle] + ["system"] * (
        len(trail) - 1
    )
    assert [e["version"] for e in outcome["events"]] == [
        task.version + i for i in range(1, len(trail) + 1)
    ]
    assert outcome["task"]["state"] == trail[-1][2].value
    assert outcome["task"]["version"] == task.version + len(trail)
    assert outcome["task"]["result"]["returnedBy"] == assignee.handle
    assert outcome["task"]["result"]["returnedAt"]


# --- expectedVersion -------------------------------------------------------------------------


@pytest.mark.parametrize("offset", [-1, 1])
async def test_a_stale_expected_version_is_a_conflict_and_the_right_one_moves(
    service: TaskService, world: World, offset: int
) -> None:
    task = await world.task_in(S.routed)
    assignee = world.roles["assignee"]
    before = await read(service, task.id)

    wrong = before["version"] + offset
    conflict = await call(service, assignee, "acceptTask", id=task.id, expectedVersion=wrong)

    assert conflict["__typename"] == "VersionConflictError", conflict
    assert conflict["code"] == "version_conflict"
    assert (conflict["expectedVersion"], conflict["actualVersion"]) == (wrong, before["version"])
    assert await read(service, task.id) == before

    success = await call(
        service, assignee, "acceptTask", id=task.id, expectedVersion=before["version"]
    )
    assert success["__typename"] == "MoveSuccess", success
    assert success["task"]["state"] == "accepted"
    assert success["task"]["version"] == before["version"] + 1


async def test_a_stale_expected_version_on_save_checkpoint_saves_nothing(
    service: TaskService, world: World
) -> None:
    task = await world.task_in(S.working)
    before = await read(service, task.id)

    conflict = await call(
        service,
        world.roles["assignee"],
        "saveCheckpoint",
        id=task.id,
        checkpoint=CHECKPOINT,
        expectedVersion=before["version"] - 1,
    )

    assert conflict["__typename"] == "VersionConflictError", conflict
    assert conflict["actualVersion"] == before["version"]
    assert await read(service, task.id) == before


# --- waiting on a person or another agent ---------------------------------------------------


@pytest.mark.parametrize("waiting_on", ["human", "agent"])
async def test_pause_records_what_the_task_waits_on_and_resume_clears_it(
    service: TaskService, world: World, waiting_on: str
) -> None:
    task = await world.task_in(S.working)
    assignee = world.roles["assignee"]

    paused = await call(service, assignee, "pauseTask", id=task.id, waitingOn=waiting_on)
    owner_decision = await call(service, ADMIN, "approveTask", id=task.id)
    resumed = await call(service, assignee, "resumeTask", id=task.id)

    assert paused["__typename"] == "MoveSuccess", paused
    assert (paused["task"]["state"], paused["task"]["waitingOn"]) == ("waiting", waiting_on)
    assert owner_decision["__typename"] == "InvalidStateError", owner_decision
    assert resumed["__typename"] == "MoveSuccess", resumed
    assert (resumed["task"]["state"], resumed["task"]["waitingOn"]) == ("working", None)


# --- races -----------------------------------------------------------------------------------


async def test_two_racing_moves_out_of_one_state_never_both_succeed(
    service: TaskService, world: World
) -> None:
    assignee = world.roles["assignee"]
    for _ in range(5):
        task = await world.task_in(S.working)

        pause, submit = await asyncio.gather(
            call(service, assignee, "pauseTask", id=task.id, waitingOn="human"),
            call(service, assignee, "submitResult", id=task.id, result=RESULT_INPUT),
        )

        kinds = sorted([pause["__typename"], submit["__typename"]])
        assert kinds == ["InvalidStateError", "MoveSuccess"], (pause, submit)
        winner = pause if pause["__typename"] == "MoveSuccess" else submit
        after = await read(service, task.id)
        assert (after["state"], after["version"]) == (
            winner["task"]["state"],
            task.version + len(winner["events"]),
        )


async def test_two_racing_moves_expecting_one_version_never_both_succeed(
    service: TaskService, world: World
) -> None:
    assignee, requester = world.roles["assignee"], world.roles["requester"]
    for _ in range(5):
        task = await world.task_in(S.working)

        pause, cancel = await asyncio.gather(
            call(
                service,
                assignee,
                "pauseTask",
                id=task.id,
                waitingOn="human",
                expectedVersion=task.version,
            ),
            call(service, requester, "cancelTask", id=task.id, expectedVersion=task.version),
        )

        kinds = sorted([pause["__typename"], cancel["__typename"]])
        assert kinds == ["MoveSuccess", "VersionConflictError"], (pause, cancel)
        loser = cancel if pause["__typename"] == "MoveSuccess" else pause
        assert (loser["expectedVersion"], loser["actualVersion"]) == (
            task.version,
            task.version + 1,
        )
        assert (await read(service, task.id))["version"] == task.version + 1


# --- checkpoints -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("state", "waiting_on"),
    [(S.accepted, None), (S.working, None), (S.waiting, WaitingOn.human)],
    ids=["accepted", "working", "waiting[human]"],
)
async def test_the_assignee_replaces_the_latest_checkpoint_while_it_holds_the_task(
    service: TaskService, world: World, state: TaskState, waiting_on: WaitingOn | None
) -> None:
    task = await world.task_in(state, waiting_on)
    assignee = world.roles["assignee"]
    first = {"progress": "started"}
    second = CHECKPOINT

    saved = [
        await call(service, assignee, "saveCheckpoint", id=task.id, checkpoint=checkpoint)
        for checkpoint in (first, second)
    ]

    for i, outcome in enumerate(saved, start=1):
        assert outcome["__typename"] == "MoveSuccess", outcome
        assert outcome["task"]["state"] == state.value
        assert outcome["task"]["version"] == task.version + i
        [event] = outcome["events"]
        assert event["kind"] == "checkpoint_saved"
        assert event["move"] is None
        assert event["actor"] == assignee.handle
        assert event["version"] == task.version + i
    assert saved[0]["task"]["latestCheckpoint"] == {
        "progress": "started",
        "decisions": [],
        "filesTouched": [],
        "nextSteps": [],
        "openQuestions": [],
    }
    assert saved[1]["task"]["latestCheckpoint"] == CHECKPOINT
    after = await read(service, task.id)
    assert [e["kind"] for e in event_nodes(after)[-2:]] == ["checkpoint_saved"] * 2


# API.md §3: a checkpoint is saved "while the task is accepted, working or waiting";
# elsewhere InvalidStateError. Every other state, written out here rather than read from code.
OUTSIDE_THE_HOLD = [
    S.requested,
    S.routed,
    S.verifying,
    S.approval,
    S.completed,
    S.rejected,
    S.cancelled,
]


def test_the_states_outside_the_hold_are_all_but_accepted_working_and_waiting() -> None:
    assert set(OUTSIDE_THE_HOLD) == set(TaskState) - {S.accepted, S.working, S.waiting}


@pytest.mark.parametrize("state", OUTSIDE_THE_HOLD, ids=lambda s: s.value)
async def test_a_checkpoint_outside_the_assignees_hold_is_invalid_state(
    service: TaskService, world: World, state: TaskState
) -> None:
    task = await world.task_in(state)
    before = await read(service, task.id)

    outcome = await call(
        service, world.roles["assignee"], "saveCheckpoint", id=task.id, checkpoint=CHECKPOINT
    )

    assert outcome["__typename"] == "InvalidStateError", outcome
    assert outcome["code"] == "invalid_state"
    assert outcome["state"] == state.value
    assert outcome["move"] == "SAVE_CHECKPOINT"
    assert await read(service, task.id) == before


async def test_the_requester_agent_may_not_save_a_checkpoint(
    service: TaskService, world: World
) -> None:
    task = await world.task_in(S.working)
    before = await read(service, task.id)

    outcome = await call(
        service, world.roles["requester"], "saveCheckpoint", id=task.id, checkpoint=CHECKPOINT
    )

    assert outcome["__typename"] == "ForbiddenError", outcome
    assert outcome["code"] == "forbidden"
    assert await read(service, task.id) == before


# --- bad input -------------------------------------------------------------------------------


@pytest.mark.parametrize("reason", ["", "   "], ids=["empty", "blank"])
@pytest.mark.parametrize(
    ("mutation", "state", "role"),
    [
        ("sendBackTask", S.verifying, "requester"),
        ("requestChanges", S.approval, "requester_owner"),
    ],
    ids=["sendBackTask", "requestChanges"],
)
async def test_a_move_that_must_say_why_without_a_reason_is_invalid_input_on_reason(
    service: TaskService, world: World, mutation: str, state: TaskState, role: str, reason: str
) -> None:
    task = await world.task_in(state)
    before = await read(service, task.id)

    outcome = await call(service, world.roles[role], mutation, id=task.id, reason=reason)

    assert outcome["__typename"] == "InvalidInputError", outcome
    assert outcome["code"] == "invalid_input"
    assert outcome["field"] == "reason"
    assert await read(service, task.id) == before


async def test_pausing_to_wait_on_owner_approval_is_invalid_input_on_waiting_on(
    service: TaskService, world: World
) -> None:
    task = await world.task_in(S.working)
    before = await read(service, task.id)

    outcome = await call(
        service, world.roles["assignee"], "pauseTask", id=task.id, waitingOn="owner_approval"
    )

    assert outcome["__typename"] == "InvalidInputError", outcome
    assert outcome["field"] == "waitingOn"
    assert await read(service, task.id) == before


# --- tasks the caller cannot see -------------------------------------------------------------


@pytest.mark.parametrize("role", ["outsider_agent", "outsider_owner"])
async def test_a_move_on_a_task_the_caller_cannot_see_is_not_found(
    service: TaskService, world: World, role: str
) -> None:
    task = await world.task_in(S.routed)
    outsider = world.roles[role]
    before = await read(service, task.id)

    outcome = await call(service, outsider, "acceptTask", id=task.id)
    # A stale version must not tell an outsider that the task exists either.
    stale = await call(service, outsider, "acceptTask", id=task.id, expectedVersion=999)

    assert outcome["__typename"] == "NotFoundError", outcome
    assert outcome["code"] == "not_found"
    assert stale["__typename"] == "NotFoundError", stale
    assert await read(service, task.id, outsider) is None
    assert await read(service, task.id, world.roles["assignee"]) is not None
    assert await read(service, task.id) == before


async def test_a_move_on_a_task_that_does_not_exist_is_not_found(
    service: TaskService, world: World
) -> None:
    outcome = await call(service, ADMIN, "acceptTask", id=f"missing-{world.tag}")

    assert outcome["__typename"] == "NotFoundError", outcome
    assert outcome["id"] == f"missing-{world.tag}"
