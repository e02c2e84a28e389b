"""The result of a lifecycle's moves: `<Prefix>MoveSuccess` and the `<Prefix>MoveResult` union,
made from the lifecycle's GraphQL types (`baton.api.lifecycle`).

Every move answers the row after it and the events it appended, or one of the errors every
move may meet, or the lifecycle's refusal (`InvalidStateError`, `InvalidRunStateError`) and any
errors of its own. A lifecycle declares which, and any further fields of its success.

Deliberately no `from __future__ import annotations`: the generated types' annotations must be
real types for Strawberry to read.
"""

import operator
import types
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import reduce
from typing import Annotated, Any

import strawberry

from baton.api.errors import ForbiddenError, InvalidInputError, NotFoundError, VersionConflictError
from baton.api.lifecycle import LifecycleTypes
from baton.engine.cost import list_size

# What any move may meet, after the lifecycle's own refusal, in the union's order.
MOVE_ERRORS: tuple[type, ...] = (
    NotFoundError,
    ForbiddenError,
    VersionConflictError,
    InvalidInputError,
)

# A further field of a success: (annotation, strawberry field).
Field = tuple[Any, Any]


@dataclass(frozen=True)
class MoveResults:
    """A lifecycle's success type and result union."""

    lifecycle: LifecycleTypes
    success: type
    union: Any  # Annotated[Success | errors…, strawberry.union(…)]

    def of(self, subject: Any, events: Sequence[Any], **fields: Any) -> Any:
        """The success for a move that left the row `subject` (a record) and appended
        `events` (records); `fields` are the lifecycle's own."""
        lifecycle = self.lifecycle
        event = lifecycle.event
        return self.success(
            **{lifecycle.schema.noun: lifecycle.node(record=subject)},
            events=[event(record=e) for e in events],
            **fields,
        )


def move_results(
    lifecycle: LifecycleTypes,
    *,
    prefix: str,
    description: str,
    refusal: type,
    errors: tuple[type, ...] = (),
    fields: Mapping[str, Field] | None = None,
) -> MoveResults:
    """`<prefix>MoveSuccess` (the row under its noun, `events`, then `fields`) and
    `<prefix>MoveResult`: the success, `refusal`, the errors every move may meet, `errors`."""
    noun = lifecycle.schema.noun
    annotations: dict[str, Any] = {
        noun: lifecycle.node,
        "events": types.GenericAlias(list, (lifecycle.event,)),
    }
    namespace: dict[str, Any] = {"events": strawberry.field(metadata=list_size(2))}
    for name, (annotation, field) in (fields or {}).items():
        annotations[name] = annotation
        namespace[name] = field
    namespace["__annotations__"] = annotations
    name = f"{prefix}MoveSuccess"
    cls = types.new_class(name, (), {}, lambda ns: ns.update(namespace))
    cls.__module__ = __name__
    success = strawberry.type(cls, description=description)
    members = (success, refusal, *MOVE_ERRORS, *errors)
    union: Any = Annotated[reduce(operator.or_, members), strawberry.union(f"{prefix}MoveResult")]
    return MoveResults(lifecycle=lifecycle, success=success, union=union)
