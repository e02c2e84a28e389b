"""The handoff table against the seed page, and the checks derived from it. Pure and fast."""

from __future__ import annotations

import re
from enum import Enum

import pytest

from baton.errors import InvalidInput, InvalidMove
from baton.protocol.handoff import (
    HANDOFF,
    REQUIRES_REASON,
    REQUIRES_WAITING_ON,
    SETS_WAITING_ON,
    WAITING_ON_DESCRIPTIONS,
    MoveName,
    TaskState,
    Verification,
    WaitingOn,
    check_move,
    possible_moves,
)
from baton.protocol.machine import Machine, Move, ProtocolDefinitionError, StateInfo
from tests.protocol.seeds import seed_list_pairs

# The seed's pairs, copied by hand in tests/protocol/seeds.py (and checked there against the
# seed's second statement of them and its header): the oracle the table is checked against.
SEED_PAIRS = [(TaskState(a), TaskState(b)) for a, b in sorted(seed_list_pairs())]

WAITING_ON_CHOICES: list[WaitingOn | None] = [None, *WaitingOn]


def _waiting_on_for(state: TaskState, name: MoveName) -> WaitingOn | None:
    """A waiting reason that satisfies the rules beside the table, when one can."""
    if state is not TaskState.waiting:
        return None
    required = REQUIRES_WAITING_ON.get(name)
    return next(w for w in WaitingOn if required is None or w in required)


# --- The table ----------------------------------------------------------------------------


def test_table_is_exactly_the_seed_moves() -> None:
    assert HANDOFF.pairs() == frozenset(SEED_PAIRS)
    assert len(HANDOFF.moves) == len(SEED_PAIRS)


def test_states_are_the_enum_in_order() -> None:
    assert [info.state for info in HANDOFF.states] == list(TaskState)


def test_terminal_and_initial_states() -> None:
    terminal = {info.state for info in HANDOFF.states if info.terminal}
    assert terminal == {TaskState.completed, TaskState.rejected, TaskState.cancelled}
    assert HANDOFF.initial is TaskState.requested
    assert [info.state for info in HANDOFF.states if info.initial] == [TaskState.requested]


def test_every_move_name_is_used() -> None:
    assert set(HANDOFF.names()) == set(MoveName)


# --- check_move, every (state, move) pair --------------------------------------------------


@pytest.mark.parametrize("name", list(MoveName), ids=lambda n: n.value)
@pytest.mark.parametrize("state", list(TaskState), ids=lambda s: s.value)
def test_check_move_allows_exactly_the_table(state: TaskState, name: MoveName) -> None:
    listed = [m for m in HANDOFF.moves if m.source is state and m.name is name]
    waiting_on = _waiting_on_for(state, name)
    if listed:
        assert check_move(state, waiting_on, name) == listed[0]
    else:
        with pytest.raises(InvalidMove) as refused:
            check_move(state, waiting_on, name)
        assert refused.value.state == state.value
        assert refused.value.move == name.value
        assert refused.value.code == "invalid_state"


@pytest.mark.parametrize(
    ("name", "waiting_on"),
    [
        (MoveName.APPROVE, WaitingOn.human),
        (MoveName.APPROVE, WaitingOn.agent),
        (MoveName.DENY, WaitingOn.human),
        (MoveName.DENY, WaitingOn.agent),
        (MoveName.RESUME, WaitingOn.owner_approval),
    ],
    ids=str,
)
def test_waiting_reason_blocks_a_listed_move(name: MoveName, waiting_on: WaitingOn) -> None:
    assert HANDOFF.move_for(TaskState.waiting, name) is not None
    with pytest.raises(InvalidMove, match=waiting_on.value) as refused:
        check_move(TaskState.waiting, waiting_on, name)
    assert refused.value.state == TaskState.waiting.value
    assert refused.value.move == name.value


@pytest.mark.parametrize(
    ("name", "waiting_on"),
    [
        (MoveName.APPROVE, WaitingOn.owner_approval),
        (MoveName.DENY, WaitingOn.owner_approval),
        (MoveName.RESUME, WaitingOn.human),
        (MoveName.RESUME, WaitingOn.agent),
        (MoveName.CANCEL, WaitingOn.owner_approval),
        (MoveName.CANCEL, WaitingOn.human),
        (MoveName.CANCEL, WaitingOn.agent),
    ],
    ids=str,
)
def test_waiting_reason_lets_its_move_through(name: MoveName, waiting_on: WaitingOn) -> None:
    move = check_move(TaskState.waiting, waiting_on, name)
    assert (move.source, move.name) == (TaskState.waiting, name)


@pytest.mark.parametrize("name", list(REQUIRES_WAITING_ON), ids=lambda n: n.value)
def test_move_needing_a_reason_to_wait_fails_without_one(name: MoveName) -> None:
    with pytest.raises(InvalidMove):
        check_move(TaskState.waiting, None, name)


