"""GraphQL object types. Thin wrappers over store records; no SQL here."""

from __future__ import annotations

import operator
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any, cast

import strawberry
from strawberry.scalars import JSON
from strawberry.types import Info

from baton.access.gate import GateDecision, GateRule
from baton.access.principals import Principal, PrincipalKind
from baton.api.fields import reader
from baton.api.lifecycle import Extra, LifecycleSchema, lifecycle_types, node_type
from baton.api.pages import EVENT_PAGE_ARGUMENTS, MAX_PAGE, check_page_size, parse_event_cursor
from baton.api.wrap import wrapped
from baton.engine.cost import checked, list_size, parses
from baton.engine.plans import batched, reads
from baton.engine.selection import Selection
from baton.errors import InvalidInput
from baton.live.filters import MAX_FILTER_VALUES
from baton.protocol.handoff import MoveName, TaskState, Verification, WaitingOn
from baton.protocol.task_object import DeliverableType, EvidenceKind, Provenance
from baton.services.context import Context
from baton.store.records import EventRecord, TaskEventKind, TaskRecord
from baton.store.tasks import ALL, TASKS, TaskReads, decode_cursor, storable_time

if TYPE_CHECKING:
    from baton.api import lifecycle
    from baton.api.runs import Run
MAX_DEPENDENCIES = 20  # the seed's bound on `packet.depends_on`
MAX_EVIDENCE = 20  # the seed's bound on `result.evidence`


def filter_problem(value: Any) -> str | None:
    """What is wrong with a filter argument (its coerced value, GraphQL names), checked before
    the operation runs: a list with too many values, a time off the calendar."""
    for name, item in (value or {}).items():
        if isinstance(item, list) and len(item) > MAX_FILTER_VALUES:
            return f"`{name}` holds more than {MAX_FILTER_VALUES} values"
        if isinstance(item, datetime):
            try:
                storable_time(item, name)
            except InvalidInput:
                return f"`{name}` is outside the supported date range"
    return None


# Arguments checked before the operation runs (see `baton.engine.cost.checked`).
LISTING_ARGUMENTS = checked(after=parses(decode_cursor), filter=filter_problem)


_DELIVERABLE_TYPES = {member.value: member for member in DeliverableType}


_new = object.__new__


def _deliverable_type(packet: dict[str, Any]) -> DeliverableType:
    kind = packet["deliverable_type"]
    # A dict look-up: the enum's own call costs a microsecond per task of a page.
    return _DELIVERABLE_TYPES.get(kind) or DeliverableType(kind)


@strawberry.type(description="The task request itself (the seed's `packet`).")
class Packet:
    # The stored packet itself: each field reads its own key when asked for, where building
    # all six (and the enum) for every task of a page cost more than the one asked for.
    # Baton's engine reads the fields off the stored dict itself (each field's `reads`, and
    # `Task.packet`'s), with no object around it per task; these resolvers, for graphql-core,
    # read the same keys through `data`.
    data: strawberry.Private[dict[str, Any]]

    @classmethod
    def of(cls, p: dict[str, Any]) -> Packet:
        made = _new(cls)  # without the dataclass's `__init__`
        made.data = p
        return made

    @strawberry.field(metadata=reads(operator.itemgetter("task")))
    def task(self) -> str:
        return cast(str, self.data["task"])

    @strawberry.field(metadata=reads(_deliverable_type))
    def deliverable_type(self) -> DeliverableType:
        return _deliverable_type(self.data)

    @strawberry.field(metadata=reads(operator.itemgetter("acceptance_criteria")))
    def acceptance_criteria(self) -> list[str]:
        return cast(list[str], self.data["acceptance_criteria"])

    @strawberry.field(metadata=reads(operator.itemgetter("context")))
    def context(self) -> str:
        return cast(str, self.data["context"])

    @strawberry.field(metadata=reads(operator.itemgetter("files")))
    def files(self) -> list[str]:
        return cast(list[str], self.data["files"])

    @strawberry.field(metadata=reads(operator.itemgetter("depends_on")))
    def depends_on(self) -> list[str]:
        return cast(list[str], self.data["depends_on"])


@strawberry.type
class Evidence:
    kind: EvidenceKind
    summary: str
    url: str | None
    content: str | None


