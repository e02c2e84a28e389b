"""A 2026-07-28 `tools/call` or `resources/read` answered by the door itself, past the SDK's
generic dispatch.

In the 2026-07-28 era a call is one POST. The SDK's session manager buffers its body, checks
its headers, parses it, validates the JSON-RPC envelope and the request's `_meta` envelope (its
inbound ladder) and the call's params against the era's surface; then it builds a connection,
a dispatch context, a runner, a session and a request context, runs the middleware chain and
Baton's handler, validates Baton's result against the era's result type and dumps it, stamps
its server info, wraps it in a response model, dumps that and encodes it with `json`.

Here the same request meets the same checks, made by the SDK's own functions in the same order
(its body limit, content type and `Accept` checks, `json.loads`, `JSONRPCRequest`, the routing
headers, `classify_inbound_request`, the era's surface, the params model); then the tool is
called as the SDK's handler calls it (`baton.mcp.server.call`), or the resource read as its
handler reads it (`baton.mcp.server.read`: the URI's bounds, then the read), and the answer is
written as the SDK writes it: the result in the result type's shape (its key order,
`resultType`, the sieve's defaults, the server-info stamp), the same JSON-RPC envelope, status
and headers; a refusal the same JSON-RPC error; encoded by orjson, so non-ASCII text travels as
UTF-8 rather than escaped, the same JSON either way. What is skipped is the SDK's machinery
around Baton's own handler and the re-validation of Baton's own result.

Anything else goes to the SDK as it came: another method or era, a request some check refuses,
an unknown tool or one whose arguments have `Mcp-Param-*` headers to check, a method with a
cache hint set, traces on (the SDK's span per message). The messages already read are handed
back to it, so it reads the same request and answers it, its refusals included.
`tests/mcp/test_direct.py` holds both paths to the same answers.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from functools import cache
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
from mcp_types import (
    SERVER_INFO_META_KEY,
    CallToolRequestParams,
    JSONRPCError,
    JSONRPCRequest,
    ReadResourceRequestParams,
    ReadResourceResult,
)
from mcp_types import methods as _methods
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from baton.telemetry import requests

CALL = "tools/call"
READ = "resources/read"
VERSION_HEADER = MCP_PROTOCOL_VERSION_HEADER.encode("ascii")
JSON_TYPE = b"application/json"

# The tool call: the request's scope (its caller), the tool's name and arguments; None when
# no such tool is answered here.
Call = Callable[[Scope, str, dict[str, Any] | None], Awaitable[dict[str, Any]] | None]
# The resource read: the request's scope and the URI; the resource's JSON text, or None when
# the SDK answers it.
Read = Callable[[Scope, str], Awaitable[str] | None]
MIME = "application/json"


@cache
def _read_shape(version: str) -> tuple[tuple[str, ...], dict[str, Any]]:
    """A read's result as the SDK's sieve writes it in `version`: its keys in order, and what
    it adds to the contents (the result type's defaults: cache scope, TTL, `resultType`).
    Taken from the sieve itself, so a change of the SDK's defaults shows here too."""
    empty = ReadResourceResult(contents=[]).model_dump(
        by_alias=True, mode="json", exclude_none=True
    )
    sieved = _methods.serialize_server_result(READ, version, empty)
    if sieved.get("resultType") is None:  # as the SDK fills it in this era
        sieved["resultType"] = "complete"
    return tuple(sieved), {k: v for k, v in sieved.items() if k != "contents"}


def _read_result(version: str, uri: str, text: str) -> dict[str, Any]:
    keys, fixed = _read_shape(version)
    # One text content, its keys in the sieve's order.
    contents = [{"mimeType": MIME, "text": text, "uri": uri}]
    return {k: contents if k == "contents" else fixed[k] for k in keys}


def _replay(read: list[Message], receive: Receive) -> Receive:
    """`receive`, first giving back the messages already read from it."""
    pending = list(read)

    async def replay() -> Message:
        if pending:
            return pending.pop(0)
        return await receive()

    return replay


class Direct:
    """The door's own answer to a 2026-07-28 `tools/call` (and `resources/read`, given `read`);
    `sdk` answers everything else."""

    def __init__(
        self,
        sdk: ASGIApp,
        call: Call | None,
        *,
        read: Read | None = None,
        max_body_bytes: int,
        ready: Callable[[], bool],
        server_info: dict[str, Any],
    ) -> None:
        self.sdk = sdk
        self.call = call
        self.read = read
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
        req, params, version = call
        answered: Awaitable[Any] | None = None
        if isinstance(params, CallToolRequestParams):
            operation = params.name
            if self.call is not None:
                answered = self.call(scope, params.name, params.arguments)
        else:
            operation = READ
            if self.read is not None:
                answered = self.read(scope, params.uri)
        if answered is None:  # what the SDK's handler answers (or refuses)
            await self.sdk(scope, _replay(read, receive), send)
            return
        requests.note_operation(operation)
        try:
            result = await answered
            if isinstance(params, ReadResourceRequestParams):
                result = _read_result(version, params.uri, result)
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
    ) -> tuple[JSONRPCRequest, CallToolRequestParams | ReadResourceRequestParams, str] | None:
        """The request's envelope and params, if it is a call or read answered here and every
        check the SDK makes of it passes (the SDK answers any refusal)."""
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
        method = req.method
        if method == CALL:
            if self.call is None:
                return None
        elif method != READ or self.read is None:
            return None
        if find_duplicated_routing_header(request.headers.items()) is not None:
            return None
        verdict = classify_inbound_request(decoded, headers=dict(request.headers))
        if isinstance(verdict, InboundLadderRejection):
            return None
        try:
            _methods.validate_client_request(method, verdict.protocol_version, req.params)
            model = CallToolRequestParams if method == CALL else ReadResourceRequestParams
            params = model.model_validate(req.params or {}, by_name=False)
        except (ValueError, KeyError):  # ValidationError is a ValueError
            return None
        return req, params, verdict.protocol_version

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
