"""The handoff lifecycle: 10 task states, 22 allowed moves, as data.

This module is the single source of the protocol. A task's position is its state and what it
waits on; each move says who makes it, what it needs the task to wait on (its guard), what the
task waits on afterwards (its effect) and what it takes (its parameters). The transition check,
the GraphQL mutations, the database trigger, the docs page and the `protocol` query are all
derived from `HANDOFF`. It performs no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum

from baton.protocol.logic import ALWAYS, Arg, Condition, Const, Expr, Iff, Is, Not, Value
from baton.protocol.machine import Axis, Invariant, Machine, Move, StateInfo, ValueInfo
from baton.protocol.params import Kind, Param


class TaskState(StrEnum):
    # Member names are the wire names: the seed's snake_case values, kept as they are.
    requested = "requested"
    routed = "routed"
    accepted = "accepted"
    working = "working"
    waiting = "waiting"
    verifying = "verifying"
    approval = "approval"
    completed = "completed"
    rejected = "rejected"
    cancelled = "cancelled"


class WaitingOn(StrEnum):
    owner_approval = "owner_approval"
    human = "human"
    agent = "agent"


class MoveName(StrEnum):
    ROUTE = "ROUTE"
    HOLD = "HOLD"
    REJECT = "REJECT"
    ACCEPT = "ACCEPT"
    START = "START"
    PAUSE = "PAUSE"
    SUBMIT_RESULT = "SUBMIT_RESULT"
    APPROVE = "APPROVE"
    DENY = "DENY"
    RESUME = "RESUME"
    COMPLETE = "COMPLETE"
    REQUEST_SIGN_OFF = "REQUEST_SIGN_OFF"
    SEND_BACK = "SEND_BACK"
    SIGN_OFF = "SIGN_OFF"
    REQUEST_CHANGES = "REQUEST_CHANGES"
    CANCEL = "CANCEL"


class Actor(StrEnum):
    """Who may make a move. Admin may make every move; that rule lives in `access`."""

    GATE = "gate"  # the assignee's owner (or its permission gate during handOff), not the agent
    ASSIGNEE = "assignee"  # the assignee agent or its owner
    VERIFIER = "verifier"  # the requester agent or its owner, never the assignee side
    REQUESTER = "requester"  # the requester agent or its owner
    REQUESTER_OWNER = "requester_owner"  # the requester's owner, not the agent


class Verification(StrEnum):
    AUTO = "AUTO"
    REVIEW = "REVIEW"
    SIGN_OFF = "SIGN_OFF"


S = TaskState
M = MoveName
W = WaitingOn

STATES: tuple[StateInfo[TaskState], ...] = (
    StateInfo(
        S.requested,
        "A handoff created the task. The owner’s permission gate decides what happens next.",
        initial=True,
    ),
    StateInfo(
        S.routed, "The gate allowed it, or the owner approved it. The assignee can accept it."
    ),
    StateInfo(S.accepted, "The assignee took the task on."),
    StateInfo(S.working, "The assignee is doing the work."),
    StateInfo(
        S.waiting,
        "Paused until something outside the task happens. The task says what it is waiting on.",
        note="Today only the permission gate sets it, when a request needs the owner’s approval.",
        in_baton="The gate holds a request for the owner with `holdTask` (waiting on "
        "`owner_approval`), and the assignee pauses its own work with `pauseTask` (waiting on "
        "`human` or `agent`).",
    ),
    StateInfo(
        S.verifying,
        "A result came back, and its evidence is being checked.",
        note="Today a returned result passes straight through: evidence with the required shape "
        "completes the task in the same step.",
        in_baton="The verification mode chosen at hand-off decides. `AUTO` (the default) passes "
        "straight through as above; `SIGN_OFF` passes on to `approval`; `REVIEW` rests here "
        "until the requester calls `completeTask`, `sendBackTask` or `requestSignOff`.",
    ),
    StateInfo(
        S.approval,
        "Verified work waits for a person to sign it off.",
        note="Planned. No tool moves a task here yet.",
        in_baton="A passing result comes here when the task was handed off with `SIGN_OFF` "
        "verification, or when the requester of a `REVIEW` task calls `requestSignOff`. The "
        "requester’s owner then calls `signOffTask` or `requestChanges`.",
    ),
    StateInfo(
        S.completed,
        "Done. The result and its evidence are attached to the task.",
        terminal=True,
    ),
    StateInfo(S.rejected, "Refused by the owner’s rule, or denied by the owner.", terminal=True),
    StateInfo(
        S.cancelled,
        "Withdrawn before it finished.",
        terminal=True,
        note="Today the requesting agent’s owner cancels an open task from its task page.",
        in_baton="`cancelTask` cancels an open task; the requester agent, its owner or admin may "
        "call it.",
    ),
)

# The seed's "Waiting on" lines, each split into what the reason means and the seed's note on
# what was built at the time; `in_baton` says what Baton does now.
WAITING_ON = Axis(
    "waiting_on",
    (
        ValueInfo(
            W.owner_approval,
            "The permission gate held the request for the owner. Only the owner’s decision "
            "moves it on: approval routes it, denial rejects it.",
        ),
        ValueInfo(
            W.human,
            "Waiting on a person’s answer.",
            note="Planned: no tool sets it yet.",
            in_baton="The assignee’s `pauseTask` sets it; its `resumeTask` goes back to `working`.",
        ),
        ValueInfo(
            W.agent,
            "Waiting on another agent.",
            note="Planned: no tool sets it yet.",
            in_baton="The assignee’s `pauseTask` sets it; its `resumeTask` goes back to `working`.",
        ),
    ),
    initial=None,
    phrase="the task waits on",
    noun="what the task waits on",
    title="Waiting on",
    nullable=True,
)

INVARIANTS = (
    Invariant(
        "waiting_on_iff_waiting",
        Iff(Is("state", S.waiting), Not(Is("waiting_on", None))),
        "`waiting_on` is set exactly while the state is `waiting`.",
        seed=False,
    ),
)

_NOTHING = Const(None)
_CANCELLABLE = (S.requested, S.routed, S.accepted, S.working, S.waiting, S.verifying, S.approval)

_REASON = Param("reason", Kind.TEXT, required=False, description="Why; kept on the event.")
_REQUIRED_REASON = Param("reason", Kind.TEXT, description="Why (required for this move).")
_RESULT = Param("result", Kind.OBJECT, description="The result to verify.")
_PAUSE_ON = Param(
    "waiting_on", Kind.CHOICE, choices=(W.human, W.agent), description="What the task waits on."
)


def _move(
    name: M,
    source: S,
    target: S,
    actor: Actor,
    mutation: str,
    *,
    guard: Condition = ALWAYS,
    waiting_on: Expr = _NOTHING,
    params: tuple[Param, ...] = (_REASON,),
) -> Move[S, M, Actor]:
    """A handoff move; every move says what the task waits on next (nothing, by default)."""
    return Move(
        name,
        source,
        target,
        actor,
        mutation,
        guard=guard,
        effects=(("waiting_on", waiting_on),),
        params=params,
    )


# A task waiting on its owner's approval leaves only by the owner's decision; one waiting on a
# person or another agent leaves only by the assignee resuming it (or by cancellation).
_ON_OWNER = Is("waiting_on", W.owner_approval)
_ON_OTHERS = Is("waiting_on", W.human, W.agent)

MOVES: tuple[Move[TaskState, MoveName, Actor], ...] = (
    _move(M.ROUTE, S.requested, S.routed, Actor.GATE, "routeTask"),
    _move(
        M.HOLD,
        S.requested,
        S.waiting,
        Actor.GATE,
        "holdTask",
        waiting_on=Const(W.owner_approval),
    ),
    _move(M.REJECT, S.requested, S.rejected, Actor.GATE, "rejectTask"),
    _move(M.ACCEPT, S.routed, S.accepted, Actor.ASSIGNEE, "acceptTask"),
    _move(M.START, S.accepted, S.working, Actor.ASSIGNEE, "startTask"),
    _move(
        M.PAUSE,
        S.working,
        S.waiting,
        Actor.ASSIGNEE,
        "pauseTask",
        waiting_on=Arg("waiting_on"),
        params=(_PAUSE_ON, _REASON),
    ),
    _move(
        M.SUBMIT_RESULT,
        S.working,
        S.verifying,
        Actor.ASSIGNEE,
        "submitResult",
        params=(_RESULT, _REASON),
    ),
    _move(M.APPROVE, S.waiting, S.routed, Actor.GATE, "approveTask", guard=_ON_OWNER),
    _move(M.RESUME, S.waiting, S.working, Actor.ASSIGNEE, "resumeTask", guard=_ON_OTHERS),
    _move(M.DENY, S.waiting, S.rejected, Actor.GATE, "denyTask", guard=_ON_OWNER),
    _move(M.REQUEST_SIGN_OFF, S.verifying, S.approval, Actor.VERIFIER, "requestSignOff"),
    _move(M.COMPLETE, S.verifying, S.completed, Actor.VERIFIER, "completeTask"),
    _move(
        M.SEND_BACK,
        S.verifying,
        S.working,
        Actor.VERIFIER,
        "sendBackTask",
        params=(_REQUIRED_REASON,),
    ),
    _move(M.SIGN_OFF, S.approval, S.completed, Actor.REQUESTER_OWNER, "signOffTask"),
    _move(
        M.REQUEST_CHANGES,
        S.approval,
        S.working,
        Actor.REQUESTER_OWNER,
        "requestChanges",
        params=(_REQUIRED_REASON,),
    ),
    *(_move(M.CANCEL, s, S.cancelled, Actor.REQUESTER, "cancelTask") for s in _CANCELLABLE),
)

HANDOFF: Machine[TaskState, MoveName, Actor] = Machine(
    "handoff", STATES, MOVES, attributes=(WAITING_ON,), invariants=INVARIANTS
)

# The seed page lists exactly 22 moves; a drifted table must not import.
assert len(HANDOFF.moves) == 22, len(HANDOFF.moves)

# --- Read from the table, for the service, the API and the docs ----------------------------


def _reasons(values: Iterable[Value]) -> frozenset[WaitingOn]:
    return frozenset(WaitingOn(v.value) for v in values if v is not None)


def _required(move: Move[TaskState, MoveName, Actor]) -> frozenset[WaitingOn] | None:
    guard = move.guard
    return _reasons(guard.values) if isinstance(guard, Is) and guard.axis == "waiting_on" else None


def _set(move: Move[TaskState, MoveName, Actor]) -> frozenset[WaitingOn]:
    effect = move.effect("waiting_on")
    if isinstance(effect, Const):
        return _reasons([effect.constant])
    param = move.param(effect.param) if isinstance(effect, Arg) else None
    return _reasons(param.choices) if param is not None else frozenset()


# The seed's line for each waiting reason, verbatim.
WAITING_ON_DESCRIPTIONS: dict[WaitingOn, str] = {
    WaitingOn(info.value.value): " ".join(filter(None, (info.description, info.note)))
    for info in WAITING_ON.values
}

# The waiting reasons a move out of `waiting` needs (its guard), in MoveName order.
REQUIRES_WAITING_ON: dict[MoveName, frozenset[WaitingOn]] = {
    name: reasons for name in MoveName if (reasons := _required(HANDOFF.named(name)[0])) is not None
}

# Which waiting reason a move into `waiting` sets; PAUSE takes the reason from its input.
SETS_WAITING_ON: dict[MoveName, frozenset[WaitingOn]] = {
    name: reasons for name in MoveName if (reasons := _set(HANDOFF.named(name)[0]))
}

# Moves that must say why.
REQUIRES_REASON: frozenset[MoveName] = frozenset(
    m.name for m in MOVES if (p := m.param("reason")) is not None and p.required
)

MUTATIONS: dict[MoveName, str] = {m.name: m.mutation for m in MOVES}


def check_move(
    state: TaskState, waiting_on: WaitingOn | None, name: MoveName
) -> Move[TaskState, MoveName, Actor]:
    """The move `name` out of `state`, or `InvalidMove` when the protocol forbids it: the table
    does not list it, or its guard on what the task waits on fails."""
    return HANDOFF.check(HANDOFF.position(state, waiting_on=waiting_on), name)


def possible_moves(state: TaskState, waiting_on: WaitingOn | None) -> tuple[MoveName, ...]:
    """Every move the protocol allows now, whoever asks."""
    return HANDOFF.possible(HANDOFF.position(state, waiting_on=waiting_on))


# --- Rules the table cannot express, kept beside it ---------------------------------------

# Checkpoints may be saved only while the assignee holds the task.
CHECKPOINT_STATES: frozenset[TaskState] = frozenset({S.accepted, S.working, S.waiting})

# What a passing result leads to in the same call, per verification mode: AUTO is the seed's
# "today" (evidence of the required shape completes the task); REVIEW rests in `verifying`.
AFTER_VERIFYING: dict[Verification, MoveName | None] = {
    Verification.AUTO: M.COMPLETE,
    Verification.SIGN_OFF: M.REQUEST_SIGN_OFF,
    Verification.REVIEW: None,
}
