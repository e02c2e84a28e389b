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
say; 413 past BATON_MAX_BODY_BYTES; 415 for a body declared as anything but JSON (none declared
is taken as JSON); a body that is not JSON a parse error; a body past the bounds every door holds
input to (`baton.inputs`: values, nesting, NUL) InvalidParams. The SDK's dispatchers then parse
the request into its protobuf type and call `BatonHandler`. A request whose database call found
the database away is answered 503 with Retry-After.

The door runs SendMessage, GetTask, ListTasks and CancelTask (over both bindings) and the
streaming operations itself, from the JSON it already decoded: the SDK's dispatchers would parse
the body again and add their models, routing and tracing to every call. It answers exactly what
the SDK would (statuses, bodies, errors); a JSON-RPC request the SDK would refuse for its
envelope still goes to the SDK, and so does every other operation.

Each request's operation, in its log lines (`baton.telemetry.requests`) and as its span's
`baton.a2a.method`, is its A2A method, named the same over both bindings (`SendMessage`,
`GetTask`, `SubscribeToTask`…); a request that names none has no operation.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable
from typing import Any, Final

import orjson
from a2a.auth.user import User
from a2a.server.context import ServerCallContext
from a2a.server.jsonrpc_models import InternalError as JSONRPCInternalError
from a2a.server.jsonrpc_models import JSONParseError as ParseError
from a2a.server.request_handlers.response_helpers import agent_card_to_dict, build_error_response
from a2a.server.routes.common import ServerCallContextBuilder, serialize_list_tasks_response
from a2a.server.routes.jsonrpc_dispatcher import JsonRpcDispatcher
from a2a.server.routes.rest_routes import create_rest_routes
from a2a.types.a2a_pb2 import (
    AgentCard,
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    SendMessageRequest,
    SubscribeToTaskRequest,
    Task,
)
from a2a.types.a2a_pb2 import Message as A2AMessage
from a2a.utils.constants import A2A_JSON_MEDIA_TYPE, PROTOCOL_VERSION_1_0
from a2a.utils.error_handlers import A2A_DOMAIN, ERROR_INFO_TYPE, build_rest_error_payload
from a2a.utils.errors import (
    A2AError,
    InternalError,
    InvalidParamsError,
    InvalidRequestError,
    JSONParseError,
)
from a2a.utils.proto_utils import parse_params
from a2a.utils.version_validator import validate_version

# protobuf ships no types for json_format: ParseDict fills a message from decoded JSON.
from google.protobuf.json_format import (  # type: ignore[import-untyped]
    ParseDict,
    _DuplicateChecker,
)
from google.protobuf.json_format import (
    ParseError as ProtoParseError,
)
from starlette.datastructures import QueryParams
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route, Router
from starlette.types import Message, Receive, Scope, Send

from baton.a2a import cards
from baton.a2a.frames import Frame, to_json
from baton.a2a.handler import STATE_KEY, BatonHandler, Call, ContextFactory
from baton.a2a.streams import Refused, StreamLimits, Streams
from baton.access.grants import TokenCache, bearer
from baton.errors import InvalidInput, Unavailable
from baton.inputs import check
from baton.protocol.task_object import check_handle
from baton.sending import cycle_of
from baton.services.task_contexts import TaskContexts
from baton.settings import Settings
from baton.telemetry import requests, spans

log = logging.getLogger("baton.a2a")

CALL_KEY: Final = "baton.a2a.call"  # the request's `Call`, in the ASGI scope
RETRY_AFTER: Final = (b"retry-after", b"2")
CHALLENGE: Final = (b"www-authenticate", b'Bearer realm="baton"')

