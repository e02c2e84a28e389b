"""The MCP server: Baton's tools and resources on the official SDK's lowlevel `Server`.

Every handler learns its caller from the HTTP request the door authenticated
(`baton.mcp.http`), builds the same `Context` the GraphQL resolvers get, and calls the same
services. A tool's arguments are held first to the bounds GraphQL's variables are held to, by
the same check (`baton.inputs`: values, depth, NUL and lone surrogates), then to its input's
shape (types, required fields, enums, unknown keys, GraphQL's Int range: what GraphQL's type
system checks); a refusal, by these checks or by the service, is a tool error whose structured
content is Baton's error as the API gives it (`code`, `message`, and the error type's own
fields), never an exception trace. The resource URIs a request names pass the same check before
any is looked up.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from importlib.metadata import version
from typing import Any, TypeVar, cast

import mcp_types as types
import orjson
from jsonschema.exceptions import ValidationError
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError

from baton import inputs
from baton.access.principals import Principal
from baton.errors import BatonError, InvalidInput
from baton.mcp import shapes
from baton.mcp.resources import Resources
from baton.mcp.tools import TOOLS, Refused, Tool, shown
from baton.services.context import Context

log = logging.getLogger("baton.mcp")

INSTRUCTIONS = (
    "Baton hands tasks between AI agents and tracks pipeline runs. Every move of either "
    "lifecycle is a tool named as Baton's GraphQL mutation (handOff, acceptTask, submitResult, "
    "claimRun, …); `protocol` lists the moves, `waitingOnMe` what you can do now. A refused move "
    "is a tool error with Baton's code (invalid_state with the allowed moves, "
    "version_conflict, forbidden, not_found, invalid_input, lease_lost). Tasks and runs are "
    "resources (baton://tasks/{id}, baton://runs/{id}); subscribe to learn when one changes."
)

# Where the door leaves the caller and its token in the HTTP request's scope.
PRINCIPAL_KEY = "baton.principal"
TOKEN_KEY = "baton.token"

ContextFactory = Callable[[Principal], Context]


def caller(ctx: ServerRequestContext[Any, Any]) -> tuple[Principal, str]:
    """The principal and token of the request being served (set by the door)."""
    request = ctx.request
    scope = getattr(request, "scope", None) or {}
    principal, token = scope.get(PRINCIPAL_KEY), scope.get(TOKEN_KEY)
    if not isinstance(principal, Principal) or not isinstance(token, str):
        raise MCPError(types.INVALID_REQUEST, "not authenticated")
    return principal, token


def _field(error: ValidationError) -> str:
    out = ""
    for part in error.absolute_path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def argument_problem(tool: Tool, arguments: dict[str, Any]) -> InvalidInput | None:
    """What is wrong with `arguments`, naming the field: first the bounds GraphQL's variables
    are held to (`baton.inputs`: how many values, how deep, strings PostgreSQL can store),
    whose walk stops at the bound, so the schema only ever sees input within it; then their
    shape."""
    problem = inputs.check(arguments).problem
    if problem is not None:
        return problem.error()
    return shape_problem(tool, arguments)


def shape_problem(tool: Tool, arguments: dict[str, Any]) -> InvalidInput | None:
    """What is wrong with `arguments`' shape, as the `invalid_input` GraphQL would give for a
    value of the wrong type: naming the field. The first error found, not every one."""
    if tool.accepts is not None and tool.accepts(arguments):
        return None
    error = next(iter(tool.checker.iter_errors(arguments)), None)
    if error is None:
        return None
    where = _field(error)
    if error.validator == "required":
        missing = error.message.split("'")[1] if "'" in error.message else ""
        return InvalidInput(f"{where}.{missing}" if where else missing, "is required")
    if error.validator == "additionalProperties":
        known = set(error.schema.get("properties", {}))
        extra = sorted(set(error.instance) - known) if isinstance(error.instance, dict) else []
        name = extra[0] if extra else ""
        return InvalidInput(
            f"{where}.{name}" if where else name, f"is not a field of {tool.name}'s input"
        )
    if error.validator == "enum":
        allowed = ", ".join(map(str, error.validator_value))
        return InvalidInput(where or "input", f"must be one of {allowed}")
    if error.validator == "type":
        return InvalidInput(where or "input", f"must be of type {error.validator_value}")
    if error.validator in ("minimum", "maximum"):  # only GraphQL's Int's range is in a shape
        return InvalidInput(
            where or "input",
            f"must be a whole number from {inputs.MIN_INT} to {inputs.MAX_INT} (GraphQL's Int)",
        )
    return InvalidInput(where or "input", error.message)


P = TypeVar("P")
R = TypeVar("R")
Handler = Callable[[ServerRequestContext[Any, Any], P], Awaitable[R]]


def uris_checked(handler: Handler[P, R], uris: Callable[[P], object], field: str) -> Handler[P, R]:
    """`handler`, once the resource URIs its request names (`uris(params)`, at `field`) pass the
    check every input gets: a URI's id is looked up in the database. A refusal is the JSON-RPC
    error the resource handlers give, carrying Baton's code."""

    async def checked(ctx: ServerRequestContext[Any, Any], params: P) -> R:
        _check_uris(uris(params), field)
        return await handler(ctx, params)

    return checked


