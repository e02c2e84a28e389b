"""The handoff service: who may do what, input checks, and the permission gate.

Thin resolvers call this; this calls the store. Every operation is one transaction.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from baton.access.gate import DECISION_MOVES, GateDecision, decide
from baton.access.principals import Principal, PrincipalKind
from baton.errors import (
    DuplicateTask,
    Forbidden,
    InvalidInput,
    InvalidMove,
    NotFound,
    VersionConflict,
)
from baton.gate_rules import GateRules, rules_of
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
from baton.store import tasks as store
from baton.store.records import EventRecord, TaskRecord

MAX_REASON = 2000
# How often a move is retried when another change to the task commits between read and write.
RACE_RETRIES = 3


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
    canonical = json.dumps(
        [h.project, h.requester, h.assignee, h.packet, h.verification.value],
        sort_keys=True,
        separators=(",", ":"),
    )
    return hashlib.sha256(canonical.encode()).hexdigest()


def _now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _new_id() -> str:
    # Time-ordered and unique: 12 hex digits of milliseconds, then 64 random bits.
    return f"t{int(time.time() * 1000):012x}{secrets.token_hex(8)}"


class TaskReader:
    """Read-only queries, each on its own short connection."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine

    async def visible_by_ids(self, principal: Principal, ids: Sequence[str]) -> list[TaskRecord]:
        async with self.engine.connect() as conn:
            return await store.visible_by_ids(conn, principal, ids)

    async def dependents_of(self, principal: Principal, ids: Sequence[str]) -> list[TaskRecord]:
        async with self.engine.connect() as conn:
            return await store.dependents_of(conn, principal, ids)

    async def page(
        self, principal: Principal, query: store.TaskQuery, first: int, after: str | None
    ) -> tuple[list[TaskRecord], bool]:
        async with self.engine.connect() as conn:
            return await store.page(conn, principal, query, first, after)

    async def count(self, principal: Principal, query: store.TaskQuery) -> int:
        async with self.engine.connect() as conn:
            return await store.count(conn, principal, query)

    async def events_of_many(
        self, task_ids: Sequence[str], first: int, after: int | None
    ) -> dict[str, tuple[list[EventRecord], bool]]:
        async with self.engine.connect() as conn:
            return await store.events_of_many(conn, task_ids, first, after)


Publish = Callable[[int], Awaitable[None]]


