"""What each kind of request costs in SQL statements (each one round trip to PostgreSQL).

Counted with the store's own statement counter, around in-process executions."""

from __future__ import annotations

import pytest

from baton.access.gate import GateDecision
from baton.protocol.handoff import TaskState
from baton.services.tasks import HandOff, TaskService
from tests.helpers import World, agent, counting_statements, execute, packet

BY_ID = "query($id: ID!) { task(id: $id) { id state assignee packet { task } updatedAt } }"
LIST = """query($p: String!) { tasks(filter: {project: $p, states: [routed]}, first: 50) {
    edges { node { id state assignee packet { task } updatedAt } } } }"""
ACCEPT = """mutation($id: ID!) { acceptTask(input: {id: $id}) {
    ... on MoveSuccess { task { id state version } events { id } } } }"""
NESTED = """query($p: String!, $n: Int!) { tasks(filter: {project: $p}, first: $n) { edges { node {
    id dependencies { id state } dependents { id } events(first: 1) { edges { node { id kind } } }
} } } }"""


async def test_a_task_by_id_is_one_statement(service: TaskService, world: World) -> None:
    task = await world.task_in(TaskState.routed)
    with counting_statements() as statements:
        await execute(service, world.roles["assignee"], BY_ID, {"id": task.id})
    assert statements() == 1


async def test_a_filtered_page_is_one_statement(service: TaskService, world: World) -> None:
    await world.task_in(TaskState.routed)
    with counting_statements() as statements:
        data = await execute(service, world.roles["assignee_owner"], LIST, {"p": world.project})
    assert len(data["tasks"]["edges"]) == 1
    assert statements() == 1


async def test_a_move_is_one_statement(service: TaskService, world: World) -> None:
    task = await world.task_in(TaskState.routed)
    with counting_statements() as statements:
        data = await execute(service, world.roles["assignee"], ACCEPT, {"id": task.id})
    assert data["acceptTask"]["task"]["state"] == "accepted"
    assert statements() == 1


async def test_a_hand_off_through_the_gate_is_one_statement_once_the_rules_are_kept(
    service: TaskService, world: World
) -> None:
    """The first hand-off to an owner reads its rules; after that the task, its events and
    the gate's move are one statement, which checks the kept rules are current."""
    await world.decide(GateDecision.ASK)
    counts = []
    for _ in range(2):
        with counting_statements() as statements:
            outcome = await service.hand_off(
                agent(world.requester),
                HandOff(world.project, world.requester, world.assignee, packet()),
            )
        assert outcome.task.state is TaskState.waiting
        counts.append(statements())
    assert counts == [2, 1]


@pytest.mark.parametrize("size", [1, 10, 30])
async def test_nested_lists_cost_the_same_whatever_the_page_size(
    service: TaskService, world: World, size: int
) -> None:
    """One statement for the page, one per nested list field: never one per task."""
    ids = [f"{world.tag}-n{i}" for i in range(size)]
    for i, task_id in enumerate(ids):
        await world.decide(GateDecision.ALLOW)
        await service.hand_off(
            agent(world.requester),
            HandOff(
                world.project,
                world.requester,
                world.assignee,
                packet(depends_on=ids[:i][-2:] or ["external-spec"]),
                id=task_id,
            ),
        )
    with counting_statements() as statements:
        data = await execute(
            service, world.roles["requester_owner"], NESTED, {"p": world.project, "n": size}
        )
    assert len(data["tasks"]["edges"]) == size
    assert statements() == 4
