"""The `protocol` query: the lifecycles as data, read straight from the protocol tables."""

from __future__ import annotations

from enum import Enum
from typing import Any

import strawberry

from baton.protocol.handoff import HANDOFF
from baton.protocol.machine import Machine


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


@strawberry.type(description="One allowed (from, to) pair.")
class ProtocolMove:
    name: str = strawberry.field(description="The move's name (a MoveName for handoff).")
    from_: str = strawberry.field(name="from")
    to: str
    mutation: str
    actor: str = strawberry.field(description="Who may make it (admin may make every move).")


@strawberry.type
class Lifecycle:
    name: str
    states: list[ProtocolState]
    moves: list[ProtocolMove]


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
            )
            for info in machine.states
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
