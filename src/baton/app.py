"""The ASGI app: all wiring happens here, in the lifespan.

`/graphql` (HTTP and WebSocket) goes straight to Baton's own handlers in front of the engine;
Starlette serves the rest (health, readiness, metrics) and runs the lifespan.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from collections.abc import AsyncIterator, Callable, Collection
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from broadcaster import Broadcast
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from baton.a2a import deferred
from baton.access import tokens as api_tokens
from baton.access.grants import TokenCache, bearer
from baton.access.principals import Principal
from baton.api.schema import schema
from baton.board import routes as board_routes
from baton.engine.limits import DEFAULT_LIMITS
from baton.engine.runner import Engine
from baton.errors import Unavailable
from baton.live.backends import make_backend
from baton.live.hub import STOP_SECONDS, EventHub
from baton.live.logs import RUN_LOG, TASK_LOG
from baton.mcp.http import MCPDoor
from baton.metrics import HTTP_REQUESTS, QUEUED_BYTES, REGISTRY, count
from baton.services.context import Context
from baton.services.retention import Retention
from baton.services.runs import RunService
from baton.services.task_contexts import TaskContexts
from baton.services.tasks import TaskService
from baton.services.webhook_addresses import Policy
from baton.services.webhook_secrets import SecretBox
from baton.services.webhooks import WebhookService
from baton.settings import Settings
from baton.store import migrate
from baton.store.db import Database, libpq_url, pool_share
from baton.store.embedded import start_embedded
from baton.store.records import EventRecord, RunEventRecord
from baton.store.webhooks import PayloadFormat
from baton.telemetry import logs, requests
from baton.web.graphiql import asset_routes
from baton.web.graphql_http import GraphQLHTTP
from baton.web.graphql_sse import GraphQLSSE, StreamLimits
from baton.web.graphql_ws import GraphQLWS, SocketLimits
from baton.web.metered import Metered, Render, graphql_envelope, jsonrpc_envelope
from baton.web.outbound import Ledger
from baton.web.sse_protocol import wants_event_stream
from baton.webhooks.formats import Format
from baton.webhooks.worker import DeliveryWorker, WorkerSettings

log = logging.getLogger("baton")

GRAPHQL = "/graphql"
MCP = "/mcp"
GRAPHQL_STREAM = "/graphql/stream"  # GraphQL over SSE whatever the Accept header says
A2A = "/a2a"  # the A2A door, and Baton's agent card beside it
AGENT_CARD = "/.well-known/agent-card.json"
READYZ_UNAVAILABLE = "the database does not answer"
COUNTED_PATHS = frozenset({GRAPHQL, GRAPHQL_STREAM, MCP, "/healthz", "/readyz", "/metrics"})


@dataclass
class Runtime:
    """What the lifespan builds and the handlers share."""

    db: Database
    service: TaskService
    runs: RunService
    hub: EventHub[EventRecord]
    run_hub: EventHub[RunEventRecord]
    webhooks: WebhookService | None = None
    retention: Retention | None = None

    def context(self, principal: Principal) -> Context:
        return Context(
            principal,
            self.service,
            self.runs,
            self.hub,
            self.run_hub,
            webhooks=self.webhooks,
            retention=self.retention,
        )


def database_url(settings: Settings) -> str:
    if settings.database_url:
        return settings.database_url
    log.info(
        "BATON_DATABASE_URL is unset: starting an embedded PostgreSQL in %s", settings.data_dir
    )
    return start_embedded(settings.data_dir)


async def _sweep(runs: RunService, lease_seconds: float) -> None:
    """Move runs whose lease ran out to `waiting_for_agent`, a few times per lease; several
    processes may sweep at once (the store skips rows another sweep holds)."""
    period = max(0.2, min(5.0, lease_seconds / 4))
    while True:
        await asyncio.sleep(period)
        try:
            await runs.sweep()
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the database being away must not stop sweeping for good
            log.warning("run sweeper: %s", exc)


class Front:
    """The app uvicorn runs: `/graphql` to its handlers (HTTP, WebSocket, and Server-Sent
    Events for a request that accepts `text/event-stream`, or on `/graphql/stream`), `/mcp` to
    the MCP door, the rest to Starlette; counts every answered HTTP request by path and status
    for /metrics. Each HTTP request and WebSocket is a request of `baton.telemetry.requests`
    (its id answered in `X-Request-Id`), with an access line when it ends if `access_log`."""

    def __init__(
        self,
        http: ASGIApp,
        ws: ASGIApp,
        rest: ASGIApp,
        metrics_at: tuple[str, int] | None = None,
        mcp: ASGIApp | None = None,
        *,
        sse: GraphQLSSE | None = None,
        a2a: ASGIApp | None = None,
        on_stop: tuple[Callable[[], None], ...] = (),
        access_log: bool = False,
    ) -> None:
        self.http = http
        self.ws = ws
        self.rest = rest
        self.mcp = mcp
        self.sse = sse
        self.a2a = a2a
        self.on_stop = on_stop
        self.access_log = access_log
        # With BATON_METRICS_ADDRESS, the (host, port) that alone serves /metrics.
        self.metrics_at = metrics_at

    def stopping(self) -> None:
        """Called by the server's signal handler as it begins to stop."""
        if self.sse is not None:
            self.sse.stop_soon()
        for stop in self.on_stop:
            stop()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind == "http":
            request, token = requests.begin(scope)
            answered: list[int] = []
            try:
                await self._http(scope, receive, send, request, answered)
            finally:
                requests.CURRENT.reset(token)
                if self.access_log:
                    logs.access(request, scope, answered[0] if answered else None)
        elif kind == "websocket":
            request, token = requests.begin(scope)
            try:
                await (self.ws if scope["path"] == GRAPHQL else self.rest)(scope, receive, send)
            finally:
                requests.CURRENT.reset(token)
                if self.access_log:
                    logs.access(request, scope, None)
        else:
            await self.rest(scope, receive, send)

    async def _http(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        request: requests.Request,
        answered: list[int],
    ) -> None:
        path = scope["path"]
        request_id = (b"x-request-id", request.id.encode())
        label = path if path in COUNTED_PATHS else (A2A if _is_a2a(path) else "other")

        async def counted(message: Message) -> None:
            if message["type"] == "http.response.start":
                status = message["status"]
                answered.append(status)
                count(HTTP_REQUESTS, label, str(status))
                message = {**message, "headers": [*message.get("headers", ()), request_id]}
            await send(message)

        if self.metrics_at is not None and (path == "/metrics") != (
            tuple(scope.get("server") or ()) == self.metrics_at
        ):
            await Response(status_code=404)(scope, receive, counted)
            return
        app = self.http if path == GRAPHQL else self.rest
        if path == MCP and self.mcp is not None:
            app = self.mcp
        elif self.sse is not None and (
            path == GRAPHQL_STREAM or (path == GRAPHQL and _accepts_events(scope))
        ):
            app = self.sse
        if self.a2a is not None and _is_a2a(path):
            app = self.a2a
        await app(scope, receive, counted)


