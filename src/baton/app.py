"""The Starlette app: all wiring happens here, in the lifespan."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket
from strawberry.asgi import GraphQL
from strawberry.subscriptions import GRAPHQL_TRANSPORT_WS_PROTOCOL, GRAPHQL_WS_PROTOCOL

from baton.access.principals import Principal
from baton.access.tokens import principal_for
from baton.api.context import Context
from baton.api.schema import schema
from baton.http import BodyLimit, CountRequests, RequireToken, TokenCache
from baton.metrics import REGISTRY
from baton.service import TaskService
from baton.settings import Settings
from baton.store import migrate
from baton.store.db import create_engine
from baton.store.embedded import start_embedded

log = logging.getLogger("baton")


@dataclass
class Runtime:
    """What the lifespan builds and the handlers share."""

    engine: AsyncEngine
    service: TaskService
    tokens: TokenCache


def database_url(settings: Settings) -> str:
    if settings.database_url:
        return settings.database_url
    log.info(
        "BATON_DATABASE_URL is unset: starting an embedded PostgreSQL in %s", settings.data_dir
    )
    return start_embedded(settings.data_dir)


class BatonGraphQL(GraphQL[Context, None]):
    def __init__(self, runtime: dict[str, Runtime]) -> None:
        super().__init__(
            schema,
            subscription_protocols=[GRAPHQL_TRANSPORT_WS_PROTOCOL, GRAPHQL_WS_PROTOCOL],
        )
        self._runtime = runtime

    async def get_context(
        self, request: Request | WebSocket, response: Response | WebSocket
    ) -> Context:
        rt = self._runtime["current"]
        principal = request.scope.get("state", {}).get("principal")
        assert principal is not None, "RequireToken lets no request through without one"
        return Context(principal=principal, service=rt.service)


def create_app(settings: Settings | None = None, *, run_migrations: bool = True) -> Starlette:
    settings = settings or Settings.from_env()
    runtime: dict[str, Runtime] = {}

    async def resolve(token: str) -> Principal | None:
        return await principal_for(runtime["current"].engine, token)

    tokens = TokenCache(resolve)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        engine = create_engine(database_url(settings))
        if run_migrations:
            await migrate.upgrade(engine)
        runtime["current"] = Runtime(engine=engine, service=TaskService(engine), tokens=tokens)
        try:
            yield
        finally:
            await engine.dispose()

    graphql = BatonGraphQL(runtime)

    async def healthz(request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    async def readyz(request: Request) -> Response:
        rt = runtime.get("current")
        try:
            assert rt is not None
            async with rt.engine.connect() as conn:
                await conn.execute(text("SELECT 1"))
            current = await migrate.current_revision(rt.engine)
        except Exception as exc:  # any failure to reach the database means "not ready"
            return JSONResponse({"status": "unavailable", "reason": str(exc)[:200]}, 503)
        head = migrate.head_revision()
        if current != head:
            return JSONResponse({"status": "migrating", "at": current, "head": head}, 503)
        return JSONResponse({"status": "ready", "revision": current})

    async def metrics(request: Request) -> Response:
        return Response(generate_latest(REGISTRY), media_type=CONTENT_TYPE_LATEST)

    guarded = BodyLimit(RequireToken(graphql, tokens), settings.max_body_bytes)
    app = Starlette(
        routes=[
            Route("/graphql", guarded, methods=["GET", "POST"]),
            WebSocketRoute("/graphql", guarded),
            Route("/healthz", healthz),
            Route("/readyz", readyz),
            Route("/metrics", metrics),
        ],
        lifespan=lifespan,
    )
    app.add_middleware(
        CountRequests, paths=frozenset({"/graphql", "/healthz", "/readyz", "/metrics"})
    )
    return app
