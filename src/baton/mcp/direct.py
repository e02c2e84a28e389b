"""A 2026-07-28 `tools/call` answered by the door itself, past the SDK's generic dispatch.

In the 2026-07-28 era a call is one POST. The SDK's session manager buffers its body, checks
its headers, parses it, validates the JSON-RPC envelope and the request's `_meta` envelope (its
inbound ladder) and the call's params against the era's surface; then it builds a connection,
a dispatch context, a runner, a session and a request context, runs the middleware chain and
Baton's handler, validates Baton's result against the era's result type and dumps it, stamps
its server info, wraps it in a response model, dumps that and encodes it with `json`.

Here the same request meets the same checks, made by the SDK's own functions in the same order
(its body limit, content type and `Accept` checks, `json.loads`, `JSONRPCRequest`, the routing
headers, `classify_inbound_request`, the era's surface, `CallToolRequestParams`); then the tool
is called as the SDK's handler calls it (`baton.mcp.server.call`), and its answer is written as
the SDK writes it: the result in the result type's shape (its key order, `resultType`, the
server-info stamp), the same JSON-RPC envelope, status and headers; encoded by orjson, so
non-ASCII text travels as UTF-8 rather than escaped, the same JSON either way. What is skipped
is the SDK's machinery around Baton's own handler and the re-validation of Baton's own result.

Anything else goes to the SDK as it came: another method or era, a request some check refuses,
an unknown tool or one whose arguments have `Mcp-Param-*` headers to check, traces on (the
SDK's span per message). The messages already read are handed back to it, so it reads the same
request and answers it, its refusals included. `tests/mcp/test_direct.py` holds both paths to
the same answers.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
from mcp.server._streamable_http_modern import (  # SDK 2.3: its writer of a modern reply
    _write,
)
from mcp.server.runner import modern_error_data
from mcp.server.streamable_http import check_accept_headers
from mcp.shared.inbound import (
    MCP_PROTOCOL_VERSION_HEADER,
    InboundLadderRejection,
    classify_inbound_request,
    find_duplicated_routing_header,
)
from mcp_types import SERVER_INFO_META_KEY, CallToolRequestParams, JSONRPCError, JSONRPCRequest
from mcp_types import methods as _methods
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from baton.telemetry import requests

METHOD = "tools/call"
VERSION_HEADER = MCP_PROTOCOL_VERSION_HEADER.encode("ascii")
JSON_TYPE = b"application/json"

# The tool call: the request's scope (its caller), the tool's name and arguments; None when
# no such tool is answered here.
Call = Callable[[Scope, str, dict[str, Any] | None], Awaitable[dict[str, Any]] | None]


def _replay(read: list[Message], receive: Receive) -> Receive:
    """`receive`, first giving back the messages already read from it."""
    pending = list(read)

    async def replay() -> Message:
        if pending:
            return pending.pop(0)
        return await receive()

    return replay


class Direct:
    """The door's own answer to a 2026-07-28 `tools/call`; `sdk` answers everything else."""

    def __init__(
        self,
        sdk: ASGIApp,
        call: Call,
        *,
        max_body_bytes: int,
        ready: Callable[[], bool],
        server_info: dict[str, Any],
    ) -> None:
        self.sdk = sdk
        self.call = call
        self.max_body_bytes = max_body_bytes
        # Whether the SDK would run nothing of its own around the handler now (no span, its
        # session manager running): else it answers.
        self.ready = ready
        # The SDK stamps a fresh copy on every result; this one is encoded at once, never kept.
        self.meta = {SERVER_INFO_META_KEY: server_info}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = self._request(scope)
        if request is None:
            await self.sdk(scope, receive, send)
            return
        read: list[Message] = []
        body = await self._body(receive, read)
        call = self._call(request, body) if body is not None else None
        if call is None:
            await self.sdk(scope, _replay(read, receive), send)
            return
        req, name, arguments = call
        answered = self.call(scope, name, arguments)
        if answered is None:  # a tool the SDK's handler answers (or refuses)
            await self.sdk(scope, _replay(read, receive), send)
            return
        requests.note_operation(name)
        try:
            result = await answered
        except Exception as exc:  # as the SDK's modern entry maps a handler's failure
            error = JSONRPCError(jsonrpc="2.0", id=req.id, error=modern_error_data(exc))
            await _write(error, scope, receive, send)
            return
        await self._write(scope, send, req, result)

    def _request(self, scope: Scope) -> Request | None:
        """The request, if it may be a 2026-07-28 call the SDK would read: the checks its
        session manager and modern entry make before reading the body."""
        if scope["method"] != "POST" or not self.ready():
            return None
        headers: list[tuple[bytes, bytes]] = scope["headers"]
        version = next((v.decode("latin-1") for k, v in headers if k == VERSION_HEADER), None)
        if version not in MODERN_PROTOCOL_VERSIONS:
            return None
        request = Request(scope)
        content_type = request.headers.get("content-type")
        if content_type is None or not content_type.lower().startswith("application/json"):
            return None
        if not check_accept_headers(request)[0]:
            return None
        declared = request.headers.get("content-length")
        if declared is not None:
            try:
                if int(declared) > self.max_body_bytes:
                    return None
            except ValueError:
                pass
        return request

    async def _body(self, receive: Receive, read: list[Message]) -> bytes | None:
        """The body, read as the SDK's body limit reads it (each message kept in `read`);
        None if that would refuse it or it did not arrive whole."""
        body = bytearray()
        while True:
            message = await receive()
            read.append(message)
            if message["type"] != "http.request":
                return None
            chunk = message.get("body", b"")
            if len(body) + len(chunk) > self.max_body_bytes:
                return None
            body.extend(chunk)
            if not message.get("more_body", False):
                return bytes(body)

    def _call(
        self, request: Request, body: bytes
    ) -> tuple[JSONRPCRequest, str, dict[str, Any] | None] | None:
        """The call's envelope, tool name and arguments, if every check the SDK makes of the
        request passes (the SDK answers any refusal)."""
        try:
            decoded = json.loads(body)
        except (ValueError, RecursionError):
            return None
        if not isinstance(decoded, dict) or "id" not in decoded:
            return None
        try:
            req = JSONRPCRequest.model_validate(decoded)
        except ValidationError:
            return None
        if req.method != METHOD:
            return None
        if find_duplicated_routing_header(request.headers.items()) is not None:
            return None
        verdict = classify_inbound_request(decoded, headers=dict(request.headers))
        if isinstance(verdict, InboundLadderRejection):
            return None
        try:
            _methods.validate_client_request(METHOD, verdict.protocol_version, req.params)
            params = CallToolRequestParams.model_validate(req.params or {}, by_name=False)
        except (ValueError, KeyError):  # ValidationError is a ValueError
            return None
        return req, params.name, params.arguments

    async def _write(
        self, scope: Scope, send: Send, req: JSONRPCRequest, result: dict[str, Any]
    ) -> None:
        answer = {"jsonrpc": "2.0", "id": req.id, "result": {**result, "_meta": self.meta}}
        try:
            data = orjson.dumps(answer)
        except TypeError:  # what orjson does not write (an id past 64 bits): as the SDK does
            data = json.dumps(answer, separators=(",", ":")).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [
                    (b"content-length", str(len(data)).encode()),
                    (b"content-type", JSON_TYPE),
                ],
            }
        )
        await send({"type": "http.response.body", "body": data})
