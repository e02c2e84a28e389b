"""The generalised machine on a tiny two-axis lifecycle: validation, exploration, and the checks
that refuse a broken table when it is declared. Pure and fast."""

from __future__ import annotations

from dataclasses import replace
from enum import Enum
from typing import Any

import pytest

from baton.errors import InvalidInput, InvalidMove
from baton.protocol.logic import (
    KEEP,
    Apply,
    Arg,
    Const,
    Function,
    Implies,
    Is,
    Later,
    Now,
)
from baton.protocol.machine import (
    Axis,
    ForwardOnly,
    Invariant,
    Machine,
    Move,
    ProtocolDefinitionError,
    StateInfo,
    ValueInfo,
)
from baton.protocol.params import Kind, Param


class Lamp(Enum):
    off = "off"
    on = "on"
    broken = "broken"
    gone = "gone"


class Level(Enum):
    low = "low"
    mid = "mid"
    high = "high"


class Act(Enum):
    SWITCH_ON = "SWITCH_ON"
    BRIGHTEN = "BRIGHTEN"
    DIM = "DIM"
    SWITCH_OFF = "SWITCH_OFF"
    BREAK = "BREAK"
    FIX = "FIX"
    REMOVE = "REMOVE"


class Who(Enum):
    ANYONE = "anyone"


UP = Function("up", ((Level.low, Level.mid), (Level.mid, Level.high)))
LEVEL = Axis(
    "level",
    tuple(ValueInfo(v, f"{v.value} light") for v in Level),
    initial=Level.low,
    phrase="the level is",
    noun="the level",
    ordered=True,
)
STATES = (
    StateInfo(Lamp.off, "dark", initial=True),
    StateInfo(Lamp.on, "lit"),
    StateInfo(Lamp.broken, "needs fixing", failure=True),
    StateInfo(Lamp.gone, "thrown away", terminal=True),
)
TO = Param("to", Kind.CHOICE, choices=(Level.mid, Level.high))
WHY = Param("why", Kind.TEXT)


def mv(name: Act, source: Lamp, target: Lamp, level: Any = KEEP, **kw: Any) -> Move[Any, Any, Any]:
    return Move(
        name, source, target, Who.ANYONE, name.value.lower(), effects=(("level", level),), **kw
    )


MOVES = (
    mv(Act.SWITCH_ON, Lamp.off, Lamp.on, Apply(UP, Now("level"))),
    mv(Act.BRIGHTEN, Lamp.on, Lamp.on, Arg("to"), guard=Later("to", "level"), params=(TO,)),
    mv(Act.DIM, Lamp.on, Lamp.on, Const(Level.mid), guard=Is("level", Level.high)),
    mv(Act.SWITCH_OFF, Lamp.on, Lamp.off, Const(Level.low)),
    mv(Act.BREAK, Lamp.on, Lamp.broken, params=(WHY,)),
    mv(Act.FIX, Lamp.broken, Lamp.off, Const(Level.low)),
    *(mv(Act.REMOVE, s, Lamp.gone, Const(Level.low)) for s in (Lamp.off, Lamp.broken)),
)
OFF_IS_LOW = Invariant(
    "off_low", Implies(Is("lamp", Lamp.off), Is("level", Level.low)), "Off is low."
)
FORWARD = ForwardOnly("level", (Act.DIM, Act.SWITCH_OFF, Act.FIX, Act.REMOVE), "Level rises.")


def build(**changes: Any) -> Machine[Any, Any, Any]:
    fields: dict[str, Any] = {
        "name": "lamp",
        "states": STATES,
        "moves": MOVES,
        "attributes": (LEVEL,),
        "invariants": (OFF_IS_LOW,),
        "forward_only": (FORWARD,),
        "primary": "lamp",
        "distinct_pairs": False,
    }
    return Machine(**{**fields, **changes})


LAMP = build()


def at(lamp: Lamp, level: Level) -> Any:
    return LAMP.position(lamp, level=level)


# --- validating a move ----------------------------------------------------------------------


def test_apply_computes_every_effect() -> None:
    assert LAMP.initial_position == at(Lamp.off, Level.low)
    on = LAMP.apply(LAMP.initial_position, Act.SWITCH_ON)
    assert on == at(Lamp.on, Level.mid)
    assert LAMP.apply(on, Act.BRIGHTEN, {"to": Level.high}) == at(Lamp.on, Level.high)
    assert LAMP.apply(at(Lamp.on, Level.high), Act.DIM) == at(Lamp.on, Level.mid)
    assert LAMP.apply(on, Act.BREAK, {"why": "dropped"}) == at(Lamp.broken, Level.mid)


