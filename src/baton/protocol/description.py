"""The lifecycles as data for clients: what the `protocol` query answers and the MCP `protocol`
tool returns, read straight from the tables.

Plain values (the enums' values as text), no I/O. The GraphQL door wraps them in its types of
the same field names; the MCP door serves them as JSON, camelCase keys.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any

from baton.protocol.machine import Machine


@dataclass(frozen=True)
class StateDescription:
    name: str
    description: str
    terminal: bool
    initial: bool
    note: str | None  # the seed page's own note, quoted as the seed's
    in_baton: str | None  # what Baton does here, where the note does not describe it
    moves_to: list[str]
    reached_from: list[str]
    label: str | None = None  # the seed's friendly label, where it gives one
    failure: bool = False  # where a failed run rests: not an end, it keeps an exit


@dataclass(frozen=True)
class MoveDescription:
    """One allowed (from, to) pair of a move."""

    name: str
    from_: str
    to: str
    mutation: str
    actor: str  # who may make it (admin may make every move)


@dataclass(frozen=True)
class ValueDescription:
    name: str
    label: str | None
    description: str


@dataclass(frozen=True)
class AttributeDescription:
    """An attribute of a position besides its state (a task's `waiting_on`; a run's `phase`
    and `checkpoint`)."""

    name: str
    ordered: bool  # whether `values` are in a meaningful order (a run's checkpoints)
    values: list[ValueDescription]


@dataclass(frozen=True)
class LifecycleDescription:
    name: str
    states: list[StateDescription]
    moves: list[MoveDescription]  # a move that leaves several states, once for each
    attributes: list[AttributeDescription]


def _value(e: Enum) -> str:
    return str(e.value)


def describe(machine: Machine[Any, Any, Any]) -> LifecycleDescription:
    return LifecycleDescription(
        name=machine.name,
        states=[
            StateDescription(
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
            AttributeDescription(
                name=axis.name,
                ordered=axis.ordered,
                values=[
                    ValueDescription(name=_value(v.value), label=v.label, description=v.description)
                    for v in axis.values
                ],
            )
            for axis in machine.attributes
        ],
        moves=[
            MoveDescription(
                name=_value(m.name),
                from_=_value(m.source),
                to=_value(m.target),
                mutation=m.mutation,
                actor=_value(m.actor),
            )
            for m in machine.moves
        ],
    )
