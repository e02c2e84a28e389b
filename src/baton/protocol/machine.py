"""Shared vocabulary for lifecycles declared as data.

A lifecycle is a set of states and a table of moves. `Machine` checks the table when it is
declared (one initial state, no exit from a terminal state, every state reachable, every state
can reach a terminal one) so a broken table fails at import, not in production.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Generic, TypeVar

S = TypeVar("S", bound=Enum)
N = TypeVar("N", bound=Enum)
A = TypeVar("A", bound=Enum)


class ProtocolDefinitionError(Exception):
    """The table itself is inconsistent; raised at import time."""


@dataclass(frozen=True)
class StateInfo(Generic[S]):
    state: S
    description: str
    terminal: bool = False
    initial: bool = False
    note: str | None = None


@dataclass(frozen=True)
class Move(Generic[S, N, A]):
    """One allowed (source, target) pair, the move name that makes it and who may make it."""

    name: N
    source: S
    target: S
    actor: A
    mutation: str
    note: str | None = None


@dataclass(frozen=True)
class Machine(Generic[S, N, A]):
    name: str
    states: tuple[StateInfo[S], ...]
    moves: tuple[Move[S, N, A], ...]
    _by_pair: Mapping[tuple[S, S], Move[S, N, A]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        _validate(self.name, self.states, self.moves)
        object.__setattr__(self, "_by_pair", {(m.source, m.target): m for m in self.moves})

    @property
    def initial(self) -> S:
        return next(info.state for info in self.states if info.initial)

    def info(self, state: S) -> StateInfo[S]:
        return next(info for info in self.states if info.state == state)

    def is_terminal(self, state: S) -> bool:
        return self.info(state).terminal

    def moves_from(self, state: S) -> tuple[Move[S, N, A], ...]:
        return tuple(m for m in self.moves if m.source == state)

    def moves_to(self, state: S) -> tuple[Move[S, N, A], ...]:
        return tuple(m for m in self.moves if m.target == state)

    def targets(self, state: S) -> tuple[S, ...]:
        return tuple(m.target for m in self.moves_from(state))

    def sources(self, state: S) -> tuple[S, ...]:
        return tuple(m.source for m in self.moves_to(state))

    def pairs(self) -> frozenset[tuple[S, S]]:
        return frozenset(self._by_pair)

    def move_for(self, state: S, name: N) -> Move[S, N, A] | None:
        """The move called `name` out of `state`, or None when the table lists none."""
        return next((m for m in self.moves_from(state) if m.name == name), None)

    def move_between(self, source: S, target: S) -> Move[S, N, A] | None:
        return self._by_pair.get((source, target))

    def names(self) -> tuple[N, ...]:
        seen: dict[N, None] = {}
        for m in self.moves:
            seen.setdefault(m.name)
        return tuple(seen)


def _validate(name: str, states: Iterable[StateInfo[S]], moves: Iterable[Move[S, N, A]]) -> None:
    infos = list(states)
    table = list(moves)
    known = {i.state for i in infos}
    if len(known) != len(infos):
        raise ProtocolDefinitionError(f"{name}: a state is declared twice")
    initials = [i.state for i in infos if i.initial]
    if len(initials) != 1:
        raise ProtocolDefinitionError(f"{name}: needs exactly one initial state, has {initials}")
    pairs = [(m.source, m.target) for m in table]
    if len(set(pairs)) != len(pairs):
        raise ProtocolDefinitionError(f"{name}: a (source, target) pair is listed twice")
    for m in table:
        if m.source not in known or m.target not in known:
            raise ProtocolDefinitionError(f"{name}: move {m.name} names an undeclared state")
    terminal = {i.state for i in infos if i.terminal}
    for m in table:
        if m.source in terminal:
            raise ProtocolDefinitionError(f"{name}: terminal state {m.source} has an exit")
    # Names must not be ambiguous: one name, one target per source.
    for m in table:
        twins = [o for o in table if o.source == m.source and o.name == m.name]
        if len(twins) > 1:
            raise ProtocolDefinitionError(f"{name}: {m.name} leaves {m.source} twice")
    reachable = _closure(
        initials[0], {s: [m.target for m in table if m.source == s] for s in known}
    )
    if reachable != known:
        raise ProtocolDefinitionError(f"{name}: unreachable states {known - reachable}")
    reverse = {s: [m.source for m in table if m.target == s] for s in known}
    reaches_end: set[S] = set()
    for end in terminal:
        reaches_end |= _closure(end, reverse)
    if reaches_end != known:
        raise ProtocolDefinitionError(f"{name}: states that never end {known - reaches_end}")


def _closure(start: S, edges: Mapping[S, list[S]]) -> set[S]:
    seen = {start}
    stack = [start]
    while stack:
        for nxt in edges[stack.pop()]:
            if nxt not in seen:
                seen.add(nxt)
                stack.append(nxt)
    return seen
