"""Mutations of pipeline runs: `createRun`, one per event generated from the table, and the
work queue's `runHeartbeat`.

Deliberately no `from __future__ import annotations`: resolvers' annotations must be real types
for Strawberry to read.
"""

from typing import TYPE_CHECKING, Annotated, Any

import strawberry
from strawberry.types import Info
from strawberry.types.field import StrawberryField

from baton.api.errors import (
    ForbiddenError,
    InvalidInputError,
    InvalidRunStateError,
    LeaseLostError,
    NotFoundError,
)
from baton.api.expected import expected
from baton.api.moves import move_fields
from baton.api.results import move_results
from baton.api.runs import RUN_TYPES, Run, RunLease
from baton.protocol.pipeline import PIPELINE, RunEvent
from baton.services.context import Context
from baton.services.runs import MAX_TITLE, RunOutcome
from baton.services.words import LEASE_ID, describe_event
from baton.store.runs import FENCED


@strawberry.type(description="The lease was extended; `lease` is it as extended.")
class RunHeartbeatSuccess:
    run: Run
    lease: RunLease


RUN_MOVES = move_results(
    RUN_TYPES,
    prefix="Run",
    description="The event was made; `events` are all it appended, oldest first.",
    refusal=InvalidRunStateError,
    errors=(LeaseLostError,),
    fields={
        "lease": (
            RunLease | None,
            strawberry.field(
                default=None,
                description="The lease this call took (`claimRun`), exactly as stored: keep "
                "its `id` for `runHeartbeat` and the runner's events (`leaseId`). Null for "
                "other events.",
            ),
        )
    },
)
if TYPE_CHECKING:
    RunMoveResult = Any  # a union made at import time
else:
    RunMoveResult = RUN_MOVES.union
RunHeartbeatResult = Annotated[
    RunHeartbeatSuccess
    | InvalidRunStateError
    | NotFoundError
    | ForbiddenError
    | InvalidInputError
    | LeaseLostError,
    strawberry.union("RunHeartbeatResult"),
]


def _success(outcome: Any) -> Any:
    if not isinstance(outcome, RunOutcome):
        return outcome
    lease = RunLease.of(outcome.lease) if outcome.lease is not None else None
    return RUN_MOVES.of(outcome.run, outcome.events, lease=lease)


async def _event(info: Info[Context, None], name: Any, input: Any, args: dict[str, Any]) -> Any:
    runs, principal = info.context.runs, info.context.principal
    if name is RunEvent.CLAIM:
        call = runs.claim(
            principal,
            run_id=str(input.id) if input.id is not None else None,
            project=input.project,
            expected_version=input.expected_version,
        )
    else:
        lease_id = getattr(input, "lease_id", None)
        call = runs.event(
            principal,
            name,
            str(input.id),
            expected_version=input.expected_version,
            args=args,
            lease_id=str(lease_id) if lease_id is not None else None,
        )
    return _success(await expected(PIPELINE.named(name)[0].mutation, call))


def _lease_id_field() -> Any:
    return (strawberry.ID | None, strawberry.field(default=None, description=LEASE_ID))


RUN_EVENT_FIELDS: list[StrawberryField] = move_fields(
    PIPELINE,
    subject="run",
    result=RunMoveResult,
    resolve=_event,
    describe=describe_event,
    extras={
        **{name: {"lease_id": _lease_id_field()} for name in FENCED},
        RunEvent.CLAIM: {
            "id": (
                strawberry.ID | None,
                strawberry.field(
                    default=None,
                    description="The run; without it, the oldest claimable run of the caller's "
                    "owner.",
                ),
            ),
            "project": (
                str | None,
                strawberry.field(
                    default=None, description="Without `id`: claim only a run of this project."
                ),
            ),
        },
    },
)


@strawberry.input
class CreateRunInput:
    project: str
    title: str = strawberry.field(
        description=f"At most {MAX_TITLE} characters, with at least one visible one (not only "
        "whitespace, zero-width or format characters)."
    )
    task_id: strawberry.ID | None = strawberry.field(
        default=None, description="A handoff task the run works on (one the caller can see)."
    )
    owner: str | None = strawberry.field(
        default=None,
        description="Whose run it is: required for admin (never the reserved handles `admin` "
        "or `system`); otherwise the caller's owner.",
    )


@strawberry.mutation(
    name="createRun",
    description="Create a run in backlog / idle / none. It belongs to the caller's owner: that "
    "owner, its agents and admin may read and drive it.",
)
async def create_run(info: Info[Context, None], input: CreateRunInput) -> RunMoveResult:
    outcome = await expected(
        "createRun",
        info.context.runs.create(
            info.context.principal,
            project=input.project,
            title=input.title,
            task_id=str(input.task_id) if input.task_id is not None else None,
            owner=input.owner,
        ),
    )
    return _success(outcome)


@strawberry.input
class RunHeartbeatInput:
    id: strawberry.ID = strawberry.field(description="The run (in progress) whose lease to extend.")
    lease_id: strawberry.ID | None = strawberry.field(default=None, description=LEASE_ID)


@strawberry.mutation(
    name="runHeartbeat",
    description="Extend the live lease on a claimed run in progress (its holder, the run's owner "
    "or admin), by BATON_RUN_LEASE_SECONDS from now. Not an event: the run's version stays. A "
    "lease that ran out is lost and never extended: LeaseLostError, even before the sweeper "
    "moves the run (after it has, InvalidRunStateError, or LeaseLostError when `leaseId` is "
    "given).",
)
async def run_heartbeat(info: Info[Context, None], input: RunHeartbeatInput) -> RunHeartbeatResult:
    async def beat() -> RunHeartbeatSuccess:
        lease_id = str(input.lease_id) if input.lease_id is not None else None
        run, lease = await info.context.runs.heartbeat(
            info.context.principal, str(input.id), lease_id
        )
        return RunHeartbeatSuccess(run=Run(record=run), lease=RunLease.of(lease))

    return await expected("runHeartbeat", beat())


RUN_FIELDS: list[StrawberryField] = [create_run, *RUN_EVENT_FIELDS, run_heartbeat]