@strawberry.type(description="What the assignee returned, with its evidence.")
class Result:
    summary: str
    evidence: list[Evidence] = strawberry.field(metadata=list_size(MAX_EVIDENCE))
    provenance: Provenance
    returned_by: str = strawberry.field(description="The agent that returned it (set by Baton).")
    returned_at: datetime = strawberry.field(description="When it was returned (set by Baton).")

    @classmethod
    def of(cls, r: dict[str, Any]) -> Result:
        return cls(
            summary=r["summary"],
            evidence=[
                Evidence(
                    kind=EvidenceKind(e["kind"]),
                    summary=e["summary"],
                    url=e.get("url"),
                    content=e.get("content"),
                )
                for e in r["evidence"]
            ],
            provenance=Provenance(r["provenance"]),
            returned_by=r["returned_by"],
            returned_at=datetime.fromisoformat(r["returned_at"]),
        )


@strawberry.type(description="Where the assignee got to, saved so work can resume.")
class Checkpoint:
    progress: str
    decisions: list[str]
    files_touched: list[str]
    next_steps: list[str]
    open_questions: list[str]


def protocol_object(t: TaskRecord) -> dict[str, Any]:
    """The task as the seed's task object (snake_case keys), valid against task.schema.json."""
    return {
        "id": t.id,
        "project": t.project,
        "state": t.state.value,
        "waiting_on": t.waiting_on.value if t.waiting_on else None,
        "requester": t.requester,
        "assignee": t.assignee,
        "packet": t.packet,
        "result": t.result,
        "latest_checkpoint": t.latest_checkpoint,
        "created_at": t.created_at.isoformat(),
        "updated_at": t.updated_at.isoformat(),
    }


# --- batched look-ups: one query per field and level, whatever the number of parents ---------


# Task fields answered from a record's scalar columns (`dependencies` from the row's
# `depends_on` column; the others by the task's id), and which: a read whose selected fields
# are all among these leaves the JSON columns out and reads only those scalars (see
# `baton.engine.selection`). Any other field, a new one too, reads everything.
SCALAR_FIELDS: dict[str, tuple[str, ...]] = {
    "__typename": (),
    "id": ("id",),
    "project": ("project",),
    "state": ("state",),
    "waitingOn": ("waiting_on",),
    "requester": ("requester",),
    "assignee": ("assignee",),
    "createdAt": ("created_at",),
    "updatedAt": ("updated_at",),
    "version": ("version",),
    "verification": ("verification",),
    "allowedMoves": ("state", "waiting_on", "requester", "assignee"),
    "dependencies": (),
    "dependents": (),
    "events": (),
    "runs": (),
}


# Packet fields by the stored packet's key each reads (`__typename` reads none).
PACKET_KEYS: dict[str, str | None] = {
    "__typename": None,
    "task": "task",
    "deliverableType": "deliverable_type",
    "acceptanceCriteria": "acceptance_criteria",
    "context": "context",
    "files": "files",
    "dependsOn": "depends_on",
}


def task_reads(selection: Selection | None, *path: str) -> TaskReads:
    """What to read of tasks whose fields `selection` selects at `path` (no selection: not
    known, all): only the scalars they answer, and of the JSON only the packet's keys when
    nothing else is asked."""
    if selection is None:
        return ALL
    names = selection.names(*path)
    depends_on = "dependencies" in names
    others = names - SCALAR_FIELDS.keys()
    scalars = frozenset(column for name in names - others for column in SCALAR_FIELDS[name])
    if not others:
        return TaskReads(json=False, depends_on=depends_on, scalars=scalars)
    packet = selection.names(*path, "packet")
    if others == {"packet"} and packet <= PACKET_KEYS.keys():
        keys = frozenset(key for name in packet if (key := PACKET_KEYS[name]) is not None)
        return TaskReads(json=False, depends_on=depends_on, scalars=scalars, packet_keys=keys)
    return TaskReads(json=True, depends_on=depends_on)


async def dependencies_of(
    context: Context, parents: Sequence[Task], selection: Selection | None = None
) -> list[list[Task]]:
    refs = sorted({r for p in parents for r in p.record.depends_on})
    found = {}
    if refs:
        reads = task_reads(selection)
        visible = await context.service.visible_by_ids(context.principal, refs, reads)
        found = {t.id: t for t in visible}
    return [
        wrapped(Task, [found[r] for r in dict.fromkeys(p.record.depends_on) if r in found])
        for p in parents
    ]


