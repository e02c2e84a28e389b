"""GraphQL types for pipeline runs. Thin wrappers over store records; no SQL here."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, cast

import strawberry
from strawberry.scalars import JSON
from strawberry.types import Info

from baton.api.context import Context
from baton.api.enums import RunEventKind
from baton.api.types import (
    EVENT_PAGE_ARGUMENTS,
    MAX_PAGE,
    PageInfo,
    Task,
    check_page_size,
    parse_event_cursor,
)
from baton.engine.cost import list_size
from baton.engine.plans import batched
from baton.protocol.pipeline import PIPELINE, RunCheckpoint, RunEvent, RunPhase, RunStatus
from baton.store.records import RunEventRecord, RunRecord
from baton.store.runs import Lease
from baton.store.tasks import encode_cursor

_STATUS_LABELS = {info.state: info.label or info.state.value for info in PIPELINE.states}
_PHASE_LABELS = {
    info.value: info.label or info.value.value for info in PIPELINE.axis("phase").values
}


# --- batched look-ups: one query per field and level -------------------------------------


async def tasks_of(context: Context, parents: Sequence[Run]) -> list[Task | None]:
    ids = sorted({p.record.task_id for p in parents if p.record.task_id})
    found = {}
    if ids:
        found = {t.id: t for t in await context.service.visible_by_ids(context.principal, ids)}
    return [
        Task(record=found[p.record.task_id]) if p.record.task_id in found else None for p in parents
    ]


async def run_events_of(
    context: Context, parents: Sequence[Run], *, first: int = 50, after: str | None = None
) -> list[RunEventConnection]:
    check_page_size(first)
    after_id = parse_event_cursor(after) if after is not None else None
    pages = await context.runs.events_of_many([p.record.id for p in parents], first, after_id)
    return [
        RunEventConnection.of(*pages[p.record.id], has_previous=after is not None) for p in parents
    ]


async def leases_of(context: Context, parents: Sequence[Run]) -> list[RunLease | None]:
    leases = await context.runs.leases([p.record.id for p in parents])
    out: list[RunLease | None] = []
    for p in parents:
        lease = leases.get(p.record.id)
        out.append(RunLease.of(lease) if lease else None)
    return out


async def allowed_events_of(context: Context, parents: Sequence[Run]) -> list[list[RunEvent]]:
    """Each run's events for the caller; the leases of claimed runs are read in one query (a
    claimed run's runner events are its lease holder's alone)."""
    claimed = [p.record.id for p in parents if p.record.status is RunStatus.in_progress]
    leases = await context.runs.leases(claimed) if claimed else {}
    principal = context.principal
    return [
        context.runs.allowed_events(principal, p.record, leases.get(p.record.id)) for p in parents
    ]


async def runs_of(context: Context, parents: Sequence[Task], *, first: int = 50) -> list[list[Run]]:
    check_page_size(first)
    found = await context.runs.of_tasks(context.principal, [p.record.id for p in parents], first)
    return [[Run(record=r) for r in found[p.record.id]] for p in parents]


@strawberry.type(
    description="A claimed run's lease: which claim holds the run, who made it, until when. "
    "While it is live only its holder makes the runner's events on the run; once it expires "
    "it is lost (`LeaseLostError`), even before the sweeper moves the run."
)
class RunLease:
    id: strawberry.ID = strawberry.field(
        description="Drawn afresh by each claim: the fencing token `runHeartbeat` and the "
        "runner's events take as `leaseId`, which tells apart daemons that share one "
        "principal. Not a secret (whoever may read the run sees it): a daemon names the id "
        "its own claim returned."
    )
    holder: str = strawberry.field(description="The principal that claimed the run.")
    expires_at: datetime = strawberry.field(
        description="Unless extended by `runHeartbeat` before then, the lease is lost at this "
        "moment, and the run moves to `waiting_for_agent` (HOST_OFFLINE, by `system`) soon "
        "after."
    )

    @classmethod
    def of(cls, lease: Lease) -> RunLease:
        return cls(id=strawberry.ID(lease.id), holder=lease.holder, expires_at=lease.expires_at)


@strawberry.type(description="A pipeline run: plan, implement, test, open a pull request.")
class Run:
    record: strawberry.Private[RunRecord]

    def share_key(self) -> tuple[str, str, int]:
        """Identifies this answer among subscription streams (see `baton.engine.sharing`)."""
        return ("Run", self.record.id, self.record.version)

    @strawberry.field
    def id(self) -> strawberry.ID:
        return strawberry.ID(self.record.id)

    @strawberry.field(description="The owner the run belongs to.")
    def owner(self) -> str:
        return self.record.owner

    @strawberry.field
    def project(self) -> str:
        return self.record.project

    @strawberry.field(description="The handoff task this run works on, if any.")
    def task_id(self) -> strawberry.ID | None:
        return strawberry.ID(self.record.task_id) if self.record.task_id else None

    @strawberry.field
    def title(self) -> str:
        return self.record.title

    @strawberry.field
    def status(self) -> RunStatus:
        return self.record.status

    @strawberry.field
    def phase(self) -> RunPhase:
        return self.record.phase

    @strawberry.field(description="The last resume barrier the run passed.")
    def checkpoint(self) -> RunCheckpoint:
        return self.record.checkpoint

    @strawberry.field(description="The seed's friendly label of the status.")
    def status_label(self) -> str:
        return _STATUS_LABELS[self.record.status]

    @strawberry.field(description="The seed's friendly label of the phase.")
    def phase_label(self) -> str:
        return _PHASE_LABELS[self.record.phase]

    @strawberry.field(description="The questions a run awaiting the user asked.")
    def questions(self) -> list[str] | None:
        return self.record.questions

    @strawberry.field(description="The answers given to them (`provideUserInput`).")
    def answers(self) -> list[str] | None:
        return self.record.answers

    @strawberry.field(description="The pull request opened for this run (`openPullRequest`).")
    def pull_request_url(self) -> str | None:
        return self.record.pull_request_url

    @strawberry.field(description="Why the run failed (`failRun`).")
    def failure_reason(self) -> str | None:
        return self.record.failure_reason

    @strawberry.field(description="The principal that created the run.")
    def created_by(self) -> str:
        return self.record.created_by

    @strawberry.field(description="Rises by exactly one with every event.")
    def version(self) -> int:
        return self.record.version

    @strawberry.field
    def created_at(self) -> datetime:
        return self.record.created_at

    @strawberry.field
    def updated_at(self) -> datetime:
        return self.record.updated_at

    @strawberry.field(
        description="The events the caller may make on this run now. On a claimed run (in "
        "progress) the runner's events are listed for the principal holding its live lease "
        "only.",
        metadata=batched(allowed_events_of),
    )
    async def allowed_events(self, info: Info[Context, None]) -> list[RunEvent]:
        return (await allowed_events_of(info.context, [self]))[0]

    @strawberry.field(
        description="The claim's lease while the run is in progress, else null.",
        metadata=batched(leases_of),
    )
    async def lease(self, info: Info[Context, None]) -> RunLease | None:
        return (await leases_of(info.context, [self]))[0]

    @strawberry.field(
        description="The linked handoff task, when there is one the caller can see.",
        metadata=batched(tasks_of),
    )
    async def task(self, info: Info[Context, None]) -> Task | None:
        return (await tasks_of(info.context, [self]))[0]

    @strawberry.field(
        description="This run's events, oldest first.",
        metadata={
            **batched(run_events_of),
            **list_size(MAX_PAGE, "first", 50),
            **EVENT_PAGE_ARGUMENTS,
        },
    )
    async def events(
        self, info: Info[Context, None], first: int = 50, after: str | None = None
    ) -> RunEventConnection:
        return (await run_events_of(info.context, [self], first=first, after=after))[0]


@strawberry.type(name="RunEvent", description="One entry of a run's history.")
class RunEventEntry:
    record: strawberry.Private[RunEventRecord]

    def share_key(self) -> tuple[str, int]:
        """Identifies this answer among subscription streams (see `baton.engine.sharing`)."""
        return ("RunEvent", self.record.id)

    @strawberry.field(
        description="A cursor: a decimal integer, strictly increasing along the run event "
        "log, one order for the whole server (every owner's run events). The log orders "
        "events by the transaction that wrote them, then by their place in it: one run's "
        "events follow its versions, while two runs' events written at the same moment may "
        "stand in another order than they committed. Subscriptions and webhooks read the log "
        "only as far as it is final, so a cursor they gave never skips an event that commits "
        "later. An id is its transaction's number times 1,048,576 plus its place: gaps between "
        "your own events show how many transactions the server ran in between, its overall "
        "activity, never whose, what or on which run. Baton accepts that, as any shared "
        "sequence does; a deployment whose tenants must not learn each other's volume runs one "
        "server (database) per tenant."
    )
    def id(self) -> strawberry.ID:
        return strawberry.ID(str(self.record.id))

    @strawberry.field
    def kind(self) -> RunEventKind:
        return RunEventKind(self.record.kind)

    @strawberry.field
    def run_id(self) -> strawberry.ID:
        return strawberry.ID(self.record.run_id)

    @strawberry.field(description="The event made, or null for `created`.")
    def event(self) -> RunEvent | None:
        return self.record.event

    @strawberry.field
    def from_status(self) -> RunStatus | None:
        return self.record.from_status

    @strawberry.field
    def to_status(self) -> RunStatus:
        return self.record.to_status

    @strawberry.field(
        description="The handle of the principal that made it (`system` for the lease sweeper)."
    )
    def actor(self) -> str:
        return self.record.actor

    @strawberry.field(
        description="The event's arguments by parameter name (questions, answers, url, "
        "reason, checkpoint)."
    )
    def details(self) -> JSON | None:
        return cast(JSON, self.record.details) if self.record.details else None

    @strawberry.field
    def at(self) -> datetime:
        return self.record.at

    @strawberry.field(description="The run's version right after this event.")
    def version(self) -> int:
        return self.record.version

    @strawberry.field(description="The run as it was right after this event.")
    def run(self) -> Run:
        return Run(record=self.record.run)


@strawberry.type
class RunEdge:
    node: Run

    @strawberry.field
    def cursor(self) -> str:
        return encode_cursor(self.node.record)


@strawberry.type
class RunConnection:
    edges: list[RunEdge]
    page_info: PageInfo
    count_total: strawberry.Private[Any]

    @strawberry.field(description="How many runs match the filter, across all pages.")
    async def total_count(self) -> int:
        return int(await self.count_total())


@strawberry.type
class RunEventEdge:
    cursor: str
    node: RunEventEntry


@strawberry.type
class RunEventConnection:
    edges: list[RunEventEdge]
    page_info: PageInfo

    @classmethod
    def of(
        cls, rows: list[RunEventRecord], more: bool, *, has_previous: bool
    ) -> RunEventConnection:
        edges = [RunEventEdge(cursor=str(r.id), node=RunEventEntry(record=r)) for r in rows]
        return cls(
            edges=edges,
            page_info=PageInfo(
                has_next_page=more,
                has_previous_page=has_previous,
                start_cursor=edges[0].cursor if edges else None,
                end_cursor=edges[-1].cursor if edges else None,
            ),
        )
