"""The pipeline-run lifecycle: 8 statuses, 6 phases, 8 ordered checkpoints, 12 events, as data.

A run's position is its status, its phase and its checkpoint. The seed page gives the values,
their friendly labels and meanings, the resting phase of each checkpoint, the important
transitions and the invariants; API.md §6 gives each event its mutation, sources, guard and
effect. Where both leave something open, the choice is written into the table (a state's
`in_baton`, a move's `note`), so the docs page says it too. It performs no I/O.
"""

from __future__ import annotations

from enum import StrEnum

from baton.protocol.logic import (
    ALWAYS,
    KEEP,
    All,
    Apply,
    Arg,
    Condition,
    Const,
    Effect,
    Function,
    Iff,
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
    StateInfo,
    ValueInfo,
)
from baton.protocol.params import Kind, Param


class RunStatus(StrEnum):
    # Member names are the wire names: the seed's snake_case values, kept as they are.
    backlog = "backlog"
    awaiting_user = "awaiting_user"
    waiting_for_agent = "waiting_for_agent"
    in_progress = "in_progress"
    interrupted = "interrupted"
    in_review = "in_review"
    completed = "completed"
    errored = "errored"


class RunPhase(StrEnum):
    idle = "idle"
    planning = "planning"
    implementing = "implementing"
    testing = "testing"
    opening_pr = "opening_pr"
    done = "done"


class RunCheckpoint(StrEnum):
    """Ordered resume barriers: declaration order is the seed's order."""

    none = "none"
    plans_complete = "plans_complete"
    generation_complete = "generation_complete"
    verification_complete = "verification_complete"
    reviews_addressed = "reviews_addressed"
    summary_complete = "summary_complete"
    pr_complete = "pr_complete"
    notified = "notified"


class RunEvent(StrEnum):
    # The seed's names, plus three for the events it leaves unnamed (marked).
    CLAIM = "CLAIM"
    CHECKPOINT_REACHED = "CHECKPOINT_REACHED"  # unnamed in the seed
    PLAN_NEEDS_INPUT = "PLAN_NEEDS_INPUT"
    USER_ANSWERED = "USER_ANSWERED"  # unnamed in the seed ("answers given")
    PR_OPENED = "PR_OPENED"
    PR_MERGED = "PR_MERGED"
    NOTIFIED = "NOTIFIED"
    HOST_OFFLINE = "HOST_OFFLINE"
    USER_INTERRUPTED = "USER_INTERRUPTED"
    USER_RESUMED = "USER_RESUMED"  # unnamed in the seed ("resume")
    FAILED = "FAILED"
    RERUN_REQUESTED = "RERUN_REQUESTED"


class RunActor(StrEnum):
    """Who may make an event. A run belongs to an owner; admin may make every event."""

    RUNNER = "runner"  # the run's owner or any of its agents: the daemon, or a person by hand
    OWNER = "owner"  # the run's owner only: answers, stops and restarts are a person's decision
    SYSTEM = "system"  # the lease sweeper, acting as `system` (and admin)


ACTORS: dict[RunActor, str] = {
    RunActor.RUNNER: "the run’s owner or any of its agents (the daemon, or a person by hand); "
    "on a claimed run (`in_progress`) only the holder of its live lease, and the lease id "
    "when one is given: anyone else, or the holder once the lease ran out, gets `lease_lost`",
    RunActor.OWNER: "the run’s owner, not its agents: answering, stopping and restarting a run "
    "are a person’s decisions",
    RunActor.SYSTEM: "the lease sweeper, acting as `system`, when a claim’s lease runs out",
}

St = RunStatus
Ph = RunPhase
Cp = RunCheckpoint
Ev = RunEvent

STATUSES: tuple[StateInfo[RunStatus], ...] = (
    StateInfo(
        St.backlog,
        "Queued / resumable",
        label="Backlog",
        initial=True,
        in_baton="`createRun` puts a run here at phase `idle`, checkpoint `none`; `claimRun` "
        "takes it and resumes from its checkpoint.",
    ),
    StateInfo(St.awaiting_user, "Waiting on your answers", label="Needs your input"),
    StateInfo(
        St.waiting_for_agent,
        "Daemon offline",
        label="Waiting for machine",
        in_baton="A claimed run whose lease runs out lands here; `claimRun` picks it up again "
        "from its checkpoint.",
    ),
    StateInfo(St.in_progress, "Pipeline executing", label="In progress"),
    StateInfo(St.interrupted, "You stopped the run; checkpoint kept", label="Interrupted"),
    StateInfo(St.in_review, "PR open; waiting on merge", label="In review"),
    StateInfo(St.completed, "Terminal success", label="Done", terminal=True),
    StateInfo(
        St.errored,
        "Terminal failure; rerun to leave",
        label="Failed",
        failure=True,
        in_baton="Not an end: `requestRerun` is its one exit, back to `backlog` at checkpoint "
        "`none`. `completed` is the only status that ends a run.",
    ),
)

