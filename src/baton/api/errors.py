"""Expected failures as schema types, mapped once from the domain errors."""

from __future__ import annotations

import strawberry

from baton import errors
from baton.api import enums  # noqa: F401  (the protocol's enums, registered with their names)
from baton.protocol.handoff import MoveName, TaskState
from baton.protocol.pipeline import RunCheckpoint, RunEvent, RunPhase, RunStatus

# Clients read this where they look up `Error`: the selection that catches every failure, and
# the one client that needs telling which types implement it.
ERROR_DESCRIPTION = """An expected failure; nothing was changed.

Every member of a mutation's result union except its success type implements Error, so
`... on Error { code message }` catches any failure, including kinds added later; select the
specific type for its extra fields.

Apollo Client matches `... on Error` only if its cache is told which types implement Error;
without that it drops the selection silently and a failure reads as `{}`. Give it the list
from this schema (`{ __type(name: "Error") { possibleTypes { name } } }`):

    new InMemoryCache({ possibleTypes: { Error: ["InvalidStateError", "NotFoundError", ...] } })

urql and Python's gql need nothing."""


@strawberry.interface(name="Error", description=ERROR_DESCRIPTION)
class Error:
    code: str
    message: str


@strawberry.type(description="The protocol does not allow this move from the task's state.")
class InvalidStateError(Error):
    state: TaskState
    move: str = strawberry.field(description="The refused move (a MoveName, or SAVE_CHECKPOINT).")
    allowed_moves: list[MoveName] = strawberry.field(
        description="The moves the caller may make on the task now."
    )


@strawberry.type(description="The pipeline table does not allow this event at the run's position.")
class InvalidRunStateError(Error):
    status: RunStatus
    phase: RunPhase
    checkpoint: RunCheckpoint
    event: str = strawberry.field(description="The refused event (a RunEventName, or HEARTBEAT).")
    allowed_events: list[RunEvent] = strawberry.field(
        description="The events the caller may make on the run now."
    )


@strawberry.type(description="No such object, or the caller may not see it.")
class NotFoundError(Error):
    id: str


@strawberry.type(description="The caller may see the task but not make this change.")
class ForbiddenError(Error):
    pass


@strawberry.type(
    description="The caller does not hold the live lease of the claimed run it tried to drive "
    "(`lease_lost`): the lease ran out (expired means lost, even before the sweeper moves the "
    "run), another claim holds the run now, or `leaseId` names a lease that is not the current "
    "one. Nothing was changed; stop working on the run."
)
class LeaseLostError(Error):
    id: str = strawberry.field(description="The run.")


@strawberry.type(description="`expectedVersion` differs from the task's version.")
class VersionConflictError(Error):
    expected_version: int
    actual_version: int


@strawberry.type(description="An input broke a bound of the task schema or a rule of the API.")
class InvalidInputError(Error):
    field: str = strawberry.field(description="The offending input field, e.g. `packet.files[3]`.")


@strawberry.type(
    description="The requester's owner already has a task with this client id, handed off with "
    "different input."
)
class DuplicateTaskError(Error):
    id: str = strawberry.field(description="The existing task's id (`owner_clientId`).")


AnyError = (
    InvalidStateError
    | InvalidRunStateError
    | NotFoundError
    | ForbiddenError
    | VersionConflictError
    | InvalidInputError
    | DuplicateTaskError
    | LeaseLostError
)


def to_error(exc: errors.BatonError) -> AnyError:
    match exc:
        case errors.InvalidRunMove():
            return InvalidRunStateError(
                code=exc.code,
                message=exc.message,
                status=RunStatus(exc.state),
                phase=RunPhase(exc.phase),
                checkpoint=RunCheckpoint(exc.checkpoint),
                event=exc.move,
                allowed_events=[RunEvent(m) for m in exc.allowed_moves],
            )
        case errors.InvalidMove():
            return InvalidStateError(
                code=exc.code,
                message=exc.message,
                state=TaskState(exc.state),
                move=exc.move,
                allowed_moves=[MoveName(m) for m in exc.allowed_moves],
            )
        case errors.NotFound():
            return NotFoundError(code=exc.code, message=exc.message, id=exc.id)
        case errors.Forbidden():
            return ForbiddenError(code=exc.code, message=exc.message)
        case errors.VersionConflict():
            return VersionConflictError(
                code=exc.code,
                message=exc.message,
                expected_version=exc.expected,
                actual_version=exc.actual,
            )
        case errors.InvalidInput():
            return InvalidInputError(code=exc.code, message=exc.message, field=exc.field)
        case errors.DuplicateTask():
            return DuplicateTaskError(code=exc.code, message=exc.message, id=exc.id)
        case errors.LeaseLost():
            return LeaseLostError(code=exc.code, message=exc.message, id=exc.id)
    raise exc
