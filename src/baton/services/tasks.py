"""The handoff service: who may do what, input checks, and the permission gate.

Thin resolvers call this; this calls the store. A move is one guarded statement: the store
checks in SQL what the table and the caller's role require and writes only if all holds. When
nothing was written, the service reads the task and says why, with the same Python rules
(`check_move`, `may_act_as`); if those say the move is allowed after all, another change won a
race in between, and the move is tried again.
"""

from __future__ import annotations

import functools
import hashlib
import json
import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

import orjson

from baton.access.gate import DECISION_MOVES, GateDecision, decide
from baton.access.principals import SYSTEM, Principal, PrincipalKind, owner_of
from baton.errors import (
    DuplicateTask,
    Forbidden,
    InvalidInput,
    InvalidMove,
    NotFound,
    Unavailable,
    VersionConflict,
)
from baton.protocol import task_object
from baton.protocol.handoff import (
    AFTER_VERIFYING,
    CHECKPOINT_STATES,
    HANDOFF,
    REQUIRES_REASON,
    SETS_WAITING_ON,
    Actor,
    MoveName,
    TaskState,
    Verification,
    WaitingOn,
    check_move,
    possible_moves,
)
from baton.protocol.task_object import DeliverableType
from baton.services.gate_rules import GateRules, Ruleset
from baton.services.lifecycle import RACE_RETRIES, Publish, until_applied
from baton.store import tasks as store
from baton.store.db import Connection, Database
from baton.store.eventlog import newest_readable
from baton.store.records import EventRecord, TaskRecord
from baton.store.task_contexts import GivenContext
from baton.store.together import Lanes, Together
from baton.telemetry.spans import span

MAX_REASON = 2000


@dataclass(frozen=True)
class HandOff:
    project: str
    requester: str
    assignee: str
    packet: dict[str, Any]  # the seed's packet object, snake_case, defaults filled in
    verification: Verification = Verification.AUTO
    id: str | None = None


@dataclass(frozen=True)
class Outcome:
    task: TaskRecord
    events: list[EventRecord]


@dataclass(frozen=True)
class MoveArgs:
    waiting_on: WaitingOn | None = None
    result: dict[str, Any] | None = None  # summary, evidence, provenance (the server adds the rest)
    reason: str | None = None