# --- possible_moves agrees with check_move --------------------------------------------------


def _allowed(state: TaskState, waiting_on: WaitingOn | None, name: MoveName) -> bool:
    try:
        check_move(state, waiting_on, name)
    except InvalidMove:
        return False
    return True


@pytest.mark.parametrize("waiting_on", WAITING_ON_CHOICES, ids=str)
@pytest.mark.parametrize("state", list(TaskState), ids=lambda s: s.value)
def test_possible_moves_agrees_with_check_move(
    state: TaskState, waiting_on: WaitingOn | None
) -> None:
    possible = possible_moves(state, waiting_on)
    assert len(possible) == len(set(possible))
    assert set(possible) == {n for n in MoveName if _allowed(state, waiting_on, n)}


def test_terminal_states_have_no_possible_moves() -> None:
    for info in HANDOFF.states:
        if info.terminal:
            assert possible_moves(info.state, None) == ()


# --- Machine rejects a broken table when it is declared -----------------------------------


class St(Enum):
    a = "a"
    b = "b"
    c = "c"
    d = "d"


class Nm(Enum):
    GO = "GO"
    STOP = "STOP"
    BACK = "BACK"


class Who(Enum):
    ANYONE = "anyone"


def _mv(name: Nm, source: St, target: St) -> Move[St, Nm, Who]:
    return Move(name, source, target, Who.ANYONE, name.value.lower())


def _build(states: list[StateInfo[St]], moves: list[Move[St, Nm, Who]]) -> Machine[St, Nm, Who]:
    return Machine("tiny", tuple(states), tuple(moves))


START = StateInfo(St.a, "start", initial=True)
END = StateInfo(St.b, "end", terminal=True)


def test_a_sound_tiny_table_builds() -> None:
    machine = _build(
        [START, END, StateInfo(St.c, "middle")],
        [_mv(Nm.GO, St.a, St.c), _mv(Nm.STOP, St.c, St.b), _mv(Nm.BACK, St.c, St.a)],
    )
    assert machine.initial is St.a
    assert machine.targets(St.c) == (St.b, St.a)


@pytest.mark.parametrize(
    ("states", "moves", "complaint"),
    [
        pytest.param(
            [START, StateInfo(St.b, "end", terminal=True, initial=True)],
            [_mv(Nm.GO, St.a, St.b)],
            "exactly one initial state",
            id="two-initial-states",
        ),
        pytest.param(
            [StateInfo(St.a, "start"), END],
            [_mv(Nm.GO, St.a, St.b)],
            "exactly one initial state",
            id="no-initial-state",
        ),
        pytest.param(
            [START, END],
            [_mv(Nm.GO, St.a, St.b), _mv(Nm.BACK, St.b, St.a)],
            "terminal state .* has an exit",
            id="exit-from-terminal",
        ),
        pytest.param(
            [START, END, StateInfo(St.c, "island")],
            [_mv(Nm.GO, St.a, St.b), _mv(Nm.STOP, St.c, St.b)],
            "unreachable states",
            id="unreachable-state",
        ),
        pytest.param(
            [START, END, StateInfo(St.c, "loop"), StateInfo(St.d, "loop")],
            [
                _mv(Nm.STOP, St.a, St.b),
                _mv(Nm.GO, St.a, St.c),
                _mv(Nm.GO, St.c, St.d),
                _mv(Nm.BACK, St.d, St.c),
            ],
            "states that never end",
            id="never-reaches-terminal",
        ),
        pytest.param(
            [START, END],
            [_mv(Nm.GO, St.a, St.b), _mv(Nm.STOP, St.a, St.b)],
            "pair is listed twice",
            id="duplicated-pair",
        ),
        pytest.param(
            [START, END, StateInfo(St.c, "middle")],
            [_mv(Nm.GO, St.a, St.b), _mv(Nm.GO, St.a, St.c), _mv(Nm.STOP, St.c, St.b)],
            "leaves .* twice",
            id="ambiguous-name",
        ),
        pytest.param(
            [START, END, END],
            [_mv(Nm.GO, St.a, St.b)],
            "declared twice",
            id="state-declared-twice",
        ),
        pytest.param(
            [START, END],
            [_mv(Nm.GO, St.a, St.b), _mv(Nm.STOP, St.a, St.c)],
            "undeclared state",
            id="undeclared-state",
        ),
    ],
)
def test_broken_table_is_refused(
    states: list[StateInfo[St]], moves: list[Move[St, Nm, Who]], complaint: str
) -> None:
    with pytest.raises(ProtocolDefinitionError, match=complaint):
        _build(states, moves)


# --- The generic validator agrees with check_move ------------------------------------------

