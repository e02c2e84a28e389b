"""Subscriptions: live task events, replayable from a cursor, and a task's live state."""

from __future__ import annotations

from collections.abc import AsyncGenerator

import strawberry
from strawberry.types import Info

from baton.api.context import Context
from baton.api.enums import TaskEventKind
from baton.api.runs import RunEventEntry
from baton.api.types import MAX_FILTER_VALUES, Task, TaskEvent, filter_problem, parse_event_cursor
from baton.engine.cost import checked, parses
from baton.errors import InvalidInput
from baton.live.filters import EventFilter
from baton.live.filters import RunEventFilter as RunFilterSpec
from baton.protocol.handoff import HANDOFF, TaskState
from baton.protocol.pipeline import RunEvent, RunStatus

# Checked before the subscription starts (see `baton.engine.cost.checked`).
EVENT_STREAM_ARGUMENTS = checked(
    after=parses(lambda cursor: parse_event_cursor(cursor)), filter=filter_problem
)


@strawberry.input(description="All given conditions must hold; a list matches any of its items.")
class TaskEventFilter:
    task_ids: list[strawberry.ID] | None = None
    projects: list[str] | None = None
    kinds: list[TaskEventKind] | None = None
    states: list[TaskState] | None = strawberry.field(
        default=None, description="Events whose `toState` is one of these."
    )
    requester: str | None = None
    assignee: str | None = None

    def to_filter(self) -> EventFilter:
        for name in ("task_ids", "projects", "kinds", "states"):
            values = getattr(self, name)
            if values is not None and len(values) > MAX_FILTER_VALUES:
                raise InvalidInput(f"filter.{name}", f"at most {MAX_FILTER_VALUES} values")
        return EventFilter(
            task_ids=frozenset(map(str, self.task_ids)) if self.task_ids is not None else None,
            projects=frozenset(self.projects) if self.projects is not None else None,
            kinds=frozenset(k.value for k in self.kinds) if self.kinds is not None else None,
            states=frozenset(self.states) if self.states is not None else None,
            requester=self.requester,
            assignee=self.assignee,
        )


@strawberry.input(description="All given conditions must hold; a list matches any of its items.")
class RunEventFilter:
    run_ids: list[strawberry.ID] | None = None
    projects: list[str] | None = None
    task_ids: list[strawberry.ID] | None = strawberry.field(
        default=None, description="Events of runs linked to these handoff tasks."
    )
    events: list[RunEvent] | None = None
    statuses: list[RunStatus] | None = strawberry.field(
        default=None, description="Events whose `toStatus` is one of these."
    )

    def to_filter(self) -> RunFilterSpec:
        for name in ("run_ids", "projects", "task_ids", "events", "statuses"):
            values = getattr(self, name)
            if values is not None and len(values) > MAX_FILTER_VALUES:
                raise InvalidInput(f"filter.{name}", f"at most {MAX_FILTER_VALUES} values")

        def ids(values: list[strawberry.ID] | None) -> frozenset[str] | None:
            return frozenset(map(str, values)) if values is not None else None

        return RunFilterSpec(
            run_ids=ids(self.run_ids),
            projects=frozenset(self.projects) if self.projects is not None else None,
            task_ids=ids(self.task_ids),
            events=frozenset(self.events) if self.events is not None else None,
            statuses=frozenset(self.statuses) if self.statuses is not None else None,
        )


@strawberry.type(
    description="Live events, over WebSocket (graphql-transport-ws and the legacy graphql-ws) "
    "and Server-Sent Events (graphql-sse, on `/graphql` with `Accept: text/event-stream`, or "
    "`/graphql/stream`). "
    "Arguments are checked before the subscription starts, as for queries. Each event is "
    "built within the same budgets as a query's response; an event past one answers its own "
    "`too_expensive` error and the stream goes on. When the source of events fails, the "
    "operation ends with an `error` message carrying the errors."
)
class Subscription:
    @strawberry.subscription(
        name="taskEvents",
        description="Events of tasks the caller can see that match `filter`, in commit order. "
        "With `after` (an event id), first every committed matching event after it, then live "
        "ones, with no gap and no duplicate. Without it, only events committed from now on. "
        "A WebSocket runs at most 100 operations (subscriptions) at once.",
        metadata=EVENT_STREAM_ARGUMENTS,
    )
    async def task_events(
        self,
        info: Info[Context, None],
        filter: TaskEventFilter | None = None,
        after: strawberry.ID | None = None,
    ) -> AsyncGenerator[TaskEvent, None]:
        where = filter.to_filter() if filter is not None else EventFilter()
        cursor = parse_event_cursor(str(after)) if after is not None else None
        principal = info.context.principal
        async for event in info.context.events.stream(principal, where, cursor):
            yield TaskEvent(record=event)
            del event  # a replayed event is this stream's own copy: not kept while idle

    @strawberry.subscription(
        name="taskUpdated",
        description="The task now, then the task after each change; completes once it reaches "
        "a terminal state. A task the caller cannot see is a `not_found` error. A WebSocket "
        "runs at most 100 operations (subscriptions) at once.",
    )
    async def task_updated(
        self, info: Info[Context, None], id: strawberry.ID
    ) -> AsyncGenerator[Task, None]:
        hub, principal = info.context.events, info.context.principal
        # The newest event first, then the task: a change between the two reads is replayed.
        cursor = await hub.last_event_of(str(id))
        task = await info.context.service.get(principal, str(id))
        yield Task(record=task)
        if HANDOFF.is_terminal(task.state):
            return
        where = EventFilter(task_ids=frozenset({str(id)}))
        async for event in hub.stream(principal, where, cursor):
            if event.task.version <= task.version:
                continue
            yield Task(record=event.task)
            if HANDOFF.is_terminal(event.task.state):
                return

    @strawberry.subscription(
        name="runEvents",
        description="Events of runs the caller can see that match `filter`, in commit order. "
        "With `after` (a run event id), first every committed matching event after it, then "
        "live ones, with no gap and no duplicate. Without it, only events committed from now "
        "on. Run event ids are their own sequence, apart from task events'.",
        metadata=EVENT_STREAM_ARGUMENTS,
    )
    async def run_events(
        self,
        info: Info[Context, None],
        filter: RunEventFilter | None = None,
        after: strawberry.ID | None = None,
    ) -> AsyncGenerator[RunEventEntry, None]:
        where = filter.to_filter() if filter is not None else RunFilterSpec()
        cursor = parse_event_cursor(str(after)) if after is not None else None
        principal = info.context.principal
        async for event in info.context.run_events.stream(principal, where, cursor):
            yield RunEventEntry(record=event)
            del event  # a replayed event is this stream's own copy: not kept while idle