def _digest(h: HandOff) -> str:
    """SHA-256 of the hand-off's canonical JSON as `json.dumps` writes it (sorted keys, no
    spaces, ASCII only), which the stored digests were made with. The packet is checked by
    then and holds only text, so orjson (a tenth of the time) writes the same bytes unless
    some character is outside printable ASCII (or a lone surrogate), which `json` then
    escapes."""
    value = [h.project, h.requester, h.assignee, h.packet, h.verification.value]
    try:
        canonical = orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
        same = canonical.isascii() and b"\x7f" not in canonical
    except orjson.JSONEncodeError:  # a lone surrogate, which only `json` writes
        same = False
    if not same:
        canonical = json.dumps(value, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(canonical).hexdigest()


def _now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _new_id() -> str:
    # Time-ordered and unique: 12 hex digits of milliseconds, then 64 random bits. No `_`, so
    # never the id of a client-supplied one (see task_object.task_id_for).
    return f"t{int(time.time() * 1000):012x}{secrets.token_hex(8)}"


class TaskReader:
    """Read-only queries, each on a short-lived pooled connection."""

    def __init__(self, db: Database) -> None:
        self.db = db
        # Reads of one task that arrive while another of their kind is in flight share a
        # statement (`baton.store.together`).
        self._reads: Lanes[store.ReadKind, TaskRecord] = Lanes(
            db, store.read_one, store.read_many, once_per_subject=False
        )
        self._pages: Lanes[store.PageKind, store.PageRows] = Lanes(
            db, store.page_one, store.page_many, once_per_subject=False
        )

    async def visible_by_ids(
        self, principal: Principal, ids: Sequence[str], reads: store.TaskReads = store.ALL
    ) -> list[TaskRecord]:
        async with self.db.connection() as conn:
            return await store.visible_by_ids(conn, principal, ids, reads)

    async def dependents_of(
        self, principal: Principal, ids: Sequence[str], limit: int
    ) -> list[TaskRecord]:
        async with self.db.connection() as conn:
            return await store.dependents_of(conn, principal, ids, limit)

    async def dependents_per_task(
        self,
        principal: Principal,
        ids: Sequence[str],
        first: int,
        reads: store.TaskReads = store.ALL,
    ) -> dict[str, list[TaskRecord]]:
        async with self.db.connection() as conn:
            return await store.dependents_per_task(conn, principal, ids, first, reads)

    async def stream_start(self, principal: Principal) -> int:
        """Where a `taskEvents` stream may start so that it and whatever the caller reads
        afterwards miss nothing (see `baton.store.eventlog`). Ids are one sequence for every
        owner, so any principal may ask; the id shows the server's activity, as every id does."""
        async with self.db.connection() as conn:
            return await newest_readable(conn, store.TASKS.events)

    async def page(
        self,
        principal: Principal,
        query: store.TaskQuery,
        first: int,
        after: str | None,
        reads: store.TaskReads = store.ALL,
    ) -> tuple[list[TaskRecord], bool]:
        """A page of `query`'s tasks; `reads` says what of each to read (all of it by
        default)."""
        return await store.page_together(self._pages, principal, query, first, after, reads)

    async def count(self, principal: Principal, query: store.TaskQuery) -> int:
        async with self.db.connection() as conn:
            return await store.count(conn, principal, query)

    async def events_of_many(
        self,
        task_ids: Sequence[str],
        first: int,
        after: int | None,
        reads: store.TaskReads | None = store.ALL,
        *,
        peek: bool = True,
    ) -> dict[str, tuple[list[EventRecord], bool]]:
        """Pages of each task's events; `reads` says what to read of the task at each event
        (None: nothing, the records' `task` is not read), `peek` whether to find out if more
        follow each page."""
        async with self.db.connection() as conn:
            return await store.events_of_many(conn, task_ids, first, after, reads, peek=peek)


class TaskService(TaskReader):
    def __init__(self, db: Database, *, on_commit: Publish | None = None) -> None:
        super().__init__(db)
        self.rules = GateRules(db)
        # Changes that arrive while others of their kind are in flight go in one transaction.
        self.together = Together(db, store.lock_visible)
        # Told the newest event id after every commit that appended events (live wake-ups).
        self.on_commit = on_commit

    async def _committed(self, outcome: Outcome) -> Outcome:
        if self.on_commit is not None and outcome.events:
            await self.on_commit(outcome.events[-1].id)
        return outcome

    # --- reading --------------------------------------------------------------------------

    async def get(
        self, principal: Principal, task_id: str, reads: store.TaskReads = store.ALL
    ) -> TaskRecord:
        """Task `task_id` as `principal` sees it; `reads` says what of it to read (all of it
        by default)."""
        task = await self._reads.run((principal, reads), task_id, None)
        if task is None:
            raise NotFound("task", task_id)
        return task

    @staticmethod
    async def _visible(
        conn: Connection, principal: Principal, task_id: str, reads: store.TaskReads = store.ALL
    ) -> TaskRecord:
        # Visibility is checked by the statement: a task the caller may not see costs what a
        # missing one costs, and answers the same (ids like `alice_<id>` can be guessed).
        task = await store.load_visible(conn, principal, task_id, reads)
        if task is None:
            raise NotFound("task", task_id)
        return task

    @staticmethod
    def allowed_moves(principal: Principal, task: TaskRecord) -> list[MoveName]:
        """The moves `principal` may make on `task` now."""
        roles = frozenset(
            actor
            for actor in Actor
            if principal.may_act_as(actor, requester=task.requester, assignee=task.assignee)
        )
        return list(_allowed_moves(task.state, task.waiting_on, roles))

    # --- handing off ----------------------------------------------------------------------

    async def hand_off(
        self, principal: Principal, h: HandOff, *, context: GivenContext | None = None
    ) -> Outcome:
        """Hand off `h`; `context` (the A2A door's) is kept beside a new task by the same
        statement. A repeated hand-off answers the task it made, with no events."""
        task_object.check_project(h.project)
        task_object.check_handle(h.requester, "requester")
        task_object.check_handle(h.assignee, "assignee")
        owner = owner_of(h.requester)
        task_id = _new_id() if h.id is None else task_object.task_id_for(owner, h.id)
        task_object.check("packet", h.packet, "packet")
        task_object.check_visible(h.packet["task"], "packet.task")
        if not principal.acts_for(h.requester):
            raise Forbidden("only the requester agent or its owner may hand off in its name")
        digest = _digest(h)
        new = store.NewTask(
            id=task_id,
            project=h.project,
            requester=h.requester,
            assignee=h.assignee,
            packet=h.packet,
            verification=h.verification.value,
            input_digest=digest,
        )
        # The gate decides by the assignee owner's rules as this server keeps them; the
        # statement that creates the task checks they are still current, so a rule changed
        # before the hand-off always applies (one that changes while the task is being created
        # is one that changed just after it). The gate's move is the server's: actor `system`.
        owner_rules = owner_of(h.assignee)
        fresh = False
        for _ in range(RACE_RETRIES):
            with span("baton.gate") as traced:
                rules = await self.rules.current(owner_rules, fresh=fresh)
                decision = self._gate(rules, h)
                if traced is not None:
                    traced.set_attribute("baton.gate.owner", owner_rules)
                    traced.set_attribute("baton.gate.decision", decision.value)
            gate = gate_move(decision)
            try:
                with span("baton.move") as traced:
                    if traced is not None:
                        traced.set_attribute("baton.move", "HAND_OFF")
                        traced.set_attribute("baton.task.id", task_id)
                    async with self.db.connection() as conn:
                        events = await store.create(
                            conn,
                            new,
                            principal.handle,
                            gate,
                            SYSTEM.handle,
                            (owner_rules, rules.version),
                            context,
                        )
                        if not events:
                            existing = await store.load(conn, task_id)
                            if existing is None or existing.input_digest != digest:
                                raise DuplicateTask(task_id)
                            return Outcome(existing, [])
            except store.RulesChanged:
                fresh = True
                continue
            return await self._committed(Outcome(events[-1].task, events))
        raise Unavailable(f"the gate rules of {owner_rules} kept changing; try again")

    @staticmethod
    def _gate(rules: Ruleset, h: HandOff) -> GateDecision:
        return decide(
            rules.rules,
            requester=h.requester,
            assignee=h.assignee,
            project=h.project,
            deliverable_type=DeliverableType(h.packet["deliverable_type"]),
        )

    # --- moving ---------------------------------------------------------------------------

    async def move(
        self,
        principal: Principal,
        name: MoveName,
        task_id: str,
        *,
        expected_version: int | None = None,
        args: MoveArgs = MoveArgs(),
    ) -> Outcome:
        _check_args(name, args)
        change = change_for(name, args)
        if name is MoveName.SUBMIT_RESULT:
            change = replace(change, result=self._result(principal, args))

        async def apply() -> list[EventRecord]:
            if name is MoveName.SUBMIT_RESULT:
                return await self._submit(principal, task_id, change, expected_version, args.reason)
            event = await store.change_together(
                self.together,
                task_id,
                change,
                principal,
                expected_version=expected_version,
                reason=args.reason,
            )
            return [event] if event is not None else []

        async def explain() -> None:
            await self._why_not(principal, task_id, expected_version, name=name)

        with span("baton.move") as traced:
            if traced is not None:
                traced.set_attribute("baton.move", name.value)
                traced.set_attribute("baton.task.id", task_id)
            events = await until_applied(
                apply, explain, lambda: self._kept_changing(principal, task_id, expected_version)
            )
        return await self._committed(Outcome(events[-1].task, events))

    async def _submit(
        self,
        principal: Principal,
        task_id: str,
        change: store.Change,
        expected_version: int | None,
        reason: str | None,
    ) -> list[EventRecord]:
        """A returned result, and what a passing one leads to in the same transaction."""
        async with self.db.transaction() as conn:
            submitted = await store.change(
                conn, task_id, change, principal, expected_version=expected_version, reason=reason
            )
            if submitted is None:
                return []
            follow = AFTER_VERIFYING[submitted.task.verification]
            if follow is None:
                return [submitted]
            # The result's evidence passed the schema check: verification passes today.
            # Made by the server, not by the submitter: recorded as actor `system`.
            then = change_for(follow, MoveArgs(), by_server=True)
            followed = await store.change(conn, task_id, then, SYSTEM, expected_version=None)
            assert followed is not None, "the row is locked by this transaction"
            return [submitted, followed]

    @staticmethod
    def _result(principal: Principal, args: MoveArgs) -> dict[str, Any]:
        """The result to store; the store adds `returned_by` (the caller's agent, or the
        task's assignee when an owner or admin submits on its behalf)."""
        if args.result is None:
            raise InvalidInput("result", "submitResult needs a result")
        result = {**args.result, "returned_at": _now_iso()}
        # Checked with a stand-in `returned_by` of the right shape: the real one is a handle
        # that was checked when the task was handed off.
        agent = principal.handle if principal.kind is PrincipalKind.AGENT else "owner/agent"
        task_object.check("result", {**result, "returned_by": agent}, "result")
        task_object.check_evidence_urls(result)
        return result

    async def _why_not(
        self,
        principal: Principal,
        task_id: str,
        expected_version: int | None,
        *,
        name: MoveName | None = None,
    ) -> None:
        """Raise the error that explains why a change wrote nothing, or return when it would
        be allowed now (it lost a race)."""
        async with self.db.connection() as conn:
            task = await self._visible(conn, principal, task_id)
        if expected_version is not None and expected_version != task.version:
            raise VersionConflict(expected_version, task.version)
        if name is None:  # a checkpoint
            if task.state not in CHECKPOINT_STATES:
                refusal = InvalidMove(
                    task.state.value,
                    "SAVE_CHECKPOINT",
                    f"saveCheckpoint is not allowed from state {task.state.value}",
                )
                refusal.allowed_moves = tuple(m.value for m in self.allowed_moves(principal, task))
                raise refusal
            if not principal.may_act_as(
                Actor.ASSIGNEE, requester=task.requester, assignee=task.assignee
            ):
                raise Forbidden("only the assignee side may save a checkpoint")
            return
        try:
            move = check_move(task.state, task.waiting_on, name)
        except InvalidMove as refusal:
            refusal.allowed_moves = tuple(m.value for m in self.allowed_moves(principal, task))
            raise
        if not _may(principal, move, task):
            raise Forbidden(f"{principal.handle} may not {move.mutation} on task {task.id}")

    async def _kept_changing(
        self, principal: Principal, task_id: str, expected_version: int | None
    ) -> VersionConflict:
        """Every try lost a race: report the version the caller had (or the one before the
        last change) against the current one."""
        current = await self.get(principal, task_id)
        return VersionConflict(expected_version or current.version - 1, current.version)

    async def save_checkpoint(
        self,
        principal: Principal,
        task_id: str,
        checkpoint: dict[str, Any],
        *,
        expected_version: int | None = None,
    ) -> Outcome:
        task_object.check("checkpoint", checkpoint, "checkpoint")
        change = store.Change(
            kind="checkpoint_saved",
            pairs=SAVE_CHECKPOINT,
            actor=Actor.ASSIGNEE,
            checkpoint=checkpoint,
        )

        async def apply() -> list[EventRecord]:
            event = await store.change_together(
                self.together, task_id, change, principal, expected_version=expected_version
            )
            return [event] if event is not None else []

        async def explain() -> None:
            await self._why_not(principal, task_id, expected_version)

        with span("baton.move") as traced:
            if traced is not None:
                traced.set_attribute("baton.move", "SAVE_CHECKPOINT")
                traced.set_attribute("baton.task.id", task_id)
            events = await until_applied(
                apply, explain, lambda: self._kept_changing(principal, task_id, expected_version)
            )
        return await self._committed(Outcome(events[-1].task, events))


def change_for(name: MoveName, args: MoveArgs, *, by_server: bool = False) -> store.Change:
    """The guarded change a move makes, read off the table (every position it may start from
    and where each goes) and the rules beside it."""
    return _change_for(name, args.waiting_on, by_server)


@functools.cache
def _change_for(name: MoveName, waiting_on: WaitingOn | None, by_server: bool) -> store.Change:
    # Made once per move and steering (a handful in all): building it cost a move some 5 µs.
    steering = {"waiting_on": waiting_on} if waiting_on is not None else {}
    return store.Change(
        kind="moved",
        pairs=HANDOFF.changes(name, steering),
        move=name,
        actor=None if by_server else HANDOFF.named(name)[0].actor,
        # Work that goes back to `working` drops the result it returned.
        clears_result=HANDOFF.named(name)[0].target is TaskState.working,
    )


def gate_move(decision: GateDecision) -> store.GateMove | None:
    """The move the gate's decision makes on a new task, and where the table says it leads
    from the initial position; None when the task stays where it starts."""
    return _GATE_MOVES[decision]


def _derived_gate_move(decision: GateDecision) -> store.GateMove | None:
    name = DECISION_MOVES[decision]
    if name is None:
        return None
    start = HANDOFF.initial_position
    (to,) = (b for a, b in HANDOFF.changes(name, {}) if a == start)
    return store.GateMove(name, to)


# Derived from the table once: walking it took some 10 µs of every hand-off.
_GATE_MOVES = {decision: _derived_gate_move(decision) for decision in GateDecision}


# A checkpoint changes no position: it may be saved at any position in CHECKPOINT_STATES.
SAVE_CHECKPOINT = tuple((p, p) for p in HANDOFF.reachable() if p.state in CHECKPOINT_STATES)


@functools.cache
def _allowed_moves(
    state: TaskState, waiting_on: WaitingOn | None, roles: frozenset[Actor]
) -> tuple[MoveName, ...]:
    """The moves open in a position to whoever fills `roles`: a few hundred positions and
    role sets at most, asked for every task a listing shows (`allowedMoves`)."""
    moves = (HANDOFF.move_for(state, name) for name in possible_moves(state, waiting_on))
    return tuple(move.name for move in moves if move is not None and move.actor in roles)


def _may(principal: Principal, move: Any, task: TaskRecord) -> bool:
    return move is not None and principal.may_act_as(
        move.actor, requester=task.requester, assignee=task.assignee
    )


def _check_args(name: MoveName, args: MoveArgs) -> None:
    if name is MoveName.PAUSE and args.waiting_on not in SETS_WAITING_ON[MoveName.PAUSE]:
        allowed = ", ".join(sorted(w.value for w in SETS_WAITING_ON[MoveName.PAUSE]))
        raise InvalidInput("waitingOn", f"pauseTask waits on one of {allowed}")
    if name in REQUIRES_REASON and not (args.reason or "").strip():
        raise InvalidInput("reason", "this move needs a reason")
    if args.reason is not None and len(args.reason) > MAX_REASON:
        raise InvalidInput("reason", f"must be at most {MAX_REASON} characters")
