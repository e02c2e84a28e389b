"""Shared vocabulary for lifecycles declared as data.

A lifecycle's position is a value on each of its axes: the primary one (a task's `state`, a run's
`status`) and its attributes (a task's `waiting_on`; a run's `phase` and `checkpoint`). Its table
lists moves. A move leaves one primary value for another under a guard on the position, says what
happens to every attribute, and names the parameters it takes; guards and effects are the data of
`baton.protocol.logic`, not code, so the docs and the database guard can be generated from them.

`Machine` checks the table when it is declared (`baton.protocol.checks`), validates a move
(`check`, `apply`, `possible`) and explores every reachable position and transition from the
initial one (`reachable`, `transitions`): the database guard is generated from that exploration.
It performs no I/O.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from enum import Enum
from itertools import product
from types import MappingProxyType
from typing import Generic, TypeVar, cast

from baton.errors import InvalidInput, InvalidMove
from baton.protocol.logic import (
    ALWAYS,
    KEEP,
    Args,
    Condition,
    Effect,
    Function,
    Keep,
    Undefined,
    Value,
)
from baton.protocol.params import Kind, Param, camel

S = TypeVar("S", bound=Enum)
N = TypeVar("N", bound=Enum)
A = TypeVar("A", bound=Enum)

NO_ARGS: Args = MappingProxyType({})


class ProtocolDefinitionError(Exception):
    """The table itself is inconsistent; raised at import time."""


@dataclass(frozen=True)
class StateInfo(Generic[S]):
    """A value of the primary axis.

    `terminal` states end the lifecycle and have no exit. A `failure` state is where a failed
    run rests: not an end, so it keeps an exit (a retry), and the docs say so.
    `note` is the seed page's own "today" note, quoted as the seed's; `in_baton` says what
    Baton does where that note no longer describes it.
    """

    state: S
    description: str
    terminal: bool = False
    initial: bool = False
    note: str | None = None
    label: str | None = None
    failure: bool = False
    in_baton: str | None = None


@dataclass(frozen=True)
class ValueInfo:
    """A value of an attribute axis; `note` and `in_baton` as on `StateInfo`."""

    value: Enum
    description: str = ""
    label: str | None = None
    note: str | None = None
    in_baton: str | None = None


@dataclass(frozen=True)
class Axis:
    """An attribute of the position besides the primary axis.

    `values` is the whole enum in declaration order; `ordered` makes that order meaningful
    (a later checkpoint). `phrase` is how prose states a value ("the phase is"), `noun` how it
    names the attribute ("what the task waits on"). `functions` are the table's functions from
    this axis (a checkpoint's resting phase), shown beside its values in the docs.
    """

    name: str
    values: tuple[ValueInfo, ...]
    initial: Value
    phrase: str
    noun: str
    title: str = ""
    nullable: bool = False
    ordered: bool = False
    functions: tuple[Function, ...] = ()

    @property
    def members(self) -> tuple[Value, ...]:
        return (*(info.value for info in self.values), *((None,) if self.nullable else ()))

    def info(self, value: Enum) -> ValueInfo:
        return next(info for info in self.values if info.value is value)


@dataclass(frozen=True)
class Move(Generic[S, N, A]):
    """One named way out of one state: the (source, target) pair, who may make it, the guard
    on the rest of the position, the effect on every attribute, and the parameters it takes.

    A name that leaves several states is one row per source, each with the same definition.
    """

    name: N
    source: S
    target: S
    actor: A
    mutation: str
    note: str | None = None
    guard: Condition = ALWAYS
    effects: tuple[tuple[str, Effect], ...] = ()
    params: tuple[Param, ...] = ()

    def effect(self, axis: str) -> Effect:
        return next((e for name, e in self.effects if name == axis), KEEP)

    def param(self, name: str) -> Param | None:
        return next((p for p in self.params if p.name == name), None)


@dataclass(frozen=True)
class Invariant:
    """A rule every position obeys; `name` names its CHECK constraint, `seed` says whose it is."""

    name: str
    condition: Condition
    text: str
    seed: bool = True


@dataclass(frozen=True)
class ForwardOnly(Generic[N]):
    """The ordered axis never goes back, except by the moves named in `unless`."""

    axis: str
    unless: tuple[N, ...]
    text: str


@dataclass(frozen=True)
class Position(Generic[S]):
    """A value on every axis, primary first, in the lifecycle's axis order."""

    values: tuple[tuple[str, Value], ...]

    @property
    def state(self) -> S:
        return cast(S, self.values[0][1])

    def __getitem__(self, axis: str) -> Value:
        for name, value in self.values:
            if name == axis:
                return value
        raise KeyError(axis)

    def as_dict(self) -> dict[str, Value]:
        return dict(self.values)

    def __str__(self) -> str:
        return ", ".join(f"{k} {'null' if v is None else v.value}" for k, v in self.values)


@dataclass(frozen=True)
class Transition(Generic[S, N, A]):
    source: Position[S]
    move: Move[S, N, A]
    target: Position[S]


@dataclass(frozen=True)
class Machine(Generic[S, N, A]):
    name: str
    states: tuple[StateInfo[S], ...]
    moves: tuple[Move[S, N, A], ...]
    attributes: tuple[Axis, ...] = ()
    invariants: tuple[Invariant, ...] = ()
    forward_only: tuple[ForwardOnly[N], ...] = ()
    primary: str = "state"
    # The handoff rule "a move is one (from, to) pair"; a run's events may share a pair.
    distinct_pairs: bool = True
    _by_pair: Mapping[tuple[S, S], Move[S, N, A]] = field(init=False, repr=False, compare=False)
    # Per name: its rows in the table's order (`named`, asked on every move).
    _by_name: Mapping[N, tuple[Move[S, N, A], ...]] = field(init=False, repr=False, compare=False)
    # Per state: its row (`info`, asked of every event the live fan-out pushes).
    _info: Mapping[S, StateInfo[S]] = field(init=False, repr=False, compare=False)
    _reachable: tuple[Position[S], ...] = field(init=False, repr=False, compare=False)
    _transitions: tuple[Transition[S, N, A], ...] = field(init=False, repr=False, compare=False)
    # Per (source, name): the arguments the guard is tried with when none are given.
    _tries: Mapping[tuple[S, N], tuple[Args, ...]] = field(init=False, repr=False, compare=False)
    # Per (name, steering arguments): the changes it makes (see `changes`), filled on demand.
    _changes: dict[
        tuple[N, tuple[tuple[str, object], ...]], tuple[tuple[Position[S], Position[S]], ...]
    ] = field(init=False, repr=False, compare=False, default_factory=dict)

    def __post_init__(self) -> None:
        from baton.protocol.checks import check_declaration, check_exploration

        by_name: dict[N, list[Move[S, N, A]]] = {}
        for move in self.moves:
            by_name.setdefault(move.name, []).append(move)
        object.__setattr__(self, "_by_name", {n: tuple(rows) for n, rows in by_name.items()})
        info: dict[S, StateInfo[S]] = {}
        for row in self.states:
            info.setdefault(row.state, row)  # a state declared twice is the checks' to refuse
        object.__setattr__(self, "_info", info)
        check_declaration(self)
        object.__setattr__(self, "_by_pair", {(m.source, m.target): m for m in self.moves})
        tries = {(m.source, m.name): self._guard_tries(m) for m in self.moves}
        object.__setattr__(self, "_tries", tries)
        reachable, transitions = self._explore()
        object.__setattr__(self, "_reachable", reachable)
        object.__setattr__(self, "_transitions", transitions)
        check_exploration(self)

    # --- the table --------------------------------------------------------------------------

    @property
    def initial(self) -> S:
        return next(info.state for info in self.states if info.initial)

    def info(self, state: S) -> StateInfo[S]:
        return self._info[state]

    def is_terminal(self, state: S) -> bool:
        return self._info[state].terminal

    def axis(self, name: str) -> Axis:
        return next(a for a in self.attributes if a.name == name)

    def moves_from(self, state: S) -> tuple[Move[S, N, A], ...]:
        return tuple(m for m in self.moves if m.source == state)

    def moves_to(self, state: S) -> tuple[Move[S, N, A], ...]:
        return tuple(m for m in self.moves if m.target == state)

    def targets(self, state: S) -> tuple[S, ...]:
        return tuple(dict.fromkeys(m.target for m in self.moves_from(state)))

    def sources(self, state: S) -> tuple[S, ...]:
        return tuple(dict.fromkeys(m.source for m in self.moves_to(state)))

    def pairs(self) -> frozenset[tuple[S, S]]:
        return frozenset((m.source, m.target) for m in self.moves)

    def move_for(self, state: S, name: N) -> Move[S, N, A] | None:
        """The move called `name` out of `state`, or None when the table lists none."""
        return next((m for m in self.moves_from(state) if m.name == name), None)

    def move_between(self, source: S, target: S) -> Move[S, N, A] | None:
        """The one move from `source` to `target`; only where each pair is one move."""
        if not self.distinct_pairs:
            raise TypeError(f"{self.name}: several moves may share a pair; use moves_between")
        return self._by_pair.get((source, target))

    def moves_between(self, source: S, target: S) -> tuple[Move[S, N, A], ...]:
        return tuple(m for m in self.moves_from(source) if m.target == target)

    def names(self) -> tuple[N, ...]:
        return tuple(dict.fromkeys(m.name for m in self.moves))

    def named(self, name: N) -> tuple[Move[S, N, A], ...]:
        """Every row of the move `name`, one per source state."""
        return self._by_name.get(name, ())

    def phrase(self, axis: str) -> str:
        """How prose states a value on `axis`: "the phase is"."""
        if axis == self.primary:
            return f"the {axis} is"
        return self.axis(axis).phrase

    # --- positions --------------------------------------------------------------------------

    def position(self, state: S, **attributes: Value) -> Position[S]:
        """The position with `state` and the given attributes; an optional one left out is
        unset. Only the axes' values are checked here, not the invariants."""
        unknown = set(attributes) - {a.name for a in self.attributes}
        if unknown:
            raise ValueError(f"{self.name} has no axis {', '.join(sorted(unknown))}")
        values: list[tuple[str, Value]] = [(self.primary, state)]
        for axis in self.attributes:
            value = attributes.get(axis.name)
            if value not in axis.members:
                raise ValueError(f"{value!r} is not a value of {axis.name}")
            values.append((axis.name, value))
        return Position(tuple(values))

    @property
    def initial_position(self) -> Position[S]:
        return self.position(self.initial, **{a.name: a.initial for a in self.attributes})

    def positions(self) -> tuple[Position[S], ...]:
        """Every combination of axis values, whether the invariants allow it or not."""
        axes = [[info.state for info in self.states], *(a.members for a in self.attributes)]
        names = [self.primary, *(a.name for a in self.attributes)]
        return tuple(Position(tuple(zip(names, combo, strict=True))) for combo in product(*axes))

    def broken(self, position: Position[S]) -> tuple[Invariant, ...]:
        """The invariants `position` breaks."""
        values = position.as_dict()
        return tuple(i for i in self.invariants if not i.condition.holds(values, NO_ARGS))

    # --- validating a move ------------------------------------------------------------------

    def check(self, position: Position[S], name: N, args: Args | None = None) -> Move[S, N, A]:
        """The move `name` out of `position`, or `InvalidMove` saying why not.

        With `args`, the guard is checked against them; without, the move passes when some
        arguments would let it through (what a caller may try now).
        """
        state = position.state
        move = self.move_for(state, name)
        if move is None:
            mutation = self._mutation(name)
            raise InvalidMove(
                state.value,
                name.value,
                f"{mutation} is not allowed from {self.primary} {state.value}",
            )
        values = position.as_dict()
        tries = (args,) if args is not None else self._tries[(state, name)]
        if not any(move.guard.holds(values, a) for a in tries):
            raise InvalidMove(state.value, name.value, self._refusal(move, position, args))
        return move

    def apply(self, position: Position[S], name: N, args: Args = NO_ARGS) -> Position[S]:
        """The position after the move `name` with `args`: `InvalidInput` for arguments that do
        not fit the move's parameters, `InvalidMove` when the table does not allow it."""
        rows = self.named(name)
        if not rows:
            raise InvalidMove(
                position.state.value, name.value, f"{self.name} has no move {name.value}"
            )
        check_args(rows[0], args)
        move = self.check(position, name, args)
        try:
            return self.target_of(move, position, args)
        except Undefined as undefined:
            raise InvalidMove(
                position.state.value, name.value, f"{move.mutation} from {position}: {undefined}"
            ) from None

    def possible(self, position: Position[S]) -> tuple[N, ...]:
        """Every move the table allows now, for some arguments, whoever asks."""
        values = position.as_dict()
        return tuple(
            m.name
            for m in self.moves_from(position.state)
            if any(m.guard.holds(values, a) for a in self._tries[(m.source, m.name)])
        )

    def _mutation(self, name: N) -> str:
        rows = self.named(name)
        return rows[0].mutation if rows else name.value

    def _refusal(self, move: Move[S, N, A], position: Position[S], args: Args | None) -> str:
        now = [f"{self.phrase(a)} {_plain(position[a])}" for a in sorted(move.guard.axes())]
        given = [
            f"the given {p} is {_plain(args.get(p))}"
            for p in sorted(move.guard.params())
            if args is not None
        ]
        need = move.guard.prose(self.phrase).replace("`", "")
        return f"{move.mutation} is allowed only when {need}; now {', '.join(now + given)}"

    def target_of(self, move: Move[S, N, A], position: Position[S], args: Args) -> Position[S]:
        """Where `move` takes `position`, guard aside; `Undefined` when an effect has no value."""
        values = position.as_dict()
        new: dict[str, Value] = {}
        for axis in self.attributes:
            effect = move.effect(axis.name)
            new[axis.name] = (
                values[axis.name] if isinstance(effect, Keep) else effect.value(values, args)
            )
        return self.position(move.target, **new)

    # --- exploring --------------------------------------------------------------------------

    @staticmethod
    def arguments(move: Move[S, N, A]) -> list[Args]:
        """Every argument combination worth trying (see `Param.samples`)."""
        names = [p.name for p in move.params]
        combos = product(*(p.samples() for p in move.params))
        return [{k: v for k, v in zip(names, c, strict=True) if v is not None} for c in combos]

    @classmethod
    def fitting_arguments(cls, move: Move[S, N, A]) -> list[Args]:
        """The argument combinations worth trying that fit the move's parameters."""
        fitting = []
        for args in cls.arguments(move):
            try:
                check_args(move, args)
            except InvalidInput:
                continue
            fitting.append(args)
        return fitting

    @classmethod
    def _guard_tries(cls, move: Move[S, N, A]) -> tuple[Args, ...]:
        # A guard that reads no argument needs one try; one that does, every fitting argument.
        return tuple(cls.fitting_arguments(move)) if move.guard.params() else (NO_ARGS,)

    def outcomes(self, position: Position[S]) -> Iterator[Transition[S, N, A]]:
        """Every transition out of `position`, over all moves and all argument values; the
        same (move, target) reached by several arguments is listed once."""
        seen: set[tuple[N, Position[S]]] = set()
        for move in self.moves_from(position.state):
            for args in self.arguments(move):
                try:
                    target = self.apply(position, move.name, args)
                except (InvalidInput, InvalidMove):
                    continue
                if (move.name, target) not in seen:
                    seen.add((move.name, target))
                    yield Transition(position, move, target)

    def _explore(self) -> tuple[tuple[Position[S], ...], tuple[Transition[S, N, A], ...]]:
        start = self.initial_position
        order = [start]
        seen = {start}
        transitions: list[Transition[S, N, A]] = []
        queue = deque(order)
        while queue:
            for t in self.outcomes(queue.popleft()):
                transitions.append(t)
                if t.target not in seen:
                    seen.add(t.target)
                    order.append(t.target)
                    queue.append(t.target)
        return tuple(order), tuple(transitions)

    def reachable(self) -> tuple[Position[S], ...]:
        """Every position reachable from the initial one, in breadth-first order."""
        return self._reachable

    def changes(self, name: N, args: Args = NO_ARGS) -> tuple[tuple[Position[S], Position[S]], ...]:
        """Every (from, to) the move `name` makes with `args`, from any reachable position.

        Only the arguments that steer a move (its CHOICE parameters) matter here; a store that
        knows this list can check and apply a move in one statement. Cached per (name, args).
        """
        steering = tuple(
            sorted(
                (p.name, args[p.name])
                for p in (self.named(name)[0].params if self.named(name) else ())
                if p.kind is Kind.CHOICE and args.get(p.name) is not None
            )
        )
        key = (name, steering)
        found = self._changes.get(key)
        if found is None:
            chosen = dict(steering)
            pairs = []
            for position in self._reachable:
                try:
                    move = self.check(position, name, chosen)
                    pairs.append((position, self.target_of(move, position, chosen)))
                except (InvalidMove, Undefined):
                    continue
            found = self._changes[key] = tuple(pairs)
        return found

    def transitions(self) -> tuple[Transition[S, N, A], ...]:
        """Every allowed (position -> position, move) from a reachable position."""
        return self._transitions


def _plain(value: object) -> str:
    return "null" if value is None else str(value.value if isinstance(value, Enum) else value)


def check_args(move: Move[S, N, A], args: Args) -> None:
    """`InvalidInput` naming the field unless `args` fit the move's parameters."""
    for key in args:
        if move.param(key) is None:
            raise InvalidInput(camel(key), f"is not a parameter of {move.mutation}")
    for param in move.params:
        param.check(args.get(param.name))