def test_wrong_source_is_refused_naming_the_primary_axis() -> None:
    with pytest.raises(InvalidMove, match="dim is not allowed from lamp off") as refused:
        LAMP.apply(LAMP.initial_position, Act.DIM)
    assert (refused.value.state, refused.value.move) == ("off", "DIM")


def test_failed_guard_says_what_it_needs_and_what_is_now() -> None:
    with pytest.raises(InvalidMove, match="only when the level is high; now the level is mid"):
        LAMP.apply(at(Lamp.on, Level.mid), Act.DIM)
    with pytest.raises(InvalidMove, match=r"later than the current one; now .* given to is mid"):
        LAMP.apply(at(Lamp.on, Level.mid), Act.BRIGHTEN, {"to": Level.mid})


@pytest.mark.parametrize(
    ("name", "args", "field"),
    [
        (Act.BRIGHTEN, {}, "to"),
        (Act.BRIGHTEN, {"to": Level.low}, "to"),
        (Act.BRIGHTEN, {"to": "high"}, "to"),
        (Act.BREAK, {}, "why"),
        (Act.BREAK, {"why": "  "}, "why"),
        (Act.DIM, {"why": "x"}, "why"),
    ],
)
def test_arguments_that_do_not_fit_are_invalid_input(
    name: Act, args: dict[str, Any], field: str
) -> None:
    with pytest.raises(InvalidInput) as refused:
        LAMP.apply(at(Lamp.on, Level.high), name, args)
    assert refused.value.field == field


def test_check_without_arguments_asks_whether_some_would_do() -> None:
    assert LAMP.check(at(Lamp.on, Level.mid), Act.BRIGHTEN).name is Act.BRIGHTEN
    with pytest.raises(InvalidMove):
        LAMP.check(at(Lamp.on, Level.high), Act.BRIGHTEN)  # nothing is later than high
    assert LAMP.possible(at(Lamp.on, Level.high)) == (Act.DIM, Act.SWITCH_OFF, Act.BREAK)
    assert LAMP.possible(at(Lamp.on, Level.mid)) == (Act.BRIGHTEN, Act.SWITCH_OFF, Act.BREAK)


# --- exploring ------------------------------------------------------------------------------


def test_exploration_finds_every_reachable_position_and_transition() -> None:
    assert set(LAMP.reachable()) == {
        at(Lamp.off, Level.low),
        at(Lamp.on, Level.mid),
        at(Lamp.on, Level.high),
        at(Lamp.broken, Level.mid),
        at(Lamp.broken, Level.high),
        at(Lamp.gone, Level.low),
    }
    edges = {(str(t.source), t.move.name, str(t.target)) for t in LAMP.transitions()}
    assert (str(at(Lamp.on, Level.mid)), Act.BRIGHTEN, str(at(Lamp.on, Level.high))) in edges
    assert len(edges) == len(LAMP.transitions())
    for t in LAMP.transitions():
        assert t.source in LAMP.reachable() and t.target in LAMP.reachable()
        assert LAMP.possible(t.source).count(t.move.name) == 1


def test_several_moves_may_share_a_pair_when_the_lifecycle_says_so() -> None:
    assert len(LAMP.moves_between(Lamp.on, Lamp.on)) == 2
    with pytest.raises(TypeError):
        LAMP.move_between(Lamp.on, Lamp.on)


# --- checks at declaration ------------------------------------------------------------------


class Other(Enum):
    x = "x"


ODD = Function("odd", ((Level.low, Level.high), (Level.mid, Level.low), (Level.high, Level.low)))


def _moves_with(name: Act, **changes: Any) -> tuple[Move[Any, Any, Any], ...]:
    return tuple(replace(m, **changes) if m.name is name else m for m in MOVES)


