"""Queries: thin resolvers over the service."""

from __future__ import annotations

from datetime import datetime

import strawberry
from strawberry.types import Info

from baton.api.enums import GraphDirection
from baton.api.inputs import TaskFilter
from baton.api.pages import MAX_PAGE, check_page_size
from baton.api.protocol import Protocol
from baton.api.retention import RetentionInfo
from baton.api.runs import Run, RunConnection, RunEdge
from baton.api.types import (
    LISTING_ARGUMENTS,
    MAX_DEPENDENCIES,
    GateRuleType,
    PrincipalInfo,
    Task,
    TaskConnection,
    TaskEdge,
    task_reads,
)
from baton.api.wrap import edges_of
from baton.engine.cost import at_most, between, checked, list_size
from baton.engine.selection import selection_of
from baton.errors import InvalidInput, NotFound
from baton.protocol.pipeline import RunPhase, RunStatus
from baton.services.context import Context
from baton.services.gate_rules import MAX_RULES
from baton.services.graphs import Direction, traverse
from baton.store.runs import RunQuery
from baton.store.tasks import TaskQuery

MAX_GRAPH_DEPTH = 50
MAX_GRAPH_ROOTS = 100
MAX_GRAPH_NODES = 2000


@strawberry.type
class TaskGraphEdge:
    from_: strawberry.ID = strawberry.field(name="from", description="The dependent task.")
    to: strawberry.ID = strawberry.field(description="The task it depends on.")


@strawberry.type
class TaskGraph:
    nodes: list[Task] = strawberry.field(
        description="The tasks reached, by id: at most `first` of them."
    )
    edges: list[TaskGraphEdge] = strawberry.field(
        metadata=list_size(MAX_GRAPH_NODES * MAX_DEPENDENCIES, per_page=MAX_DEPENDENCIES)
    )
    truncated: bool = strawberry.field(
        description="Whether the traversal stopped at `first` nodes before reaching `depth`."
    )
    cycles: list[list[strawberry.ID]] = strawberry.field(
        description="One dependency cycle per strongly connected group of nodes."
    )
    unresolved: list[str] = strawberry.field(
        description="`dependsOn` entries of the nodes (and requested ids) that name no task the "
        "caller can see."
    )


def _query(f: TaskFilter | None) -> TaskQuery:
    if f is None:
        return TaskQuery()
    return TaskQuery(
        projects=[f.project] if f.project is not None else [],
        states=f.states or [],
        requester=f.requester,
        assignee=f.assignee,
        waiting_on=[f.waiting_on] if f.waiting_on is not None else [],
        deliverable_types=[d.value for d in f.deliverable_types or []],
        updated_after=f.updated_after,
    )


@strawberry.input(description="All given conditions must hold; a list matches any of its items.")
class RunFilter:
    project: str | None = None
    statuses: list[RunStatus] | None = None
    phases: list[RunPhase] | None = None
    task_id: strawberry.ID | None = strawberry.field(
        default=None, description="Runs linked to this handoff task."
    )
    updated_after: datetime | None = None

    def to_query(self) -> RunQuery:
        return RunQuery(
            projects=[self.project] if self.project is not None else [],
            statuses=self.statuses or [],
            phases=self.phases or [],
            task_ids=[str(self.task_id)] if self.task_id is not None else [],
            updated_after=self.updated_after,
        )


@strawberry.type(
    description="Positions in the event logs (see `Query.streamCursors`): each is the newest "
    "event id a stream may start after without missing one that commits later."
)
class StreamCursors:
    @strawberry.field(name="taskEvents", description="For `taskEvents(after:)`.")
    async def task_events(self, info: Info[Context, None]) -> strawberry.ID:
        return strawberry.ID(str(await info.context.service.stream_start(info.context.principal)))

    @strawberry.field(name="runEvents", description="For `runEvents(after:)`.")
    async def run_events(self, info: Info[Context, None]) -> strawberry.ID:
        return strawberry.ID(str(await info.context.runs.stream_start(info.context.principal)))