async def dependents_of(
    context: Context,
    parents: Sequence[Task],
    *,
    first: int = 50,
    selection: Selection | None = None,
) -> list[list[Task]]:
    check_page_size(first)
    ids = [p.record.id for p in parents]
    reads = task_reads(selection)
    found = await context.service.dependents_per_task(context.principal, ids, first, reads)
    return [wrapped(Task, found[p.record.id]) for p in parents]


async def events_of(
    context: Context,
    parents: Sequence[Task],
    *,
    first: int = 50,
    after: str | None = None,
    selection: Selection | None = None,
) -> list[TaskEventConnection]:
    check_page_size(first)
    after_id = parse_event_cursor(after) if after is not None else None
    ids = [p.record.id for p in parents]
    # Whether more follow a page is read only for its page info.
    peek = selection is None or "pageInfo" in selection.names()
    reads = event_reads(selection)
    pages = await context.service.events_of_many(ids, first, after_id, reads, peek=peek)
    return [
        TASK_TYPES.events_page(*pages[p.record.id], has_previous=after is not None) for p in parents
    ]


def event_reads(selection: Selection | None) -> TaskReads | None:
    """What to read of the task at each event of an event connection selecting `selection`:
    nothing unless its `task` is asked (the event's own fields come with the event)."""
    if selection is None:
        return ALL
    if "task" not in selection.names("edges", "node"):
        return None
    return task_reads(selection, "edges", "node", "task")


@strawberry.type(description="A task handed from one agent to another.")
class Task:
    record: strawberry.Private[TaskRecord]

    def share_key(self) -> tuple[str, str, int]:
        """Identifies this answer among subscription streams (see `baton.engine.sharing`)."""
        return ("Task", self.record.id, self.record.version)

    id = reader(
        "record.id",
        strawberry.ID,
        "Unique across the server and what `task(id:)` takes. A task handed off without an id "
        "gets one the server makes (`t` and 28 hex digits); one handed off with a client id `x` "
        "by an agent of owner `alice` is `alice_x` (see `HandOffInput.id`).",
    )
    project = reader("record.project", str)
    state = reader("record.state", TaskState)
    waiting_on = reader(
        "record.waiting_on", WaitingOn | None, "Set exactly while the state is `waiting`."
    )
    requester = reader("record.requester", str)
    assignee = reader("record.assignee", str)

    # The engine's parent for the packet's fields is the stored dict (see `Packet`).
    @strawberry.field(metadata=reads(operator.attrgetter("record.packet")))
    def packet(self) -> Packet:
        return Packet.of(self.record.packet)

    @strawberry.field
    def result(self) -> Result | None:
        return Result.of(self.record.result) if self.record.result else None

    @strawberry.field
    def latest_checkpoint(self) -> Checkpoint | None:
        cp = self.record.latest_checkpoint
        return Checkpoint(**cp) if cp else None

    created_at = reader("record.created_at", datetime)
    updated_at = reader("record.updated_at", datetime)
    version = reader("record.version", int, "Rises by exactly one with every event.")
    verification = reader("record.verification", Verification)

    @strawberry.field(description="The moves the caller may make on this task now.")
    def allowed_moves(self, info: Info[Context, None]) -> list[MoveName]:
        return info.context.service.allowed_moves(info.context.principal, self.record)

    @strawberry.field(
        description="Tasks this one depends on: `packet.dependsOn` entries that are ids of "
        "tasks the caller can see, in `dependsOn` order (at most 20: `dependsOn`'s bound).",
        metadata={**batched(dependencies_of), **list_size(MAX_DEPENDENCIES)},
    )
    async def dependencies(self, info: Info[Context, None]) -> list[Task]:
        return (await dependencies_of(info.context, [self]))[0]

    @strawberry.field(
        description="Visible tasks whose `packet.dependsOn` names this task, by id: the first "
        f"`first` of them (at most {MAX_PAGE}).",
        metadata={**batched(dependents_of), **list_size(MAX_PAGE, "first", 50)},
    )
    async def dependents(self, info: Info[Context, None], first: int = 50) -> list[Task]:
        return (await dependents_of(info.context, [self], first=first))[0]

    @strawberry.field(
        description="This task's events, oldest first: all of them, whatever `after` is "
        "(retention removes a task's events only with the task).",
        metadata={
            **batched(events_of),
            **list_size(MAX_PAGE, "first", 50),
            **EVENT_PAGE_ARGUMENTS,
        },
    )
    async def events(
        self, info: Info[Context, None], first: int = 50, after: str | None = None
    ) -> TaskEventConnection:
        return (await events_of(info.context, [self], first=first, after=after))[0]

    @strawberry.field(
        description="Pipeline runs linked to this task that the caller can see, oldest first: "
        f"the first `first` of them (at most {MAX_PAGE}).",
        metadata={
            **batched(lambda context, parents, **page: _runs_of(context, parents, **page)),
            **list_size(MAX_PAGE, "first", 50),
        },
    )
    async def runs(
        self, info: Info[Context, None], first: int = 50
    ) -> list[Annotated[Run, strawberry.lazy("baton.api.runs")]]:
        return (await _runs_of(info.context, [self], first=first))[0]

    @strawberry.field(
        description="The task as the seed's task object (snake_case keys), valid against "
        "task.schema.json."
    )
    def protocol_object(self) -> JSON:
        return cast(JSON, protocol_object(self.record))