BROKEN: list[Any] = [
    pytest.param(
        {"attributes": (replace(LEVEL, values=LEVEL.values[::-1]),)},
        "whole enum, in declaration order",
        id="axis-out-of-order",
    ),
    pytest.param(
        {"attributes": (replace(LEVEL, initial=None),)}, "starts at None", id="axis-bad-initial"
    ),
    pytest.param(
        {"attributes": (replace(LEVEL, name="lamp"),)}, "axis names are not unique", id="axis-clash"
    ),
    pytest.param(
        {"moves": _moves_with(Act.DIM, effects=())}, "one effect on each", id="missing-effect"
    ),
    pytest.param(
        {"moves": _moves_with(Act.DIM, effects=(("level", Const(Other.x)),))},
        "not one of its values",
        id="effect-off-axis",
    ),
    pytest.param(
        {"moves": _moves_with(Act.DIM, guard=Is("colour", Other.x))},
        "guards an unknown axis",
        id="guard-unknown-axis",
    ),
    pytest.param(
        {"moves": _moves_with(Act.BREAK, guard=Later("why", "level"))},
        "which is not a choice",
        id="guard-steered-by-text",
    ),
    pytest.param(
        {"moves": _moves_with(Act.DIM, effects=(("level", Arg("to")),))},
        "does not declare: to",
        id="effect-undeclared-param",
    ),
    pytest.param(
        {"moves": _moves_with(Act.BREAK, params=(WHY, WHY))},
        "parameter twice",
        id="param-twice",
    ),
    pytest.param(
        {"moves": (*MOVES[:-1], replace(MOVES[-1], mutation="throw"))},
        "REMOVE is defined differently",
        id="name-means-two-things",
    ),
    pytest.param(
        {"moves": _moves_with(Act.DIM, mutation="brighten")},
        "share a mutation",
        id="shared-mutation",
    ),
    pytest.param(
        {"moves": _moves_with(Act.SWITCH_OFF, effects=(("level", KEEP),))},
        "invariant off_low breaks at reachable lamp off, level mid",
        id="invariant-broken-when-reached",
    ),
    pytest.param(
        # Only from `broken` at `low`, which obeys the invariant but is never reached.
        {"moves": _moves_with(Act.FIX, effects=(("level", Apply(ODD, Now("level"))),))},
        "FIX takes lamp broken, level low to lamp off, level high, breaking off_low",
        id="invariant-broken-by-a-move",
    ),
    pytest.param(
        {"moves": _moves_with(Act.BREAK, effects=(("level", Apply(UP, Now("level"))),))},
        r"BREAK from lamp on, level high: up\(`high`\) is undefined",
        id="undefined-effect",
    ),
    pytest.param(
        {"forward_only": (replace(FORWARD, unless=(Act.SWITCH_OFF, Act.FIX, Act.REMOVE)),)},
        "DIM moves level back",
        id="forward-only-broken",
    ),
    pytest.param(
        {"forward_only": (replace(FORWARD, axis="lamp"),)},
        "not an ordered, required attribute",
        id="forward-only-on-primary",
    ),
    pytest.param(
        {"states": (*STATES[:2], replace(STATES[2], terminal=True), STATES[3])},
        "failure state .* is terminal",
        id="terminal-failure",
    ),
    pytest.param(
        {"invariants": (Invariant("args", Later("to", "level"), "no"),)},
        "position's axes alone",
        id="invariant-reads-args",
    ),
    pytest.param({"invariants": (OFF_IS_LOW, OFF_IS_LOW)}, "share a name", id="invariant-twice"),
    pytest.param({"distinct_pairs": True}, "pair is listed twice", id="shared-pair"),
    pytest.param(
        {"moves": _moves_with(Act.SWITCH_ON, guard=Is("level", Level.high))},
        "unreachable states",
        id="guard-makes-states-unreachable",
    ),
    pytest.param(
        {"moves": tuple(m for m in MOVES if m.source is not Lamp.broken), "forward_only": ()},
        "states that never end",
        id="failure-without-exit",
    ),
]


@pytest.mark.parametrize(("changes", "complaint"), BROKEN)
def test_broken_table_is_refused(changes: dict[str, Any], complaint: str) -> None:
    with pytest.raises(ProtocolDefinitionError, match=complaint):
        build(**changes)


def test_only_arguments_that_fit_make_a_move_possible() -> None:
    only_mid = replace(TO, choices=(Level.mid,))
    lamp = build(moves=_moves_with(Act.BRIGHTEN, params=(only_mid,)))
    # `high` would be later than `mid`, but it is not one of the parameter's choices.
    assert Act.BRIGHTEN not in lamp.possible(lamp.position(Lamp.on, level=Level.mid))
    with pytest.raises(InvalidMove):
        lamp.check(lamp.position(Lamp.on, level=Level.mid), Act.BRIGHTEN)