class TracedFront(Front):
    """`Front` inside OpenTelemetry's ASGI middleware: every request starts a trace, or
    continues its client's (`baton.telemetry.tracing`)."""

    def __init__(self, *args: Any, middleware: Callable[[ASGIApp], ASGIApp], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._traced = middleware(super().__call__)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self._traced(scope, receive, send)


def _is_a2a(path: str) -> bool:
    return path in (AGENT_CARD, A2A) or path.startswith(A2A + "/")


def _accepts_events(scope: Scope) -> bool:
    accept = b",".join(value for name, value in scope["headers"] if name == b"accept")
    return bool(accept) and wants_event_stream(accept.decode("latin-1"))


def _metrics_refused(status: int, why: str) -> Response:
    return Response(
        f"{why}: /metrics needs an admin API token or BATON_METRICS_TOKEN as a bearer token\n",
        status,
        headers={"WWW-Authenticate": 'Bearer realm="baton-metrics"'},
    )


def create_app(
    settings: Settings | None = None,
    *,
    run_migrations: bool = True,
    processes: int = 1,
    access_log: bool = False,
) -> Front:
    """The ASGI app of one server process; `processes` of them share the database pool
    (`BATON_DATABASE_POOL_SIZE`). With `access_log`, a line per request as it ends. Traces
    are set up here when OTEL_* configures them (`Settings.traces`), and only then."""
    settings = settings or Settings.from_env()
    traced: Callable[[ASGIApp], ASGIApp] | None = None
    if settings.traces:
        from baton.telemetry import tracing

        traced = tracing.start(settings).middleware
    pool_size = pool_share(settings.database_pool_size, processes)
    runtime: dict[str, Runtime] = {}

    async def resolve(token: str) -> api_tokens.Grant | None:
        return await api_tokens.grant_for(runtime["current"].db, token)

    async def working(tokens: Collection[str]) -> set[str]:
        return await api_tokens.working(runtime["current"].db, tokens)

    def context(principal: Principal) -> Context:
        return runtime["current"].context(principal)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        url = await asyncio.to_thread(database_url, settings)
        # LISTEN/NOTIFY and migrations want a session of their own, not a pooler's.
        session_url = settings.database_direct_url or url
        if run_migrations:
            await migrate.upgrade_url(session_url)
        db = await Database.connect(url, max_size=pool_size)
        # The hubs wake their own readers on a commit: the broker need not bring it back.
        backend = make_backend(settings.broadcast_url or libpq_url(session_url), echo=False)
        broadcast = Broadcast(backend=backend)
        await broadcast.connect()
        hub = EventHub(db, broadcast, TASK_LOG, poll_interval=settings.poll_seconds)
        run_hub = EventHub(db, broadcast, RUN_LOG, poll_interval=settings.poll_seconds)
        await hub.start()
        await run_hub.start()
        service = TaskService(db, on_commit=hub.publish)
        runs = RunService(db, lease_seconds=settings.run_lease_seconds, on_commit=run_hub.publish)
        sweeper = asyncio.create_task(
            _sweep(runs, settings.run_lease_seconds), name="baton-sweeper"
        )
        policy = Policy(settings.webhook_allow_private, settings.webhook_allow_http)
        box = SecretBox(settings.webhook_secret_key)
        if not box.encrypts:
            log.info("BATON_WEBHOOK_SECRET_KEY is unset: webhook secrets are stored as given")
        deliveries = DeliveryWorker(
            db,
            engine,
            context,
            (hub, run_hub),
            box,
            WorkerSettings(
                policy,
                timeout=settings.webhook_timeout_seconds,
                retry_first=settings.webhook_retry_seconds,
                max_attempts=settings.webhook_max_attempts,
                concurrency=settings.webhook_concurrency,
                poll_seconds=settings.poll_seconds,
            ),
            # A2A push notifications: each update as A2A's StreamResponse (baton.a2a.push).
            payload_formats={
                PayloadFormat.A2A: Format(deferred.render, token_header=deferred.TOKEN_HEADER)
            },
        )
        webhooks = WebhookService(db, box, policy, on_change=deliveries.wake)
        # Finished work past BATON_RETENTION goes, one process at a time; its vacuum wants a
        # session of its own (baton.services.retention).
        retention = Retention(
            db,
            settings.retention_seconds,
            url=session_url,
            lease_seconds=settings.retention_lease_seconds,
        )
        removing = (
            asyncio.create_task(retention.run(), name="baton-retention")
            if settings.retention_seconds is not None
            else None
        )
        runtime["current"] = Runtime(db, service, runs, hub, run_hub, webhooks, retention)
        await deliveries.start()
        try:
            async with mcp.run():
                yield
        finally:
            await deliveries.stop()  # bounded: attempts in flight are cancelled, not awaited
            for task in (sweeper, removing):
                if task is not None:
                    task.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await task
            await hub.stop()
            await run_hub.stop()
            with contextlib.suppress(Exception):  # bounded: a broker that hangs must not
                await asyncio.wait_for(broadcast.disconnect(), STOP_SECONDS)
            await db.close()

    async def healthz(request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    head = migrate.head_revision()  # read from the migration scripts once, not per probe

    async def readyz(request: Request) -> Response:
        rt = runtime.get("current")
        if rt is None:
            return JSONResponse({"status": "starting"}, 503)
        try:
            current = await migrate.current_revision(rt.db)
        except Exception as exc:  # any failure to reach the database means "not ready"
            # The probe needs no token: the detail (hosts, ports, driver messages) goes to
            # the log, never to the caller.
            log.warning("readyz: the database does not answer: %r", exc)
            return JSONResponse({"status": "unavailable", "reason": READYZ_UNAVAILABLE}, 503)
        if current != head:
            return JSONResponse({"status": "migrating", "at": current, "head": head}, 503)
        return JSONResponse({"status": "ready", "revision": current})

    engine = Engine(schema, DEFAULT_LIMITS)  # the GraphQL engine (no database in it)
    tokens = TokenCache(resolve, working, settings.token_check_seconds)
    metrics_token = settings.metrics_token.encode() if settings.metrics_token else None

    async def metrics(request: Request) -> Response:
        """Prometheus text, for a bearer token only: the metrics name mutations, paths and
        volumes, which is no one's business but the operator's. An admin API token always
        works; BATON_METRICS_TOKEN, when set, is a token for the scraper alone."""
        token = bearer(request.headers.get("authorization"))
        if token is None:
            return _metrics_refused(401, "a bearer token is required")
        if metrics_token is None or not secrets.compare_digest(token.encode(), metrics_token):
            try:
                grant = await tokens.grant(token)
            except Unavailable:
                return JSONResponse({"status": "unavailable"}, 503, headers={"Retry-After": "1"})
            if grant is None:
                return _metrics_refused(401, "the bearer token does not work")
            if not grant.principal.is_admin:
                return _metrics_refused(403, "the bearer token is not an admin token")
        return Response(generate_latest(REGISTRY), media_type=CONTENT_TYPE_LATEST)

    socket_limits = SocketLimits(
        init_timeout=settings.ws_init_timeout,
        max_unauthenticated=settings.max_unauthenticated_sockets,
        token_check=settings.token_check_seconds,
        max_queued_bytes=settings.ws_max_queued_bytes,
        send_timeout=settings.ws_send_timeout,
        max_per_token=settings.max_sockets_per_token,
        max_sockets=settings.max_sockets,
    )
    mcp = MCPDoor(
        context,
        tokens,
        max_body_bytes=settings.max_body_bytes,
        max_sessions=settings.mcp_max_sessions,
        max_sessions_per_token=settings.mcp_max_sessions_per_token,
        max_subscriptions=settings.mcp_max_subscriptions,
        session_idle_seconds=settings.mcp_session_idle_seconds,
    )
    rest = Starlette(
        routes=[
            Route("/healthz", healthz),
            Route("/readyz", readyz),
            Route("/metrics", metrics),
            *asset_routes(),  # GraphiQL's scripts and styles, from the package
            *board_routes(),  # the owners' web page at / and /board
        ],
        lifespan=lifespan,
    )
    # What every door's connections hold for clients that have not taken it, in one ledger.
    ledger = Ledger(settings.max_queued_bytes_per_token, settings.max_queued_bytes)
    QUEUED_BYTES.set_function(lambda: ledger.total)

    def metered(app: ASGIApp, render: Render = graphql_envelope, effects: bool = False) -> ASGIApp:
        return Metered(app, ledger, tokens, render, effects=effects)

    # Loaded on its first request: the A2A SDK's import would lengthen every start.
    a2a_door = deferred.DeferredDoor(
        settings, tokens, context, lambda: TaskContexts(runtime["current"].db)
    )
    # A message hands a task off or moves it: refused before it runs, never after.
    a2a = metered(a2a_door, jsonrpc_envelope, effects=True)
    stream_limits = StreamLimits(
        keep_alive=settings.sse_keep_alive_seconds,
        max_streams=settings.sse_max_streams,
        max_streams_per_token=settings.sse_max_streams_per_token,
        max_queued_bytes=settings.sse_max_queued_bytes,
        max_body_bytes=settings.max_body_bytes,
        token_check=settings.token_check_seconds,
    )
    doors: tuple[Any, ...] = (
        GraphQLHTTP(engine, tokens, context, settings.max_body_bytes, ledger),
        GraphQLWS(engine, tokens, context, socket_limits, ledger),
        metered(rest),
        settings.metrics_address,
        metered(mcp, jsonrpc_envelope, effects=True),  # its tools may change something
    )
    sse = GraphQLSSE(engine, tokens, context, stream_limits, ledger)
    if traced is not None:
        return TracedFront(
            *doors,
            sse=sse,
            a2a=a2a,
            on_stop=(a2a_door.stop_soon,),
            access_log=access_log,
            middleware=traced,
        )
    return Front(*doors, sse=sse, a2a=a2a, on_stop=(a2a_door.stop_soon,), access_log=access_log)