PHASE = Axis(
    "phase",
    (
        ValueInfo(Ph.idle, label="Idle"),
        ValueInfo(Ph.planning, label="Planning"),
        ValueInfo(Ph.implementing, label="Implementing"),
        ValueInfo(Ph.testing, label="Testing"),
        ValueInfo(Ph.opening_pr, label="Opening pull request"),
        ValueInfo(Ph.done, label="Done"),
    ),
    initial=Ph.idle,
    phrase="the phase is",
    noun="the phase",
    title="Phase",
)

# The seed's "resting phase" of each checkpoint; `next` is the checkpoint after it.
RESTING = Function(
    "resting",
    (
        (Cp.none, Ph.idle),
        (Cp.plans_complete, Ph.planning),
        (Cp.generation_complete, Ph.implementing),
        (Cp.verification_complete, Ph.testing),
        (Cp.reviews_addressed, Ph.testing),
        (Cp.summary_complete, Ph.opening_pr),
        (Cp.pr_complete, Ph.opening_pr),
        (Cp.notified, Ph.done),
    ),
    label="Resting phase",
)
NEXT = Function(
    "next",
    tuple(zip(list(Cp)[:-1], list(Cp)[1:], strict=True)),
    description="`next(c)` is the checkpoint after `c`; `resting(c)` is the resting phase of `c`.",
)

CHECKPOINT = Axis(
    "checkpoint",
    tuple(ValueInfo(c) for c in Cp),
    initial=Cp.none,
    phrase="the checkpoint is",
    noun="the checkpoint",
    title="Checkpoint",
    ordered=True,
    functions=(RESTING, NEXT),
)

# A run that works rests at the phase leading to its next checkpoint.
_WORKING_PHASE = Apply(RESTING, Apply(NEXT, Now("checkpoint")))
# The seed's parked statuses: a run there rests at phase `idle`.
PARKED = (St.backlog, St.awaiting_user, St.waiting_for_agent, St.interrupted)
_IDLE = Const(Ph.idle)

# A reported checkpoint: one of those a daemon reaches by itself; the last two belong to the
# pull request's own events.
_REACHABLE_BY_WORK = tuple(Cp)[1 : list(Cp).index(Cp.summary_complete) + 1]
_CHECKPOINT = Param(
    "checkpoint",
    Kind.CHOICE,
    choices=_REACHABLE_BY_WORK,
    description="The checkpoint reached: later than the run’s, at most `summary_complete`.",
)
_QUESTIONS = Param("questions", Kind.TEXT_LIST, description="What the owner must answer.")
_ANSWERS = Param("answers", Kind.TEXT_LIST, description="The owner’s answers.")
_URL = Param(
    "url",
    Kind.URL,
    description="The pull request’s URL: http or https only (javascript:, data: and other "
    "schemes are refused).",
)
_REASON = Param("reason", Kind.TEXT, description="Why the run failed.")


def _event(
    name: Ev,
    sources: tuple[St, ...],
    target: St,
    actor: RunActor,
    mutation: str,
    *,
    phase: Effect,
    checkpoint: Effect,
    guard: Condition = ALWAYS,
    params: tuple[Param, ...] = (),
    note: str | None = None,
) -> tuple[Move[St, Ev, RunActor], ...]:
    """One event: a row per status it leaves, all with the same definition."""
    effects = (("phase", phase), ("checkpoint", checkpoint))
    return tuple(
        Move(name, s, target, actor, mutation, note, guard=guard, effects=effects, params=params)
        for s in sources
    )


