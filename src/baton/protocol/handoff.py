"""The handoff lifecycle: 10 task states, 22 allowed moves, as data.

This module is the single source of the protocol. The transition check, the GraphQL mutations,
the database trigger, the docs page and the `protocol` query are all derived from `HANDOFF`.
It performs no I/O.
"""

from __future__ import annotations

from enum import StrEnum

from baton.errors import InvalidMove
from baton.protocol.machine import Machine, Move, StateInfo


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
    ),
    StateInfo(
        S.verifying,
        "A result came back, and its evidence is being checked.",
        note="Today a returned result passes straight through: evidence with the required shape "
        "completes the task in the same step.",
    ),
    StateInfo(
        S.approval,
        "Verified work waits for a person to sign it off.",
        note="Planned. No tool moves a task here yet.",
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
    ),
)

_CANCELLABLE = (S.requested, S.routed, S.accepted, S.working, S.waiting, S.verifying, S.approval)


def _move(name: M, source: S, target: S, actor: Actor, mutation: str) -> Move[S, M, Actor]:
    return Move(name, source, target, actor, mutation)


MOVES: tuple[Move[TaskState, MoveName, Actor], ...] = (
    _move(M.ROUTE, S.requested, S.routed, Actor.GATE, "routeTask"),
    _move(M.HOLD, S.requested, S.waiting, Actor.GATE, "holdTask"),
    _move(M.REJECT, S.requested, S.rejected, Actor.GATE, "rejectTask"),
    _move(M.ACCEPT, S.routed, S.accepted, Actor.ASSIGNEE, "acceptTask"),
    _move(M.START, S.accepted, S.working, Actor.ASSIGNEE, "startTask"),
    _move(M.PAUSE, S.working, S.waiting, Actor.ASSIGNEE, "pauseTask"),
    _move(M.SUBMIT_RESULT, S.working, S.verifying, Actor.ASSIGNEE, "submitResult"),
    _move(M.APPROVE, S.waiting, S.routed, Actor.GATE, "approveTask"),
    _move(M.RESUME, S.waiting, S.working, Actor.ASSIGNEE, "resumeTask"),
    _move(M.DENY, S.waiting, S.rejected, Actor.GATE, "denyTask"),
    _move(M.REQUEST_SIGN_OFF, S.verifying, S.approval, Actor.VERIFIER, "requestSignOff"),
    _move(M.COMPLETE, S.verifying, S.completed, Actor.VERIFIER, "completeTask"),
    _move(M.SEND_BACK, S.verifying, S.working, Actor.VERIFIER, "sendBackTask"),
    _move(M.SIGN_OFF, S.approval, S.completed, Actor.REQUESTER_OWNER, "signOffTask"),
    _move(M.REQUEST_CHANGES, S.approval, S.working, Actor.REQUESTER_OWNER, "requestChanges"),
    *(_move(M.CANCEL, s, S.cancelled, Actor.REQUESTER, "cancelTask") for s in _CANCELLABLE),
)

HANDOFF: Machine[TaskState, MoveName, Actor] = Machine("handoff", STATES, MOVES)

# The seed page lists exactly 22 moves; a drifted table must not import.
assert len(HANDOFF.moves) == 22, len(HANDOFF.moves)

# --- Rules the table cannot express, kept beside it ---------------------------------------

WAITING_ON_DESCRIPTIONS: dict[WaitingOn, str] = {
    WaitingOn.owner_approval: "The permission gate held the request for the owner. Only the "
    "owner’s decision moves it on: approval routes it, denial rejects it.",
    WaitingOn.human: "Waiting on a person’s answer. Planned: no tool sets it yet.",
    WaitingOn.agent: "Waiting on another agent. Planned: no tool sets it yet.",
}

# A task waiting on its owner's approval leaves only by the owner's decision; one waiting on a
# person or another agent leaves only by the assignee resuming it (or by cancellation).
REQUIRES_WAITING_ON: dict[MoveName, frozenset[WaitingOn]] = {
    M.APPROVE: frozenset({WaitingOn.owner_approval}),
    M.DENY: frozenset({WaitingOn.owner_approval}),
    M.RESUME: frozenset({WaitingOn.human, WaitingOn.agent}),
}

# Which waiting reason a move into `waiting` sets; PAUSE takes the reason from its input.
SETS_WAITING_ON: dict[MoveName, frozenset[WaitingOn]] = {
    M.HOLD: frozenset({WaitingOn.owner_approval}),
    M.PAUSE: frozenset({WaitingOn.human, WaitingOn.agent}),
}

# Checkpoints may be saved only while the assignee holds the task.
CHECKPOINT_STATES: frozenset[TaskState] = frozenset({S.accepted, S.working, S.waiting})

# Moves that must say why.
REQUIRES_REASON: frozenset[MoveName] = frozenset({M.SEND_BACK, M.REQUEST_CHANGES})

# What a passing result leads to in the same call, per verification mode: AUTO is the seed's
# "today" (evidence of the required shape completes the task); REVIEW rests in `verifying`.
AFTER_VERIFYING: dict[Verification, MoveName | None] = {
    Verification.AUTO: M.COMPLETE,
    Verification.SIGN_OFF: M.REQUEST_SIGN_OFF,
    Verification.REVIEW: None,
}

MUTATIONS: dict[MoveName, str] = {m.name: m.mutation for m in MOVES}


def _refusal(state: TaskState, name: MoveName, waiting_on: WaitingOn | None) -> InvalidMove:
    if HANDOFF.move_for(state, name) is not None and waiting_on is not None:
        why = f"while the task waits on {waiting_on.value}"
    else:
        why = f"from state {state.value}"
    return InvalidMove(state.value, name.value, f"{MUTATIONS[name]} is not allowed {why}")


def check_move(
    state: TaskState, waiting_on: WaitingOn | None, name: MoveName
) -> Move[TaskState, MoveName, Actor]:
    """The move `name` out of `state`, or `InvalidMove` when the protocol forbids it."""
    move = HANDOFF.move_for(state, name)
    if move is None:
        raise _refusal(state, name, waiting_on)
    required = REQUIRES_WAITING_ON.get(name)
    if required is not None and waiting_on not in required:
        raise _refusal(state, name, waiting_on)
    return move


def possible_moves(state: TaskState, waiting_on: WaitingOn | None) -> tuple[MoveName, ...]:
    """Every move the protocol allows now, whoever asks."""
    names: list[MoveName] = []
    for m in HANDOFF.moves_from(state):
        required = REQUIRES_WAITING_ON.get(m.name)
        if required is None or waiting_on in required:
            names.append(m.name)
    return tuple(names)
