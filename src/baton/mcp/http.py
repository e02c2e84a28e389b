"""The MCP door over Streamable HTTP, at `/mcp` on `baton serve`.

Every request carries `Authorization: Bearer <token>`, checked like GraphQL's (the same
`TokenCache`: a revoked token is refused within `BATON_TOKEN_CHECK_SECONDS`): no or a bad token
answers 401 and reaches nothing. A session made with one token serves that token only. Bodies
are bounded by `BATON_MAX_BODY_BYTES` (413). Sessions and listen streams are bounded per token
by `BATON_MCP_MAX_SESSIONS_PER_TOKEN` (429) and per process by `BATON_MCP_MAX_SESSIONS` (503):
a request that may open a session takes its place here, before the SDK's session manager makes
the session, and a refused one answers with no session id and leaves nothing behind.

What stays open (a session's notification stream, a listen stream, a call in flight) is
re-checked on the same period as WebSockets: one query per sweep for every open token; when a
token stopped working its requests in flight are ended (a stream ends as a finished response,
a call not yet answered is answered 401) and every one of its sessions is terminated, so a
revoked token loses its streams within the bound too.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from contextvars import Context
from functools import partial
from typing import Any, ClassVar

import anyio
import orjson
from mcp.server._otel import (
    OpenTelemetryMiddleware,
)  # SDK 2.3: the default middleware, not exported
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.context import CallNext, HandlerResult, ServerMiddleware, ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.exceptions import MCPError
from mcp.shared.inbound import MCP_PROTOCOL_VERSION_HEADER
from mcp_types import INVALID_REQUEST
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from opentelemetry.trace import ProxyTracerProvider, get_tracer_provider
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from baton.access.grants import TokenCache, bearer
from baton.access.principals import Principal
from baton.access.tokens import Grant
from baton.errors import Unavailable
from baton.mcp.direct import Direct
from baton.mcp.resources import Resources, connection_of
from baton.mcp.server import (
    HEADED,
    PRINCIPAL_KEY,
    TOKEN_KEY,
    ContextFactory,
    ToolResult,
    build,
    call,
    caller,
)
from baton.mcp.server import read as read_resource
from baton.mcp.sessions import (
    ADMISSION_KEY,
    STATUS_KEY,
    Held,
    ProcessFull,
    Sessions,
    TooManySessions,
)
from baton.mcp.tools import TOOLS
from baton.metrics import REGISTRY
from baton.telemetry import requests

log = logging.getLogger("baton.mcp")

PATH = "/mcp"
AUTHORIZATION_HEADER = b"authorization"
SESSION_HEADER = b"mcp-session-id"
VERSION_HEADER = MCP_PROTOCOL_VERSION_HEADER.lower().encode()
RETRY_AFTER = (b"retry-after", b"2")
# Ending a request of a token that stopped working: how long its last bytes may take to go.
FINISH_SECONDS = 2.0
REVOKED = "the bearer token no longer works"
MAX_USERS = 1024  # tokens whose SDK user is kept (`MCPDoor._user`)
NO_REBINDING_CHECKS = TransportSecuritySettings(enable_dns_rebinding_protection=False)
# While no tracer provider is installed, how often the door looks again for one.
TRACER_LOOK_SECONDS = 1.0


async def _json(send: Send, status: int, body: dict[str, Any], headers: list[Any]) -> None:
    data = orjson.dumps(body)
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(data)).encode()),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": data})


def _error(code: str, message: str) -> dict[str, Any]:
    # A JSON-RPC error with no id (the request was not read), carrying Baton's code.
    return {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": INVALID_REQUEST, "message": message, "data": {"code": code}},
    }


def _first(headers: list[tuple[bytes, bytes]], name: bytes) -> str | None:
    """A header's first value, as the SDK reads it (Starlette's `Headers.get`): reading the
    last of a repeated header would let a request look like one era here and another there."""
    for key, value in headers:
        if key == name:
            return value.decode("latin-1")
    return None


class _Answer:
    """Watches what a request's response has sent, so the door can finish it."""

    def __init__(self, send: Send, scope: Scope) -> None:
        self._send = send
        self._scope = scope
        self.status: int | None = None
        self.complete = False

    async def send(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            # A handler that refused a place names its status (429, 503) in the scope.
            status = self._scope.get(STATUS_KEY)
            if isinstance(status, int):
                message = {
                    **message,
                    "status": status,
                    "headers": [*message.get("headers", ()), RETRY_AFTER],
                }
            self.status = message["status"]
        elif message["type"] == "http.response.body" and not message.get("more_body", False):
            self.complete = True
        await self._send(message)

    async def finish(self) -> None:
        """End a response cut short: an unanswered request is answered 401, a stream ends as
        a finished response (not a dropped connection). Bounded: it never waits on the peer."""
        with anyio.move_on_after(FINISH_SECONDS), contextlib.suppress(Exception):
            if self.status is None:
                body = _error("unauthenticated", REVOKED)
                await _json(self.send, 401, body, [(b"www-authenticate", b'Bearer realm="baton"')])
            elif not self.complete:
                await self.send({"type": "http.response.body", "body": b"", "more_body": False})


class _Around:
    """The door's one middleware around every message (one layer rather than one per step:
    each layer costs a coroutine and a bound call per message).

    The message is handled in the request it came with (its log lines' request id, its trace):
    the SDK runs a session's handlers in the session's own task, which began with another
    request; the request's operation is the message's method, or the tool it calls. Inside
    that, so that its span joins the request's trace, the SDK's own middleware; its span per
    message (`OpenTelemetryMiddleware`) only once a tracer provider is installed (Baton's, when
    `OTEL_*` sets traces up, or another's): before, the span is a no-op that nothing reads but
    whose setup (attributes, context, a tracer lookup) every call paid. Innermost, an
    `initialize` is tied to the session it opens (`attach`)."""

    def __init__(self, sdk: list[ServerMiddleware[Any]], attach: ServerMiddleware[Any]) -> None:
        self.traced_chain = list(sdk)
        self.untraced_chain = [m for m in sdk if not isinstance(m, OpenTelemetryMiddleware)]
        self.attach = attach
        self.traced = False  # a provider, once installed, stays
        self.looked = -1.0  # when `traced` was last found False (a look reads the environment)

    def _chain(self) -> list[ServerMiddleware[Any]]:
        if not self.traced:
            now = time.monotonic()
            if now - self.looked < TRACER_LOOK_SECONDS:
                return self.untraced_chain
            self.looked = now
            if isinstance(get_tracer_provider(), ProxyTracerProvider):
                return self.untraced_chain
            self.traced = True
        return self.traced_chain

    def bare(self) -> bool:
        """Whether nothing of the SDK's would run around a message now (no span)."""
        return not self._chain()

    async def __call__(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        scope = getattr(ctx.request, "scope", None)
        with requests.resumed(scope):
            name = ctx.params.get("name") if ctx.method == "tools/call" and ctx.params else None
            requests.note_operation(name if isinstance(name, str) else ctx.method)
            inner = call_next
            if ctx.method == "initialize":
                inner = partial(self.attach, call_next=call_next)
            for middleware in reversed(self._chain()):
                inner = partial(middleware, call_next=inner)
            return await inner(ctx)


class MCPDoor:
    """The ASGI app at `/mcp`, with its lifespan (`run`)."""

    # A 2026-07-28 `tools/call` answered by the door (`baton.mcp.direct`), not through the
    # SDK's dispatch; off, the SDK answers every request (the tests compare the two).
    direct: ClassVar[bool] = True

    def __init__(
        self,
        context: ContextFactory,
        tokens: TokenCache,
        *,
        max_body_bytes: int,
        max_sessions: int,
        max_sessions_per_token: int,
        max_subscriptions: int,
        session_idle_seconds: float,
    ) -> None:
        self.tokens = tokens
        self.sessions = Sessions(max_sessions_per_token, max_sessions)
        self.resources = Resources(context, caller, self.sessions, max_subscriptions)
        self.server: Server[Any] = build(context, self.resources)
        around = _Around(self.server.middleware, self._attach_session)
        self.server.middleware[:] = [around]
        self.context = context
        self.manager = StreamableHTTPSessionManager(
            self.server,
            # No DNS-rebinding checks: they guard servers that trust a browser's ambient
            # credentials, and every request here carries its own bearer token. Said once:
            # without settings the SDK makes these (a model) for every request.
            security_settings=NO_REBINDING_CHECKS,
            max_request_body_size=max_body_bytes,
            # The door admits sessions (`Sessions`): every request that reaches the manager
            # without a session id holds a place, so the manager's own count never passes ours.
            max_sessions=None,
            session_idle_timeout=session_idle_seconds,
            # A call's answer is one JSON body: Baton sends nothing else while a call runs
            # (resource updates go on the session's GET stream), and an event stream per call
            # cost a fifth of the door's CPU.
            json_response=True,
        )
        self.answer: ASGIApp = self.manager.handle_request
        # A cache hint set for a method would be the SDK's to add: those it answers itself.
        hints = self.server.cache_hints
        if self.direct and not (hints.get("tools/call") and hints.get("resources/read")):
            self.answer = Direct(
                self.manager.handle_request,
                None if hints.get("tools/call") else self._call,
                read=None if hints.get("resources/read") else self._read,
                max_body_bytes=max_body_bytes,
                # The manager's task group is set while it runs (else it refuses requests).
                ready=lambda: around.bare() and self.manager._task_group is not None,
                server_info=self.server.server_info_stamp,
            )
        self._users: dict[str, tuple[Grant, AuthenticatedUser]] = {}
        # Requests in flight per token, each ended by cancelling its scope.
        self.inflight: dict[str, set[anyio.CancelScope]] = {}
        self._sweeper: asyncio.Task[None] | None = None
        _DOORS.add(self)

    @asynccontextmanager
    async def run(self) -> AsyncIterator[None]:
        async with self.manager.run():
            try:
                yield
            finally:
                if self._sweeper is not None:
                    self._sweeper.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await self._sweeper

    def open_sessions(self) -> int:
        """Handshake sessions the SDK's session manager holds now."""
        # The manager keeps them in a private dict (SDK 2.3); read, never written.
        return len(self.manager._server_instances)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers: list[tuple[bytes, bytes]] = scope["headers"]
        token = bearer(_first(headers, AUTHORIZATION_HEADER))
        try:
            grant = await self.tokens.grant(token)
        except Unavailable as exc:
            await _json(send, 503, _error("unavailable", exc.message), [RETRY_AFTER])
            return
        if grant is None or token is None:
            body = _error("unauthenticated", "a valid bearer token is required")
            await _json(send, 401, body, [(b"www-authenticate", b'Bearer realm="baton"')])
            return
        scope = {**scope, "user": self._user(token, grant), PRINCIPAL_KEY: grant.principal}
        scope[TOKEN_KEY] = token
        version = _first(headers, VERSION_HEADER)
        handshake = version is None or version in HANDSHAKE_PROTOCOL_VERSIONS
        if handshake and _first(headers, SESSION_HEADER) is None:
            # The manager makes a session for any such request (only an `initialize` keeps
            # it): the place is taken first, in this synchronous step.
            await self._open(token, scope, receive, send)
        else:
            await self._serve(token, scope, receive, send)

    def _user(self, token: str, grant: Grant) -> AuthenticatedUser:
        """The SDK's user for `token` (it ties a session to the token that opened it): made
        once per grant the token cache holds, not per request."""
        kept = self._users.get(token)
        if kept is not None and kept[0] is grant:
            return kept[1]
        if len(self._users) >= MAX_USERS:
            self._users.clear()
        user = AuthenticatedUser(
            AccessToken(token=token, client_id=f"baton-token-{grant.id}", scopes=[])
        )
        self._users[token] = (grant, user)
        return user

    async def _open(self, token: str, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            held = self.sessions.admit(token)
        except (TooManySessions, ProcessFull) as refused:
            await _json(send, refused.status, _error(refused.code, refused.message), [RETRY_AFTER])
            return
        scope[ADMISSION_KEY] = held
        status: int | None = None
        try:
            status = await self._serve(token, scope, receive, send)
        finally:
            if held.session_id is None:  # no session came of it
                self.sessions.release(held)
            elif status is None or status >= 400:
                # The manager discards a session whose opening request failed.
                self.sessions.release(held)
            elif held.doomed:  # made, but its initialize failed or its token stopped working
                with anyio.CancelScope(shield=True):
                    await self._close(held)

    async def _serve(self, token: str, scope: Scope, receive: Receive, send: Send) -> int | None:
        """Serve one request, ended if its token stops working; the status it answered."""
        answer = _Answer(send, scope)
        with anyio.CancelScope() as cancel:
            scopes = self.inflight.setdefault(token, set())
            scopes.add(cancel)
            self._sweep_soon()
            try:
                await self.answer(scope, receive, answer.send)
            finally:
                scopes.discard(cancel)
                if not scopes and self.inflight.get(token) is scopes:
                    del self.inflight[token]
        if cancel.cancel_called:
            await answer.finish()
        return answer.status

    def _call(
        self, scope: Scope, name: str, arguments: dict[str, Any] | None
    ) -> Awaitable[ToolResult] | None:
        """The call of tool `name` for the door's own answer, as the SDK's handler makes it;
        None for what the SDK answers: a tool not known, or one with `Mcp-Param-*` headers
        to check against its arguments."""
        tool = TOOLS.get(name)
        principal = scope.get(PRINCIPAL_KEY)
        if tool is None or name in HEADED or not isinstance(principal, Principal):
            return None
        if not isinstance(scope.get(TOKEN_KEY), str):
            return None
        return call(tool, self.context, principal, arguments)

    def _read(self, scope: Scope, uri: str) -> Awaitable[str] | None:
        """The read of resource `uri` for the door's own answer, as the SDK's handler makes it;
        None (the SDK answers) for a request the door did not authenticate."""
        principal = scope.get(PRINCIPAL_KEY)
        if not isinstance(principal, Principal) or not isinstance(scope.get(TOKEN_KEY), str):
            return None
        return read_resource(self.resources, principal, uri)

    # --- sessions -------------------------------------------------------------------------

    async def _attach_session(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        """Tie the place an opening `initialize` holds to the session the manager made for
        it: given back however the session ends (its connection's teardown), and the session
        ended at once if the handshake fails."""
        request = ctx.request
        scope = getattr(request, "scope", None)
        held = scope.get(ADMISSION_KEY) if ctx.method == "initialize" and scope else None
        if not isinstance(held, Held) or held.session_id is not None:
            return await call_next(ctx)
        connection = connection_of(ctx.session)
        session_id = connection.session_id
        if session_id is None:
            return await call_next(ctx)
        held.session_id = session_id
        held.close = self._terminator(session_id, scope.get("user") if scope else None)
        connection.exit_stack.callback(self.sessions.release, held)
        if held.doomed:
            raise MCPError(INVALID_REQUEST, REVOKED, data={"code": "unauthenticated"})
        try:
            return await call_next(ctx)
        except BaseException:
            held.doomed = True
            raise

    def _terminator(self, session_id: str, user: Any) -> Callable[[], Any]:
        """Ends a session as its client's DELETE would (the manager then forgets it)."""

        async def terminate() -> None:
            scope: Scope = {
                "type": "http",
                "asgi": {"version": "3.0"},
                "http_version": "1.1",
                "method": "DELETE",
                "scheme": "http",
                "path": PATH,
                "raw_path": PATH.encode(),
                "root_path": "",
                "query_string": b"",
                "headers": [(SESSION_HEADER, session_id.encode())],
                "client": None,
                "server": None,
                "user": user,
            }

            async def receive() -> Message:
                return {"type": "http.request", "body": b"", "more_body": False}

            async def send(message: Message) -> None:
                return None

            await self.manager.handle_request(scope, receive, send)

        return terminate

    async def _close(self, held: Held) -> None:
        try:
            await held.close()
        except Exception:
            log.exception("ending an MCP session failed")
        # Its connection's teardown gives the place back; at once here, whatever happened.
        self.sessions.release(held)

    # --- revocation -------------------------------------------------------------------------

    def _sweep_soon(self) -> None:
        if self._sweeper is None or self._sweeper.done():
            # Every session's, so not in the context of the request that started it.
            self._sweeper = asyncio.create_task(
                self._sweep(), name="baton-mcp-token-sweep", context=Context()
            )

    def _open_tokens(self) -> list[str]:
        return list(dict.fromkeys([*self.inflight, *self.sessions.tokens()]))

    async def _sweep(self) -> None:
        """Every `check_seconds` while anything is open: end what belongs to tokens that
        stopped working. One query per sweep, however many sessions and tokens."""
        while self._open_tokens():
            await asyncio.sleep(self.tokens.check_seconds)
            tokens = self._open_tokens()
            if not tokens:
                return
            try:
                working = await self.tokens.recheck(tokens)
            except Unavailable as exc:
                log.warning("cannot re-check MCP tokens now (%s)", exc)
                continue
            except Exception:
                log.exception("re-checking MCP tokens failed")
                continue
            for token in tokens:
                if token not in working:
                    await self._end(token)

    async def _end(self, token: str) -> None:
        """End all `token` holds: its requests in flight (listen streams and GET streams
        among them), then every session it opened, those still opening included."""
        for cancel in list(self.inflight.pop(token, ())):
            cancel.cancel()
        for held in self.sessions.of(token):
            held.doomed = True
            await self._close(held)


class _Gauges(Collector):
    """What the MCP doors of this process hold, read at scrape time."""

    def collect(self) -> Iterator[Metric]:
        doors = list(_DOORS)
        values = (
            ("baton_mcp_sessions", "MCP handshake sessions open.", MCPDoor.open_sessions),
            (
                "baton_mcp_listen_streams",
                "MCP subscriptions/listen streams open.",
                lambda door: door.resources.listening,
            ),
            (
                "baton_mcp_resource_subscriptions",
                "Resources followed by MCP sessions and listen streams.",
                lambda door: len(door.resources.following),
            ),
        )
        for name, text, read in values:
            gauge = GaugeMetricFamily(name, text)
            gauge.add_metric([], float(sum(read(door) for door in doors)))
            yield gauge


_DOORS: weakref.WeakSet[MCPDoor] = weakref.WeakSet()
REGISTRY.register(_Gauges())
