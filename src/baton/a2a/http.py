"""The A2A door over HTTP: cards, JSON-RPC and HTTP+JSON, mounted by the app.

Addresses (`baton.a2a.cards`):
- `GET /.well-known/agent-card.json`: Baton's card; `GET /a2a/agents/{owner}/{agent}/.well-known/
  agent-card.json`: that agent's. Cards need no token.
- `/a2a/agents/{owner}/{agent}`: the agent. JSON-RPC is `POST` there; HTTP+JSON is under it
  (`POST /message:send`, `POST /message:stream`, `GET /tasks/{id}`, `GET /tasks`,
  `POST /tasks/{id}:cancel`, `GET|POST /tasks/{id}:subscribe`, `.../pushNotificationConfigs`).
  `/a2a` is Baton itself, the same operations: a hand-off names its `assignee`.

Before an operation runs, the door answers itself, in the binding's error format (a JSON-RPC
error, or A2A's HTTP+JSON error with an `ErrorInfo` whose metadata holds Baton's `code`):
401 without a bearer token that works (the same `TokenCache` as GraphQL's and MCP's: a revoked
token is refused within BATON_TOKEN_CHECK_SECONDS); 503 with Retry-After when the database cannot
say; 413 past BATON_MAX_BODY_BYTES; a body that is not JSON a parse error; a body past the
bounds every door holds input to (`baton.inputs`: values, nesting, NUL) InvalidParams. The SDK's
dispatchers then parse the request into its protobuf type and call `BatonHandler`. A request
whose database call found the database away is answered 503 with Retry-After.
"""

from __future__ import annotations

import logging
from typing import Any, Final

import orjson
from a2a.auth.user import User
from a2a.server.context import ServerCallContext
from a2a.server.jsonrpc_models import JSONParseError as ParseError
from a2a.server.request_handlers.response_helpers import agent_card_to_dict, build_error_response
from a2a.server.routes.common import ServerCallContextBuilder
from a2a.server.routes.jsonrpc_dispatcher import JsonRpcDispatcher
from a2a.server.routes.rest_routes import create_rest_routes
from a2a.types.a2a_pb2 import AgentCard
from a2a.utils.error_handlers import A2A_DOMAIN, ERROR_INFO_TYPE, build_rest_error_payload
from a2a.utils.errors import (
    A2AError,
    InternalError,
    InvalidParamsError,
    InvalidRequestError,
    JSONParseError,
)
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route, Router
from starlette.types import Message, Receive, Scope, Send

from baton.a2a import cards
from baton.a2a.handler import STATE_KEY, BatonHandler, Call
from baton.access.grants import TokenCache, bearer
from baton.errors import InvalidInput, Unavailable
from baton.inputs import check
from baton.protocol.task_object import check_handle

log = logging.getLogger("baton.a2a")

CALL_KEY: Final = "baton.a2a.call"  # the request's `Call`, in the ASGI scope
RETRY_AFTER: Final = (b"retry-after", b"2")
CHALLENGE: Final = (b"www-authenticate", b'Bearer realm="baton"')

JSONRPC, REST = "jsonrpc", "rest"


class _Caller(User):
    def __init__(self, handle: str) -> None:
        self.handle = handle

    @property
    def is_authenticated(self) -> bool:
        return True

    @property
    def user_name(self) -> str:
        return self.handle


class _Contexts(ServerCallContextBuilder):
    """The call the door made of the request, for the handler (with the headers the SDK reads:
    `A2A-Version`)."""

    def build(self, request: Request) -> ServerCallContext:
        call: Call = request.scope[CALL_KEY]
        return ServerCallContext(
            state={"headers": dict(request.headers), STATE_KEY: call},
            user=_Caller(call.principal.handle),
        )


def where(path: str) -> tuple[str | None, str] | None:
    """The agent a path reaches (None: Baton itself) and what follows its URL; None when it
    names no agent that could exist."""
    if path != cards.PREFIX and not path.startswith(cards.PREFIX + "/"):
        return None
    rest = path[len(cards.PREFIX) :]
    if not rest.startswith("/agents/"):
        return None, rest
    owner, _, more = rest[len("/agents/") :].partition("/")
    name, slash, tail = more.partition("/")
    agent = f"{owner}/{name}"
    try:
        check_handle(agent, "agent")
    except InvalidInput:
        return None
    return agent, slash + tail


def _origin(scope: Scope) -> str:
    host = next((v.decode("latin-1") for k, v in scope["headers"] if k == b"host"), None)
    if host is None:
        server = scope.get("server") or ("localhost", None)
        host = f"{server[0]}:{server[1]}" if server[1] else str(server[0])
    return f"{scope.get('scheme', 'http')}://{host}"


def _first(scope: Scope, name: bytes) -> str | None:
    for key, value in scope["headers"]:
        if key == name:
            return str(value.decode("latin-1"))
    return None


