"""Expected failures as schema types, mapped once from the domain errors."""

from __future__ import annotations

from collections.abc import Callable
from enum import Enum
from typing import Any, get_args, get_origin, get_type_hints

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


_TYPES: dict[str, type[AnyError]] = {kind.__name__: kind for kind in get_args(AnyError)}


def _reader(hint: Any) -> Callable[[Any], Any]:
    """How a plain value becomes a field's declared type: an enum's member from its value."""
    if isinstance(hint, type) and issubclass(hint, Enum):
        return hint
    if get_origin(hint) is list:
        (item,) = get_args(hint)
        if isinstance(item, type) and issubclass(item, Enum):
            return lambda values: [item(v) for v in values]
    return lambda value: value


_READERS: dict[str, dict[str, Callable[[Any], Any]]] = {
    name: {field: _reader(hint) for field, hint in get_type_hints(kind).items()}
    for name, kind in _TYPES.items()
}


def to_error(exc: errors.BatonError) -> AnyError:
    """The error as the type it names (`BatonError.type_name`), from its own fields; an error
    that names none is raised again."""
    if exc.type_name is None:
        raise exc
    read = _READERS[exc.type_name]
    values = {field: read[field](value) for field, value in exc.fields().items()}
    return _TYPES[exc.type_name](code=exc.code, message=exc.message, **values)
