"""GraphQL types for pipeline runs. Thin wrappers over store records; no SQL here."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING

import strawberry
from strawberry.scalars import JSON
from strawberry.types import Info

from baton.api.fields import reader
from baton.api.lifecycle import Extra, LifecycleSchema, lifecycle_types
from baton.api.pages import EVENT_PAGE_ARGUMENTS, MAX_PAGE, check_page_size, parse_event_cursor
from baton.api.types import Task
from baton.engine.cost import list_size
from baton.engine.plans import batched
from baton.protocol.pipeline import PIPELINE, RunCheckpoint, RunEvent, RunPhase, RunStatus
from baton.services.context import Context
from baton.store.records import RunEventKind, RunEventRecord, RunRecord
from baton.store.runs import RUNS, Lease

if TYPE_CHECKING:
    from baton.api import lifecycle

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
        RUN_TYPES.events_page(*pages[p.record.id], has_previous=after is not None) for p in parents
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

    id = reader("record.id", strawberry.ID)
    owner = reader("record.owner", str, "The owner the run belongs to.")
    project = reader("record.project", str)

    @strawberry.field(description="The handoff task this run works on, if any.")
    def task_id(self) -> strawberry.ID | None:
        return strawberry.ID(self.record.task_id) if self.record.task_id else None

    title = reader("record.title", str)
    status = reader("record.status", RunStatus)
    phase = reader("record.phase", RunPhase)
    checkpoint = reader(
        "record.checkpoint",
        RunCheckpoint,
        "The last resume barrier the run passed.",
    )

    @strawberry.field(description="The seed's friendly label of the status.")
    def status_label(self) -> str:
        return _STATUS_LABELS[self.record.status]

    @strawberry.field(description="The seed's friendly label of the phase.")
    def phase_label(self) -> str:
        return _PHASE_LABELS[self.record.phase]

    questions = reader(
        "record.questions",
        list[str] | None,
        "The questions a run awaiting the user asked.",
    )

    answers = reader(
        "record.answers",
        list[str] | None,
        "The answers given to them (`provideUserInput`).",
    )

    pull_request_url = reader(
        "record.pull_request_url",
        str | None,
        "The pull request opened for this run (`openPullRequest`).",
    )

    failure_reason = reader(
        "record.failure_reason",
        str | None,
        "Why the run failed (`failRun`).",
    )

    created_by = reader("record.created_by", str, "The principal that created the run.")
    version = reader("record.version", int, "Rises by exactly one with every event.")
    created_at = reader("record.created_at", datetime)
    updated_at = reader("record.updated_at", datetime)

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
        description="This run's events, oldest first: all of them, whatever `after` is "
        "(retention removes a run's events only with the run).",
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


RUN_SCHEMA = LifecycleSchema(
    layout=RUNS,
    node="Run",
    noun="run",
    nouns="runs",
    event="RunEvent",
    kind=RunEventKind,
    name="The event made, or null for `created`.",
    actor="The handle of the principal that made it (`system` for the lease sweeper).",
    extras=(
        Extra(
            JSON | None,
            "The event's arguments by parameter name (questions, answers, url, reason, "
            "checkpoint).",
        ),
    ),
)
RUN_TYPES = lifecycle_types(RUN_SCHEMA, Run)

if TYPE_CHECKING:
    RunEdge = lifecycle.Edge[Run]
    RunConnection = lifecycle.Connection[Run]
    RunEventEntry = lifecycle.Entry[RunEventRecord]
    RunEventConnection = lifecycle.EventConnection[RunEventRecord]
else:
    RunEdge = RUN_TYPES.edge
    RunConnection = RUN_TYPES.connection
    RunEventEntry = RUN_TYPES.event
    RunEventConnection = RUN_TYPES.event_connection
