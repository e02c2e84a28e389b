"""The pipeline-run service: who may drive a run, input checks, the work queue and its leases.

A run belongs to the owner of the principal that created it; that owner, its agents and admin
may read and drive it (the table's actors narrow some events to the owner alone). Every event is
one guarded statement (`baton.store.runs`); when it writes nothing the service reads the run and
says why with the table's own check, as for tasks (`baton.services.lifecycle`).
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from baton.access.principals import SYSTEM, Principal
from baton.errors import (
    Forbidden,
    InvalidInput,
    InvalidMove,
    InvalidRunMove,
    NotFound,
    NothingToClaim,
    VersionConflict,
)
from baton.protocol import task_object
from baton.protocol.machine import check_args
from baton.protocol.pipeline import PIPELINE, RunActor, RunEvent, RunStatus
from baton.services.lifecycle import Publish, until_applied
from baton.storable import unstorable
from baton.store import runs as store
from baton.store import tasks as task_store
from baton.store.db import Connection, Database
from baton.store.records import RunEventRecord, RunRecord

MAX_TITLE = 500
MAX_TEXT = 2000  # a question, an answer, a reason, a URL
MAX_ITEMS = 20  # questions or answers in one event

# What an event's arguments leave on the run (beside the log, which keeps them all): the
# questions being asked and their answers, the pull request, why it failed. A rerun starts
# clean. Rules the table leaves to the store, kept here beside the events they belong to.
RECORDS: dict[RunEvent, dict[str, str | None]] = {
    RunEvent.PLAN_NEEDS_INPUT: {"questions": "questions", "answers": None},
    RunEvent.USER_ANSWERED: {"answers": "answers"},
    RunEvent.PR_OPENED: {"pull_request_url": "url"},
    RunEvent.FAILED: {"failure_reason": "reason"},
    RunEvent.RERUN_REQUESTED: {
        "questions": None,
        "answers": None,
        "pull_request_url": None,
        "failure_reason": None,
    },
}


@dataclass(frozen=True)
class RunOutcome:
    run: RunRecord
    events: list[RunEventRecord]


def _new_id() -> str:
    # Time-ordered and unique: 12 hex digits of milliseconds, then 64 random bits.
    return f"r{int(time.time() * 1000):012x}{secrets.token_hex(8)}"


def _check_texts(args: dict[str, Any]) -> None:
    for name, value in args.items():
        values = value if isinstance(value, list) else [value]
        if isinstance(value, list) and len(value) > MAX_ITEMS:
            raise InvalidInput(name, f"must have at most {MAX_ITEMS} items")
        for item in values:
            if isinstance(item, str) and len(item) > MAX_TEXT:
                raise InvalidInput(name, f"must be at most {MAX_TEXT} characters")
        reason = unstorable(value, name)
        if reason is not None:
            raise InvalidInput(name, reason)


class RunService:
    def __init__(
        self, db: Database, *, lease_seconds: float = 60.0, on_commit: Publish | None = None
    ) -> None:
        self.db = db
        self.lease_seconds = lease_seconds
        self.on_commit = on_commit

    async def _committed(self, run: RunRecord, events: list[RunEventRecord]) -> RunOutcome:
        if self.on_commit is not None and events:
            await self.on_commit(events[-1].id)
        return RunOutcome(run, events)

    # --- reading --------------------------------------------------------------------------

    async def get(self, principal: Principal, run_id: str) -> RunRecord:
        async with self.db.connection() as conn:
            return await self._visible(conn, principal, run_id)

    @staticmethod
    async def _visible(conn: Connection, principal: Principal, run_id: str) -> RunRecord:
        run = await store.load(conn, run_id)
        if run is None or not principal.may_see_run(run.owner):
            raise NotFound("run", run_id)
        return run

    async def page(
        self, principal: Principal, query: store.RunQuery, first: int, after: str | None
    ) -> tuple[list[RunRecord], bool]:
        async with self.db.connection() as conn:
            return await store.page(conn, principal, query, first, after)

    async def count(self, principal: Principal, query: store.RunQuery) -> int:
        async with self.db.connection() as conn:
            return await store.count(conn, principal, query)

    async def of_tasks(
        self, principal: Principal, task_ids: Sequence[str], first: int
    ) -> dict[str, list[RunRecord]]:
        async with self.db.connection() as conn:
            return await store.of_tasks(conn, principal, task_ids, first)

    async def events_of_many(
        self, run_ids: Sequence[str], first: int, after: int | None
    ) -> dict[str, tuple[list[RunEventRecord], bool]]:
        async with self.db.connection() as conn:
            return await store.events_of_many(conn, run_ids, first, after)

    async def leases(self, run_ids: Sequence[str]) -> dict[str, tuple[str, datetime]]:
        async with self.db.connection() as conn:
            return await store.lease_of(conn, run_ids)

    @staticmethod
    def allowed_events(principal: Principal, run: RunRecord) -> list[RunEvent]:
        """The events `principal` may make on `run` now."""
        position = _position(run)
        return [
            name
            for name in PIPELINE.possible(position)
            if principal.may_drive(PIPELINE.named(name)[0].actor, owner=run.owner)
        ]

    # --- writing --------------------------------------------------------------------------

    async def create(
        self,
        principal: Principal,
        *,
        project: str,
        title: str,
        task_id: str | None = None,
        owner: str | None = None,
    ) -> RunOutcome:
        task_object.check_project(project)
        if not title.strip() or len(title) > MAX_TITLE:
            raise InvalidInput("title", f"must be 1 to {MAX_TITLE} characters, not only spaces")
        if principal.is_admin:
            if owner is None:
                raise InvalidInput("owner", "admin must name the owner whose run this is")
            task_object.check_string(owner, task_object.OWNER_PATTERN, "owner", "an owner")
        elif owner is not None and owner != principal.owner:
            raise Forbidden("a run belongs to the owner of the principal that creates it")
        run_owner = owner if owner is not None else principal.owner
        assert run_owner is not None
        new = store.NewRun(_new_id(), run_owner, project, task_id, title, principal.handle)
        async with self.db.transaction() as conn:
            if task_id is not None:
                task_object.check_task_id(task_id, "taskId")
                task = await task_store.load(conn, task_id)
                if task is None or not principal.sees(
                    requester=task.requester, assignee=task.assignee
                ):
                    raise NotFound("task", task_id)
            created = await store.insert(conn, new, principal.handle)
        return await self._committed(created.run, [created])

    async def event(
        self,
        principal: Principal,
        name: RunEvent,
        run_id: str,
        *,
        expected_version: int | None = None,
        args: dict[str, Any] | None = None,
    ) -> RunOutcome:
        """Make event `name` on run `run_id` (a claim takes a lease: see `claim`)."""
        if name is RunEvent.CLAIM:
            return await self.claim(principal, run_id=run_id, expected_version=expected_version)
        change = _change(name, args or {})

        async def apply() -> list[RunEventRecord]:
            async with self.db.connection() as conn:
                event = await store.change(
                    conn, run_id, change, principal, expected_version=expected_version
                )
            return [event] if event is not None else []

        async def explain() -> None:
            await self._why_not(principal, run_id, name, expected_version, args or {})

        events = await until_applied(apply, explain, lambda: self._kept_changing(principal, run_id))
        return await self._committed(events[-1].run, events)

    async def claim(
        self,
        principal: Principal,
        *,
        run_id: str | None = None,
        project: str | None = None,
        expected_version: int | None = None,
    ) -> RunOutcome:
        """Claim run `run_id`, or the oldest claimable run of the caller's owner (of `project`
        when given), with a lease for the caller; `NotFound` when there is none to claim."""
        change = _change(RunEvent.CLAIM, {})
        if project is not None:
            task_object.check_project(project)
        owner = principal.owner
        if run_id is None and owner is None:
            raise InvalidInput("id", "admin claims a run by its id")

        async def apply() -> list[RunEventRecord]:
            async with self.db.connection() as conn:
                event = await store.claim(
                    conn,
                    change,
                    principal,
                    lease_seconds=self.lease_seconds,
                    run_id=run_id,
                    owner=owner,
                    project=project,
                    expected_version=expected_version,
                )
            return [event] if event is not None else []

        async def explain() -> None:
            if run_id is None:
                assert owner is not None
                raise NothingToClaim(owner, project)
            await self._why_not(principal, run_id, RunEvent.CLAIM, expected_version, {})

        events = await until_applied(
            apply, explain, lambda: self._kept_changing(principal, run_id or "")
        )
        return await self._committed(events[-1].run, events)

    async def heartbeat(self, principal: Principal, run_id: str) -> tuple[RunRecord, datetime]:
        """Extend the caller's lease on a run in progress; the run and the new expiry."""
        async with self.db.connection() as conn:
            expires = await store.heartbeat(conn, run_id, principal, self.lease_seconds)
            run = await self._visible(conn, principal, run_id)
            if expires is not None:
                return run, expires
            if run.status is not RunStatus.in_progress:
                message = f"runHeartbeat needs a run in_progress; this one is {run.status.value}"
                raise self._refusal(principal, run, "HEARTBEAT", message)
            raise Forbidden("only the lease's holder, the run's owner or admin may extend it")

    async def sweep(self, limit: int = 100) -> int:
        """Move every run whose lease ran out to `waiting_for_agent` (HOST_OFFLINE, by
        `system`); safe with several processes sweeping at once. How many it moved."""
        change = _change(RunEvent.HOST_OFFLINE, {})
        moved = 0
        async with self.db.connection() as conn:
            for run_id in await store.expired(conn, limit):
                event = await store.offline(conn, run_id, change, SYSTEM)
                if event is not None:
                    moved += 1
                    await self._committed(event.run, [event])
        return moved

    # --- why nothing was written ------------------------------------------------------------

    async def _why_not(
        self,
        principal: Principal,
        run_id: str,
        name: RunEvent,
        expected_version: int | None,
        args: dict[str, Any],
    ) -> None:
        run = await self.get(principal, run_id)
        if expected_version is not None and expected_version != run.version:
            raise VersionConflict(expected_version, run.version, "run")
        try:
            move = PIPELINE.check(_position(run), name, args or None)
        except InvalidMove as refusal:
            raise self._refusal(principal, run, name.value, refusal.message) from None
        if not principal.may_drive(move.actor, owner=run.owner):
            raise Forbidden(f"{principal.handle} may not {move.mutation} on run {run.id}")

    def _refusal(
        self, principal: Principal, run: RunRecord, event: str, message: str
    ) -> InvalidRunMove:
        refusal = InvalidRunMove(
            run.status.value, run.phase.value, run.checkpoint.value, event, message
        )
        refusal.allowed_moves = tuple(e.value for e in self.allowed_events(principal, run))
        return refusal

    async def _kept_changing(self, principal: Principal, run_id: str) -> VersionConflict:
        current = await self.get(principal, run_id)
        return VersionConflict(current.version - 1, current.version, "run")


def _position(run: RunRecord) -> Any:
    return PIPELINE.position(run.status, phase=run.phase, checkpoint=run.checkpoint)


def _change(name: RunEvent, args: dict[str, Any]) -> store.RunChange:
    """The guarded change an event makes, read off the table, and what it records."""
    rows = PIPELINE.named(name)
    if not rows:
        raise InvalidInput("event", f"no event {name.value}")
    check_args(rows[0], args)
    _check_texts(args)
    actor: RunActor | None = rows[0].actor
    sets = {column: (args[arg] if arg else None) for column, arg in RECORDS.get(name, {}).items()}
    details = {key: (v.value if hasattr(v, "value") else v) for key, v in args.items()} or None
    return store.RunChange(
        event=name, pairs=PIPELINE.changes(name, args), actor=actor, sets=sets, details=details
    )
