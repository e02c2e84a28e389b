"""The MCP door over Streamable HTTP, at `/mcp` on `baton serve`.

Every request carries `Authorization: Bearer <token>`, checked like GraphQL's (the same
`TokenCache`: a revoked token is refused within `BATON_TOKEN_CHECK_SECONDS`): no or a bad token
answers 401 and reaches nothing. A session made with one token serves that token only. Bodies
are bounded by `BATON_MAX_BODY_BYTES` (413), sessions per process by `BATON_MCP_MAX_SESSIONS`
(503) and per token by `BATON_MCP_MAX_SESSIONS_PER_TOKEN` (429; a listen stream counts as one).

What stays open (a session's notification stream, a listen stream, a call in flight) is
re-checked on the same period as WebSockets: one query per sweep for every open token; when a
token stopped working its requests in flight are ended and its sessions terminated, so a
revoked token loses its streams within the bound too.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import orjson
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.shared.exceptions import MCPError
from mcp.shared.inbound import MCP_PROTOCOL_VERSION_HEADER
from mcp_types import INVALID_REQUEST
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.types import Message, Receive, Scope, Send

from baton.errors import Unavailable
from baton.mcp.resources import Resources, connection_of
from baton.mcp.server import PRINCIPAL_KEY, TOKEN_KEY, ContextFactory, build, caller
from baton.mcp.sessions import Sessions, TooManySessions
from baton.web.auth import TokenCache, bearer

log = logging.getLogger("baton.mcp")

PATH = "/mcp"
SESSION_HEADER = b"mcp-session-id"
VERSION_HEADER = MCP_PROTOCOL_VERSION_HEADER.lower().encode()


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


class MCPDoor:
    """The ASGI app at `/mcp`, with its lifespan (`run`)."""

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
        self.sessions = Sessions(max_sessions_per_token)
        self.resources = Resources(context, caller, self.sessions, max_subscriptions)
        self.server: Server[Any] = build(context, self.resources)
        self.server.middleware.append(self._track_sessions)
        # No DNS-rebinding checks: they guard servers that trust a browser's ambient
        # credentials, and every request here carries its own bearer token.
        self.manager = StreamableHTTPSessionManager(
            self.server,
            max_request_body_size=max_body_bytes,
            max_sessions=max_sessions,
            session_idle_timeout=session_idle_seconds,
            # A call's answer is one JSON body: Baton sends nothing else while a call runs
            # (resource updates go on the session's GET stream), and an event stream per call
            # cost a fifth of the door's CPU.
            json_response=True,
        )
        # Requests in flight per token, each ended by cancelling its scope.
        self.inflight: dict[str, set[anyio.CancelScope]] = {}
        self._sweeper: asyncio.Task[None] | None = None

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

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = dict(scope["headers"])
        token = bearer(headers.get(b"authorization", b"").decode("latin-1"))
        try:
            grant = await self.tokens.grant(token)
        except Unavailable as exc:
            body = _error("unavailable", exc.message)
            await _json(send, 503, body, [(b"retry-after", b"2")])
            return
        if grant is None or token is None:
            body = _error("unauthenticated", "a valid bearer token is required")
            await _json(send, 401, body, [(b"www-authenticate", b'Bearer realm="baton"')])
            return
        version = headers.get(VERSION_HEADER, b"").decode("latin-1") or None
        opens_session = (
            scope["method"] == "POST"
            and SESSION_HEADER not in headers
            and (version is None or version in HANDSHAKE_PROTOCOL_VERSIONS)
        )
        if opens_session and self.sessions.count(token) >= self.sessions.per_token:
            full = TooManySessions(self.sessions.per_token)
            await _json(send, 429, _error(full.code, full.message), [])
            return
        user = AuthenticatedUser(
            AccessToken(token=token, client_id=f"baton-token-{grant.id}", scopes=[])
        )
        scope = {**scope, "user": user, PRINCIPAL_KEY: grant.principal, TOKEN_KEY: token}
        await self._serve(token, scope, receive, send)

    async def _serve(self, token: str, scope: Scope, receive: Receive, send: Send) -> None:
        with anyio.CancelScope() as cancel:
            scopes = self.inflight.setdefault(token, set())
            scopes.add(cancel)
            self._sweep_soon()
            try:
                await self.manager.handle_request(scope, receive, send)
            finally:
                scopes.discard(cancel)
                if not scopes and self.inflight.get(token) is scopes:
                    del self.inflight[token]

    # --- sessions -------------------------------------------------------------------------

    async def _track_sessions(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        """Count a handshake session against its token from its `initialize` on, until the
        session ends however it ends."""
        if ctx.method != "initialize" or ctx.request is None:
            return await call_next(ctx)
        _, token = caller(ctx)
        try:
            self.sessions.check_room(token)
        except TooManySessions as exc:
            raise MCPError(INVALID_REQUEST, exc.message, data={"code": exc.code}) from None
        result = await call_next(ctx)
        connection = connection_of(ctx.session)
        session_id = connection.session_id
        if session_id is not None:
            user = ctx.request.scope.get("user")
            held = self.sessions.open(
                token, self._terminator(session_id, connection.protocol_version, user), session_id
            )
            connection.exit_stack.callback(self.sessions.release, held)
            self._sweep_soon()
        return result

    def _terminator(self, session_id: str, version: str, user: Any) -> Callable[[], Any]:
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
                "headers": [
                    (SESSION_HEADER, session_id.encode()),
                    (VERSION_HEADER, version.encode()),
                ],
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

    # --- revocation -------------------------------------------------------------------------

    def _sweep_soon(self) -> None:
        if self._sweeper is None or self._sweeper.done():
            self._sweeper = asyncio.create_task(self._sweep(), name="baton-mcp-token-sweep")

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
        for cancel in list(self.inflight.pop(token, ())):
            cancel.cancel()
        for held in self.sessions.of(token):
            self.sessions.release(held)
            try:
                await held.close()
            except Exception:
                log.exception("ending an MCP session of a revoked token failed")