class A2ADoor:
    """The ASGI app for `/.well-known/agent-card.json` and everything under `/a2a`."""

    def __init__(
        self,
        handler: BatonHandler,
        tokens: TokenCache,
        *,
        max_body_bytes: int,
    ) -> None:
        self.handler = handler
        self.tokens = tokens
        self.max_body_bytes = max_body_bytes
        contexts = _Contexts()
        jsonrpc = JsonRpcDispatcher(handler, context_builder=contexts)
        self.router = Router(
            routes=[
                Route("/", jsonrpc.handle_requests, methods=["POST"]),
                *create_rest_routes(handler, context_builder=contexts),
            ]
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await Response(status_code=404)(scope, receive, send)
            return
        path: str = scope["path"]
        if path == cards.CARD_PATH:
            await self._card(scope, receive, send, cards.baton_card(_origin(scope)))
            return
        found = where(path)
        if found is None:
            await _json(send, 404, {"error": {"code": 404, "message": "no such A2A address"}})
            return
        agent, rest = found
        if rest == cards.CARD_PATH:
            origin = _origin(scope)
            card = cards.agent_card(origin, agent) if agent else cards.baton_card(origin)
            await self._card(scope, receive, send, card)
            return
        binding = JSONRPC if rest in ("", "/") else REST
        await self._operation(scope, receive, send, agent, rest or "/", binding)

    async def _card(self, scope: Scope, receive: Receive, send: Send, card: AgentCard) -> None:
        if scope["method"] not in ("GET", "HEAD"):
            await _json(send, 405, {"error": {"code": 405, "message": "use GET"}})
            return
        await JSONResponse(agent_card_to_dict(card))(scope, receive, send)

    async def _operation(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        agent: str | None,
        rest: str,
        binding: str,
    ) -> None:
        token = bearer(_first(scope, b"authorization"))
        try:
            grant = await self.tokens.grant(token)
        except Unavailable as exc:
            error: A2AError = InternalError(exc.message, data={"code": "unavailable"})
            await _refuse(send, binding, None, error, 503, "UNAVAILABLE", [RETRY_AFTER])
            return
        if grant is None or token is None:
            error = InvalidRequestError(
                "a valid bearer token is required (Authorization: Bearer <Baton API token>)",
                data={"code": "unauthenticated"},
            )
            await _refuse(send, binding, None, error, 401, "UNAUTHENTICATED", [CHALLENGE])
            return
        body = await _body(receive, self.max_body_bytes)
        if body is None:
            error = InvalidRequestError(
                f"the body is larger than {self.max_body_bytes} bytes",
                data={"code": "payload_too_large"},
            )
            await _refuse(send, binding, None, error, 413, "INVALID_ARGUMENT")
            return
        request_id: Any = None
        if body.strip():
            try:
                decoded = orjson.loads(body)
            except orjson.JSONDecodeError as exc:
                error = JSONParseError(
                    f"the body is not JSON: {exc}", data={"code": "invalid_input"}
                )
                status = 200 if binding == JSONRPC else 400
                await _refuse(send, binding, None, error, status, "INVALID_ARGUMENT")
                return
            if binding == JSONRPC and isinstance(decoded, dict):
                request_id = decoded.get("id")
                if not isinstance(request_id, str | int) or isinstance(request_id, bool):
                    request_id = None
            checked = check(decoded, "params" if binding == JSONRPC else "body")
            if checked.problem is not None:
                problem = checked.problem
                error = InvalidParamsError(
                    problem.message, data={"code": "invalid_input", "field": problem.field}
                )
                status = 200 if binding == JSONRPC else 400
                await _refuse(send, binding, request_id, error, status, "INVALID_ARGUMENT")
                return
        call = Call(grant.principal, agent, token, _first(scope, b"last-event-id"))
        inner = {**scope, "path": rest, "raw_path": rest.encode(), "root_path": "", CALL_KEY: call}
        await self.router(inner, _replay(body, receive), _unavailable_as_503(send, call))


async def _body(receive: Receive, limit: int) -> bytes | None:
    """The request's body, or None once it passes `limit` bytes (nothing more is read)."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            break
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


def _replay(body: bytes, receive: Receive) -> Receive:
    """The body once more, for the SDK's dispatchers; then the connection's own messages."""
    sent = False

    async def replayed() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replayed


def _unavailable_as_503(send: Send, call: Call) -> Send:
    """The answer of a call that found the database away: 503 with Retry-After, whatever
    status the SDK gave its error (JSON-RPC's are 200, HTTP+JSON's internal ones 500)."""

    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start" and call.unavailable:
            headers = [(k, v) for k, v in message.get("headers", ()) if k != RETRY_AFTER[0]]
            message = {**message, "status": 503, "headers": [*headers, RETRY_AFTER]}
        await send(message)

    return sending


async def _refuse(
    send: Send,
    binding: str,
    request_id: Any,
    error: A2AError,
    status: int,
    grpc_status: str,
    headers: list[tuple[bytes, bytes]] | None = None,
) -> None:
    """An answer the door gives before any operation runs, in the binding's error format."""
    if binding == JSONRPC and isinstance(error, JSONParseError):
        # The SDK builds this one only from its own model (its A2A error has no reason).
        info = {
            "@type": ERROR_INFO_TYPE,
            "reason": "PARSE_ERROR",
            "domain": A2A_DOMAIN,
            "metadata": error.data or {},
        }
        body = build_error_response(request_id, ParseError(message=error.message, data=[info]))
    elif binding == JSONRPC:
        body = build_error_response(request_id, error)
    else:
        body = build_rest_error_payload(error)
        body["error"]["code"] = status
        body["error"]["status"] = grpc_status
    await _json(send, status, body, headers or [])


async def _json(
    send: Send, status: int, body: dict[str, Any], headers: list[tuple[bytes, bytes]] | None = None
) -> None:
    data = orjson.dumps(body)
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(data)).encode()),
                *(headers or []),
            ],
        }
    )
    await send({"type": "http.response.body", "body": data})
