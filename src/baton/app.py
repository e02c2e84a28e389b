"""The ASGI app: all wiring happens here, in the lifespan.

`/graphql` (HTTP and WebSocket) goes straight to Baton's own handlers in front of the engine;
Starlette serves the rest (health, readiness, metrics) and runs the lifespan.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from broadcaster import Broadcast
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from baton.access.principals import Principal
from baton.access.tokens import principal_for
from baton.api.context import Context
from baton.api.schema import schema
from baton.board import routes as board_routes
from baton.engine.limits import DEFAULT_LIMITS
from baton.engine.runner import Engine
from baton.live.backends import make_backend
from baton.live.hub import EventHub
from baton.metrics import HTTP_REQUESTS, REGISTRY
from baton.services.tasks import TaskService
from baton.settings import Settings
from baton.store import migrate
from baton.store.db import Database, libpq_url
from baton.store.embedded import start_embedded
from baton.web.auth import TokenCache
from baton.web.graphql_http import GraphQLHTTP
from baton.web.graphql_ws import GraphQLWS

log = logging.getLogger("baton")

GRAPHQL = "/graphql"
COUNTED_PATHS = frozenset({GRAPHQL, "/healthz", "/readyz", "/metrics"})


@dataclass
class Runtime:
    """What the lifespan builds and the handlers share."""

    db: Database
    service: TaskService
    hub: EventHub

    def context(self, principal: Principal) -> Context:
        return Context(principal, self.service, self.hub)


def database_url(settings: Settings) -> str:
    if settings.database_url:
        return settings.database_url
    log.info(
        "BATON_DATABASE_URL is unset: starting an embedded PostgreSQL in %s", settings.data_dir
    )
    return start_embedded(settings.data_dir)


class Front:
    """The app uvicorn runs: `/graphql` to its handlers, the rest to Starlette; counts every
    answered HTTP request by path and status for /metrics."""

    def __init__(self, http: ASGIApp, ws: ASGIApp, rest: ASGIApp) -> None:
        self.http = http
        self.ws = ws
        self.rest = rest

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind == "http":
            path = scope["path"]
            label = path if path in COUNTED_PATHS else "other"

            async def counted(message: Message) -> None:
                if message["type"] == "http.response.start":
                    HTTP_REQUESTS.labels(path=label, status=str(message["status"])).inc()
                await send(message)

            app = self.http if path == GRAPHQL else self.rest
            await app(scope, receive, counted)
        elif kind == "websocket" and scope["path"] == GRAPHQL:
            await self.ws(scope, receive, send)
        else:
            await self.rest(scope, receive, send)


def create_app(settings: Settings | None = None, *, run_migrations: bool = True) -> Front:
    settings = settings or Settings.from_env()
    runtime: dict[str, Runtime] = {}

    async def resolve(token: str) -> Principal | None:
        return await principal_for(runtime["current"].db, token)

    def context(principal: Principal) -> Context:
        return runtime["current"].context(principal)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        url = await asyncio.to_thread(database_url, settings)
        if run_migrations:
            await migrate.upgrade_url(url)
        db = await Database.connect(url)
        broadcast = Broadcast(backend=make_backend(settings.broadcast_url or libpq_url(url)))
        hub = EventHub(db, broadcast, poll_interval=settings.poll_seconds)
        await hub.start()
        service = TaskService(db, on_commit=hub.publish)
        runtime["current"] = Runtime(db=db, service=service, hub=hub)
        try:
            yield
        finally:
            await hub.stop()
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
            return JSONResponse({"status": "unavailable", "reason": str(exc)[:200]}, 503)
        if current != head:
            return JSONResponse({"status": "migrating", "at": current, "head": head}, 503)
        return JSONResponse({"status": "ready", "revision": current})

    async def metrics(request: Request) -> Response:
        return Response(generate_latest(REGISTRY), media_type=CONTENT_TYPE_LATEST)

    engine = Engine(schema, DEFAULT_LIMITS)  # the GraphQL engine (no database in it)
    tokens = TokenCache(resolve)
    rest = Starlette(
        routes=[
            Route("/healthz", healthz),
            Route("/readyz", readyz),
            Route("/metrics", metrics),
            *board_routes(),  # the owners' web page at / and /board
        ],
        lifespan=lifespan,
    )
    return Front(
        GraphQLHTTP(engine, tokens, context, settings.max_body_bytes),
        GraphQLWS(engine, tokens, context),
        rest,
    )