EVENTS: tuple[Move[RunStatus, RunEvent, RunActor], ...] = (
    *_event(
        Ev.CLAIM,
        (St.backlog, St.waiting_for_agent),
        St.in_progress,
        RunActor.RUNNER,
        "claimRun",
        phase=_WORKING_PHASE,
        checkpoint=KEEP,
        note="A claim resumes where the checkpoint left off: at `none` the run plans; at "
        "`summary_complete` it goes straight to `opening_pr`.",
    ),
    *_event(
        Ev.CHECKPOINT_REACHED,
        (St.in_progress,),
        St.in_progress,
        RunActor.RUNNER,
        "reachCheckpoint",
        phase=Apply(RESTING, Apply(NEXT, Arg("checkpoint"))),
        checkpoint=Arg("checkpoint"),
        guard=Later("checkpoint", "checkpoint"),
        params=(_CHECKPOINT,),
        note="Checkpoints may be skipped (a run may go from `none` to `generation_complete`); "
        "`pr_complete` and `notified` come only from the pull request’s events.",
    ),
    *_event(
        Ev.PLAN_NEEDS_INPUT,
        (St.in_progress,),
        St.awaiting_user,
        RunActor.RUNNER,
        "requestUserInput",
        phase=_IDLE,
        checkpoint=KEEP,
        guard=Is("phase", Ph.planning),
        params=(_QUESTIONS,),
    ),
    *_event(
        Ev.USER_ANSWERED,
        (St.awaiting_user,),
        St.backlog,
        RunActor.OWNER,
        "provideUserInput",
        phase=_IDLE,
        checkpoint=KEEP,
        params=(_ANSWERS,),
        note="The answered run queues again; the next claim resumes its planning.",
    ),
    *_event(
        Ev.PR_OPENED,
        (St.in_progress,),
        St.in_review,
        RunActor.RUNNER,
        "openPullRequest",
        phase=Const(Ph.opening_pr),
        checkpoint=Const(Cp.pr_complete),
        guard=Is("checkpoint", Cp.summary_complete),
        params=(_URL,),
    ),
    *_event(
        Ev.PR_MERGED,
        (St.in_review,),
        St.completed,
        RunActor.RUNNER,
        "mergePullRequest",
        phase=Const(Ph.done),
        checkpoint=Const(Cp.notified),
    ),
    *_event(
        Ev.NOTIFIED,
        (St.in_review,),
        St.completed,
        RunActor.RUNNER,
        "markNotified",
        phase=Const(Ph.done),
        checkpoint=Const(Cp.notified),
        note="For a pull request that ends without a merge through Baton: the owner has been "
        "told, and the run is done.",
    ),
    *_event(
        Ev.HOST_OFFLINE,
        (St.in_progress,),
        St.waiting_for_agent,
        RunActor.SYSTEM,
        "reportHostOffline",
        phase=_IDLE,
        checkpoint=KEEP,
    ),
    *_event(
        Ev.USER_INTERRUPTED,
        (St.backlog, St.in_progress, St.awaiting_user, St.waiting_for_agent),
        St.interrupted,
        RunActor.OWNER,
        "interruptRun",
        phase=_IDLE,
        checkpoint=KEEP,
    ),
    *_event(
        Ev.USER_RESUMED,
        (St.interrupted,),
        St.backlog,
        RunActor.OWNER,
        "resumeRun",
        phase=_IDLE,
        checkpoint=KEEP,
    ),
    *_event(
        Ev.FAILED,
        (St.in_progress,),
        St.errored,
        RunActor.RUNNER,
        "failRun",
        phase=KEEP,
        checkpoint=KEEP,
        params=(_REASON,),
        note="Also how “verification exhausted” is reported: the reason says so. The phase "
        "kept shows where the run failed.",
    ),
    *_event(
        Ev.RERUN_REQUESTED,
        (St.errored, St.interrupted),
        St.backlog,
        RunActor.OWNER,
        "requestRerun",
        phase=_IDLE,
        checkpoint=Const(Cp.none),
    ),
)

INVARIANTS = (
    Invariant(
        "completed_is_notified_and_done",
        Iff(Is("status", St.completed), All(Is("checkpoint", Cp.notified), Is("phase", Ph.done))),
        "`completed` means checkpoint `notified` and phase `done`.",
    ),
    Invariant(
        "in_review_is_pr_complete",
        Implies(Is("status", St.in_review), Is("checkpoint", Cp.pr_complete)),
        "`in_review` means checkpoint `pr_complete`.",
    ),
    Invariant(
        "parked_is_idle",
        Implies(Is("status", *PARKED), Is("phase", Ph.idle)),
        "Parked statuses rest at phase `idle`.",
    ),
    # Baton's own: the two last checkpoints belong to the pull request's events, so a run that
    # holds one is in review or done. Without them a claim at `notified` would have no phase.
    Invariant(
        "pr_complete_is_in_review",
        Implies(Is("checkpoint", Cp.pr_complete), Is("status", St.in_review)),
        "Checkpoint `pr_complete` means `in_review`.",
        seed=False,
    ),
    Invariant(
        "notified_is_completed",
        Implies(Is("checkpoint", Cp.notified), Is("status", St.completed)),
        "Checkpoint `notified` means `completed`.",
        seed=False,
    ),
)

PIPELINE: Machine[RunStatus, RunEvent, RunActor] = Machine(
    "pipeline",
    STATUSES,
    EVENTS,
    attributes=(PHASE, CHECKPOINT),
    invariants=INVARIANTS,
    forward_only=(
        ForwardOnly(
            "checkpoint",
            (Ev.RERUN_REQUESTED,),
            "Checkpoints only move forward, except a rerun, which resets them to `none`.",
        ),
    ),
    primary="status",
    distinct_pairs=False,
)

# --- Read from the table -------------------------------------------------------------------

MUTATIONS: dict[RunEvent, str] = {m.name: m.mutation for m in EVENTS}
STATUS_LABELS: dict[RunStatus, str] = {i.state: i.label or i.state.value for i in STATUSES}
PHASE_LABELS: dict[RunPhase, str] = {
    RunPhase(i.value.value): i.label or i.value.value for i in PHASE.values
}


def resting(checkpoint: RunCheckpoint) -> RunPhase:
    """The seed's resting phase of `checkpoint`."""
    return RunPhase(RESTING(checkpoint).value)


def next_checkpoint(checkpoint: RunCheckpoint) -> RunCheckpoint:
    """The checkpoint after `checkpoint`; `Undefined` after `notified`."""
    return RunCheckpoint(NEXT(checkpoint).value)
