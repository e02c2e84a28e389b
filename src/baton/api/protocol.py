"""The `protocol` query: the lifecycles as data, read straight from the protocol tables."""

from __future__ import annotations

from enum import Enum
from typing import Any

import strawberry

from baton.engine.cost import list_size
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


def _value(e: Enum) -> str:
    return str(e.value)


def lifecycle(machine: Machine[Any, Any, Any]) -> Lifecycle:
    return Lifecycle(
        name=machine.name,
        states=[
            ProtocolState(
                name=_value(info.state),
                description=info.description,
                terminal=info.terminal,
                initial=info.initial,
                note=info.note,
                in_baton=info.in_baton,
                moves_to=[_value(s) for s in machine.targets(info.state)],
                reached_from=[_value(s) for s in machine.sources(info.state)],
                label=info.label,
                failure=info.failure,
            )
            for info in machine.states
        ],
        attributes=[
            ProtocolAttribute(
                name=axis.name,
                ordered=axis.ordered,
                values=[
                    ProtocolValue(name=_value(v.value), label=v.label, description=v.description)
                    for v in axis.values
                ],
            )
            for axis in machine.attributes
        ],
        moves=[
            ProtocolMove(
                name=_value(m.name),
                from_=_value(m.source),
                to=_value(m.target),
                mutation=m.mutation,
                actor=_value(m.actor),
            )
            for m in machine.moves
        ],
    )


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
