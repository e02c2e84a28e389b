"""The pipeline table against seed page 003 and API.md §6. Pure and fast.

The oracles below are copied by hand from the seed page and from API.md, and the expected effect
of every event is written out here as plain Python, apart from the table's declarative effects,
so the table is checked against the documents rather than against itself.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from baton.errors import InvalidInput, InvalidMove
from baton.protocol.machine import Position
from baton.protocol.pipeline import (
    PHASE,
    PHASE_LABELS,
    PIPELINE,
    STATUS_LABELS,
    RunActor,
    RunCheckpoint,
    RunEvent,
    RunPhase,
    RunStatus,
    next_checkpoint,
    resting,
)

Cp, Ph, St, Ev = RunCheckpoint, RunPhase, RunStatus, RunEvent

# --- The seed page's tables, copied by hand ------------------------------------------------

SEED_STATUS = """
| `backlog`           | Backlog             | Queued / resumable                   |
| `awaiting_user`     | Needs your input    | Waiting on your answers              |
| `waiting_for_agent` | Waiting for machine | Daemon offline                       |
| `in_progress`       | In progress         | Pipeline executing                   |
| `interrupted`       | Interrupted         | You stopped the run; checkpoint kept |
| `in_review`         | In review           | PR open; waiting on merge            |
| `completed`         | Done                | Terminal success                     |
| `errored`           | Failed              | Terminal failure; rerun to leave     |
"""
SEED_PHASE = """
| `idle`         | Idle                 |
| `planning`     | Planning             |
| `implementing` | Implementing         |
| `testing`      | Testing              |
| `opening_pr`   | Opening pull request |
| `done`         | Done                 |
"""
SEED_RESTING = """
| `none`                  | `idle`         |
| `plans_complete`        | `planning`     |
| `generation_complete`   | `implementing` |
| `verification_complete` | `testing`      |
| `reviews_addressed`     | `testing`      |
| `summary_complete`      | `opening_pr`   |
| `pr_complete`           | `opening_pr`   |
| `notified`              | `done`         |
"""


def _rows(table: str) -> list[list[str]]:
    return [
        [cell.strip().strip("`") for cell in line.strip().strip("|").split("|")]
        for line in table.strip().splitlines()
    ]


STATUS_ROWS = _rows(SEED_STATUS)
REST = {Cp(c): Ph(p) for c, p in _rows(SEED_RESTING)}
ORDER = list(Cp)

# API.md §6: event, mutation, from statuses, to status.
API_EVENTS: dict[RunEvent, tuple[str, set[RunStatus], RunStatus]] = {
    Ev.CLAIM: ("claimRun", {St.backlog, St.waiting_for_agent}, St.in_progress),
    Ev.CHECKPOINT_REACHED: ("reachCheckpoint", {St.in_progress}, St.in_progress),
    Ev.PLAN_NEEDS_INPUT: ("requestUserInput", {St.in_progress}, St.awaiting_user),
    Ev.USER_ANSWERED: ("provideUserInput", {St.awaiting_user}, St.backlog),
    Ev.PR_OPENED: ("openPullRequest", {St.in_progress}, St.in_review),
    Ev.PR_MERGED: ("mergePullRequest", {St.in_review}, St.completed),
    Ev.NOTIFIED: ("markNotified", {St.in_review}, St.completed),
    Ev.HOST_OFFLINE: ("reportHostOffline", {St.in_progress}, St.waiting_for_agent),
    Ev.USER_INTERRUPTED: (
        "interruptRun",
        {St.backlog, St.in_progress, St.awaiting_user, St.waiting_for_agent},
        St.interrupted,
    ),
    Ev.USER_RESUMED: ("resumeRun", {St.interrupted}, St.backlog),
    Ev.FAILED: ("failRun", {St.in_progress}, St.errored),
    Ev.RERUN_REQUESTED: ("requestRerun", {St.errored, St.interrupted}, St.backlog),
}

PARKED = {St.backlog, St.awaiting_user, St.waiting_for_agent, St.interrupted}
Triple = tuple[RunStatus, RunPhase, RunCheckpoint]


def oracle(
    s: RunStatus, p: RunPhase, c: RunCheckpoint, e: RunEvent, args: dict[str, Any]
) -> Triple | None:
    """API.md §6 by hand: where event `e` with `args` takes (s, p, c), or None if refused."""
    working = REST[ORDER[ORDER.index(c) + 1]] if c is not Cp.notified else None
    if s not in API_EVENTS[e][1]:
        return None
    if e is Ev.CLAIM:
        return (St.in_progress, working, c) if working else None
    if e is Ev.CHECKPOINT_REACHED:
        given = args["checkpoint"]
        later = ORDER.index(given) > ORDER.index(c)
        return (St.in_progress, REST[ORDER[ORDER.index(given) + 1]], given) if later else None
    if e is Ev.PLAN_NEEDS_INPUT:
        return (St.awaiting_user, Ph.idle, c) if p is Ph.planning else None
    if e is Ev.PR_OPENED:
        return (St.in_review, Ph.opening_pr, Cp.pr_complete) if c is Cp.summary_complete else None
    if e in (Ev.PR_MERGED, Ev.NOTIFIED):
        return (St.completed, Ph.done, Cp.notified)
    if e is Ev.FAILED:
        return (St.errored, p, c)
    if e is Ev.RERUN_REQUESTED:
        return (St.backlog, Ph.idle, Cp.none)
    # Answers given, host offline, interrupted, resumed: parked at idle, checkpoint kept.
    return (API_EVENTS[e][2], Ph.idle, c)


VALID_ARGS: dict[RunEvent, list[dict[str, Any]]] = {
    Ev.CHECKPOINT_REACHED: [{"checkpoint": c} for c in ORDER[1 : ORDER.index(Cp.pr_complete)]],
    Ev.PLAN_NEEDS_INPUT: [{"questions": ["Which database?"]}],
    Ev.USER_ANSWERED: [{"answers": ["PostgreSQL"]}],
    Ev.PR_OPENED: [{"url": "https://example.com/acme/app/pull/7"}],
    Ev.FAILED: [{"reason": "verification exhausted"}],
}


def triple(position: Position[RunStatus]) -> Triple:
    return (position.state, RunPhase(position["phase"]), RunCheckpoint(position["checkpoint"]))  # type: ignore[arg-type]


def at(s: RunStatus, p: RunPhase, c: RunCheckpoint) -> Position[RunStatus]:
    return PIPELINE.position(s, phase=p, checkpoint=c)


def holds_seed_invariants(s: RunStatus, p: RunPhase, c: RunCheckpoint) -> bool:
    return (
        (s is St.completed) == (c is Cp.notified and p is Ph.done)
        and (s is not St.in_review or c is Cp.pr_complete)
        and (s not in PARKED or p is Ph.idle)
    )


# --- The table against the seed page ---------------------------------------------------------


def test_statuses_labels_and_meanings_are_the_seeds() -> None:
    assert [[i.state.value, i.label, i.description] for i in PIPELINE.states] == STATUS_ROWS
    assert [[s.value, label] for s, label in STATUS_LABELS.items()] == [r[:2] for r in STATUS_ROWS]


def test_phases_and_labels_are_the_seeds() -> None:
    rows = _rows(SEED_PHASE)
    assert [[i.value.value, i.label] for i in PHASE.values] == rows
    assert [[p.value, label] for p, label in PHASE_LABELS.items()] == rows


def test_checkpoints_are_ordered_with_their_resting_phases() -> None:
    assert list(REST) == list(Cp)
    for c in Cp:
        assert resting(c) is REST[c]
    assert [next_checkpoint(c) for c in ORDER[:-1]] == ORDER[1:]


def test_initial_terminal_and_failure() -> None:
    assert PIPELINE.initial_position == at(St.backlog, Ph.idle, Cp.none)
    assert [i.state for i in PIPELINE.states if i.terminal] == [St.completed]
    assert [i.state for i in PIPELINE.states if i.failure] == [St.errored]
    assert PIPELINE.targets(St.errored) == (St.backlog,)


def test_events_are_api_md_section_6() -> None:
    assert set(PIPELINE.names()) == set(RunEvent) == set(API_EVENTS)
    for event, (mutation, sources, target) in API_EVENTS.items():
        rows = PIPELINE.named(event)
        assert {m.mutation for m in rows} == {mutation}
        assert {m.source for m in rows} == sources
        assert {m.target for m in rows} == {target}


def test_seed_event_names_are_kept() -> None:
    seed = "CLAIM PLAN_NEEDS_INPUT PR_OPENED PR_MERGED NOTIFIED HOST_OFFLINE USER_INTERRUPTED"
    for name in [*seed.split(), "FAILED", "RERUN_REQUESTED"]:
        assert RunEvent(name).value == name
    for name in RunEvent:
        assert re.fullmatch(r"[A-Z]+(_[A-Z]+)*", name.value)


def test_who_may_make_each_event() -> None:
    actors = {event: PIPELINE.named(event)[0].actor for event in RunEvent}
    owner = {Ev.USER_ANSWERED, Ev.USER_INTERRUPTED, Ev.USER_RESUMED, Ev.RERUN_REQUESTED}
    assert {e for e, a in actors.items() if a is RunActor.OWNER} == owner
    assert {e for e, a in actors.items() if a is RunActor.SYSTEM} == {Ev.HOST_OFFLINE}
    assert {e for e, a in actors.items() if a is RunActor.RUNNER} == set(RunEvent) - owner - {
        Ev.HOST_OFFLINE
    }


# --- Every (status, event) pair, from every reachable position ----------------------------


@pytest.mark.parametrize("event", list(RunEvent), ids=lambda e: e.value)
@pytest.mark.parametrize("status", list(RunStatus), ids=lambda s: s.value)
def test_event_is_allowed_iff_the_table_says_so_with_its_effect(
    status: RunStatus, event: RunEvent
) -> None:
    positions = [p for p in PIPELINE.reachable() if p.state is status]
    assert positions, f"{status} is never reached"
    listed = PIPELINE.move_for(status, event) is not None
    assert listed == (status in API_EVENTS[event][1])
    for position in positions:
        for args in VALID_ARGS.get(event, [{}]):
            expected = oracle(*triple(position), event, args)
            if expected is None:
                with pytest.raises(InvalidMove) as refused:
                    PIPELINE.apply(position, event, args)
                assert refused.value.state == status.value
                assert refused.value.move == event.value
            else:
                assert triple(PIPELINE.apply(position, event, args)) == expected


def test_allowed_events_are_those_that_some_arguments_let_through() -> None:
    for position in PIPELINE.reachable():
        some = {
            e
            for e in RunEvent
            for a in VALID_ARGS.get(e, [{}])
            if oracle(*triple(position), e, a) is not None
        }
        assert set(PIPELINE.possible(position)) == some, position


def test_claim_resumes_at_the_phase_after_each_checkpoint() -> None:
    expected = {
        Cp.none: Ph.planning,
        Cp.plans_complete: Ph.implementing,
        Cp.generation_complete: Ph.testing,
        Cp.verification_complete: Ph.testing,
        Cp.reviews_addressed: Ph.opening_pr,
        Cp.summary_complete: Ph.opening_pr,
    }
    for c, phase in expected.items():
        for parked in (St.backlog, St.waiting_for_agent):
            after = PIPELINE.apply(at(parked, Ph.idle, c), Ev.CLAIM)
            assert triple(after) == (St.in_progress, phase, c)


# --- Arguments ------------------------------------------------------------------------------

WORKING = at(St.in_progress, Ph.testing, Cp.generation_complete)


@pytest.mark.parametrize("checkpoint", [Cp.none, Cp.plans_complete, Cp.generation_complete])
def test_a_checkpoint_that_is_not_later_is_refused(checkpoint: RunCheckpoint) -> None:
    with pytest.raises((InvalidMove, InvalidInput)):
        PIPELINE.apply(WORKING, Ev.CHECKPOINT_REACHED, {"checkpoint": checkpoint})


@pytest.mark.parametrize("checkpoint", [Cp.pr_complete, Cp.notified])
def test_a_checkpoint_beyond_summary_complete_is_invalid_input(checkpoint: RunCheckpoint) -> None:
    with pytest.raises(InvalidInput) as refused:
        PIPELINE.apply(WORKING, Ev.CHECKPOINT_REACHED, {"checkpoint": checkpoint})
    assert refused.value.field == "checkpoint"


def test_a_later_checkpoint_is_refused_with_why() -> None:
    with pytest.raises(InvalidMove, match=r"later than the current one.*generation_complete"):
        PIPELINE.apply(WORKING, Ev.CHECKPOINT_REACHED, {"checkpoint": Cp.plans_complete})


@pytest.mark.parametrize(
    ("event", "position", "args", "field"),
    [
        (Ev.CHECKPOINT_REACHED, WORKING, {}, "checkpoint"),
        (Ev.CHECKPOINT_REACHED, WORKING, {"checkpoint": "testing"}, "checkpoint"),
        (Ev.PLAN_NEEDS_INPUT, at(St.in_progress, Ph.planning, Cp.none), {}, "questions"),
        (
            Ev.PLAN_NEEDS_INPUT,
            at(St.in_progress, Ph.planning, Cp.none),
            {"questions": []},
            "questions",
        ),
        (
            Ev.PLAN_NEEDS_INPUT,
            at(St.in_progress, Ph.planning, Cp.none),
            {"questions": [" "]},
            "questions",
        ),
        (Ev.USER_ANSWERED, at(St.awaiting_user, Ph.idle, Cp.none), {}, "answers"),
        (Ev.USER_ANSWERED, at(St.awaiting_user, Ph.idle, Cp.none), {"answers": "yes"}, "answers"),
        (Ev.PR_OPENED, at(St.in_progress, Ph.opening_pr, Cp.summary_complete), {}, "url"),
        (
            Ev.PR_OPENED,
            at(St.in_progress, Ph.opening_pr, Cp.summary_complete),
            {"url": "pr 7"},
            "url",
        ),
        (
            Ev.PR_OPENED,
            at(St.in_progress, Ph.opening_pr, Cp.summary_complete),
            {"url": "ftp://x/y"},
            "url",
        ),
        (Ev.FAILED, WORKING, {}, "reason"),
        (Ev.FAILED, WORKING, {"reason": ""}, "reason"),
        (Ev.CLAIM, at(St.backlog, Ph.idle, Cp.none), {"reason": "go"}, "reason"),
    ],
)
def test_missing_or_malformed_arguments_are_invalid_input(
    event: RunEvent, position: Position[RunStatus], args: dict[str, Any], field: str
) -> None:
    with pytest.raises(InvalidInput) as refused:
        PIPELINE.apply(position, event, args)
    assert refused.value.field == field


def test_guards_refuse_with_why() -> None:
    with pytest.raises(
        InvalidMove, match="only when the phase is planning; now the phase is testing"
    ):
        PIPELINE.apply(WORKING, Ev.PLAN_NEEDS_INPUT, {"questions": ["?"]})
    with pytest.raises(InvalidMove, match="only when the checkpoint is summary_complete"):
        PIPELINE.apply(WORKING, Ev.PR_OPENED, {"url": "https://example.com/p/1"})
    with pytest.raises(InvalidMove, match="requestRerun is not allowed from status completed"):
        PIPELINE.apply(at(St.completed, Ph.done, Cp.notified), Ev.RERUN_REQUESTED)


# --- Invariants -----------------------------------------------------------------------------


def test_seed_invariants_hold_at_every_reachable_position() -> None:
    for position in PIPELINE.reachable():
        assert holds_seed_invariants(*triple(position)), position
        assert PIPELINE.broken(position) == ()


def test_declared_invariants_are_the_seeds_plus_two() -> None:
    for position in PIPELINE.positions():
        s, p, c = triple(position)
        seed = [i for i in PIPELINE.invariants if i.seed]
        holds = all(i.condition.holds(position.as_dict(), {}) for i in seed)
        assert holds == holds_seed_invariants(s, p, c), position
    assert [i.text for i in PIPELINE.invariants if i.seed] == [
        "`completed` means checkpoint `notified` and phase `done`.",
        "`in_review` means checkpoint `pr_complete`.",
        "Parked statuses rest at phase `idle`.",
    ]


def test_checkpoints_only_move_forward_except_a_rerun() -> None:
    for t in PIPELINE.transitions():
        before = ORDER.index(RunCheckpoint(t.source["checkpoint"]))  # type: ignore[arg-type]
        after = ORDER.index(RunCheckpoint(t.target["checkpoint"]))  # type: ignore[arg-type]
        if t.move.name is Ev.RERUN_REQUESTED:
            assert after == 0
        else:
            assert after >= before, t


def test_several_events_share_a_pair_and_one_event_leaves_several_statuses() -> None:
    merged = PIPELINE.moves_between(St.in_review, St.completed)
    assert [m.name for m in merged] == [Ev.PR_MERGED, Ev.NOTIFIED]
    assert len(PIPELINE.named(Ev.USER_INTERRUPTED)) == 4
    assert PIPELINE.moves_between(St.in_progress, St.in_progress)[0].name is Ev.CHECKPOINT_REACHED


# --- Random event sequences, legal or not ---------------------------------------------------

ARG_NAMES = ["checkpoint", "questions", "answers", "url", "reason", "bogus"]
ANY_VALUE = st.one_of(
    st.none(),
    st.sampled_from(list(RunCheckpoint)),
    st.sampled_from(list(RunPhase)),
    st.text("ab ", max_size=3),
    st.lists(st.text("ab ", max_size=2), max_size=2),
    st.just("https://example.com/acme/app/pull/1"),
    st.integers(),
)


def _args(event: RunEvent) -> st.SearchStrategy[dict[str, Any]]:
    random = st.dictionaries(st.sampled_from(ARG_NAMES), ANY_VALUE, max_size=3)
    return st.one_of(st.sampled_from(VALID_ARGS.get(event, [{}])), random)


# One strategy per event, built once (a flatmap would rebuild and revalidate one per draw).
STEPS = st.lists(st.one_of(*(st.tuples(st.just(e), _args(e)) for e in RunEvent)), max_size=40)


@settings(max_examples=200, deadline=None)
@given(STEPS)
def test_random_event_sequences_keep_every_invariant(
    steps: list[tuple[RunEvent, dict[str, Any]]],
) -> None:
    position = PIPELINE.initial_position
    for event, args in steps:
        try:
            after = PIPELINE.apply(position, event, args)
        except (InvalidMove, InvalidInput):
            continue
        assert (position, event, after) in EDGES
        assert after in REACHABLE
        assert holds_seed_invariants(*triple(after)), after
        assert PIPELINE.broken(after) == ()
        position = after


REACHABLE = set(PIPELINE.reachable())
EDGES = {(t.source, t.move.name, t.target) for t in PIPELINE.transitions()}
