"""`allowedMoves` is kept per position and role set: for every position of the protocol table
and every kind of principal, it is exactly the moves whose actor that principal fills."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from baton.access.principals import Principal, PrincipalKind
from baton.protocol.handoff import HANDOFF, MoveName, TaskState, WaitingOn
from baton.services.tasks import TaskService

PRINCIPALS = (
    [Principal(PrincipalKind.AGENT, h) for h in ("bob/coder", "alice/planner", "carol/x")]
    + [Principal(PrincipalKind.AGENT, h) for h in ("bob/other", "alice/other")]
    + [Principal(PrincipalKind.OWNER, h) for h in ("alice", "bob", "carol")]
    + [Principal(PrincipalKind.ADMIN, "admin")]
)
# Across owners, within one owner, and a task an agent handed to itself.
PAIRS = (("alice/planner", "bob/coder"), ("bob/planner", "bob/coder"), ("alice/a", "alice/a"))


@dataclass(frozen=True)
class Task:
    state: TaskState
    waiting_on: WaitingOn | None
    requester: str
    assignee: str


def moves_by_the_table(principal: Principal, task: Task) -> list[MoveName]:
    """The moves out of the task's state that the protocol allows in its position and whose
    actor the principal fills, read from the table row by row."""
    position = HANDOFF.position(task.state, waiting_on=task.waiting_on)
    return [
        move.name
        for move in HANDOFF.moves_from(task.state)
        if move.name in HANDOFF.possible(position)
        and principal.may_act_as(move.actor, requester=task.requester, assignee=task.assignee)
    ]


def test_allowed_moves_are_the_tables_moves_whose_actor_the_principal_fills() -> None:
    seen: set[MoveName] = set()
    for principal, state, (requester, assignee) in itertools.product(PRINCIPALS, TaskState, PAIRS):
        waits = [None, *WaitingOn] if state is TaskState.waiting else [None]
        for waiting_on in waits:
            task = Task(state, waiting_on, requester, assignee)
            try:
                expected = moves_by_the_table(principal, task)
            except ValueError:  # not a position of the table (waiting on nothing)
                continue
            allowed = TaskService.allowed_moves(principal, task)  # type: ignore[arg-type]
            assert sorted(allowed) == sorted(expected), (principal, task)
            assert TaskService.allowed_moves(principal, task) == allowed  # type: ignore[arg-type]
            seen.update(allowed)
    # Every move of the table is open to someone somewhere: the sweep above reached them all.
    assert seen == {move.name for move in HANDOFF.moves}