JSONRPC, REST = "jsonrpc", "rest"
METHODS: Final = frozenset(JsonRpcDispatcher.METHOD_TO_MODEL)  # A2A's, by their names
STREAMING_METHODS: Final = frozenset({"SendStreamingMessage", "SubscribeToTask"})
# HTTP+JSON's operations: HTTP methods, the path after an optional tenant, the A2A method;
# the first that fits is the one (the order of the SDK's routes).
_TENANT = r"(?:/[^/]+)?"
_CONFIGS = r"/tasks/[^/]+/pushNotificationConfigs"
REST_OPERATIONS: Final = tuple(
    (frozenset(verbs.split()), re.compile(_TENANT + path), name)
    for verbs, path, name in (
        ("POST", "/message:send", "SendMessage"),
        ("POST", "/message:stream", "SendStreamingMessage"),
        ("POST", r"/tasks/[^/]+:cancel", "CancelTask"),
        ("GET POST", r"/tasks/[^/]+:subscribe", "SubscribeToTask"),
        ("GET", r"/tasks/[^/]+", "GetTask"),
        ("GET", _CONFIGS + "/[^/]+", "GetTaskPushNotificationConfig"),
        ("DELETE", _CONFIGS + "/[^/]+", "DeleteTaskPushNotificationConfig"),
        ("POST", _CONFIGS, "CreateTaskPushNotificationConfig"),
        ("GET", _CONFIGS, "ListTaskPushNotificationConfigs"),
        ("GET", "/tasks", "ListTasks"),
        ("GET", "/extendedAgentCard", "GetExtendedAgentCard"),
    )
)
SUBSCRIBE: Final = re.compile(_TENANT + r"/tasks/([^/]+):subscribe")  # the task it names
# HTTP+JSON's paths of the operations the door answers itself: the tenant, then the task's id
# (matched as the SDK's routes match them: without a tenant first, then under `/{tenant}`).
REST_PATHS: Final = {
    "SendMessage": re.compile(r"(?:/([^/]+))?/message:send"),
    "GetTask": re.compile(r"(?:/([^/]+))?/tasks/([^/]+)"),
    "CancelTask": re.compile(r"(?:/([^/]+))?/tasks/([^/]+):cancel"),
    "ListTasks": re.compile(r"(?:/([^/]+))?/tasks"),
}
DIRECT: Final = frozenset(REST_PATHS)
GET_TASK_FIELDS: Final = frozenset({"id", "tenant", "historyLength"})  # JSON names, all its own
INT32: Final = -(2**31)
# The members a JSON-RPC request may have (the SDK refuses others, as `jsonrpc` does).
JSONRPC_FIELDS: Final = frozenset({"jsonrpc", "method", "params", "id"})
A2A_JSON: Final = (b"content-type", A2A_JSON_MEDIA_TYPE.encode())


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

    # False: SendMessage goes through the SDK's dispatchers too (what the tests compare with).
    direct: bool = True

    def __init__(
        self,
        handler: BatonHandler,
        tokens: TokenCache,
        *,
        max_body_bytes: int,
        streams: Streams,
    ) -> None:
        self.handler = handler
        self.tokens = tokens
        self.max_body_bytes = max_body_bytes
        self.streams = streams
        self.contexts = contexts = _Contexts()
        jsonrpc = JsonRpcDispatcher(handler, context_builder=contexts)
        self.router = Router(
            routes=[
                Route("/", jsonrpc.handle_requests, methods=["POST"]),
                *create_rest_routes(handler, context_builder=contexts),
            ]
        )

    @classmethod
    def from_settings(
        cls,
        settings: Settings,
        tokens: TokenCache,
        context: ContextFactory,
        contexts: Callable[[], TaskContexts],
    ) -> A2ADoor:
        """The door as `baton serve` runs it: its streams held to GraphQL over SSE's bounds, a
        blocking SendMessage to BATON_A2A_BLOCKING_SECONDS."""
        streams = Streams(
            tokens,
            StreamLimits(
                keep_alive=settings.sse_keep_alive_seconds,
                max_streams=settings.sse_max_streams,
                max_streams_per_token=settings.sse_max_streams_per_token,
                max_queued_bytes=settings.sse_max_queued_bytes,
                token_check=settings.token_check_seconds,
            ),
        )
        handler = BatonHandler(
            context,
            contexts,
            blocking_seconds=settings.a2a_blocking_seconds,
            places=streams.place,
        )
        return cls(handler, tokens, max_body_bytes=settings.max_body_bytes, streams=streams)

    def stop_soon(self) -> None:
        """The server is stopping: open streams end now (see `Streams.stop_soon`)."""
        self.streams.stop_soon()

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
        if body.strip() and not _json_declared(_first(scope, b"content-type")):
            error = InvalidRequestError(
                "send the body as application/json or application/a2a+json",
                data={"code": "unsupported_media_type"},
            )
            await _refuse(send, binding, None, error, 415, "INVALID_ARGUMENT")
            return
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
        method = _method(scope["method"], rest, decoded if body.strip() else None, binding)
        if method is not None:
            requests.note_operation(method)
            spans.annotate("baton.a2a.method", method)
        if method in STREAMING_METHODS:
            parsed = decoded if body.strip() else None
            await self._stream(inner, receive, send, call, binding, parsed, request_id)
            return
        if method in DIRECT and self.direct:
            if binding == REST and (body.strip() or method != "SendMessage"):
                parsed = decoded if body.strip() else None
                await self._unary_rest(inner, send, call, method, body, parsed)
                return
            if binding == JSONRPC and body.strip() and _plain_jsonrpc(decoded):
                await self._unary_jsonrpc(inner, send, call, method, decoded)
                return
        await self.router(inner, _replay(body, receive), _unavailable_as_503(send, call))

    # --- SendMessage, GetTask, ListTasks, CancelTask -------------------------------------------

    def _context(self, scope: Scope) -> ServerCallContext:
        return self.contexts.build(Request(scope))

    async def _unary_jsonrpc(
        self, scope: Scope, send: Send, call: Call, method: str, decoded: dict[str, Any]
    ) -> None:
        """A JSON-RPC operation, answered as `JsonRpcDispatcher.handle_requests` answers it."""
        request_id: str | int = decoded["id"]
        params = decoded.get("params", {})
        try:
            request = (method == "GetTask" and _plain_get_task(params)) or ParseDict(
                params, JsonRpcDispatcher.METHOD_TO_MODEL[method](), ignore_unknown_fields=True
            )
        except Exception as exc:  # the dispatcher's refusal of params that are not the request's
            error = InvalidParamsError(data={"parseError": str(exc)})
            await _json(send, 200, build_error_response(request_id, error))
            return
        context = self._context(scope)
        context.tenant = request.tenant
        context.state["method"] = method
        context.state["request_id"] = request_id
        answer: dict[str, Any] | bytes
        try:
            await _versioned(context)
            result = await self._answer(method, request, context)
            answer = b"".join(
                (b'{"result":', result, b',"id":', orjson.dumps(request_id), b',"jsonrpc":"2.0"}')
            )
        except A2AError as error:
            answer = build_error_response(request_id, error)
        except Exception as exc:
            log.exception("Unhandled exception")
            answer = build_error_response(request_id, JSONRPCInternalError(message=str(exc)))
        unavailable = call.unavailable
        await _json(send, 503 if unavailable else 200, answer, [RETRY_AFTER] if unavailable else [])

    async def _unary_rest(
        self, scope: Scope, send: Send, call: Call, method: str, body: bytes, decoded: Any
    ) -> None:
        """An HTTP+JSON operation, answered as `RestDispatcher` answers it (its route's method
        under `rest_error_handler`)."""
        context = self._context(scope)
        path = REST_PATHS[method].fullmatch(scope["path"])
        assert path is not None, "the door found the operation by this path"
        if path.group(1) is not None:
            context.tenant = path.group(1)
        try:
            await _versioned(context)
            request = _rest_request(method, path, scope, body, decoded)
            result = await self._answer(method, request, context)
        except Exception as exc:  # the dispatcher answers every error in A2A's error format
            if not isinstance(exc, A2AError | ProtoParseError):
                log.exception("Unknown error occurred")
            payload = build_rest_error_payload(exc)
            status = 503 if call.unavailable else int(payload["error"]["code"])
            await _json(send, status, payload, [RETRY_AFTER] if call.unavailable else [])
            return
        headers = [RETRY_AFTER] if call.unavailable else []
        await _json(send, 503 if call.unavailable else 200, result, headers, A2A_JSON)

    async def _answer(self, method: str, request: Any, context: ServerCallContext) -> bytes:
        """The operation's result as JSON, as both dispatchers write it."""
        if method == "GetTask":
            return await self.handler.get_task_json(request, context)
        result: dict[str, Any]
        if method == "SendMessage":
            result = _send_response(await self.handler.on_message_send(request, context))
        elif method == "CancelTask":
            result = to_json(await self.handler.on_cancel_task(request, context))
        else:
            listed = await self.handler.on_list_tasks(request, context)
            result = serialize_list_tasks_response(listed, request.include_artifacts)
        return orjson.dumps(result)

    # --- streams ------------------------------------------------------------------------

    async def _stream(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        call: Call,
        binding: str,
        decoded: Any,
        request_id: Any,
    ) -> None:
        """SendStreamingMessage or SubscribeToTask, written here (`baton.a2a.streams`)."""
        render, render_error = _renderers(binding, request_id)
        try:
            await _version(scope)
            start = self._start(scope, call, binding, decoded)
        except A2AError as error:
            await _error_answer(send, binding, request_id, error, call)
            return
        try:
            stream = self.streams.open(call.token, render_error, cycle_of(scope))
        except Refused as refused:
            full = InvalidRequestError(refused.message, data={"code": refused.code})
            status = "RESOURCE_EXHAUSTED" if refused.status == 429 else "UNAVAILABLE"
            await _refuse(send, binding, request_id, full, refused.status, status, [RETRY_AFTER])
            return
        try:
            frames = await start()
        except A2AError as error:
            self.streams.release(call.token, stream)
            await _error_answer(send, binding, request_id, error, call)
            return
        except BaseException:
            self.streams.release(call.token, stream)
            raise
        await self.streams.serve(call.token, stream, frames, render, receive, send)

    def _start(self, scope: Scope, call: Call, binding: str, decoded: Any) -> Any:
        """The operation a streaming request asks for, parsed (not run yet)."""
        rest: str = scope["path"]
        if binding == JSONRPC:
            if not isinstance(decoded, dict) or decoded.get("jsonrpc") != "2.0":
                raise InvalidRequestError(
                    "Invalid request: 'jsonrpc' must be exactly '2.0'",
                    data={"code": "invalid_input"},
                )
            method, params = decoded.get("method"), decoded.get("params", {})
        else:
            subscribed = SUBSCRIBE.fullmatch(rest)
            method = "SubscribeToTask" if subscribed else "SendStreamingMessage"
            params = {"id": subscribed.group(1)} if subscribed else (decoded or {})
        if method == "SubscribeToTask":
            task_id = _parsed(params, SubscribeToTaskRequest()).id
            return lambda: self.handler.subscribe_frames(call, task_id, call.last_event_id)
        message = _parsed(params, SendMessageRequest())
        return lambda: self.handler.send_frames(call, message)


