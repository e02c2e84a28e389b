"""The checks a lifecycle's table passes when it is declared, so a broken table fails at import.

`check_declaration` looks at the table alone: one initial state, no exit from a terminal state,
names that mean one thing, effects on every attribute, guards and effects that name real axes and
parameters. `check_exploration` looks at what the table does: every state reachable, every
reachable position able to reach an end, the invariants true at every reachable position, and,
stronger, no allowed move taking any position that obeys the invariants to one that breaks them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from enum import Enum
from typing import TYPE_CHECKING, Any

from baton.errors import InvalidInput, InvalidMove
from baton.protocol.logic import Arg, Const, Expr, Keep, Undefined
from baton.protocol.machine import Move, Position, ProtocolDefinitionError, check_args
from baton.protocol.params import Kind

if TYPE_CHECKING:
    from baton.protocol.machine import Machine


def _fail(machine: Machine[Any, Any, Any], problem: str) -> ProtocolDefinitionError:
    return ProtocolDefinitionError(f"{machine.name}: {problem}")


def _twice(values: Iterable[object]) -> list[object]:
    return [v for v, n in Counter(values).items() if n > 1]


def check_declaration(m: Machine[Any, Any, Any]) -> None:
    _check_states(m)
    _check_axes(m)
    _check_moves(m)
    for move in m.moves:
        _check_move(m, move)
    _check_invariants(m)


def _check_states(m: Machine[Any, Any, Any]) -> None:
    if _twice(i.state for i in m.states):
        raise _fail(m, "a state is declared twice")
    initials = [i.state for i in m.states if i.initial]
    if len(initials) != 1:
        raise _fail(m, f"needs exactly one initial state, has {initials}")
    for info in m.states:
        if info.failure and info.terminal:
            raise _fail(m, f"failure state {info.state} is terminal; a failure keeps an exit")


def _check_axes(m: Machine[Any, Any, Any]) -> None:
    names = [m.primary, *(a.name for a in m.attributes)]
    if _twice(names):
        raise _fail(m, f"axis names are not unique: {names}")
    for axis in m.attributes:
        values = [info.value for info in axis.values]
        if not values or values != list(type(values[0])):
            raise _fail(m, f"axis {axis.name} must list its whole enum, in declaration order")
        if axis.initial not in axis.members:
            raise _fail(m, f"axis {axis.name} starts at {axis.initial}, not one of its values")


def _check_moves(m: Machine[Any, Any, Any]) -> None:
    known = {i.state for i in m.states}
    for move in m.moves:
        if move.source not in known or move.target not in known:
            raise _fail(m, f"move {move.name} names an undeclared state")
    if m.distinct_pairs and _twice((mv.source, mv.target) for mv in m.moves):
        raise _fail(m, "a (source, target) pair is listed twice")
    terminal = {i.state for i in m.states if i.terminal}
    for move in m.moves:
        if move.source in terminal:
            raise _fail(m, f"terminal state {move.source} has an exit")
    for move in m.moves:
        if len([o for o in m.moves if o.source == move.source and o.name == move.name]) > 1:
            raise _fail(m, f"{move.name} leaves {move.source} twice")
    # A name means one thing wherever it leaves from: one mutation, actor, guard, effect and
    # parameters (its target may differ by source).
    for name in m.names():
        first, *rest = m.named(name)
        for other in rest:
            if _definition(other) != _definition(first):
                raise _fail(m, f"{name} is defined differently from {other.source}")
    mutations = {(mv.mutation, mv.name) for mv in m.moves}
    if _twice(mutation for mutation, _ in mutations):
        raise _fail(m, "two moves share a mutation name")


def _definition(move: Move[Any, Any, Any]) -> tuple[object, ...]:
    return (move.actor, move.mutation, move.guard, move.effects, move.params)


def _check_move(m: Machine[Any, Any, Any], move: Move[Any, Any, Any]) -> None:
    where = f"{move.name} from {move.source}"
    if _twice(p.name for p in move.params):
        raise _fail(m, f"{where} declares a parameter twice")
    attributes = {a.name: a for a in m.attributes}
    named = [axis for axis, _ in move.effects]
    if _twice(named) or set(named) != set(attributes):
        raise _fail(m, f"{where} must give one effect on each of {sorted(attributes)}")
    for axis_name, effect in move.effects:
        if not isinstance(effect, Keep):
            _check_expr(m, move, effect, axis_name)
    axes = {m.primary, *attributes}
    if not move.guard.axes() <= axes:
        raise _fail(m, f"{where} guards an unknown axis: {sorted(move.guard.axes() - axes)}")
    for param in move.guard.params():
        _steering_param(m, where, move, param)


def _check_expr(
    m: Machine[Any, Any, Any], move: Move[Any, Any, Any], expr: Expr, axis_name: str
) -> None:
    where = f"{move.name} from {move.source}"
    axis = m.axis(axis_name)
    unknown = expr.axes() - {m.primary, *(a.name for a in m.attributes)}
    if unknown:
        raise _fail(m, f"{where} reads an unknown axis: {sorted(unknown)}")
    if isinstance(expr, Const) and expr.constant not in axis.members:
        raise _fail(m, f"{where} sets {axis_name} to {expr.constant}, not one of its values")
    for name in expr.params():
        param = _steering_param(m, where, move, name)
        if isinstance(expr, Arg) and not set(param.choices) <= set(axis.members):
            raise _fail(m, f"{where} sets {axis_name} from {name}, whose choices differ")


def _steering_param(
    m: Machine[Any, Any, Any], where: str, move: Move[Any, Any, Any], name: str
) -> Any:
    param = move.param(name)
    if param is None:
        raise _fail(m, f"{where} uses a parameter it does not declare: {name}")
    # Only a finite choice may steer a move, so every argument value can be explored.
    if param.kind is not Kind.CHOICE or not param.choices:
        raise _fail(m, f"{where} is steered by {name}, which is not a choice")
    return param


def _check_invariants(m: Machine[Any, Any, Any]) -> None:
    if _twice(i.name for i in m.invariants):
        raise _fail(m, "two invariants share a name")
    axes = {m.primary, *(a.name for a in m.attributes)}
    for inv in m.invariants:
        if not inv.condition.axes() <= axes or inv.condition.params():
            raise _fail(m, f"invariant {inv.name} must read the position's axes alone")
    names = set(m.names())
    for rule in m.forward_only:
        axis = next((a for a in m.attributes if a.name == rule.axis), None)
        if axis is None or not axis.ordered or axis.nullable:
            raise _fail(m, f"forward-only axis {rule.axis} is not an ordered, required attribute")
        if not set(rule.unless) <= names:
            raise _fail(m, f"forward-only {rule.axis} excepts an unknown move")


# --- what the table does ------------------------------------------------------------------


def check_exploration(m: Machine[Any, Any, Any]) -> None:
    reachable = m.reachable()
    states = {i.state for i in m.states}
    reached = {p.state for p in reachable}
    if reached != states:
        raise _fail(m, f"unreachable states {states - reached}")
    _check_ends(m, reachable)
    for position in reachable:
        broken = m.broken(position)
        if broken:
            raise _fail(m, f"invariant {broken[0].name} breaks at reachable {position}")
    for position in m.positions():
        if not m.broken(position):
            _check_preserved(m, position)


def _check_ends(m: Machine[Any, Any, Any], reachable: tuple[Position[Any], ...]) -> None:
    back: dict[Position[Any], set[Position[Any]]] = {p: set() for p in reachable}
    for t in m.transitions():
        back[t.target].add(t.source)
    ending = [p for p in reachable if m.is_terminal(p.state)]
    seen = set(ending)
    while ending:
        for source in back[ending.pop()]:
            if source not in seen:
                seen.add(source)
                ending.append(source)
    stuck = {p.state for p in reachable if p not in seen}
    if stuck:
        raise _fail(m, f"states that never end {stuck}")


def _check_preserved(m: Machine[Any, Any, Any], position: Position[Any]) -> None:
    """Every move allowed from `position`, with any arguments, keeps the invariants."""
    for move in m.moves_from(position.state):
        for args in m.arguments(move):
            try:
                check_args(move, args)
                m.check(position, move.name, args)
            except (InvalidInput, InvalidMove):
                continue
            try:
                target = m.target_of(move, position, args)
            except Undefined as undefined:
                raise _fail(m, f"{move.name} from {position}: {undefined}") from None
            broken = m.broken(target)
            if broken:
                raise _fail(
                    m, f"{move.name} takes {position} to {target}, breaking {broken[0].name}"
                )
            for rule in m.forward_only:
                before, after = position[rule.axis], target[rule.axis]
                assert before is not None and after is not None, "an ordered axis is set"
                if move.name not in rule.unless and _rank(after) < _rank(before):
                    raise _fail(m, f"{move.name} moves {rule.axis} back at {position}")


def _rank(value: Enum) -> int:
    return list(type(value)).index(value)
