"""Subscriptions: live task events, replayable from a cursor, and a task's live state."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any, TypeVar

import strawberry
from strawberry.types import Info

from baton.api.pages import parse_event_cursor
from baton.api.runs import RunEventEntry
from baton.api.types import Task, TaskEvent, filter_problem
from baton.engine.cost import checked, parses
from baton.live.filters import EventFilter, LogFilter
from baton.live.filters import RunEventFilter as RunFilterSpec
from baton.protocol.handoff import HANDOFF, TaskState
from baton.protocol.pipeline import RunEvent, RunStatus
from baton.services.context import Context
from baton.store.records import EventRecord, RunEventRecord, TaskEventKind

F = TypeVar("F", bound=LogFilter[Any])

# What a stream does with a cursor older than what is kept (baton.services.retention).
EXPIRED = (
    "An `after` older than what the server keeps (finished work removed after it, "
    "`Query.retention`) ends the stream at once with the error `cursor_expired`, whose "
    "`extensions.oldestCursor` is the oldest `after` still taken, rather than skip what was "
    "removed: read what you show again, then follow from `streamCursors`."
)

# Checked before the subscription starts (see `baton.engine.cost.checked`).
EVENT_STREAM_ARGUMENTS = checked(
    after=parses(lambda cursor: parse_event_cursor(cursor)), filter=filter_problem
)


def log_filter(given: object, spec: type[F]) -> F:
    """The filter `spec` for a filter input whose fields are named as its conditions (held to
    the filter's bounds by `LogFilter.of`, as a webhook endpoint's stored filter is)."""
    return spec.of(
        {condition.name: getattr(given, condition.name) for condition in spec.schema.conditions}
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
        return log_filter(self, EventFilter)


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
        return log_filter(self, RunFilterSpec)


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
        description="Events of tasks the caller can see that match `filter`, in the log's order "
        "(one task's in the order of its versions). "
        "With `after` (an event id), first every committed matching event after it, then live "
        "ones, with no gap and no duplicate. Without it, events committed from now on (and any "
        "that committed a moment before while an older transaction was still running). "
        f"{EXPIRED} "
        "A WebSocket runs at most 100 operations (subscriptions) at once.",
        metadata=EVENT_STREAM_ARGUMENTS,
    )
    def task_events(
        self,
        info: Info[Context, None],
        filter: TaskEventFilter | None = None,
        after: strawberry.ID | None = None,
    ) -> AsyncGenerator[TaskEvent, None]:
        # The hub's stream itself, not a generator around it: live events may be pushed past
        # its task (`baton.live.streams`).
        where = filter.to_filter() if filter is not None else EventFilter.of({})
        cursor = parse_event_cursor(str(after)) if after is not None else None
        return info.context.events.stream_of(_task_event, info.context.principal, where, cursor)

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
        # The task's own newest event: it never expires (its events go only with it).
        async for event in hub.stream(principal, where, cursor, expires=False):
            if event.task.version <= task.version:
                continue
            yield Task(record=event.task)
            if HANDOFF.is_terminal(event.task.state):
                return

    @strawberry.subscription(
        name="runEvents",
        description="Events of runs the caller can see that match `filter`, in the log's order "
        "(one run's in the order of its versions). "
        "With `after` (a run event id), first every committed matching event after it, then "
        "live ones, with no gap and no duplicate. Without it, events committed from now on (and "
        "any that committed a moment before while an older transaction was still running). "
        "Run event ids are their own sequence, apart from task events'. "
        f"{EXPIRED}",
        metadata=EVENT_STREAM_ARGUMENTS,
    )
    def run_events(
        self,
        info: Info[Context, None],
        filter: RunEventFilter | None = None,
        after: strawberry.ID | None = None,
    ) -> AsyncGenerator[RunEventEntry, None]:
        where = filter.to_filter() if filter is not None else RunFilterSpec.of({})
        cursor = parse_event_cursor(str(after)) if after is not None else None
        principal = info.context.principal
        return info.context.run_events.stream_of(_run_event, principal, where, cursor)


def _task_event(record: EventRecord) -> TaskEvent:
    return TaskEvent(record=record)


def _run_event(record: RunEventRecord) -> RunEventEntry:
    return RunEventEntry(record=record)
