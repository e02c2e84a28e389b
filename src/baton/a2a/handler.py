"""The A2A request handler: each operation through the services GraphQL's resolvers and MCP's
tools call, with the caller's `Context`.

- **SendMessage** to an agent is `handOff` (the caller the requester, the card's agent the
  assignee; `baton.a2a.mapping.delegation` reads the message), its A2A context kept beside the
  task. A message naming an existing task (`taskId`) is the reply the task waits on: the move it
  names, or the one move open to the caller now. The answer is the Task. Unless the request says
  `returnImmediately`, it is given once the task is final or interrupted (AUTH_REQUIRED,
  INPUT_REQUIRED), or after `blocking_seconds`, whichever comes first.
- **GetTask / ListTasks**: the tasks the caller may see (`TaskService.get`, `page`): a hidden task
  answers as a missing one. At an agent's URL, only the tasks handed to that agent.
- **CancelTask**: the `cancelTask` move; a cancelled task answers as it is (cancel is
  idempotent), another final one `TaskNotCancelableError`.
- **Streams** (`frames_*`): the Task, then each event's updates in order from the event log,
  closing at a final state; each with the id a client resumes after (`Frame`). Live updates
  go to the door's sink past the stream's task while it waits (`_Following`).
- **Push notification configs**: `baton.a2a.push`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
from typing import Any, Final, cast

import orjson
from a2a.server.context import ServerCallContext
from a2a.server.events.event_queue import Event
from a2a.server.request_handlers.request_handler import RequestHandler
from a2a.types.a2a_pb2 import (
    AgentCard,
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetExtendedAgentCardRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    ListTaskPushNotificationConfigsRequest,
    ListTaskPushNotificationConfigsResponse,
    ListTasksRequest,
    ListTasksResponse,
    Message,
    SendMessageRequest,
    StreamResponse,
    SubscribeToTaskRequest,
    Task,
    TaskPushNotificationConfig,
)
from a2a.types.a2a_pb2 import TaskState as A2AState
from a2a.utils.constants import DEFAULT_LIST_TASKS_PAGE_SIZE, MAX_LIST_TASKS_PAGE_SIZE
from a2a.utils.errors import (
    A2AError,
    ExtendedAgentCardNotConfiguredError,
    InvalidParamsError,
    TaskNotCancelableError,
    UnsupportedOperationError,
)

from baton.a2a import frames, mapping, push, rendered
from baton.a2a.errors import UNAVAILABLE, refusal, to_a2a, unexpected
from baton.a2a.frames import Frame
from baton.access.principals import Principal
from baton.engine.limits import DEFAULT_LIMITS
from baton.errors import BatonError, InvalidInput, NotFound
from baton.live.filters import EventFilter
from baton.live.streams import Passing, Pushable, Sink
from baton.metrics import MOVES, count
from baton.protocol.handoff import HANDOFF, MUTATIONS, MoveName, TaskState
from baton.services import task_contexts
from baton.services.context import Context
from baton.services.task_contexts import TaskContext, TaskContexts
from baton.services.tasks import MoveArgs, Outcome, TaskService
from baton.settings import Settings
from baton.store.records import EventRecord, TaskRecord
from baton.store.tasks import TaskQuery, decode_cursor, encode_cursor, storable_time

STATE_KEY: Final = "baton.a2a"  # the request's `Call`, in ServerCallContext.state
# History messages one task may answer with, and one page of ListTasks in all.
MAX_HISTORY: Final = 100
MAX_PAGE_HISTORY: Final = 200
# The most one answer may weigh (the response budget of GraphQL's engine).
MAX_ANSWER_BYTES: Final = DEFAULT_LIMITS.max_response_bytes
# How long a blocking SendMessage waits for its task to settle (BATON_A2A_BLOCKING_SECONDS).
BLOCKING_SECONDS: Final = Settings.a2a_blocking_seconds
# Reading a task and its newest event as one snapshot: tries while events keep coming.
SNAPSHOT_TRIES: Final = 5

ContextFactory = Callable[[Principal], Context]
# A place among the streams of a token (`baton.a2a.streams.Streams.place`), held while a
# blocking SendMessage waits on the task: False when none is free (it then answers at once).
Places = Callable[[str], AbstractContextManager[bool]]


@dataclass
class Call:
    """One request as the door saw it: the caller, the agent whose URL it reached (None:
    Baton's own, `/a2a`), and what its answer needs from the door."""

    principal: Principal
    agent: str | None
    token: str
    last_event_id: str | None = None  # the request's Last-Event-ID header
    unavailable: bool = False  # answered 503 with Retry-After


def call_of(context: ServerCallContext) -> Call:
    call = context.state.get(STATE_KEY)
    assert isinstance(call, Call), "the door puts the call in every request's state"
    return call


def _settled(state: A2AState) -> bool:
    return state in mapping.TERMINAL or state in mapping.INTERRUPTED


class BatonHandler(RequestHandler):
    def __init__(
        self,
        context: ContextFactory,
        contexts: Callable[[], TaskContexts],
        *,
        blocking_seconds: float = BLOCKING_SECONDS,
        places: Places | None = None,
    ) -> None:
        self.context = context
        self.contexts = contexts
        self.blocking_seconds = blocking_seconds
        self.places = places

    # --- the door's rules, around every operation ---------------------------------------------

    @contextlib.contextmanager
    def _answering(self, call: Call) -> Iterator[None]:
        """Baton's refusals become A2A's errors (the database away marks the call for a
        503); anything else is logged and answered with no detail."""
        try:
            yield
        except A2AError:
            raise
        except BatonError as exc:
            if exc.code == UNAVAILABLE:
                call.unavailable = True
            raise to_a2a(exc) from None
        except Exception as exc:
            raise unexpected(exc) from None

    async def _visible(self, call: Call, context: Context, task_id: str) -> TaskRecord:
        """The task, if the caller may see it and it is the agent's whose URL was called."""
        if not task_id:
            raise InvalidInput("id", "name the task")
        task = await context.service.get(call.principal, task_id)
        if call.agent is not None and task.assignee != call.agent:
            raise NotFound("task", task_id)  # another agent's: not found at this agent's URL
        return task

    async def _tasks(
        self,
        tasks: Sequence[TaskRecord],
        history: int,
        *,
        artifacts: bool = True,
        newest: dict[str, list[EventRecord]] | None = None,
        kept: dict[str, TaskContext] | None = None,
    ) -> list[Task]:
        """Tasks as A2A's, with their contexts and newest events read in one query."""
        ids = [t.id for t in tasks]
        contexts = self.contexts()
        if kept is None and newest is None:
            kept, newest = await contexts.kept_and_newest(ids, max(1, history))
        if kept is None:
            kept = await contexts.of(ids)
        if newest is None:
            newest = await contexts.newest_events(ids, max(1, history))
        out = []
        for task in tasks:
            found = kept.get(task.id)
            out.append(
                mapping.task_of(
                    task,
                    found.context_id if found is not None else task.id,
                    newest.get(task.id, []),
                    message_id=found.message_id if found is not None else None,
                    history=history,
                    artifacts=artifacts,
                )
            )
        return out

    # --- reading ---------------------------------------------------------------------------

    async def on_get_task(self, params: GetTaskRequest, context: ServerCallContext) -> Task:
        _required(params)
        call = call_of(context)
        with self._answering(call):
            history = _history(params.history_length if params.HasField("history_length") else None)
            task = await self._visible(call, self.context(call.principal), params.id)
            (answer,) = await self._tasks([task], history)
            return answer

    async def get_task_json(self, params: GetTaskRequest, context: ServerCallContext) -> bytes:
        """`on_get_task`'s Task as the SDK writes it (`to_json`), rendered once per version of
        the task and kept for the reads that follow (`baton.a2a.rendered`)."""
        _required(params)
        call = call_of(context)
        with self._answering(call):
            history = _history(params.history_length if params.HasField("history_length") else None)
            task = await self._visible(call, self.context(call.principal), params.id)
            kept, events = await self.contexts().kept_and_newest([task.id], max(1, history))
            found = kept.get(task.id)
            newest = events[task.id]
            context_id = found.context_id if found is not None else task.id
            message_id = found.message_id if found is not None else None

            def render() -> bytes:
                made = mapping.task_of(
                    task, context_id, newest, message_id=message_id, history=history
                )
                return orjson.dumps(frames.to_json(made))

            return rendered.task_json(task, context_id, message_id, history, newest, render)

    async def on_list_tasks(
        self, params: ListTasksRequest, context: ServerCallContext
    ) -> ListTasksResponse:
        call = call_of(context)
        with self._answering(call):
            size = params.page_size if params.HasField("page_size") else None
            size = DEFAULT_LIST_TASKS_PAGE_SIZE if size is None else size
            if not 1 <= size <= MAX_LIST_TASKS_PAGE_SIZE:
                raise InvalidInput("pageSize", f"must be between 1 and {MAX_LIST_TASKS_PAGE_SIZE}")
            history = params.history_length if params.HasField("history_length") else 0
            history = _history(history)
            if size * history > MAX_PAGE_HISTORY:
                raise InvalidInput(
                    "historyLength",
                    f"pageSize x historyLength may be at most {MAX_PAGE_HISTORY}",
                )
            wanted = params.status or None
            query = TaskQuery(
                assignee=call.agent,
                context_id=params.context_id or None,
                updated_after=(
                    storable_time(
                        params.status_timestamp_after.ToDatetime(), "statusTimestampAfter"
                    )
                    if params.HasField("status_timestamp_after")
                    else None
                ),
            )
            service = self.context(call.principal).service
            rows, more, total = await _page(
                service, call.principal, query, wanted, size, params.page_token or None
            )
            artifacts = params.include_artifacts if params.HasField("include_artifacts") else False
            tasks = await self._tasks(
                [r for r in rows if wanted is None or mapping.state_of(r) == wanted],
                history,
                artifacts=artifacts,
            )
            answer = ListTasksResponse(
                tasks=tasks,
                next_page_token=encode_cursor(rows[-1]) if more and rows else "",
                page_size=size,
                total_size=total,
            )
            if answer.ByteSize() > MAX_ANSWER_BYTES:
                raise InvalidInput(
                    "pageSize", "the page is larger than one answer may be: ask for fewer tasks"
                )
            return answer

    # --- cancelling ------------------------------------------------------------------------

    async def on_cancel_task(self, params: CancelTaskRequest, context: ServerCallContext) -> Task:
        _required(params)
        call = call_of(context)
        with self._answering(call):
            ctx = self.context(call.principal)
            task = await self._visible(call, ctx, params.id)
            if task.state is not TaskState.cancelled:
                if HANDOFF.is_terminal(task.state):
                    raise _not_cancelable(task)
                try:
                    outcome = await _counted(
                        MoveName.CANCEL,
                        ctx.service.move(call.principal, MoveName.CANCEL, task.id),
                    )
                    task = outcome.task
                except BatonError as exc:
                    if exc.code != "invalid_state":
                        raise
                    # Another move won the race: the task is final now, cancelled or not.
                    task = await self._visible(call, ctx, params.id)
                    if task.state is not TaskState.cancelled:
                        raise _not_cancelable(task) from None
            (answer,) = await self._tasks([task], 0)
            return answer

    # --- sending ---------------------------------------------------------------------------

    async def on_message_send(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> Task | Message:
        _required(params)
        call = call_of(context)
        with self._answering(call):
            ctx = self.context(call.principal)
            task, kept, newest = await self._send(call, ctx, params)
            if not params.configuration.return_immediately:
                task, newest = await self._until_settled(call, ctx, task, newest)
            history = _history(
                params.configuration.history_length
                if params.configuration.HasField("history_length")
                else 0
            )
            if history > 0:
                (answer,) = await self._tasks([task], history, kept={task.id: kept})
            else:
                (answer,) = await self._tasks(
                    [task], 0, kept={task.id: kept}, newest={task.id: newest[-1:]}
                )
            return answer

    async def _send(
        self, call: Call, ctx: Context, params: SendMessageRequest
    ) -> tuple[TaskRecord, TaskContext, list[EventRecord]]:
        """Hand off, or reply to the task the message names; the task, its context and the
        events the call appended (the newest one when it appended none)."""
        message = params.message
        if message.task_id:
            task = await self._visible(call, ctx, message.task_id)
            outcome = await self._reply(call, ctx, task, message)
            kept = (await self.contexts().of([task.id])).get(task.id)
            if kept is None:
                kept = TaskContext(task.id, None)
        else:
            skill = _skill(params.metadata) or _skill(message.metadata)
            if skill is not None and not isinstance(skill, str):
                raise InvalidInput("message.metadata.skill", "must be a deliverable type")
            delegation = mapping.delegation(message, call.principal, call.agent, skill)
            # A new task's context is written by the hand-off's own statement.
            context = task_contexts.given(delegation.context_id, delegation.message_id)
            outcome = await _counted(
                "handOff",
                ctx.service.hand_off(call.principal, delegation.hand_off, context=context),
            )
            if outcome.events:
                kept = TaskContext(delegation.context_id or outcome.task.id, delegation.message_id)
            else:  # a repeated hand-off: its first context (this one, if another door made it)
                kept = await self.contexts().keep(
                    outcome.task.id,
                    delegation.context_id or outcome.task.id,
                    delegation.message_id,
                )
            if params.configuration.HasField("task_push_notification_config"):
                config = TaskPushNotificationConfig()
                config.CopyFrom(params.configuration.task_push_notification_config)
                config.task_id = outcome.task.id
                await push.create_config(ctx, config)
        events = outcome.events
        if not events:  # a repeated hand-off, which appended nothing
            events = (await self.contexts().newest_events([outcome.task.id], 1))[outcome.task.id]
        return outcome.task, kept, events

    async def _reply(self, call: Call, ctx: Context, task: TaskRecord, message: Message) -> Outcome:
        if HANDOFF.is_terminal(task.state):
            raise refusal(
                UnsupportedOperationError,
                f"task {task.id} is {task.state.value}: it takes no more messages",
                "invalid_state",
                state=task.state.value,
            )
        answer = mapping.reply(message)
        move = answer.move
        if move is None:
            allowed = [
                m
                for m in TaskService.allowed_moves(call.principal, task)
                if m is not MoveName.CANCEL
            ]
            if not allowed:
                raise refusal(
                    UnsupportedOperationError,
                    f"task {task.id} waits on no move of yours now (it is {task.state.value})",
                    "invalid_move",
                    state=task.state.value,
                )
            if len(allowed) > 1:
                names = [MUTATIONS[m] for m in allowed]
                raise refusal(
                    InvalidParamsError,
                    f"name the move in a data part (`move`): one of {', '.join(names)}",
                    "invalid_input",
                    field="move",
                    allowedMoves=names,
                )
            move = allowed[0]
        args = answer.args
        if args.result is not None:
            args = MoveArgs(
                waiting_on=args.waiting_on,
                result={"provenance": "agent_generated", **args.result},
                reason=args.reason,
            )
        return await _counted(move, ctx.service.move(call.principal, move, task.id, args=args))

    async def _until_settled(
        self, call: Call, ctx: Context, task: TaskRecord, newest: list[EventRecord]
    ) -> tuple[TaskRecord, list[EventRecord]]:
        """The task once it is final or interrupted, or as it is after `blocking_seconds`;
        at once when the token has no stream place free to wait in."""
        if _settled(mapping.state_of(task)) or not newest or self.blocking_seconds <= 0:
            return task, newest
        if self.places is None:
            return await self._wait(call, ctx, task, newest)
        with self.places(call.token) as held:
            if not held:
                return task, newest
            return await self._wait(call, ctx, task, newest)

    async def _wait(
        self, call: Call, ctx: Context, task: TaskRecord, newest: list[EventRecord]
    ) -> tuple[TaskRecord, list[EventRecord]]:
        where = EventFilter(task_ids=frozenset({task.id}))
        # One task's events, removed only with it: the log's floor does not concern them.
        stream = _closable(ctx.events.stream(call.principal, where, newest[-1].id, expires=False))
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self.blocking_seconds), contextlib.aclosing(stream):
                async for event in stream:
                    task, newest = event.task, [event]
                    if _settled(mapping.state_of(task)):
                        break
        return task, newest

    # --- streams ---------------------------------------------------------------------------

    async def send_frames(
        self, call: Call, params: SendMessageRequest
    ) -> AsyncGenerator[Frame, None]:
        """SendStreamingMessage: the hand-off (or reply), then the task followed. The first
        frame comes once the hand-off is made, so a refusal is raised before any."""
        _required(params)
        with self._answering(call):
            ctx = self.context(call.principal)
            task, kept, newest = await self._send(call, ctx, params)
            history = _history(
                params.configuration.history_length
                if params.configuration.HasField("history_length")
                else 0
            )
            (first,) = await self._tasks(
                [task], history, kept={task.id: kept}, newest=None if history else {task.id: newest}
            )
        return self._follow(call, ctx, task, first, kept.context_id, newest[-1].id, None)

    async def subscribe_frames(
        self, call: Call, task_id: str, last_event_id: str | None
    ) -> AsyncGenerator[Frame, None]:
        """SubscribeToTask: the task, then its updates. With `last_event_id` (a resumption),
        no Task: every update after that one, then live ones. A final task with nothing to
        resume is refused (UnsupportedOperationError)."""
        with self._answering(call):
            ctx = self.context(call.principal)
            after = frames.parse_id(last_event_id) if last_event_id else None
            task = await self._visible(call, ctx, task_id)
            kept = (await self.contexts().of([task.id])).get(task.id)
            context_id = kept.context_id if kept is not None else task.id
            task, newest = await self._snapshot(call, ctx, task)
            last = newest[-1].id if newest else 0
            if after is not None:
                if after[0] > last:
                    raise InvalidInput("Last-Event-ID", f"is not an event of task {task.id}")
                if HANDOFF.is_terminal(task.state) and after == (last, None):
                    raise _final(task)
                return self._follow(call, ctx, task, None, context_id, after[0], after[1])
            if HANDOFF.is_terminal(task.state):
                raise _final(task)
            (first,) = await self._tasks(
                [task],
                0,
                kept={task.id: kept or TaskContext(task.id, None)},
                newest={task.id: newest},
            )
        return self._follow(call, ctx, task, first, context_id, last, None)

    async def _snapshot(
        self, call: Call, ctx: Context, task: TaskRecord
    ) -> tuple[TaskRecord, list[EventRecord]]:
        """The task and its newest event, at the same version."""
        for _ in range(SNAPSHOT_TRIES):
            newest = (await self.contexts().newest_events([task.id], 1))[task.id]
            if not newest or newest[-1].version == task.version:
                return task, newest
            task = await self._visible(call, ctx, task.id)
        return task, newest

    def _follow(
        self,
        call: Call,
        ctx: Context,
        task: TaskRecord,
        first: Task | None,
        context_id: str,
        after: int,
        seen: int | None,
    ) -> Passing[Frame]:
        """`first` (the Task) with id `after`, then the updates of the task's events after
        it (with `seen`, event `after`'s own updates after that index first), until a final
        state. Live updates may be pushed past the stream's consumer (`_Following`)."""
        following = _Following(context_id, after, seen)
        return Passing(self._frames(call, ctx, task, first, following), following)

    async def _frames(
        self,
        call: Call,
        ctx: Context,
        task: TaskRecord,
        first: Task | None,
        following: _Following,
    ) -> AsyncGenerator[Frame, None]:
        after, seen, context_id = following.after, following.seen, following.context_id
        if first is not None:
            yield Frame.of(str(after), StreamResponse(task=first))
            if HANDOFF.is_terminal(task.state):
                return
        cursor = after - 1 if seen is not None else after
        where = EventFilter(task_ids=frozenset({task.id}))
        # One task's events go only with the task: a cursor below the log's floor (other
        # tasks removed since) still resumes it.
        stream = ctx.events.stream(call.principal, where, cursor, expires=False)
        following.follow(stream)
        try:
            async with contextlib.aclosing(stream):
                async for event in stream:
                    for index, frame in enumerate(frames.of(event, context_id)):
                        if event.id == after and seen is not None and index <= seen:
                            continue
                        yield frame
                    if HANDOFF.is_terminal(event.task.state):
                        return
        except BatonError as exc:
            if exc.code == UNAVAILABLE:
                call.unavailable = True
            raise to_a2a(exc) from None

    async def on_message_send_stream(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event, None]:
        stream = await self.send_frames(call_of(context), params)
        async with contextlib.aclosing(stream):
            async for frame in stream:
                yield frame.payload

    async def on_subscribe_to_task(
        self, params: SubscribeToTaskRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event, None]:
        _required(params)
        call = call_of(context)
        stream = await self.subscribe_frames(call, params.id, call.last_event_id)
        async with contextlib.aclosing(stream):
            async for frame in stream:
                yield frame.payload

    # --- push notification configs (baton.a2a.push) --------------------------------------------

    async def _push_task(self, call: Call, task_id: str) -> None:
        await self._visible(call, self.context(call.principal), task_id)

    async def on_create_task_push_notification_config(
        self, params: TaskPushNotificationConfig, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        call = call_of(context)
        with self._answering(call):
            await self._push_task(call, params.task_id)
            return await push.create_config(self.context(call.principal), params)

    async def on_get_task_push_notification_config(
        self, params: GetTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        call = call_of(context)
        with self._answering(call):
            await self._push_task(call, params.task_id)
            return await push.get_config(self.context(call.principal), params)

    async def on_list_task_push_notification_configs(
        self, params: ListTaskPushNotificationConfigsRequest, context: ServerCallContext
    ) -> ListTaskPushNotificationConfigsResponse:
        call = call_of(context)
        with self._answering(call):
            await self._push_task(call, params.task_id)
            return await push.list_configs(self.context(call.principal), params)

    async def on_delete_task_push_notification_config(
        self, params: DeleteTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> None:
        call = call_of(context)
        with self._answering(call):
            await self._push_task(call, params.task_id)
            await push.delete_config(self.context(call.principal), params)

    async def on_get_extended_agent_card(
        self, params: GetExtendedAgentCardRequest, context: ServerCallContext
    ) -> AgentCard:
        raise ExtendedAgentCardNotConfiguredError(
            "Baton's cards are public and whole: there is no extended card",
            data={"code": "not_found"},
        )


class _Following:
    """A followed task's live updates, pushed past the stream's consumer (`baton.live.streams`):
    the door's sink of frames (`push_to`), put on the hub's stream of the task's events as a
    sink of events once `_frames` opens it, after the Task frame (so the door's sink most
    often comes first, and either order works). While the stream's task waits with nothing
    queued, the hub hands a live event here, and each of its frames (`frames.of`, made once
    for every stream) goes to the door's sink at once. An event of a final state is not taken:
    it goes the ordinary way, through `_frames`, which ends the stream after its updates."""

    __slots__ = ("after", "context_id", "events", "seen", "sink")

    def __init__(self, context_id: str, after: int, seen: int | None) -> None:
        self.context_id = context_id
        self.after = after
        self.seen = seen
        self.sink: Sink[Frame] | None = None
        self.events: Pushable[EventRecord] | None = None

    def push_to(self, sink: Sink[Frame]) -> None:
        self.sink = sink
        if self.events is not None:
            self.events.push_to(self._push)

    def follow(self, events: Pushable[EventRecord]) -> None:
        self.events = events
        if self.sink is not None:
            events.push_to(self._push)

    def _push(self, event: EventRecord) -> bool:
        sink = self.sink
        if sink is None or HANDOFF.is_terminal(event.task.state):
            return False
        if self.seen is not None and event.id <= self.after:
            # Never reached: the hub replays event `after` (the cursor starts below it) before
            # it pushes anything, and pushes only events past its cursor. Skipping its updates
            # seen already is `_frames`'s.
            return False
        # A frame the door refuses means the stream takes nothing more (it is ending, or
        # dropped): the event goes the ordinary way only to be refused again. A loop, not
        # `all()`: no generator made per stream and event.
        for frame in frames.of(event, self.context_id):  # noqa: SIM110
            if not sink(frame):
                return False
        return True


def _closable(stream: AsyncIterator[EventRecord]) -> AsyncGenerator[EventRecord, None]:
    """The hub's stream, as the async generator it is (closed when the caller stops)."""
    return cast(AsyncGenerator[EventRecord, None], stream)


# The fields A2A marks REQUIRED in the requests `_required` checks, as the SDK's
# `validate_proto_required_fields` names them (a test reads them off the SDK's descriptors).
REQUIRED: Final = {
    "SendMessageRequest": (
        "message",
        "message.message_id",
        "message.role",
        "message.parts",
        "configuration.task_push_notification_config.url",
        "configuration.task_push_notification_config.authentication.scheme",
    ),
    "GetTaskRequest": ("id",),
    "CancelTaskRequest": ("id",),
    "SubscribeToTaskRequest": ("id",),
}
_IS_REQUIRED: Final = "Field is required."
_NEEDS_ONE: Final = "Field must contain at least one element."

Required = SendMessageRequest | GetTaskRequest | CancelTaskRequest | SubscribeToTaskRequest


def _required(params: Required) -> None:
    """The fields A2A requires, given: the SDK's check (its errors, with Baton's code) of just
    the fields `REQUIRED` lists, where the SDK's walks every part and Struct of the request (a
    fifth of a millisecond a hand-off)."""
    errors = _missing(params)
    if errors:
        data = {"code": "invalid_input", "errors": errors}
        raise InvalidParamsError("Validation failed", data=data)


def _missing(params: Required) -> list[dict[str, str]]:
    if not isinstance(params, SendMessageRequest):
        return [] if params.id else [{"field": "id", "message": _IS_REQUIRED}]
    errors = []
    message = params.message
    if not params.HasField("message"):
        errors.append({"field": "message", "message": _IS_REQUIRED})
    else:
        if not message.message_id:
            errors.append({"field": "message.message_id", "message": _IS_REQUIRED})
        if not message.role:
            errors.append({"field": "message.role", "message": _IS_REQUIRED})
        if not message.parts:
            errors.append({"field": "message.parts", "message": _NEEDS_ONE})
    if params.configuration.HasField("task_push_notification_config"):
        config = params.configuration.task_push_notification_config
        where = "configuration.task_push_notification_config"
        if not config.url:
            errors.append({"field": f"{where}.url", "message": _IS_REQUIRED})
        if config.HasField("authentication") and not config.authentication.scheme:
            errors.append({"field": f"{where}.authentication.scheme", "message": _IS_REQUIRED})
    return errors


def _history(wanted: int | None) -> int:
    """History messages to answer: `wanted` (None: as many as one answer takes)."""
    if wanted is None:
        return MAX_HISTORY
    if not 0 <= wanted <= MAX_HISTORY:
        raise InvalidInput("historyLength", f"must be between 0 and {MAX_HISTORY}")
    return wanted


def _skill(metadata: Any) -> Any:
    if "skill" in metadata:  # a protobuf Struct: no `get`
        return metadata["skill"]
    return None


def _not_cancelable(task: TaskRecord) -> A2AError:
    return refusal(
        TaskNotCancelableError,
        f"task {task.id} is {task.state.value}: only an open task can be cancelled",
        "invalid_state",
        state=task.state.value,
    )


def _final(task: TaskRecord) -> A2AError:
    return refusal(
        UnsupportedOperationError,
        f"task {task.id} is {task.state.value}: a final task has no more updates",
        "invalid_state",
        state=task.state.value,
    )


async def _counted(name: MoveName | str, call: Awaitable[Outcome]) -> Outcome:
    """A service call counted as its GraphQL mutation's is (`baton_moves_total`)."""
    mutation = MUTATIONS[name] if isinstance(name, MoveName) else name
    try:
        outcome = await call
    except BatonError as exc:
        count(MOVES, mutation, exc.code)
        raise
    count(MOVES, mutation, "ok")
    return outcome


# Which Baton positions each A2A state filter reads, and the query that finds them: a state
# filter that is a set of positions TaskQuery cannot say at once reads their states, and the
# page drops the rest (it may come back shorter than asked; the token goes on from its end).
def _positions(wanted: A2AState) -> list[tuple[TaskState, Any]]:
    return [position for position, state in mapping.STATES.items() if state == wanted]


async def _page(
    service: TaskService,
    principal: Principal,
    query: TaskQuery,
    wanted: A2AState | None,
    size: int,
    after: str | None,
) -> tuple[list[TaskRecord], bool, int]:
    """A page of `query`'s tasks in A2A state `wanted` (None: any), whether more follow, and
    how many there are in all."""
    if after is not None:
        _check_token(after)
    if wanted is None:
        rows, more = await service.page(principal, query, size, after)
        return rows, more, await service.count(principal, query)
    positions = _positions(wanted)
    if not positions:
        return [], False, 0  # FAILED: never a Baton task's
    states = sorted({state for state, _ in positions})
    rows, more = await service.page(principal, _with(query, states=states), size, after)
    # The count, exactly: each state whole, or the waiting ones by what they wait on.
    total = 0
    whole = [s for s in states if s is not TaskState.waiting]
    if whole:
        total += await service.count(principal, _with(query, states=whole))
    waits = [w for s, w in positions if s is TaskState.waiting and w is not None]
    if waits:
        total += await service.count(
            principal, _with(query, states=[TaskState.waiting], waiting_on=waits)
        )
    return rows, more, total


def _with(query: TaskQuery, **changes: Any) -> TaskQuery:
    return replace(query, **changes)


def _check_token(token: str) -> None:
    try:
        decode_cursor(token)
    except InvalidInput:
        raise InvalidInput("pageToken", "is not a page token this server gave") from None
