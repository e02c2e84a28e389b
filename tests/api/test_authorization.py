"""Who may do what (API.md §2 and §8 "Who, precisely"), role by role, over GraphQL.

The oracle is the literal table below, written from the contract, not from `may_act_as`.
"""

from __future__ import annotations

from typing import Any

import pytest

from baton.access.principals import ADMIN, Principal
from baton.protocol.handoff import HANDOFF, MoveName, TaskState, WaitingOn
from baton.services.tasks import HandOff, TaskService
from baton.store.records import TaskRecord
from tests.helpers import PACKET_INPUT, RESULT_INPUT, World, agent, execute, packet, task_id_of

S = TaskState

ROLES = [
    "requester",
    "requester_owner",
    "assignee",
    "assignee_owner",
    "requester_sibling",
    "assignee_sibling",
    "outsider_agent",
    "outsider_owner",
    "admin",
]

# Who may make each move (and saveCheckpoint), from API.md §3 and §8.
MAY_MAKE: dict[str, frozenset[str]] = {
    "routeTask": frozenset({"assignee_owner", "admin"}),
    "holdTask": frozenset({"assignee_owner", "admin"}),
    "rejectTask": frozenset({"assignee_owner", "admin"}),
    "approveTask": frozenset({"assignee_owner", "admin"}),
    "denyTask": frozenset({"assignee_owner", "admin"}),
    "acceptTask": frozenset({"assignee", "assignee_owner", "admin"}),
    "startTask": frozenset({"assignee", "assignee_owner", "admin"}),
    "pauseTask": frozenset({"assignee", "assignee_owner", "admin"}),
    "submitResult": frozenset({"assignee", "assignee_owner", "admin"}),
    "resumeTask": frozenset({"assignee", "assignee_owner", "admin"}),
    "saveCheckpoint": frozenset({"assignee", "assignee_owner", "admin"}),
    "completeTask": frozenset({"requester", "requester_owner", "admin"}),
    "sendBackTask": frozenset({"requester", "requester_owner", "admin"}),
    "requestSignOff": frozenset({"requester", "requester_owner", "admin"}),
    "signOffTask": frozenset({"requester_owner", "admin"}),
    "requestChanges": frozenset({"requester_owner", "admin"}),
    "cancelTask": frozenset({"requester", "requester_owner", "admin"}),
}

# Neither requester nor assignee, nor their owner: the task does not exist for them.
CANNOT_SEE = frozenset(
    {"requester_sibling", "assignee_sibling", "outsider_agent", "outsider_owner"}
)

# Where each mutation is tried: a state (and waiting reason) the protocol allows it from.
TRIED_FROM: dict[str, tuple[TaskState, WaitingOn | None]] = {
    "routeTask": (S.requested, None),
    "holdTask": (S.requested, None),
    "rejectTask": (S.requested, None),
    "acceptTask": (S.routed, None),
    "startTask": (S.accepted, None),
    "pauseTask": (S.working, None),
    "submitResult": (S.working, None),
    "approveTask": (S.waiting, WaitingOn.owner_approval),
    "denyTask": (S.waiting, WaitingOn.owner_approval),
    "resumeTask": (S.waiting, WaitingOn.human),
    "completeTask": (S.verifying, None),
    "requestSignOff": (S.verifying, None),
    "sendBackTask": (S.verifying, None),
    "signOffTask": (S.approval, None),
    "requestChanges": (S.approval, None),
    "cancelTask": (S.working, None),
    "saveCheckpoint": (S.working, None),
}

# The inputs each mutation needs besides `id`.
EXTRA_INPUT: dict[str, dict[str, Any]] = {
    "pauseTask": {"waitingOn": "human"},
    "submitResult": {"result": RESULT_INPUT},
    "sendBackTask": {"reason": "needs another pass"},
    "requestChanges": {"reason": "needs another pass"},
    "saveCheckpoint": {"checkpoint": {"progress": "half way"}},
}

# The move name each mutation makes, as `allowedMoves` lists it.
MOVE_NAME: dict[str, str] = {
    "routeTask": "ROUTE",
    "holdTask": "HOLD",
    "rejectTask": "REJECT",
    "acceptTask": "ACCEPT",
    "startTask": "START",
    "pauseTask": "PAUSE",
    "submitResult": "SUBMIT_RESULT",
    "approveTask": "APPROVE",
    "denyTask": "DENY",
    "resumeTask": "RESUME",
    "completeTask": "COMPLETE",
    "requestSignOff": "REQUEST_SIGN_OFF",
    "sendBackTask": "SEND_BACK",
    "signOffTask": "SIGN_OFF",
    "requestChanges": "REQUEST_CHANGES",
    "cancelTask": "CANCEL",
}

