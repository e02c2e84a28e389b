"""The `protocol` query: the lifecycles as data (`baton.protocol.description`), as the schema's
types."""

from __future__ import annotations

from dataclasses import fields
from typing import Any

import strawberry

from baton.engine.cost import list_size
from baton.protocol.description import describe
from baton.protocol.handoff import HANDOFF
from baton.protocol.machine import Machine
from baton.protocol.pipeline import PIPELINE


@strawberry.type
class ProtocolState:
    name: str
    description: str
    terminal: bool
    initial: bool
    note: str | None = strawberry.field(
        description="The seed page's own note on what was built at the time, quoted as the "
        "seed's; `inBaton` says what Baton does."
    )
    in_baton: str | None = strawberry.field(
        description="What Baton does here, where the seed's note does not describe it."
    )
    moves_to: list[str]
    reached_from: list[str]
    label: str | None = strawberry.field(
        default=None, description="The seed's friendly label, where it gives one."
    )
    failure: bool = strawberry.field(
        default=False,
        description="Where a failed run rests: not an end, it keeps an exit (a retry).",
    )


@strawberry.type(description="One allowed (from, to) pair.")
class ProtocolMove:
    name: str = strawberry.field(description="The move's name (a MoveName for handoff).")
    from_: str = strawberry.field(name="from")
    to: str
    mutation: str
    actor: str = strawberry.field(description="Who may make it (admin may make every move).")


@strawberry.type(description="A value of one of a lifecycle's attributes.")
class ProtocolValue:
    name: str
    label: str | None = strawberry.field(description="The seed's friendly label, if any.")
    description: str


@strawberry.type(
    description="An attribute of a lifecycle's position besides its state (a task's "
    "`waiting_on`; a run's `phase` and `checkpoint`)."
)
class ProtocolAttribute:
    name: str
    ordered: bool = strawberry.field(
        description="Whether `values` are in a meaningful order (a run's checkpoints)."
    )
    values: list[ProtocolValue] = strawberry.field(metadata=list_size(20))


@strawberry.type
class Lifecycle:
    name: str
    states: list[ProtocolState] = strawberry.field(metadata=list_size(20))
    moves: list[ProtocolMove] = strawberry.field(
        description="One (from, to) pair per entry: a move that leaves several states is "
        "listed once for each.",
        metadata=list_size(60),
    )
    attributes: list[ProtocolAttribute] = strawberry.field(metadata=list_size(5))


def lifecycle(machine: Machine[Any, Any, Any]) -> Lifecycle:
    """The lifecycle's description (`baton.protocol.description`) as the schema's types."""
    found = describe(machine)
    return Lifecycle(
        name=found.name,
        states=[ProtocolState(**_fields(s)) for s in found.states],
        moves=[ProtocolMove(**_fields(m)) for m in found.moves],
        attributes=[
            ProtocolAttribute(
                name=a.name,
                ordered=a.ordered,
                values=[ProtocolValue(**_fields(v)) for v in a.values],
            )
            for a in found.attributes
        ],
    )


def _fields(plain: Any) -> dict[str, Any]:
    return {f.name: getattr(plain, f.name) for f in fields(plain)}


@strawberry.type(description="Baton's lifecycles.")
class Protocol:
    @strawberry.field(description="The handoff protocol: 10 states, 22 moves.")
    def handoff(self) -> Lifecycle:
        return lifecycle(HANDOFF)

    @strawberry.field(
        description="The pipeline-run lifecycle: 8 statuses, 6 phases, 8 ordered checkpoints "
        "(`attributes`), and its events."
    )
    def pipeline(self) -> Lifecycle:
        return lifecycle(PIPELINE)