@strawberry.type(
    description="Reads. Every operation (queries, mutations, subscriptions alike) is checked "
    "before anything of it runs, and refused whole (`errors` with code `invalid_input`, and "
    "no `data`) when its document breaks a limit (the README's Limits table: depth, aliases, "
    "tokens, nesting, cost) or an argument is out of its bounds: a `first` or `depth` out of "
    "range, more `ids` than allowed, an `after` that is not a cursor this server gave out, a "
    "filter list with more than 100 values or a time off the calendar. What goes wrong while "
    "it runs is a field error with its `path`, as the GraphQL spec has it; a variable given "
    "an explicit null where the argument needs a value is one. Strings may not contain the "
    "NUL character (U+0000), which PostgreSQL cannot store: a document or variables holding "
    "one are refused whole. A response is built within a budget of bytes (16 MiB, text and "
    "JSON counted as they are written): past it, the operation answers `too_expensive` and no "
    "`data`. The MCP door's read tools `task`, `tasks`, `taskGraph`, `run`, `runs` and "
    "`protocol` answer as these fields do; its `waitingOnMe` lists the open tasks and runs the "
    "caller can move now."
)
class Query:
    @strawberry.field(description="A task the caller can see, or null.")
    async def task(self, info: Info[Context, None], id: strawberry.ID) -> Task | None:
        reads = task_reads(selection_of(info))
        try:
            record = await info.context.service.get(info.context.principal, str(id), reads)
        except NotFound:
            return None
        return Task(record=record)

    @strawberry.field(
        description="Tasks the caller can see, newest `updatedAt` first. `first` is at most 100.",
        metadata={**list_size(MAX_PAGE, "first", 50), **LISTING_ARGUMENTS},
    )
    async def tasks(
        self,
        info: Info[Context, None],
        filter: TaskFilter | None = None,
        first: int = 50,
        after: str | None = None,
    ) -> TaskConnection:
        check_page_size(first)
        service, principal, query = info.context.service, info.context.principal, _query(filter)
        selection = selection_of(info)
        reads = task_reads(selection, "edges", "node")
        if (
            selection is None
            or "pageInfo" in selection.names()
            or "cursor" in selection.names("edges")
        ):
            reads = reads.taking("updated_at")  # the cursors are made of it
        rows, more = await service.page(principal, query, first, after, reads)
        return TaskConnection(
            edges=edges_of(TaskEdge, Task, rows),
            rows=rows,
            more=more,
            after=after,
            count_total=lambda: service.count(principal, query),
        )

    @strawberry.field(
        name="taskGraph",
        description="The dependency graph around `ids`, `depth` hops out (1 is one hop), of at "
        f"most `first` tasks (at most {MAX_GRAPH_NODES}; `truncated` says when it stopped "
        "there). Costs at most two SQL queries per hop, whatever the graph's size.",
        metadata={
            **list_size(MAX_GRAPH_NODES, "first", 200),
            **checked(depth=between(0, MAX_GRAPH_DEPTH), ids=at_most(MAX_GRAPH_ROOTS, "ids")),
        },
    )
    async def task_graph(
        self,
        info: Info[Context, None],
        ids: list[strawberry.ID],
        direction: GraphDirection = GraphDirection.BOTH,
        depth: int = 10,
        first: int = 200,
    ) -> TaskGraph:
        if not 0 <= depth <= MAX_GRAPH_DEPTH:
            raise InvalidInput("depth", f"must be between 0 and {MAX_GRAPH_DEPTH}")
        if len(ids) > MAX_GRAPH_ROOTS:
            raise InvalidInput("ids", f"at most {MAX_GRAPH_ROOTS} ids")
        if not 0 <= first <= MAX_GRAPH_NODES:
            raise InvalidInput("first", f"must be between 0 and {MAX_GRAPH_NODES}")
        service, principal = info.context.service, info.context.principal
        graph = await traverse(
            [str(i) for i in ids],
            Direction(direction.value),
            depth,
            max_nodes=first,
            by_ids=lambda keys: service.visible_by_ids(principal, keys),
            dependents_of=lambda keys, limit: service.dependents_of(principal, keys, limit),
        )
        return TaskGraph(
            truncated=graph.truncated,
            nodes=[Task(record=t) for t in graph.nodes],
            edges=[
                TaskGraphEdge(from_=strawberry.ID(a), to=strawberry.ID(b)) for a, b in graph.edges
            ],
            cycles=[[strawberry.ID(i) for i in c] for c in graph.cycles],
            unresolved=graph.unresolved,
        )

    @strawberry.field(description="A run the caller can see, or null.")
    async def run(self, info: Info[Context, None], id: strawberry.ID) -> Run | None:
        try:
            record = await info.context.runs.get(info.context.principal, str(id))
        except NotFound:
            return None
        return Run(record=record)

    @strawberry.field(
        description="Runs the caller can see (its owner's), newest `updatedAt` first. `first` "
        "is at most 100.",
        metadata={**list_size(MAX_PAGE, "first", 50), **LISTING_ARGUMENTS},
    )
    async def runs(
        self,
        info: Info[Context, None],
        filter: RunFilter | None = None,
        first: int = 50,
        after: str | None = None,
    ) -> RunConnection:
        check_page_size(first)
        runs, principal = info.context.runs, info.context.principal
        query = filter.to_query() if filter is not None else RunQuery()
        rows, more = await runs.page(principal, query, first, after)
        return RunConnection(
            edges=edges_of(RunEdge, Run, rows),
            rows=rows,
            more=more,
            after=after,
            count_total=lambda: runs.count(principal, query),
        )

    @strawberry.field(
        description="The state machines as data, from the same table the server enforces."
    )
    def protocol(self) -> Protocol:
        return Protocol()

    @strawberry.field(
        name="streamCursors",
        description="Where the event streams may start so that a client that shows what it "
        "reads and then follows `taskEvents` or `runEvents` misses nothing: ask for these "
        "first, then read your page, then subscribe with `after:` set to one of them. Every "
        "event up to a cursor has committed, and every event that commits later has a larger "
        "id, so the page and the stream together hold every change (an event the page already "
        "shows may come again: compare `version`). An id taken from `Task.events` or from a "
        "mutation's answer does not promise that across tasks: a transaction that began "
        "earlier may still commit another task's event below it (one task's own events always "
        "follow its versions).",
    )
    def stream_cursors(self) -> StreamCursors:
        return StreamCursors()

    @strawberry.field(
        description="What this server keeps of finished work, and the oldest cursors the event "
        "streams still take (`BATON_RETENTION`)."
    )
    def retention(self) -> RetentionInfo:
        return RetentionInfo()

    @strawberry.field(description="Who the caller's token acts as.")
    def viewer(self, info: Info[Context, None]) -> PrincipalInfo:
        return PrincipalInfo.of(info.context.principal)

    @strawberry.field(
        name="gateRules",
        description="An owner's gate rules in the order they are tried. Owners see their own; "
        f"admin names the owner. An owner has at most {MAX_RULES} rules.",
        metadata=list_size(MAX_RULES),
    )
    async def gate_rules(
        self, info: Info[Context, None], owner: str | None = None
    ) -> list[GateRuleType]:
        rules = await info.context.service.rules.list(info.context.principal, owner)
        return [GateRuleType.of(r) for r in rules]
