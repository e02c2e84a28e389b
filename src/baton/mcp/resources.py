"""Tasks and runs as resources (`baton://tasks/{id}`, `baton://runs/{id}`), and subscriptions
to them fed by the same live hubs as GraphQL subscriptions.

A subscription follows its subject's events in the event log (`EventHub.stream`, only what the
caller may see) from the moment it is made, and sends `notifications/resources/updated` after
each one, so the client reads the resource again. Both ways MCP subscribes are served: the
handshake era's `resources/subscribe` (notifications on the session's standalone stream, ended
with the session) and 2026-07-28's `subscriptions/listen` (notifications on the listen
request's own stream, ended when the client closes it). At most
`BATON_MCP_MAX_SUBSCRIPTIONS` resources per session or listen stream; a subscription's place
is taken before anything is awaited, and what it holds lives in a task that ends with its
session or stream (`Resources.following` counts them).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio
import mcp_types as types
import orjson
from mcp.server._streamable_http_modern import (  # SDK 2.3: its listen stream's sink and frames
    _SingleExchangeDispatchContext,
    _sse_event,
)
from mcp.server.connection import Connection
from mcp.server.context import ServerRequestContext
from mcp.server.session import ServerSession
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import SUBSCRIPTION_ID_META_KEY

from baton.access.principals import Principal
from baton.errors import BatonError, NotFound
from baton.live.filters import EventFilter, RunEventFilter
from baton.mcp import shapes
from baton.mcp.sessions import STATUS_KEY, ProcessFull, Sessions, TooManySessions
from baton.mcp.tools import run_with_lease
from baton.services.context import Context
from baton.store.runs import RunQuery
from baton.store.tasks import TaskQuery

log = logging.getLogger("baton.mcp")

MIME = "application/json"
LISTED = 50  # the newest tasks and runs `resources/list` names
_SUBSCRIPTIONS = "baton.subscriptions"  # a handshake session's subscriptions, in its state


@dataclass(frozen=True)
class Kind:
    """A lifecycle's resources, `baton://<collection>/{id}`: how one is read (`get` checks
    that the caller may see it, `shape` answers it as its read tool does), listed, and
    followed (its live hub, and the filter that keeps one subject's events)."""

    collection: str  # tasks, runs
    name: str  # task, run
    description: str  # the template's
    get: Callable[[Context, str], Awaitable[Any]]
    shape: Callable[[Context, Any], Awaitable[dict[str, Any]]]
    newest: Callable[[Context], Awaitable[Sequence[Any]]]
    listed: Callable[[Any], tuple[str, str]]  # a record's (title, description) in the list
    hub: Callable[[Context], Any]
    only: Callable[[str], Any]

    @property
    def template(self) -> str:
        return f"baton://{self.collection}/{{id}}"


async def _task_shape(context: Context, record: Any) -> dict[str, Any]:
    return shapes.task(record, context.principal)


async def _newest_tasks(context: Context) -> Sequence[Any]:
    rows, _more = await context.service.page(context.principal, TaskQuery(), LISTED, None)
    return rows


async def _newest_runs(context: Context) -> Sequence[Any]:
    rows, _more = await context.runs.page(context.principal, RunQuery(), LISTED, None)
    return rows


TASKS = Kind(
    collection="tasks",
    name="task",
    description="A task as the `task` tool returns it; subscribe to be told when it changes "
    "(a move, a checkpoint).",
    get=lambda context, id: context.service.get(context.principal, id),
    shape=_task_shape,
    newest=_newest_tasks,
    listed=lambda t: (
        t.packet["task"][:100],
        f"task {t.state.value}: {t.requester} → {t.assignee}",
    ),
    hub=lambda context: context.events,
    only=lambda id: EventFilter(task_ids=frozenset({id})),
)
RUNS = Kind(
    collection="runs",
    name="run",
    description="A pipeline run as the `run` tool returns it; subscribe to be told when it "
    "changes (an event).",
    get=lambda context, id: context.runs.get(context.principal, id),
    shape=run_with_lease,
    newest=_newest_runs,
    listed=lambda r: (r.title[:100], f"run {r.status.value} ({r.phase.value})"),
    hub=lambda context: context.run_events,
    only=lambda id: RunEventFilter(run_ids=frozenset({id})),
)
KINDS = {kind.collection: kind for kind in (TASKS, RUNS)}
_URI = re.compile(rf"baton://({'|'.join(KINDS)})/([^/?#]{{1,128}})")

ContextFactory = Callable[[Principal], Context]
Caller = Callable[[ServerRequestContext[Any, Any]], tuple[Principal, str]]


def parse(uri: str) -> tuple[Kind, str]:
    """The kind and id of a Baton resource URI; `not_found` for any other."""
    match = _URI.fullmatch(uri)
    if match is None:
        raise _refused(NotFound("resource", uri))
    return KINDS[match.group(1)], match.group(2)


def _refused(error: BatonError) -> MCPError:
    # Resource requests have no error result of their own: a JSON-RPC error that carries
    # Baton's code as its data.
    return MCPError(
        types.INVALID_PARAMS, error.message, data={"code": error.code, "message": error.message}
    )


def connection_of(session: ServerSession) -> Connection:
    """The connection a request arrived on. The SDK (2.3) hands handlers its per-request
    session only; the connection behind it is where per-connection state and teardown live
    (`Connection.state`, `Connection.exit_stack`)."""
    connection: Connection = session._connection
    return connection


@dataclass
class Resources:
    context: ContextFactory
    caller: Caller
    sessions: Sessions
    per_session: int
    # Every resource followed now, over handshake sessions and listen streams: what a
    # subscription holds lives in these tasks, so nothing outlives its session unseen.
    following: set[asyncio.Task[None]] = field(default_factory=set)
    listening: int = 0  # listen streams open

    # --- reading ----------------------------------------------------------------------------

    async def body(self, principal: Principal, uri: str) -> dict[str, Any]:
        """What `resources/read` of `uri` answers `principal` (an `MCPError` if refused)."""
        kind, subject = parse(uri)
        context = self.context(principal)
        try:
            return await kind.shape(context, await kind.get(context, subject))
        except BatonError as exc:
            raise _refused(exc) from None

    async def read(
        self, ctx: ServerRequestContext[Any, Any], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        principal, _ = self.caller(ctx)
        body = await self.body(principal, params.uri)
        return types.ReadResourceResult(
            contents=[
                types.TextResourceContents(
                    uri=params.uri, mime_type=MIME, text=orjson.dumps(body).decode()
                )
            ]
        )

    async def list(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        """The caller's newest tasks and runs (reach the rest through the templates)."""
        principal, _ = self.caller(ctx)
        context = self.context(principal)
        resources = []
        try:
            for kind in KINDS.values():
                for record in await kind.newest(context):
                    title, description = kind.listed(record)
                    resources.append(
                        types.Resource(
                            uri=kind.template.format(id=record.id),
                            name=record.id,
                            title=title,
                            description=description,
                            mime_type=MIME,
                        )
                    )
        except BatonError as exc:
            raise _refused(exc) from None
        return types.ListResourcesResult(resources=resources)

    async def templates(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        return types.ListResourceTemplatesResult(
            resource_templates=[
                types.ResourceTemplate(
                    uri_template=kind.template,
                    name=kind.name,
                    description=kind.description,
                    mime_type=MIME,
                )
                for kind in KINDS.values()
            ]
        )

    # --- following --------------------------------------------------------------------------

    async def changes(self, principal: Principal, uri: str) -> AsyncIterator[None]:
        """One item after each change of the resource from now on (not_found first, as an
        error, for one the caller cannot see)."""
        kind, subject = parse(uri)
        context = self.context(principal)
        hub = kind.hub(context)
        try:
            # The newest event first, then the subject: nothing between the two is missed.
            cursor = await hub.last_event_of(subject)
            await kind.get(context, subject)
        except BatonError as exc:
            raise _refused(exc) from None
        return self._follow(hub, principal, kind.only(subject), cursor)

    @staticmethod
    async def _follow(
        hub: Any, principal: Principal, where: Any, cursor: int
    ) -> AsyncIterator[None]:
        # The subject's own newest event: retention removes a subject's events only with it,
        # so this cursor never expires, however old (`EventHub.stream`).
        async for _event in hub.stream(principal, where, cursor, expires=False):
            yield None

    # The handshake era: resources/subscribe on a session.

    def _followed_by(self, connection: Connection) -> Followed:
        """The session's subscriptions, made on its first subscribe and ended with it."""
        mine = connection.state.get(_SUBSCRIPTIONS)
        if not isinstance(mine, Followed):
            mine = connection.state[_SUBSCRIPTIONS] = Followed()
            connection.exit_stack.push_async_callback(mine.close)
        return mine

    async def subscribe(
        self, ctx: ServerRequestContext[Any, Any], params: types.SubscribeRequestParams
    ) -> types.EmptyResult:
        """Follow a resource on the session's stream. Its place is taken before anything is
        awaited, so racing requests for one URI make one subscription and racing URIs stop at
        the bound; a subscription lives no longer than its session."""
        principal, _ = self.caller(ctx)
        mine = self._followed_by(connection_of(ctx.session))
        uri = params.uri
        while (earlier := mine.entries.get(uri)) is not None:
            if earlier.task is not None:
                return types.EmptyResult()
            # Another request for this URI is making it: its outcome is this one's.
            await earlier.settled.wait()
            if earlier.error is not None:
                raise earlier.error
        if mine.closed:
            raise MCPError(types.INVALID_REQUEST, "the session has ended")
        if len(mine.entries) >= self.per_session:
            raise MCPError(
                types.INVALID_PARAMS,
                f"at most {self.per_session} resource subscriptions per session "
                "(BATON_MCP_MAX_SUBSCRIPTIONS)",
                data={"code": "invalid_input"},
            )
        entry = mine.entries[uri] = Subscription()
        try:
            changes = await self.changes(principal, uri)
        except BaseException as exc:
            entry.error = (
                exc
                if isinstance(exc, Exception)
                else MCPError(types.INVALID_REQUEST, "the subscribe request was cancelled")
            )
            mine.drop(uri, entry)
            raise
        finally:
            entry.settled.set()
        if mine.entries.get(uri) is not entry:  # unsubscribed, or the session ended, meanwhile
            return types.EmptyResult()
        session = ctx.session

        async def notify() -> None:
            async for _ in changes:
                await session.send_resource_updated(uri)

        entry.task = self._follow_in_task(notify(), f"baton-mcp-subscription {uri}")
        return types.EmptyResult()

    async def unsubscribe(
        self, ctx: ServerRequestContext[Any, Any], params: types.UnsubscribeRequestParams
    ) -> types.EmptyResult:
        self.caller(ctx)
        mine = connection_of(ctx.session).state.get(_SUBSCRIPTIONS)
        if isinstance(mine, Followed):
            entry = mine.entries.pop(params.uri, None)
            if entry is not None and entry.task is not None:
                await _cancel(entry.task)
        return types.EmptyResult()

    def _follow_in_task(self, follow: Coroutine[Any, Any, None], name: str) -> asyncio.Task[None]:
        """Run one resource's follower, counted in `following` until it ends."""

        async def run() -> None:
            try:
                await follow
            except Exception as exc:  # the session's stream went away: nothing left to tell
                log.debug("an MCP resource subscription ended: %r", exc)

        task = asyncio.create_task(run(), name=name)
        self.following.add(task)
        task.add_done_callback(self.following.discard)
        return task

    # 2026-07-28: subscriptions/listen, one stream per request.

    async def listen(
        self,
        ctx: ServerRequestContext[Any, Any],
        params: types.SubscriptionsListenRequestParams,
    ) -> types.SubscriptionsListenResult:
        principal, token = self.caller(ctx)
        uris = list(dict.fromkeys(params.notifications.resource_subscriptions or ()))
        if len(uris) > self.per_session:
            raise MCPError(
                types.INVALID_PARAMS,
                f"at most {self.per_session} resources per listen stream "
                "(BATON_MCP_MAX_SUBSCRIPTIONS)",
                data={"code": "invalid_input"},
            )
        request_id = ctx.request_id
        meta: dict[str, Any] = {SUBSCRIPTION_ID_META_KEY: request_id}
        try:
            # The stream is the listen request's response: the door ends it by ending the
            # request (see `MCPDoor._end`).
            held = self.sessions.admit(token)
        except (TooManySessions, ProcessFull) as exc:
            # Answered with the bound's own HTTP status (429 or 503), not the 400 of a bad
            # parameter: the door reads it from the request's scope.
            scope = getattr(ctx.request, "scope", None)
            if isinstance(scope, dict):
                scope[STATUS_KEY] = exc.status
            raise _refused(exc) from None
        self.listening += 1
        try:
            streams = [(uri, await self.changes(principal, uri)) for uri in uris]
            honored = types.SubscriptionFilter(resource_subscriptions=uris or None)
            await ctx.session.send_notification(
                types.SubscriptionsAcknowledgedNotification(
                    params=types.SubscriptionsAcknowledgedNotificationParams(
                        notifications=honored, _meta=meta
                    )
                ),
                related_request_id=request_id,
            )
            pumps = [
                self._follow_in_task(
                    _pump(changes, _updated(ctx, uri, meta, request_id)), f"baton-mcp-listen {uri}"
                )
                for uri, changes in streams
            ]
            try:
                while True:  # the pumps notify; the client ends the stream (or the door does)
                    await anyio.sleep_forever()
            finally:
                for p in pumps:
                    await _cancel(p)
        finally:
            self.listening -= 1
            self.sessions.release(held)


Notify = Callable[[], Awaitable[None]]


def _updated(
    ctx: ServerRequestContext[Any, Any], uri: str, meta: dict[str, Any], request_id: Any
) -> Notify:
    """Sends `notifications/resources/updated` of `uri` on the listen request's stream.

    What the SDK (2.3) writes for it never changes while the stream lives (the URI and the
    stream's subscription id), so its SSE frame is made once, by the SDK's own functions, and
    each change only hands those bytes to the stream's sink, as the SDK's dispatch context
    does (a closed stream drops it). Elsewhere than a 2026-07-28 listen response, the SDK's
    session sends it."""
    notification = types.ResourceUpdatedNotification(
        params=types.ResourceUpdatedNotificationParams(uri=uri, _meta=meta)
    )
    outbound = getattr(ctx.session, "_request_outbound", None)
    sink = outbound.sink if isinstance(outbound, _SingleExchangeDispatchContext) else None
    if sink is None:

        async def through_session() -> None:
            await ctx.session.send_notification(notification, related_request_id=request_id)

        return through_session
    data = notification.model_dump(by_alias=True, mode="json", exclude_none=True)
    frame = _sse_event(
        types.JSONRPCNotification(jsonrpc="2.0", method=data["method"], params=data.get("params"))
    )
    send = sink.send

    async def framed() -> None:
        try:
            await send(frame)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            log.debug("dropped a resource update: the listen stream is closed")

    return framed


async def _pump(changes: AsyncIterator[None], notify: Notify) -> None:
    async for _ in changes:
        await notify()


@dataclass(eq=False)
class Subscription:
    """One resource a session follows; `task` once it is made, `error` if it was refused."""

    settled: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None
    error: Exception | None = None


@dataclass(eq=False)
class Followed:
    """The resources one handshake session follows, by URI (those being made included)."""

    entries: dict[str, Subscription] = field(default_factory=dict)
    closed: bool = False

    def drop(self, uri: str, entry: Subscription) -> None:
        if self.entries.get(uri) is entry:
            del self.entries[uri]

    async def close(self) -> None:
        self.closed = True
        entries = list(self.entries.values())
        self.entries.clear()
        for entry in entries:
            if entry.task is not None:
                await _cancel(entry.task)


async def _cancel(task: asyncio.Task[None]) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await task