class TaskService(TaskReader):
    def __init__(self, engine: AsyncEngine, *, on_commit: Publish | None = None) -> None:
        super().__init__(engine)
        self.rules = GateRules(engine)
        # Told the newest event id after every commit that appended events (live wake-ups).
        self.on_commit = on_commit

    async def _committed(self, outcome: Outcome) -> Outcome:
        if self.on_commit is not None and outcome.events:
            await self.on_commit(outcome.events[-1].id)
        return outcome

    # --- reading --------------------------------------------------------------------------

    async def get(self, principal: Principal, task_id: str) -> TaskRecord:
        async with self.engine.connect() as conn:
            return await self._visible(conn, principal, task_id)

    async def _visible(
        self, conn: AsyncConnection, principal: Principal, task_id: str
    ) -> TaskRecord:
        task = await store.load(conn, task_id)
        if task is None or not principal.sees(requester=task.requester, assignee=task.assignee):
            raise NotFound("task", task_id)
        return task

    @staticmethod
    def allowed_moves(principal: Principal, task: TaskRecord) -> list[MoveName]:
        """The moves `principal` may make on `task` now."""
        return [
            name
            for name in possible_moves(task.state, task.waiting_on)
            if _may(principal, HANDOFF.move_for(task.state, name), task)
        ]

    # --- handing off ----------------------------------------------------------------------

    async def hand_off(self, principal: Principal, h: HandOff) -> Outcome:
        if h.id is not None:
            task_object.check_task_id(h.id)
        task_object.check_project(h.project)
        task_object.check_handle(h.requester, "requester")
        task_object.check_handle(h.assignee, "assignee")
        task_object.check("packet", h.packet, "packet")
        if not principal.acts_for(h.requester):
            raise Forbidden("only the requester agent or its owner may hand off in its name")
        task_id = h.id or _new_id()
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
        async with self.engine.begin() as conn:
            created = await store.insert(conn, new, principal.handle)
            if created is None:
                existing = await store.load(conn, task_id)
                if existing is None or existing.input_digest != digest:
                    raise DuplicateTask(task_id)
                return Outcome(existing, [])
            outcome = await self._gate_move(conn, principal, h, created)
        return await self._committed(outcome)

    async def _gate_move(
        self, conn: AsyncConnection, principal: Principal, h: HandOff, created: EventRecord
    ) -> Outcome:
        """The gate decides in the hand-off's own transaction."""
        events = [created]
        name = DECISION_MOVES[await self._gate(conn, h)]
        if name is not None:
            moved = await self._apply(conn, principal, name, created.task, MoveArgs())
            assert moved, "a task inserted in this transaction cannot race"
            events += moved
        return Outcome(events[-1].task, events)

    async def _gate(self, conn: AsyncConnection, h: HandOff) -> GateDecision:
        owner = h.assignee.split("/", 1)[0]
        rules = await rules_of(conn, owner)
        return decide(
            rules,
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
        for _ in range(RACE_RETRIES):
            async with self.engine.begin() as conn:
                task = await self._checked(conn, principal, name, task_id, expected_version)
                events = await self._apply(conn, principal, name, task, args)
            if events:
                return await self._committed(Outcome(events[-1].task, events))
        raise await self._kept_changing(principal, task)

    async def _kept_changing(self, principal: Principal, seen: TaskRecord) -> VersionConflict:
        """Every retry lost a race: report the version last read against the current one."""
        current = await self.get(principal, seen.id)
        return VersionConflict(seen.version, current.version)

    async def _checked(
        self,
        conn: AsyncConnection,
        principal: Principal,
        name: MoveName,
        task_id: str,
        expected_version: int | None,
    ) -> TaskRecord:
        task = await self._visible(conn, principal, task_id)
        if expected_version is not None and expected_version != task.version:
            raise VersionConflict(expected_version, task.version)
        try:
            move = check_move(task.state, task.waiting_on, name)
        except InvalidMove as refusal:
            refusal.allowed_moves = tuple(m.value for m in self.allowed_moves(principal, task))
            raise
        if not _may(principal, move, task):
            raise Forbidden(f"{principal.handle} may not {move.mutation} on task {task.id}")
        return task

    async def _apply(
        self,
        conn: AsyncConnection,
        principal: Principal,
        name: MoveName,
        task: TaskRecord,
        args: MoveArgs,
    ) -> list[EventRecord]:
        """Apply the move and what follows from it; [] when the task changed under us."""
        actor = principal.handle
        target = check_move(task.state, task.waiting_on, name).target
        result = None
        if name is MoveName.SUBMIT_RESULT:
            result = self._returned_result(principal, task, args)
        first = await store.move(
            conn,
            task,
            name,
            target,
            actor=actor,
            waiting_on=_waiting_on(name, args),
            result=result,
            clear_result=target is TaskState.working and task.state is not TaskState.waiting,
            reason=args.reason,
        )
        if first is None:
            return []
        events = [first]
        follow = AFTER_VERIFYING[task.verification] if name is MoveName.SUBMIT_RESULT else None
        if follow is not None:
            # The result's evidence passed the schema check above: verification passes today.
            moved = first.task
            then = check_move(moved.state, None, follow).target
            second = await store.move(conn, moved, follow, then, actor=actor)
            assert second is not None, "the row is locked by this transaction"
            events.append(second)
        return events

    @staticmethod
    def _returned_result(principal: Principal, task: TaskRecord, args: MoveArgs) -> dict[str, Any]:
        if args.result is None:
            raise InvalidInput("result", "submitResult needs a result")
        # The caller's agent; an owner or admin submitting on its behalf returns as the assignee.
        agent = principal.kind is PrincipalKind.AGENT
        returned_by = principal.handle if agent else task.assignee
        result = {**args.result, "returned_by": returned_by, "returned_at": _now_iso()}
        task_object.check("result", result, "result")
        return result

    async def save_checkpoint(
        self,
        principal: Principal,
        task_id: str,
        checkpoint: dict[str, Any],
        *,
        expected_version: int | None = None,
    ) -> Outcome:
        task_object.check("checkpoint", checkpoint, "checkpoint")
        for _ in range(RACE_RETRIES):
            async with self.engine.begin() as conn:
                task = await self._visible(conn, principal, task_id)
                if expected_version is not None and expected_version != task.version:
                    raise VersionConflict(expected_version, task.version)
                if task.state not in CHECKPOINT_STATES:
                    refusal = InvalidMove(
                        task.state.value,
                        "SAVE_CHECKPOINT",
                        f"saveCheckpoint is not allowed from state {task.state.value}",
                    )
                    refusal.allowed_moves = tuple(
                        m.value for m in self.allowed_moves(principal, task)
                    )
                    raise refusal
                if not principal.may_act_as(
                    Actor.ASSIGNEE, requester=task.requester, assignee=task.assignee
                ):
                    raise Forbidden("only the assignee side may save a checkpoint")
                event = await store.save_checkpoint(conn, task, checkpoint, actor=principal.handle)
            if event is not None:
                return await self._committed(Outcome(event.task, [event]))
        raise await self._kept_changing(principal, task)


def _may(principal: Principal, move: Any, task: TaskRecord) -> bool:
    return move is not None and principal.may_act_as(
        move.actor, requester=task.requester, assignee=task.assignee
    )


def _waiting_on(name: MoveName, args: MoveArgs) -> WaitingOn | None:
    """What a move into `waiting` waits on: fixed by the table, or chosen by the caller."""
    reasons = SETS_WAITING_ON.get(name, frozenset())
    if len(reasons) == 1:
        return next(iter(reasons))
    return args.waiting_on if reasons else None


def _check_args(name: MoveName, args: MoveArgs) -> None:
    if name is MoveName.PAUSE and args.waiting_on not in SETS_WAITING_ON[MoveName.PAUSE]:
        allowed = ", ".join(sorted(w.value for w in SETS_WAITING_ON[MoveName.PAUSE]))
        raise InvalidInput("waitingOn", f"pauseTask waits on one of {allowed}")
    if name in REQUIRES_REASON and not (args.reason or "").strip():
        raise InvalidInput("reason", "this move needs a reason")
    if args.reason is not None and len(args.reason) > MAX_REASON:
        raise InvalidInput("reason", f"must be at most {MAX_REASON} characters")