def _plain_jsonrpc(decoded: Any) -> bool:
    """Whether a JSON-RPC request passes the SDK's checks of its envelope (any other is left
    to the SDK, which refuses it): version 2.0, an id of a string or an integer, params an
    object or none, no other members."""
    if not isinstance(decoded, dict) or decoded.get("jsonrpc") != "2.0":
        return False
    request_id = decoded.get("id")
    return (
        decoded.keys() <= JSONRPC_FIELDS
        and isinstance(request_id, str | int)
        and not isinstance(request_id, bool)
        and isinstance(decoded.get("params", {}), dict)
    )


def _plain_get_task(params: dict[str, Any]) -> GetTaskRequest | None:
    """GetTask's params as `ParseDict` reads them, made directly when they are the plain ones
    (a string id and tenant, an int32 historyLength): ParseDict's walk is a tenth of a read's
    CPU. None for any other params, which ParseDict reads (and refuses as it does)."""
    if not params.keys() <= GET_TASK_FIELDS:
        return None
    task_id, tenant = params.get("id", ""), params.get("tenant", "")
    if not isinstance(task_id, str) or not isinstance(tenant, str):
        return None
    history = params.get("historyLength")
    if "historyLength" in params and (type(history) is not int or not INT32 <= history < -INT32):
        return None
    try:
        request = GetTaskRequest(id=task_id, tenant=tenant)
        if history is not None:
            request.history_length = history
    except Exception:  # a value protobuf refuses: ParseDict refuses it in its own words
        return None
    return request