POSITIONS = [(s, w) for s in TaskState for w in WAITING_ON_CHOICES]
ARGS: dict[MoveName, dict[str, object]] = {
    MoveName.PAUSE: {"waiting_on": WaitingOn.human},
    MoveName.SUBMIT_RESULT: {"result": {"summary": "done"}},
    MoveName.SEND_BACK: {"reason": "the tests fail"},
    MoveName.REQUEST_CHANGES: {"reason": "needs a screenshot"},
}


@pytest.mark.parametrize("name", list(MoveName), ids=lambda n: n.value)
@pytest.mark.parametrize(("state", "waiting_on"), POSITIONS, ids=str)
def test_generic_apply_agrees_with_check_move(
    state: TaskState, waiting_on: WaitingOn | None, name: MoveName
) -> None:
    position = HANDOFF.position(state, waiting_on=waiting_on)
    args = ARGS.get(name, {})
    if not _allowed(state, waiting_on, name):
        with pytest.raises(InvalidMove):
            HANDOFF.apply(position, name, args)
        return
    after = HANDOFF.apply(position, name, args)
    assert after.state is check_move(state, waiting_on, name).target
    assert (after["waiting_on"] is not None) == (after.state is TaskState.waiting)
    if after.state is TaskState.waiting:
        assert after["waiting_on"] in SETS_WAITING_ON[name]
        if name is MoveName.PAUSE:
            assert after["waiting_on"] is args["waiting_on"]


def test_exploration_lists_exactly_the_table_pairs() -> None:
    assert {(t.source.state, t.target.state) for t in HANDOFF.transitions()} == HANDOFF.pairs()
    waiting = [p for p in HANDOFF.reachable() if p.state is TaskState.waiting]
    assert {p["waiting_on"] for p in waiting} == set(WaitingOn)
    assert len(HANDOFF.reachable()) == len(TaskState) - 1 + len(WaitingOn)


def test_rules_read_from_the_table_are_the_seed_rules() -> None:
    owner, others = (
        frozenset({WaitingOn.owner_approval}),
        frozenset({WaitingOn.human, WaitingOn.agent}),
    )
    assert {
        MoveName.APPROVE: owner,
        MoveName.DENY: owner,
        MoveName.RESUME: others,
    } == REQUIRES_WAITING_ON
    assert list(REQUIRES_WAITING_ON) == [MoveName.APPROVE, MoveName.DENY, MoveName.RESUME]
    assert {MoveName.HOLD: owner, MoveName.PAUSE: others} == SETS_WAITING_ON
    assert {MoveName.SEND_BACK, MoveName.REQUEST_CHANGES} == REQUIRES_REASON


@pytest.mark.parametrize(
    ("args", "field"),
    [({}, "waitingOn"), ({"waiting_on": WaitingOn.owner_approval}, "waitingOn")],
)
def test_pause_needs_a_reason_to_wait_that_it_may_set(args: dict[str, object], field: str) -> None:
    with pytest.raises(InvalidInput) as refused:
        HANDOFF.apply(HANDOFF.position(TaskState.working), MoveName.PAUSE, args)
    assert refused.value.field == field


# --- The seed's "today" notes, and what Baton does ----------------------------------------

# The seed page's notes, copied by hand: kept verbatim, as the seed's.
SEED_TODAY = {
    TaskState.waiting: "Today only the permission gate sets it, when a request needs the owner’s "
    "approval.",
    TaskState.verifying: "Today a returned result passes straight through: evidence with the "
    "required shape completes the task in the same step.",
    TaskState.approval: "Planned. No tool moves a task here yet.",
    TaskState.cancelled: "Today the requesting agent’s owner cancels an open task from its task "
    "page.",
}
SEED_WAITING_ON = {
    WaitingOn.owner_approval: "The permission gate held the request for the owner. Only the "
    "owner’s decision moves it on: approval routes it, denial rejects it.",
    WaitingOn.human: "Waiting on a person’s answer. Planned: no tool sets it yet.",
    WaitingOn.agent: "Waiting on another agent. Planned: no tool sets it yet.",
}


def test_seed_notes_are_kept_verbatim_and_each_says_what_baton_does() -> None:
    assert {i.state: i.note for i in HANDOFF.states if i.note} == SEED_TODAY
    assert all(HANDOFF.info(state).in_baton for state in SEED_TODAY)
    assert SEED_WAITING_ON == WAITING_ON_DESCRIPTIONS
    for info in HANDOFF.axis("waiting_on").values:
        assert bool(info.note) == bool(info.in_baton), info.value


def test_in_baton_notes_name_real_mutations_and_values() -> None:
    notes = [i.in_baton or "" for i in HANDOFF.states]
    notes += [i.in_baton or "" for i in HANDOFF.axis("waiting_on").values]
    known = {m.mutation for m in HANDOFF.moves} | {
        member.value for enum in (TaskState, WaitingOn, Verification) for member in enum
    }
    named = {word for note in notes for word in re.findall(r"`([^`]+)`", note)}
    assert named and named <= known, named - known
