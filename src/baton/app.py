"""The Starlette app: all wiring happens here, in the lifespan."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from broadcaster import Broadcast
from cross_web import AsyncHTTPRequestAdapter, HTTPException
from graphql import GraphQLError, OperationType, get_operation_ast, parse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route, WebSocketRoute
from starlette.types import Receive, Scope, Send
from starlette.websockets import WebSocket
from strawberry.asgi import GraphQL
from strawberry.exceptions import ConnectionRejectionError
from strawberry.http import GraphQLHTTPResponse, GraphQLRequestData, process_result
from strawberry.subscriptions import GRAPHQL_TRANSPORT_WS_PROTOCOL, GRAPHQL_WS_PROTOCOL
from strawberry.subscriptions.protocols.graphql_ws.handlers import BaseGraphQLWSHandler
from strawberry.subscriptions.protocols.graphql_ws.types import ConnectionInitMessage
from strawberry.types import ExecutionResult
from strawberry.types.unset import UnsetType

from baton.access.principals import Principal
from baton.access.tokens import principal_for
from baton.api.context import Context
from baton.api.schema import schema
from baton.engine.limits import DEFAULT_LIMITS
from baton.engine.runner import Engine
from baton.http import BodyLimit, CountRequests, RequireToken, TokenCache, bearer
from baton.live.backends import make_backend
from baton.live.hub import EventHub
from baton.metrics import REGISTRY
from baton.service import TaskService
from baton.settings import Settings
from baton.store import migrate
from baton.store.db import Database, libpq_url
from baton.store.embedded import start_embedded
from baton.web.graphql_http import GraphQLHTTP

log = logging.getLogger("baton")


@dataclass
class Runtime:
    """What the lifespan builds and the handlers share."""

    db: Database
    service: TaskService
    hub: EventHub


class LegacyWSHandler(BaseGraphQLWSHandler[Context, None]):
    """The legacy `graphql-ws` protocol closes a refused connection with 1011; Baton closes it
    with 4403 like `graphql-transport-ws`, so clients see one behaviour on both."""

    async def handle_connection_init(self, message: ConnectionInitMessage) -> None:
        payload = message.get("payload")
        if isinstance(payload, dict):
            self.context.connection_params = payload
        try:
            ack = await self.view.on_ws_connect(self.context)
        except ConnectionRejectionError as rejection:
            await self.send_message({"type": "connection_error", "payload": rejection.payload})
            await self.websocket.close(code=4403, reason="Forbidden")
            return
        if isinstance(ack, dict):
            await self.send_message({"type": "connection_ack", "payload": ack})
        else:
            await self.send_message({"type": "connection_ack"})
        self.connection_acknowledged = True


def database_url(settings: Settings) -> str:
    if settings.database_url:
        return settings.database_url
    log.info(
        "BATON_DATABASE_URL is unset: starting an embedded PostgreSQL in %s", settings.data_dir
    )
    return start_embedded(settings.data_dir)


class BatonGraphQL(GraphQL[Context, None]):
    graphql_ws_handler_class = LegacyWSHandler

    def __init__(self, runtime: dict[str, Runtime], tokens: TokenCache) -> None:
        super().__init__(
            schema,
            subscription_protocols=[GRAPHQL_TRANSPORT_WS_PROTOCOL, GRAPHQL_WS_PROTOCOL],
            keep_alive=True,
            keep_alive_interval=15,
        )
        self._runtime = runtime
        self._tokens = tokens

    async def get_context(
        self, request: Request | WebSocket, response: Response | WebSocket
    ) -> Context:
        rt = self._runtime["current"]
        # Authenticated in on_ws_connect, from the connection_init payload.
        return Context(None, rt.service, rt.hub)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await super().__call__(scope, receive, send)
            return
        # Strawberry answers a malformed request with plain text; Baton keeps its error shape.
        try:
            response = await self.run(Request(scope, receive))
        except HTTPException as exc:
            body = {"errors": [{"message": exc.reason, "extensions": {"code": "invalid_input"}}]}
            response = JSONResponse(body, status_code=exc.status_code)
        await response(scope, receive, send)

    def decode_json(self, data: str | bytes) -> object:
        """Decode an HTTP body or a WebSocket message. Whatever cannot be served is raised as
        JSONDecodeError, which Strawberry answers with 400 on HTTP and 4400 on a socket."""
        try:
            decoded = json.loads(data)
        except (ValueError, RecursionError) as exc:  # bad JSON, bad encoding, absurd nesting
            raise json.JSONDecodeError("the request body is not valid JSON", "", 0) from exc
        if not isinstance(decoded, dict | list):
            raise json.JSONDecodeError("the request body must be a JSON object", "", 0)
        return decoded

    async def process_result(
        self, request: Request, result: ExecutionResult
    ) -> GraphQLHTTPResponse:
        # A refused or failed operation answers its errors and no `data` at all.
        response = process_result(result)
        if response.get("data") is None and response.get("errors"):
            response.pop("data", None)
        return response

    def parse_json(self, data: str | bytes) -> Any:
        try:
            return self.decode_json(data)
        except json.JSONDecodeError as exc:
            raise HTTPException(400, exc.msg) from exc

    async def execute_single(
        self,
        request: Request,
        request_adapter: AsyncHTTPRequestAdapter,
        sub_response: Response,
        context: Context,
        root_value: None,
        request_data: GraphQLRequestData,
    ) -> ExecutionResult:
        if _is_subscription(request_data.query, request_data.operation_name):
            raise HTTPException(400, "subscriptions need a WebSocket (graphql-transport-ws)")
        return await super().execute_single(
            request, request_adapter, sub_response, context, root_value, request_data
        )

    async def on_ws_connect(self, context: Context) -> UnsetType | dict[str, object] | None:
        params = context.connection_params or {}
        raw = params.get("authorization") or params.get("Authorization")
        principal = await self._tokens.principal(bearer(raw) if isinstance(raw, str) else None)
        if principal is None:
            raise ConnectionRejectionError({"message": "a valid bearer token is required"})
        context.caller = principal
        return None


def _is_subscription(query: str | None, operation_name: str | None) -> bool:
    """Whether the operation to run is a subscription (parsed only when the word appears)."""
    if not query or "subscription" not in query:
        return False
    try:
        operation = get_operation_ast(parse(query), operation_name)
    except GraphQLError:
        return False  # execution reports the syntax error itself
    return operation is not None and operation.operation is OperationType.SUBSCRIPTION


def create_app(settings: Settings | None = None, *, run_migrations: bool = True) -> Starlette:
    settings = settings or Settings.from_env()
    runtime: dict[str, Runtime] = {}

    async def resolve(token: str) -> Principal | None:
        return await principal_for(runtime["current"].db, token)

    tokens = TokenCache(resolve)

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

    graphql = BatonGraphQL(runtime, tokens)

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

    def http_context(scope: Scope) -> Context:
        rt = runtime["current"]
        # RequireToken let through without a principal only the GraphiQL page, which runs
        # nothing; any resolver reached without one raises Forbidden.
        return Context(scope.get("state", {}).get("principal"), rt.service, rt.hub)

    http = BodyLimit(
        RequireToken(GraphQLHTTP(engine, http_context), tokens), settings.max_body_bytes
    )
    app = Starlette(
        routes=[
            Route("/graphql", http, methods=["GET", "POST", "PUT", "PATCH", "DELETE"]),
            WebSocketRoute("/graphql", graphql),
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