def _rest_request(method: str, path: re.Match[str], scope: Scope, body: bytes, decoded: Any) -> Any:
    """An HTTP+JSON request as its route reads it: SendMessage's body, the task's id in the
    path, the query's parameters (`parse_params`)."""
    if method == "SendMessage":
        return _message_request(body, decoded)
    if method == "CancelTask":
        return CancelTaskRequest(id=path.group(2))
    query = QueryParams(scope["query_string"])
    if method == "ListTasks":
        listed = ListTasksRequest()
        parse_params(query, listed)
        return listed
    got = GetTaskRequest()
    parse_params(query, got)
    got.id = path.group(2)
    return got


def _message_request(body: bytes, decoded: Any) -> SendMessageRequest:
    """The body as the SDK's `json_format.Parse` reads it, from the JSON already decoded."""
    try:
        # Parse refuses an object that names a key twice, where orjson keeps the last: the
        # check costs a few microseconds, a tenth of a second parse into the request.
        json.loads(body.decode("utf-8"), object_pairs_hook=_DuplicateChecker)
    except Exception as exc:
        raise ProtoParseError(f"Failed to load JSON: {exc}.") from exc
    try:
        request: SendMessageRequest = ParseDict(
            decoded, SendMessageRequest(), ignore_unknown_fields=True
        )
    except ProtoParseError:
        raise
    except Exception as exc:
        raise ProtoParseError(f"Failed to parse JSON: {type(exc).__name__}: {exc}.") from exc
    return request