# The moves the protocol allows in each situation, whoever asks.
POSSIBLE: dict[tuple[TaskState, WaitingOn | None], list[str]] = {
    (S.requested, None): ["routeTask", "holdTask", "rejectTask", "cancelTask"],
    (S.routed, None): ["acceptTask", "cancelTask"],
    (S.accepted, None): ["startTask", "cancelTask"],
    (S.working, None): ["pauseTask", "submitResult", "cancelTask"],
    (S.waiting, WaitingOn.owner_approval): ["approveTask", "denyTask", "cancelTask"],
    (S.waiting, WaitingOn.human): ["resumeTask", "cancelTask"],
    (S.verifying, None): ["completeTask", "requestSignOff", "sendBackTask", "cancelTask"],
    (S.approval, None): ["signOffTask", "requestChanges", "cancelTask"],
    (S.completed, None): [],
}


def expected_outcome(mutation: str, role: str) -> str:
    if role in MAY_MAKE[mutation]:
        return "MoveSuccess"
    if role in CANNOT_SEE:
        return "NotFoundError"
    return "ForbiddenError"


def situation_id(situation: tuple[TaskState, WaitingOn | None]) -> str:
    state, waiting_on = situation
    return f"{state.value}[{waiting_on.value}]" if waiting_on else state.value


# --- GraphQL ---------------------------------------------------------------------------------

OUTCOME_FIELDS = """
  __typename
  ... on Error { code message }
  ... on MoveSuccess { task { state version } events { actor } }
  ... on InvalidStateError { allowedMoves }
"""

TASK_QUERY = """
query Task($id: ID!) { task(id: $id) { state version allowedMoves } }
"""

TASKS_QUERY = """
query Tasks($project: String!) {
  tasks(filter: { project: $project }, first: 100) { totalCount edges { node { id } } }
}
"""

HAND_OFF = """
mutation HandOff($input: HandOffInput!) {
  handOff(input: $input) {
    __typename
    ... on Error { code }
    ... on HandOffSuccess { task { id requester } events { kind actor } }
  }
}
"""


async def call(
    service: TaskService, principal: Principal, mutation: str, **input: Any
) -> dict[str, Any]:
    input_type = mutation[0].upper() + mutation[1:] + "Input"
    selection = f"{mutation}(input: $input) {{ {OUTCOME_FIELDS} }}"
    document = f"mutation Call($input: {input_type}!) {{ {selection} }}"
    data = await execute(service, principal, document, {"input": input})
    outcome: dict[str, Any] = data[mutation]
    return outcome


async def read(service: TaskService, principal: Principal, task_id: str) -> Any:
    return (await execute(service, principal, TASK_QUERY, {"id": task_id}))["task"]


# --- the tables are complete -----------------------------------------------------------------


def test_the_matrix_names_every_move_mutation_every_role_and_save_checkpoint(
    world: World,
) -> None:
    mutations = {m.mutation for m in HANDOFF.moves} | {"saveCheckpoint"}
    assert set(MAY_MAKE) == mutations
    assert set(TRIED_FROM) == mutations
    assert {MoveName(n) for n in MOVE_NAME.values()} == set(MoveName)
    assert set(ROLES) == set(world.roles)


# --- moves -----------------------------------------------------------------------------------

MATRIX = [(mutation, role) for mutation in MAY_MAKE for role in ROLES]


@pytest.mark.parametrize(
    ("mutation", "role"),
    MATRIX,
    ids=[f"{m}-{r}-{expected_outcome(m, r)}" for m, r in MATRIX],
)
async def test_each_role_may_make_exactly_the_moves_the_contract_gives_it(
    service: TaskService, world: World, mutation: str, role: str
) -> None:
    task = await world.task_in(*TRIED_FROM[mutation])
    principal = world.roles[role]

    outcome = await call(service, principal, mutation, id=task.id, **EXTRA_INPUT.get(mutation, {}))

    expected = expected_outcome(mutation, role)
    assert outcome["__typename"] == expected, outcome
    after = await read(service, ADMIN, task.id)
    if expected == "MoveSuccess":
        # The caller's move, then any the server made after it (a passing result's COMPLETE).
        actors = [e["actor"] for e in outcome["events"]]
        assert actors[0] == principal.handle and set(actors[1:]) <= {"system"}
        assert after["version"] == task.version + len(outcome["events"])
    else:
        assert (
            outcome["code"]
            == {"NotFoundError": "not_found", "ForbiddenError": "forbidden"}[expected]
        )
        assert (after["state"], after["version"]) == (task.state.value, task.version)


# --- handOff ---------------------------------------------------------------------------------

MAY_HAND_OFF = frozenset({"requester", "requester_owner", "admin"})