async def _runs_of(context: Context, parents: Sequence[Task], first: int = 50) -> list[list[Run]]:
    check_page_size(first)
    found = await context.runs.of_tasks(context.principal, [p.record.id for p in parents], first)
    run = node_type("Run")  # declared by `baton.api.runs`, which refers to tasks in turn
    return [wrapped(run, found[p.record.id]) for p in parents]


TASK_SCHEMA = LifecycleSchema(
    layout=TASKS,
    node="Task",
    noun="task",
    nouns="tasks",
    event="TaskEvent",
    kind=TaskEventKind,
    name="The move made, or null for `created` and `checkpoint_saved`.",
    actor="Who made the change: a principal's handle (`owner/agent`, `owner`, `admin`), or "
    "`system` for the moves the server makes itself: the gate's decision when a task is handed "
    "off (ROUTE, HOLD, REJECT by the owner's rules) and what a passing result leads to "
    "(COMPLETE in AUTO mode, REQUEST_SIGN_OFF in SIGN_OFF). `admin` and `system` are reserved: "
    "no owner has either name.",
    extras=(Extra(str | None, "The reason given with the move, if any."),),
    to_required=False,
)
TASK_TYPES = lifecycle_types(TASK_SCHEMA, Task)

if TYPE_CHECKING:
    TaskEdge = lifecycle.Edge[Task]
    TaskConnection = lifecycle.Connection[Task]
    TaskEvent = lifecycle.Entry[EventRecord]
    TaskEventConnection = lifecycle.EventConnection[EventRecord]
else:
    TaskEdge = TASK_TYPES.edge
    TaskConnection = TASK_TYPES.connection
    TaskEvent = TASK_TYPES.event
    TaskEventConnection = TASK_TYPES.event_connection


@strawberry.type(name="Principal", description="Who the caller's token acts as.")
class PrincipalInfo:
    kind: PrincipalKind
    handle: str = strawberry.field(description="`owner/agent`, `owner`, or `admin`.")
    owner: str | None

    @classmethod
    def of(cls, p: Principal) -> PrincipalInfo:
        return cls(kind=p.kind, handle=p.handle, owner=p.owner)


@strawberry.type(name="GateRule", description="One rule of an owner's permission gate.")
class GateRuleType:
    id: strawberry.ID
    owner: str
    requester: str = strawberry.field(description="Glob over `owner/agent`, e.g. `bob/*`.")
    project: str = strawberry.field(description="Glob over the project, e.g. `web-*`.")
    deliverable_types: list[DeliverableType] = strawberry.field(description="Empty means any.")
    decision: GateDecision
    priority: int = strawberry.field(
        description="Higher first; the first matching rule decides (oldest first on a tie)."
    )

    @classmethod
    def of(cls, r: GateRule) -> GateRuleType:
        return cls(
            id=strawberry.ID(str(r.id)),
            owner=r.owner,
            requester=r.requester,
            project=r.project,
            deliverable_types=list(r.deliverable_types),
            decision=r.decision,
            priority=r.priority,
        )
