"""The request each log line belongs to: its id, its principal and its operation.

The app's front door (`baton.app.Front`) begins every HTTP request and WebSocket with
`begin`: the id is the client's `X-Request-Id` when it gives a usable one (1 to
`MAX_REQUEST_ID` visible ASCII characters), else a new random one, and it is answered in the
response's `X-Request-Id` header. The doors fill in the rest as they learn it: the token cache
the principal's name (never the token), the engine the operation's name. Log lines read it
from a context variable, so whatever a request logs, at any depth, says which request it was.

Work no request asked for (a webhook delivery) is a request of its own (`background`).
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Coroutine, MutableMapping
from contextvars import ContextVar, Token
from dataclasses import dataclass, field
from typing import Any, TypeVar

from baton.telemetry import spans

T = TypeVar("T")

MAX_REQUEST_ID = 128
HEADER = b"x-request-id"
# Where the front door leaves the request and its trace context in the ASGI scope, for a door
# whose handlers run in tasks of their own (`resumed`).
SCOPE_KEY = "baton.request"
TRACE_KEY = "baton.trace"

_USABLE = re.compile(rb"[!-~]{1,%d}" % MAX_REQUEST_ID)


@dataclass(slots=True)
class Request:
    """What the log lines of one request say about it."""

    id: str
    principal: str | None = None
    operation: str | None = None
    started: float = field(default_factory=time.perf_counter)


CURRENT: ContextVar[Request | None] = ContextVar("baton_request", default=None)

# Whether work outside requests should be given one (`background`): JSON logs or traces.
wanted = False


def new_id() -> str:
    return os.urandom(8).hex()


def request_id(headers: list[tuple[bytes, bytes]]) -> str:
    """The client's X-Request-Id when it is usable (the first one), else a new id."""
    for name, value in headers:
        if name == HEADER:
            if _USABLE.fullmatch(value):
                return value.decode("ascii")
            break
    return new_id()


def begin(scope: MutableMapping[str, Any]) -> tuple[Request, Token[Request | None]]:
    """The request of an HTTP or WebSocket `scope`, made current (end it with `CURRENT.reset`)
    and left in the scope."""
    request = Request(request_id(scope["headers"]))
    scope[SCOPE_KEY] = request
    if spans.enabled():
        spans.annotate("baton.request_id", request.id)
        scope[TRACE_KEY] = spans.carry()
    return request, CURRENT.set(request)


def answered(scope: MutableMapping[str, Any]) -> list[tuple[bytes, bytes]]:
    """The response headers that answer the request id of `scope` (none outside `begin`)."""
    request = scope.get(SCOPE_KEY)
    return [(HEADER, request.id.encode())] if isinstance(request, Request) else []


def note_principal(handle: str) -> None:
    """The current request acts for `handle` (a principal's name: never a token)."""
    request = CURRENT.get()
    if request is not None:
        request.principal = handle
    spans.annotate("enduser.id", handle)


def note_operation(name: str) -> None:
    """The current request runs the operation `name` (a GraphQL operation, an MCP tool): the
    first one named stays the request's (a webhook delivery's, whose payloads are GraphQL
    operations too; a WebSocket's first)."""
    request = CURRENT.get()
    if request is not None and request.operation is None:
        request.operation = name


class resumed:
    """The request (and trace) of `scope` made current for a block run in another task."""

    __slots__ = ("_request", "_span", "_token")

    def __init__(self, scope: MutableMapping[str, Any] | None) -> None:
        scope = scope or {}
        request = scope.get(SCOPE_KEY)
        self._request = request if isinstance(request, Request) else None
        carried = scope.get(TRACE_KEY)
        self._span = spans.resumed(carried) if carried is not None else None
        self._token: Token[Request | None] | None = None

    def __enter__(self) -> None:
        if self._request is not None:
            self._token = CURRENT.set(self._request)
        if self._span is not None:
            self._span.__enter__()

    def __exit__(self, *exc: object) -> None:
        if self._span is not None:
            self._span.__exit__(None, None, None)
        if self._token is not None:
            CURRENT.reset(self._token)


def background(
    operation: str,
    work: Coroutine[Any, Any, T],
    attributes: dict[str, spans.Attribute],
    principal: str | None = None,
) -> Coroutine[Any, Any, T]:
    """`work` as a request of its own: a new id for its log lines and, when tracing, a trace
    of its own. `work` itself while neither JSON logs nor traces are on."""
    if not wanted:
        return work
    return _background(operation, work, attributes, principal)


async def _background(
    operation: str,
    work: Coroutine[Any, Any, T],
    attributes: dict[str, spans.Attribute],
    principal: str | None,
) -> T:
    request = Request(new_id(), principal, operation)
    token = CURRENT.set(request)
    own = {**attributes, "baton.request_id": request.id}
    if principal is not None:
        own["enduser.id"] = principal
    try:
        with spans.root(operation, own):
            return await work
    finally:
        CURRENT.reset(token)
