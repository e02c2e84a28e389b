"""The pipeline-run service: who may drive a run, input checks, the work queue and its leases.

A run belongs to the owner of the principal that created it; that owner, its agents and admin
may read and drive it (the table's actors narrow some events to the owner alone). Every event is
one guarded statement (`baton.store.runs`); when it writes nothing the service reads the run and
says why with the table's own check, as for tasks (`baton.services.lifecycle`).

A claimed run is driven by the holder of its lease alone (`store.FENCED`): a runner event or a
heartbeat from anyone else, or after the lease ran out, is `LeaseLost`. A claim draws a lease id;
a caller that names it (`lease_id`) is told apart from other claims by the same principal.
"""

from __future__ import annotations

import re
import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import asyncpg

from baton.access.principals import SYSTEM, Principal
from baton.errors import (
    Forbidden,
    InvalidInput,
    InvalidMove,
    InvalidRunMove,
    LeaseLost,
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
from baton.store.eventlog import newest_readable
from baton.store.records import RunEventRecord, RunRecord
from baton.store.runs import FENCED, Lease
from baton.telemetry.spans import span

MAX_TITLE = 500
MAX_TEXT = 2000  # a question, an answer, a reason, a URL
MAX_ITEMS = 20  # questions or answers in one event
# A lease id as `_new_lease_id` draws them; anything else names no lease of this server.
LEASE_ID = re.compile(r"l[0-9a-f]{24}")

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
    lease: Lease | None = None  # the lease a claim took


def _new_id() -> str:
    # Time-ordered and unique: 12 hex digits of milliseconds, then 64 random bits.
    return f"r{int(time.time() * 1000):012x}{secrets.token_hex(8)}"


def _new_lease_id() -> str:
    # 96 random bits: no two claims share one.
    return f"l{secrets.token_hex(12)}"


def check_lease_id(lease_id: str | None) -> None:
    if lease_id is not None and not LEASE_ID.fullmatch(lease_id):
        raise InvalidInput("leaseId", "is not a lease id (claimRun returns one: lease { id })")


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

    async def _committed(
        self, run: RunRecord, events: list[RunEventRecord], lease: Lease | None = None
    ) -> RunOutcome:
        if self.on_commit is not None and events:
            await self.on_commit(events[-1].id)
        return RunOutcome(run, events, lease)

    # --- reading --------------------------------------------------------------------------

    async def stream_start(self, principal: Principal) -> int:
        """Where a `runEvents` stream may start so that it and whatever the caller reads
        afterwards miss nothing (as `TaskReader.stream_start`)."""
        async with self.db.connection() as conn:
            return await newest_readable(conn, store.RUNS.events)

    async def get(self, principal: Principal, run_id: str) -> RunRecord:
        async with self.db.connection() as conn:
            return await self._visible(conn, principal, run_id)

    @staticmethod
    async def _visible(conn: Connection, principal: Principal, run_id: str) -> RunRecord:
        # Visibility is checked by the statement: a run the caller may not see costs what a
        # missing one costs, and answers the same.
        run = await store.load_visible(conn, principal, run_id)
        if run is None:
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

    async def leases(self, run_ids: Sequence[str]) -> dict[str, Lease]:
        async with self.db.connection() as conn:
            return await store.lease_of(conn, run_ids)

    @staticmethod
    def allowed_events(
        principal: Principal, run: RunRecord, lease: Lease | None = None
    ) -> list[RunEvent]:
        """The events `principal` may make on `run` now; `lease`: the run's lease, if it has
        one (a claimed run's runner events are its holder's alone)."""
        position = _position(run)
        return [
            name
            for name in PIPELINE.possible(position)
            if principal.may_drive(PIPELINE.named(name)[0].actor, owner=run.owner)
            and not _fenced_off(principal, run, name, lease, None)
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
        if len(title) > MAX_TITLE:
            raise InvalidInput("title", f"must be at most {MAX_TITLE} characters")
        task_object.check_visible(title, "title")
        reason = unstorable(title, "title")
        if reason is not None:
            raise InvalidInput("title", reason)
        if principal.is_admin:
            if owner is None:
                raise InvalidInput("owner", "admin must name the owner whose run this is")
            task_object.check_owner(owner)  # never `admin` or `system`: reserved handles
        elif owner is not None and owner != principal.owner:
            raise Forbidden("a run belongs to the owner of the principal that creates it")
        run_owner = owner if owner is not None else principal.owner
        assert run_owner is not None
        new = store.NewRun(_new_id(), run_owner, project, task_id, title, principal.handle)
        async with self.db.transaction() as conn:
            if task_id is not None:
                task_object.check_task_id(task_id, "taskId")
                if not await task_store.visible_by_ids(conn, principal, [task_id]):
                    raise NotFound("task", task_id)  # missing or not visible: one statement
            try:
                created = await store.insert(conn, new, principal.handle)
            except asyncpg.ForeignKeyViolationError as exc:
                # Removed (finished long ago: retention) between the look-up and the insert.
                raise NotFound("task", task_id or "") from exc
        return await self._committed(created.run, [created])

    async def event(
        self,
        principal: Principal,
        name: RunEvent,
        run_id: str,
        *,
        expected_version: int | None = None,
        args: dict[str, Any] | None = None,
        lease_id: str | None = None,
    ) -> RunOutcome:
        """Make event `name` on run `run_id` (a claim takes a lease: see `claim`). A runner
        event on a claimed run needs the caller to hold its live lease (`lease_id`, when given:
        that very lease)."""
        if name is RunEvent.CLAIM:
            return await self.claim(principal, run_id=run_id, expected_version=expected_version)
        change = _change(name, args or {})
        if lease_id is not None and name not in FENCED:
            raise InvalidInput("leaseId", f"{change.event.value} is not made on a claimed run")
        check_lease_id(lease_id)

        async def apply() -> list[RunEventRecord]:
            async with self.db.connection() as conn:
                event = await store.change(
                    conn,
                    run_id,
                    change,
                    principal,
                    expected_version=expected_version,
                    lease_id=lease_id,
                )
            return [event] if event is not None else []

        async def explain() -> None:
            await self._why_not(principal, run_id, name, expected_version, args or {}, lease_id)

        with span("baton.move") as traced:
            if traced is not None:
                traced.set_attribute("baton.move", name.value)
                traced.set_attribute("baton.run.id", run_id)
            events = await until_applied(
                apply, explain, lambda: self._kept_changing(principal, run_id)
            )
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
        lease_id = _new_lease_id()

        async def apply() -> list[RunEventRecord]:
            async with self.db.connection() as conn:
                event = await store.claim(
                    conn,
                    change,
                    principal,
                    lease_id=lease_id,
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

        with span("baton.move") as traced:
            if traced is not None:
                traced.set_attribute("baton.move", RunEvent.CLAIM.value)
                if run_id is not None:
                    traced.set_attribute("baton.run.id", run_id)
            events = await until_applied(
                apply, explain, lambda: self._kept_changing(principal, run_id or "")
            )
        run = events[-1].run
        expires = store.lease_expiry(run, self.lease_seconds)
        return await self._committed(run, events, Lease(lease_id, principal.handle, expires))

    async def heartbeat(
        self, principal: Principal, run_id: str, lease_id: str | None = None
    ) -> tuple[RunRecord, Lease]:
        """Extend the live lease on a run in progress (the caller's, or as its owner or admin
        any; lease `lease_id` when given); the run and the lease as extended. An expired lease
        is lost: `LeaseLost`, even before the sweeper moves the run."""
        check_lease_id(lease_id)
        async with self.db.connection() as conn:
            lease = await store.heartbeat(conn, run_id, principal, self.lease_seconds, lease_id)
            run = await self._visible(conn, principal, run_id)
            if lease is not None:
                return run, lease
            if lease_id is None and run.status is not RunStatus.in_progress:
                message = f"runHeartbeat needs a run in_progress; this one is {run.status.value}"
                raise await self._refusal(conn, principal, run, "HEARTBEAT", message)
            raise _lost(run, lease_id)

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
        lease_id: str | None = None,
    ) -> None:
        """Raise the error that explains why an event wrote nothing, or return when it would
        be allowed now (it lost a race)."""
        async with self.db.connection() as conn:
            run = await self._visible(conn, principal, run_id)
            if expected_version is not None and expected_version != run.version:
                raise VersionConflict(expected_version, run.version, "run")
            if lease_id is not None and run.status is not RunStatus.in_progress:
                raise _lost(run, lease_id)  # the named lease ended with the claim
            try:
                move = PIPELINE.check(_position(run), name, args or None)
            except InvalidMove as refusal:
                raise await self._refusal(
                    conn, principal, run, name.value, refusal.message
                ) from None
            if not principal.may_drive(move.actor, owner=run.owner):
                raise Forbidden(f"{principal.handle} may not {move.mutation} on run {run.id}")
            if name in FENCED and run.status is RunStatus.in_progress:
                lease = (await store.lease_of(conn, [run.id])).get(run.id)
                if _fenced_off(principal, run, name, lease, lease_id):
                    raise _lost(run, lease_id)

    async def _refusal(
        self, conn: Connection, principal: Principal, run: RunRecord, event: str, message: str
    ) -> InvalidRunMove:
        refusal = InvalidRunMove(
            run.status.value, run.phase.value, run.checkpoint.value, event, message
        )
        lease = None
        if run.status is RunStatus.in_progress:
            lease = (await store.lease_of(conn, [run.id])).get(run.id)
        allowed = self.allowed_events(principal, run, lease)
        refusal.allowed_moves = tuple(e.value for e in allowed)
        return refusal

    async def _kept_changing(self, principal: Principal, run_id: str) -> VersionConflict:
        current = await self.get(principal, run_id)
        return VersionConflict(current.version - 1, current.version, "run")


def _fenced_off(
    principal: Principal,
    run: RunRecord,
    name: RunEvent,
    lease: Lease | None,
    lease_id: str | None,
) -> bool:
    """Whether the claimed run's lease keeps `principal` from making `name` on it."""
    if name not in FENCED or run.status is not RunStatus.in_progress:
        return False
    if not store.fenced(principal, lease_id):
        return False
    return lease is None or not lease.held_by(principal, lease_id)


def _lost(run: RunRecord, lease_id: str | None) -> LeaseLost:
    named = f"lease {lease_id}" if lease_id is not None else "its live lease"
    return LeaseLost(
        run.id,
        f"the caller does not hold {named} on run {run.id}: the lease ran out or another "
        "claim holds the run now; stop working on it (claimRun to take it up again once it "
        "is back in the queue)",
    )


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
