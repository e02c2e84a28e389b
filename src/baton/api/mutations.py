"""Mutations. One per protocol move, generated from the protocol table, plus the rest.

Deliberately no `from __future__ import annotations`: the generated resolvers' annotations
must be real types for Strawberry to read.
"""

import types
from collections.abc import Awaitable
from typing import Annotated, Any, TypeVar, cast

import strawberry
from strawberry.types import Info
from strawberry.types.field import StrawberryField

from baton.api.context import Context
from baton.api.errors import (
    DuplicateTaskError,
    ForbiddenError,
    InvalidInputError,
    InvalidStateError,
    NotFoundError,
    VersionConflictError,
    to_error,
)
from baton.api.inputs import (
    DeleteGateRuleInput,
    HandOffInput,
    ResultInput,
    SaveCheckpointInput,
    SetGateRuleInput,
)
from baton.api.types import GateRuleType, Task, TaskEvent
from baton.errors import BatonError, InvalidInput
from baton.metrics import MOVES
from baton.protocol.handoff import (
    AFTER_VERIFYING,
    HANDOFF,
    REQUIRES_REASON,
    SETS_WAITING_ON,
    MoveName,
    TaskState,
    WaitingOn,
    check_move,
)
from baton.services.tasks import HandOff, MoveArgs, Outcome


@strawberry.type(description="The move was made; `events` are all it appended, oldest first.")
class MoveSuccess:
    task: Task
    events: list[TaskEvent]


@strawberry.type(
    description="The task exists; `events` are all the call appended (none on a "
    "repeated idempotent handOff)."
)
class HandOffSuccess:
    task: Task
    events: list[TaskEvent]


@strawberry.type
class GateRuleSuccess:
    rule: GateRuleType


@strawberry.type
class DeleteGateRuleSuccess:
    rule: GateRuleType = strawberry.field(description="The rule as it was before deletion.")


MoveResult = Annotated[
    MoveSuccess
    | InvalidStateError
    | NotFoundError
    | ForbiddenError
    | VersionConflictError
    | InvalidInputError,
    strawberry.union("MoveResult"),
]
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

T = TypeVar("T")


async def _expected(mutation: str, call: Awaitable[T]) -> T | Any:
    """Run a service call; an expected failure becomes its error type. Counts the outcome."""
    try:
        outcome = await call
    except BatonError as exc:
        MOVES.labels(mutation=mutation, outcome=exc.code).inc()
        return to_error(exc)
    MOVES.labels(mutation=mutation, outcome="ok").inc()
    return outcome


def _move_success(outcome: Outcome) -> MoveSuccess:
    return MoveSuccess(
        task=Task(record=outcome.task), events=[TaskEvent(record=e) for e in outcome.events]
    )


# --- one mutation per move name, from the table -------------------------------------------


def _move_input_type(name: MoveName) -> type:
    """`<Mutation>Input`: id, expectedVersion, and what this move needs besides."""
    move = next(m for m in HANDOFF.moves if m.name is name)
    fields: dict[str, Any] = {
        "id": (strawberry.ID, strawberry.field(description="The task.")),
        "expected_version": (
            int | None,
            strawberry.field(
                default=None, description="When given and different, VersionConflictError."
            ),
        ),
    }
    if len(SETS_WAITING_ON.get(name, ())) > 1:
        fields["waiting_on"] = (WaitingOn, strawberry.field(description="What the task waits on."))
    if name is MoveName.SUBMIT_RESULT:
        fields["result"] = (ResultInput, strawberry.field(description="The result to verify."))
    if name in REQUIRES_REASON:
        fields["reason"] = (str, strawberry.field(description="Why (required for this move)."))
    else:
        fields["reason"] = (
            str | None,
            strawberry.field(default=None, description="Why; kept on the event."),
        )
    namespace = {key: spec[1] for key, spec in fields.items()}
    namespace["__annotations__"] = {key: spec[0] for key, spec in fields.items()}
    cls = types.new_class(
        move.mutation[0].upper() + move.mutation[1:] + "Input",
        (),
        {},
        lambda ns: ns.update(namespace),
    )
    return strawberry.input(cls)


def _describe(name: MoveName) -> str:
    pairs = ", ".join(
        f"{m.source.value} → {m.target.value}" for m in HANDOFF.moves if m.name is name
    )
    actor = next(m.actor for m in HANDOFF.moves if m.name is name).value.replace("_", " ")
    text = f"{pairs} (who: {actor})."
    if name is MoveName.SUBMIT_RESULT:
        for mode, follow in AFTER_VERIFYING.items():
            if follow is None:
                text += f" {mode.value}: rests in verifying for the requester."
            else:
                then = check_move(TaskState.verifying, None, follow).target.value
                text += f" {mode.value}: then verifying → {then} in the same call."
    return text


def _move_field(name: MoveName) -> StrawberryField:
    input_type = _move_input_type(name)
    mutation = next(m.mutation for m in HANDOFF.moves if m.name is name)

    async def resolve(info: Info[Context, None], input: Any) -> MoveResult:
        args = MoveArgs(
            waiting_on=getattr(input, "waiting_on", None),
            result=input.result.to_seed() if getattr(input, "result", None) else None,
            reason=input.reason,
        )
        outcome = await _expected(
            mutation,
            info.context.service.move(
                info.context.principal,
                name,
                str(input.id),
                expected_version=input.expected_version,
                args=args,
            ),
        )
        return _move_success(outcome) if isinstance(outcome, Outcome) else outcome

    resolve.__annotations__["input"] = input_type
    resolve.__name__ = resolve.__qualname__ = mutation  # the field's Python name, kept unique
    field = strawberry.mutation(resolver=resolve, name=mutation, description=_describe(name))
    return cast(StrawberryField, field)


MOVE_FIELDS: list[StrawberryField] = [_move_field(name) for name in HANDOFF.names()]


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
    outcome = await _expected("handOff", info.context.service.hand_off(info.context.principal, h))
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
    outcome = await _expected(
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
    if not str(raw).isdigit() or len(str(raw)) > 18:
        raise InvalidInput("id", "is not a gate rule id")
    return int(raw)


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

    return await _expected("setGateRule", run())


@strawberry.mutation(name="deleteGateRule", description="Remove a rule (its owner or admin).")
async def delete_gate_rule(
    info: Info[Context, None], input: DeleteGateRuleInput
) -> DeleteGateRuleResult:
    async def run() -> DeleteGateRuleSuccess:
        rule = await info.context.service.rules.delete(info.context.principal, _rule_id(input.id))
        return DeleteGateRuleSuccess(rule=GateRuleType.of(rule))

    return await _expected("deleteGateRule", run())


ALL_FIELDS: list[StrawberryField] = [
    hand_off,
    *MOVE_FIELDS,
    save_checkpoint,
    set_gate_rule,
    delete_gate_rule,
]