@pytest.mark.parametrize("role", ROLES)
async def test_only_the_requester_agent_its_owner_or_admin_hands_off_in_its_name(
    service: TaskService, world: World, role: str
) -> None:
    principal = world.roles[role]
    client_id = f"h{world.tag}-{role.replace('_', '-')}"
    task_id = task_id_of(world.requester, client_id)
    handoff = {
        "id": client_id,
        "project": world.project,
        "requester": world.requester,
        "assignee": world.assignee,
        "packet": PACKET_INPUT,
    }

    outcome = (await execute(service, principal, HAND_OFF, {"input": handoff}))["handOff"]

    if role in MAY_HAND_OFF:
        assert outcome["__typename"] == "HandOffSuccess", outcome
        assert outcome["task"] == {"id": task_id, "requester": world.requester}
        assert outcome["events"][0] == {"kind": "created", "actor": principal.handle}
        assert await read(service, ADMIN, task_id) is not None
    else:
        assert outcome["__typename"] == "ForbiddenError", outcome
        assert outcome["code"] == "forbidden"
        assert await read(service, ADMIN, task_id) is None


# --- allowedMoves ----------------------------------------------------------------------------


@pytest.mark.parametrize("situation", list(POSSIBLE), ids=situation_id)
async def test_allowed_moves_are_what_the_matrix_gives_each_role_now(
    service: TaskService, world: World, situation: tuple[TaskState, WaitingOn | None]
) -> None:
    task = await world.task_in(*situation)

    seen: dict[str, Any] = {}
    for role in ROLES:
        found = await read(service, world.roles[role], task.id)
        seen[role] = None if found is None else set(found["allowedMoves"])

    expected = {
        role: None
        if role in CANNOT_SEE
        else {MOVE_NAME[m] for m in POSSIBLE[situation] if role in MAY_MAKE[m]}
        for role in ROLES
    }
    assert seen == expected


@pytest.mark.parametrize("role", ROLES)
async def test_a_refused_move_answers_with_the_callers_own_allowed_moves(
    service: TaskService, world: World, role: str
) -> None:
    task = await world.task_in(S.verifying)

    outcome = await call(service, world.roles[role], "acceptTask", id=task.id)

    if role in CANNOT_SEE:
        assert outcome["__typename"] == "NotFoundError", outcome
    else:
        assert outcome["__typename"] == "InvalidStateError", outcome
        expected = {MOVE_NAME[m] for m in POSSIBLE[(S.verifying, None)] if role in MAY_MAKE[m]}
        assert set(outcome["allowedMoves"]) == expected


# --- reading ---------------------------------------------------------------------------------


async def hand_off_as(service: TaskService, world: World, requester: str, assignee: str) -> str:
    outcome = await service.hand_off(
        agent(requester),
        HandOff(project=world.project, requester=requester, assignee=assignee, packet=packet()),
    )
    return outcome.task.id


async def test_each_role_lists_exactly_the_tasks_it_may_see(
    service: TaskService, world: World
) -> None:
    ours: TaskRecord = await world.hand_off()
    siblings = await hand_off_as(
        service, world, f"{world.req_owner}/other", f"{world.asg_owner}/other"
    )
    outsiders = await hand_off_as(service, world, f"x{world.tag}/x", f"x{world.tag}/y")
    visible = {
        "requester": {ours.id},
        "requester_owner": {ours.id, siblings},
        "assignee": {ours.id},
        "assignee_owner": {ours.id, siblings},
        "requester_sibling": {siblings},
        "assignee_sibling": {siblings},
        "outsider_agent": {outsiders},
        "outsider_owner": {outsiders},
        "admin": {ours.id, siblings, outsiders},
    }

    listed: dict[str, set[str]] = {}
    counted: dict[str, int] = {}
    for role in ROLES:
        data = await execute(service, world.roles[role], TASKS_QUERY, {"project": world.project})
        listed[role] = {edge["node"]["id"] for edge in data["tasks"]["edges"]}
        counted[role] = data["tasks"]["totalCount"]

    assert listed == visible
    assert counted == {role: len(ids) for role, ids in visible.items()}


# --- an agent's own work ---------------------------------------------------------------------


async def test_an_agent_that_handed_a_review_task_to_itself_cannot_verify_it_but_its_owner_can(
    service: TaskService, world: World
) -> None:
    me = agent(f"{world.req_owner}/solo")
    handoff = {
        "project": world.project,
        "requester": me.handle,
        "assignee": me.handle,
        "packet": PACKET_INPUT,
        "verification": "REVIEW",
    }
    handed = (await execute(service, me, HAND_OFF, {"input": handoff}))["handOff"]
    assert handed["__typename"] == "HandOffSuccess", handed
    task_id = handed["task"]["id"]
    for mutation in ("acceptTask", "startTask", "submitResult"):
        done = await call(service, me, mutation, id=task_id, **EXTRA_INPUT.get(mutation, {}))
        assert done["__typename"] == "MoveSuccess", done
    assert (await read(service, me, task_id))["allowedMoves"] == ["CANCEL"]

    for mutation in ("completeTask", "requestSignOff", "sendBackTask"):
        refused = await call(service, me, mutation, id=task_id, **EXTRA_INPUT.get(mutation, {}))
        assert refused["__typename"] == "ForbiddenError", refused

    person = world.roles["requester_owner"]
    completed = await call(service, person, "completeTask", id=task_id)
    assert completed["__typename"] == "MoveSuccess", completed
    assert completed["events"] == [{"actor": person.handle}]
