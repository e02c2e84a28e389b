"""Mutations. One per protocol move, generated from the protocol table, plus the rest.

Deliberately no `from __future__ import annotations`: the generated resolvers' annotations
must be real types for Strawberry to read.
"""

from typing import TYPE_CHECKING, Annotated, Any

import strawberry
from strawberry.types import Info
from strawberry.types.field import StrawberryField

from baton.api.errors import (
    DuplicateTaskError,
    ForbiddenError,
    InvalidInputError,
    InvalidStateError,
    NotFoundError,
)
from baton.api.expected import expected
from baton.api.inputs import (
    DeleteGateRuleInput,
    HandOffInput,
    ResultInput,
    SaveCheckpointInput,
    SetGateRuleInput,
)
from baton.api.moves import ObjectParam, move_fields
from baton.api.results import move_results
from baton.api.run_mutations import RUN_FIELDS
from baton.api.types import TASK_TYPES, GateRuleType, Task, TaskEvent
from baton.engine.cost import list_size
from baton.errors import InvalidInput
from baton.numbers import MAX_BIGINT, ascii_int
from baton.protocol.handoff import (
    HANDOFF,
)
from baton.services.context import Context
from baton.services.tasks import HandOff, MoveArgs, Outcome
from baton.services.words import describe_move


@strawberry.type(
    description="The task exists; `events` are all the call appended (none on a "
    "repeated idempotent handOff)."
)
class HandOffSuccess:
    task: Task
    events: list[TaskEvent] = strawberry.field(metadata=list_size(2))


@strawberry.type
class GateRuleSuccess:
    rule: GateRuleType


@strawberry.type
class DeleteGateRuleSuccess:
    rule: GateRuleType = strawberry.field(description="The rule as it was before deletion.")


TASK_MOVES = move_results(
    TASK_TYPES,
    prefix="",
    description="The move was made; `events` are all it appended, oldest first.",
    refusal=InvalidStateError,
)
if TYPE_CHECKING:
    MoveResult = Any  # a union made at import time
else:
    MoveResult = TASK_MOVES.union
HandOffResult = Annotated[
    HandOffSuccess | InvalidInputError | ForbiddenError | DuplicateTaskError,
    strawberry.union("HandOffResult"),
]
GateRuleResult = Annotated[
    GateRuleSuccess | InvalidInputError | ForbiddenError | NotFoundError,
    strawberry.union("GateRuleResult"),
]
DeleteGateRuleResult = Annotated[
    DeleteGateRuleSuccess | InvalidInputError | ForbiddenError | NotFoundError,
    strawberry.union("DeleteGateRuleResult"),
]


def _move_success(outcome: Outcome) -> Any:
    return TASK_MOVES.of(outcome.task, outcome.events)


# --- one mutation per move name, from the table -------------------------------------------


async def _move(info: Info[Context, None], name: Any, input: Any, args: dict[str, Any]) -> Any:
    outcome = await expected(
        HANDOFF.named(name)[0].mutation,
        info.context.service.move(
            info.context.principal,
            name,
            str(input.id),
            expected_version=input.expected_version,
            args=MoveArgs(
                waiting_on=args.get("waiting_on"),
                result=args.get("result"),
                reason=args.get("reason"),
            ),
        ),
    )
    return _move_success(outcome) if isinstance(outcome, Outcome) else outcome


MOVE_FIELDS: list[StrawberryField] = move_fields(
    HANDOFF,
    subject="task",
    result=MoveResult,
    resolve=_move,
    describe=describe_move,
    objects={"result": ObjectParam(ResultInput, lambda value: value.to_seed())},
)


# --- the rest -----------------------------------------------------------------------------


@strawberry.mutation(
    name="handOff",
    description="Create a task in `requested` and run the assignee owner's permission gate "
    "in the same call. With no matching rule: same owner ALLOW, different owner ASK.",
)
async def hand_off(info: Info[Context, None], input: HandOffInput) -> HandOffResult:
    h = HandOff(
        id=str(input.id) if input.id is not None else None,
        project=input.project,
        requester=input.requester,
        assignee=input.assignee,
        packet=input.packet.to_seed(),
        verification=input.verification,
    )
    outcome = await expected("handOff", info.context.service.hand_off(info.context.principal, h))
    if not isinstance(outcome, Outcome):
        return outcome  # type: ignore[no-any-return]
    return HandOffSuccess(
        task=Task(record=outcome.task), events=[TaskEvent(record=e) for e in outcome.events]
    )


@strawberry.mutation(
    name="saveCheckpoint",
    description="Replace `latestCheckpoint` while the task is accepted, working or waiting "
    "(assignee side). Appends a `checkpoint_saved` event and bumps the version.",
)
async def save_checkpoint(info: Info[Context, None], input: SaveCheckpointInput) -> MoveResult:
    outcome = await expected(
        "saveCheckpoint",
        info.context.service.save_checkpoint(
            info.context.principal,
            str(input.id),
            input.checkpoint.to_seed(),
            expected_version=input.expected_version,
        ),
    )
    return _move_success(outcome) if isinstance(outcome, Outcome) else outcome


def _rule_id(raw: strawberry.ID) -> int:
    rule_id = ascii_int(str(raw), MAX_BIGINT)
    if rule_id is None:
        raise InvalidInput("id", "is not a gate rule id")
    return rule_id


@strawberry.mutation(
    name="setGateRule",
    description="Add a rule to an owner's gate, or replace one given its id (owner or admin).",
)
async def set_gate_rule(info: Info[Context, None], input: SetGateRuleInput) -> GateRuleResult:
    async def run() -> GateRuleSuccess:
        rule = await info.context.service.rules.set(
            info.context.principal,
            owner=input.owner,
            requester=input.requester,
            project=input.project,
            deliverable_types=input.deliverable_types,
            decision=input.decision,
            priority=input.priority,
            rule_id=_rule_id(input.id) if input.id is not None else None,
        )
        return GateRuleSuccess(rule=GateRuleType.of(rule))

    return await expected("setGateRule", run())


@strawberry.mutation(name="deleteGateRule", description="Remove a rule (its owner or admin).")
async def delete_gate_rule(
    info: Info[Context, None], input: DeleteGateRuleInput
) -> DeleteGateRuleResult:
    async def run() -> DeleteGateRuleSuccess:
        rule = await info.context.service.rules.delete(info.context.principal, _rule_id(input.id))
        return DeleteGateRuleSuccess(rule=GateRuleType.of(rule))

    return await expected("deleteGateRule", run())


ALL_FIELDS: list[StrawberryField] = [
    hand_off,
    *MOVE_FIELDS,
    save_checkpoint,
    set_gate_rule,
    delete_gate_rule,
    *RUN_FIELDS,
]