def _check_uris(uris: object, field: str) -> None:
    problem = inputs.check(uris, field).problem
    if problem is not None:
        error = problem.error()
        data = {"code": error.code, "message": error.message}
        raise MCPError(types.INVALID_PARAMS, error.message, data=data)


async def read(resources: Resources, principal: Principal, uri: str) -> str:
    """The JSON text of resource `uri` read by `principal`, as the SDK's handler reads it (the
    URI's bounds, then the read; a refusal the same `MCPError`): for the door's own answer
    (`baton.mcp.direct`)."""
    _check_uris(uri, "uri")
    return _text(await resources.body(principal, uri))


def _uri(params: types.ReadResourceRequestParams | types.SubscribeRequestParams) -> str:
    return params.uri


def _listened(params: types.SubscriptionsListenRequestParams) -> list[str]:
    return list(params.notifications.resource_subscriptions or ())


def _text(value: Any) -> str:
    return orjson.dumps(value).decode()


# A tool's answer, as the SDK's `CallToolResult` puts it on the wire: a dict, which the SDK
# checks against the protocol's result type and shapes for the era as it does a model, without
# first building the model and dumping it again.
ToolResult = dict[str, Any]


def _result(text: str, content: shapes.JSONObject, is_error: bool) -> ToolResult:
    # Keys in the order the SDK's result type dumps them, so the door's own 2026-07-28 answer
    # (`baton.mcp.direct`) reads as the SDK's.
    return {
        "content": [{"text": text, "type": "text"}],
        "isError": is_error,
        "resultType": "complete",  # what the model says; eras before 2026-07-28 drop it
        "structuredContent": content,
    }


def success(content: shapes.JSONObject) -> ToolResult:
    return _result(_text(content), content, False)


def refusal(error: BatonError) -> ToolResult:
    try:
        body = shapes.error(error)
    except BatonError:  # not an expected failure of a call (the database away): code and message
        body = {"type": "Error", "code": error.code, "message": error.message}
    return _result(f"{body['code']}: {body['message']}", body, True)


async def call(
    tool: Tool, context: ContextFactory, principal: Principal, arguments: dict[str, Any] | None
) -> ToolResult:
    """`tool` called by `principal` with `arguments` (the call's params, validated): its
    answer, a refusal included. Both ways in call it: the SDK's handler and the door's own
    (`baton.mcp.direct`)."""
    arguments = dict(arguments or {})
    problem = argument_problem(tool, arguments)
    if problem is not None:
        return refusal(problem)
    try:
        return success(await tool.call(context(principal), arguments))
    except Refused as refused:
        return refusal(refused.error)
    except BatonError as exc:  # e.g. the database away: said as Baton says it
        return refusal(exc)


def _declares_headers(schema: Any) -> bool:
    """Whether `schema` has an `x-mcp-header` anywhere (a property the client mirrors in an
    `Mcp-Param-*` header)."""
    if isinstance(schema, dict):
        return "x-mcp-header" in schema or any(_declares_headers(v) for v in schema.values())
    if isinstance(schema, list):
        return any(_declares_headers(v) for v in schema)
    return False


# The tools that declare one: only their calls have `Mcp-Param-*` headers to check.
HEADED = frozenset(name for name, tool in TOOLS.items() if _declares_headers(tool.input_schema))


def _tool(tool: Tool) -> types.Tool:
    return types.Tool(
        name=tool.name,
        description=tool.description,
        input_schema=tool.input_schema,
        annotations=types.ToolAnnotations(
            read_only_hint=tool.read_only,
            destructive_hint=False if tool.read_only else None,
            open_world_hint=False,
        ),
    )


def build(context: ContextFactory, resources: Resources) -> Server[Any]:
    """Baton's MCP server; `context` makes a resolver's context for a principal."""

    async def list_tools(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        principal, _ = caller(ctx)
        return types.ListToolsResult(tools=[_tool(t) for t in shown(principal)])

    async def call_tool(
        ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> ToolResult:
        principal, _ = caller(ctx)
        tool = TOOLS.get(params.name)
        if tool is None:
            raise MCPError(types.INVALID_PARAMS, f"no tool named {params.name!r}")
        return await call(tool, context, principal, params.arguments)

    def input_schema(name: str) -> dict[str, Any] | None:
        # For the SDK's check of `Mcp-Param-*` headers against the schema's `x-mcp-header`
        # properties: a tool that declares none has nothing to check (None: skipped), and
        # walking its schema on every call would find that again.
        tool = TOOLS.get(name)
        return tool.input_schema if tool is not None and tool.name in HEADED else None

    server: Server[Any] = Server(
        "baton",
        version=version("baton"),
        title="Baton",
        instructions=INSTRUCTIONS,
        get_tool_input_schema=input_schema,
        on_list_tools=list_tools,
        # The runner takes a dict as it takes a model (`HandlerResult`); the parameter's type
        # names only the models.
        on_call_tool=cast(Any, call_tool),
        on_list_resources=resources.list,
        on_list_resource_templates=resources.templates,
        on_read_resource=uris_checked(resources.read, _uri, "uri"),
        on_subscribe_resource=uris_checked(resources.subscribe, _uri, "uri"),
        on_unsubscribe_resource=resources.unsubscribe,  # looks nothing up
        on_subscriptions_listen=uris_checked(
            resources.listen, _listened, "notifications.resourceSubscriptions"
        ),
    )
    return server