def _send_response(sent: Task | A2AMessage) -> dict[str, Any]:
    """SendMessage's answer as the SDK writes its `SendMessageResponse` (without copying the
    task into one)."""
    return {"task": to_json(sent)} if isinstance(sent, Task) else {"message": to_json(sent)}


def _json_declared(content_type: str | None) -> bool:
    """Whether a body's declared media type is JSON: `application/json` or a `+json` type such
    as A2A's `application/a2a+json`, with any parameters; none declared counts as JSON."""
    if content_type is None:
        return True
    media = content_type.partition(";")[0].strip().lower()
    return media == "application/json" or (
        media.startswith("application/") and media.endswith("+json")
    )


def _method(verb: str, rest: str, decoded: Any, binding: str) -> str | None:
    """The A2A method a request calls: JSON-RPC's `method`, or the HTTP+JSON operation its
    HTTP method and path name (None: none of A2A's)."""
    if binding == JSONRPC:
        method = decoded.get("method") if isinstance(decoded, dict) else None
        return method if isinstance(method, str) and method in METHODS else None
    for verbs, path, name in REST_OPERATIONS:
        if verb in verbs and path.fullmatch(rest):
            return name
    return None


def _parsed(params: Any, into: Any) -> Any:
    """`params` (decoded JSON) as the protobuf message `into`, as the SDK parses them."""
    try:
        return ParseDict(params, into, ignore_unknown_fields=True)
    except Exception as exc:  # ParseError, or a value of the wrong shape for the message
        raise InvalidParamsError(
            "the params are not the operation's",
            data={"code": "invalid_input", "parseError": str(exc)},
        ) from None


@validate_version(PROTOCOL_VERSION_1_0)
async def _versioned(context: ServerCallContext) -> None:
    """Nothing: the SDK's check of the A2A-Version header, as its dispatchers make it."""


async def _version(scope: Scope) -> None:
    await _versioned(ServerCallContext(state={"headers": dict(Request(scope).headers)}))


def _renderers(binding: str, request_id: Any) -> tuple[Callable[[Frame], bytes], Any]:
    """How a stream writes an update and an error, in `binding`."""
    if binding == JSONRPC:
        head = b'{"jsonrpc":"2.0","id":' + orjson.dumps(request_id) + b',"result":'

        def render(frame: Frame) -> bytes:
            return b"".join((b"id: ", frame.id.encode(), b"\ndata: ", head, frame.json, b"}\n\n"))

        def error(exc: A2AError) -> bytes:
            body = orjson.dumps(build_error_response(request_id, exc))
            return b"event: error\ndata: " + body + b"\n\n"

        return render, error

    def render_rest(frame: Frame) -> bytes:
        return b"".join((b"id: ", frame.id.encode(), b"\ndata: ", frame.json, b"\n\n"))

    def error_rest(exc: A2AError) -> bytes:
        return b"event: error\ndata: " + orjson.dumps(build_rest_error_payload(exc)) + b"\n\n"

    return render_rest, error_rest


async def _error_answer(
    send: Send, binding: str, request_id: Any, error: A2AError, call: Call
) -> None:
    """An operation's refusal before its stream began, as its binding answers one."""
    headers = [RETRY_AFTER] if call.unavailable else []
    if binding == JSONRPC:
        body = build_error_response(request_id, error)
        status = 503 if call.unavailable else 200
    else:
        body = build_rest_error_payload(error)
        status = 503 if call.unavailable else int(body["error"]["code"])
    await _json(send, status, body, headers)


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
    send: Send,
    status: int,
    body: dict[str, Any] | bytes,
    headers: list[tuple[bytes, bytes]] | None = None,
    content_type: tuple[bytes, bytes] = (b"content-type", b"application/json"),
) -> None:
    data = body if isinstance(body, bytes) else orjson.dumps(body)
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                content_type,
                (b"content-length", str(len(data)).encode()),
                *(headers or []),
            ],
        }
    )
    await send({"type": "http.response.body", "body": data})
