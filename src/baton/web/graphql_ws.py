"""GraphQL over WebSocket: both subprotocols, on the engine.

One coroutine per socket reads messages; each operation runs as its own task. The token comes
in `connection_init` (`{"authorization": "Bearer …"}`); until the connection is acknowledged
nothing runs, and a socket that sends no `connection_init` within the init timeout is closed
(4408, both subprotocols). Once acknowledged, a socket's token is re-checked every
`token_check` seconds by one sweep per process, which asks the database about every open
socket's token in one query and closes those whose token was revoked or has expired with 4403;
each new operation also checks the token (through the short-lived cache). While the database is
unavailable a `connection_init` is answered by closing with 1013 (try again later).
Each event of a subscription goes out as one text frame; the engine shares one execution (and
one encoded payload) among subscribers of the same document, variables and principal, so here
a frame is that payload with the operation's id put in front.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson
from graphql import OperationType
from starlette.types import Message, Receive, Scope, Send

from baton.access.principals import Principal
from baton.engine.runner import Engine, Outcome, Request
from baton.errors import Unavailable
from baton.web.auth import TokenCache, bearer
from baton.web.ws_protocol import LEGACY, TRANSPORT, Close, Dialect, choose

log = logging.getLogger("baton.ws")

ContextFactory = Callable[[Principal], Any]


@dataclass(frozen=True)
class SocketLimits:
    init_timeout: float = 10.0  # seconds to send `connection_init`
    max_operations: int = 100  # operations running at once on one socket
    keep_alive: float = 15.0  # seconds between legacy `ka` messages
    max_unauthenticated: int = 1000  # sockets per process not yet acknowledged
    token_check: float = 5.0  # seconds between re-checks of open sockets' tokens


class GraphQLWS:
    def __init__(
        self,
        engine: Engine,
        tokens: TokenCache,
        context: ContextFactory,
        limits: SocketLimits = SocketLimits(),
    ) -> None:
        self.engine = engine
        self.tokens = tokens
        self.context = context
        self.limits = limits
        self.unauthenticated = 0  # sockets open and not yet acknowledged
        self.by_token: dict[str, set[_Socket]] = {}  # acknowledged sockets, by token
        self._sweeper: asyncio.Task[None] | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        message = await receive()
        if message["type"] != "websocket.connect":
            return
        dialect = choose(list(scope.get("subprotocols") or ()))
        if dialect is None:
            await send({"type": "websocket.accept"})
            await _close(send, Close.SUBPROTOCOL_NOT_ACCEPTABLE, "Subprotocol not acceptable")
            return
        await send({"type": "websocket.accept", "subprotocol": dialect.name})
        if self.unauthenticated >= self.limits.max_unauthenticated:
            await _close(send, Close.TRY_AGAIN_LATER, "Too many connections waiting to start")
            return
        self.unauthenticated += 1
        socket = _Socket(self, dialect, receive, send)
        try:
            await socket.run()
        finally:
            if not socket.acknowledged:
                self.unauthenticated -= 1
            self.forget(socket)
            await socket.stop()

    # --- token re-checks --------------------------------------------------------------------

    def remember(self, socket: _Socket) -> None:
        assert socket.token is not None
        self.by_token.setdefault(socket.token, set()).add(socket)
        if self._sweeper is None or self._sweeper.done():
            self._sweeper = asyncio.create_task(self._sweep(), name="baton-ws-token-sweep")

    def forget(self, socket: _Socket) -> None:
        if socket.token is None:
            return
        sockets = self.by_token.get(socket.token)
        if sockets is not None:
            sockets.discard(socket)
            if not sockets:
                del self.by_token[socket.token]

    async def _sweep(self) -> None:
        """Every `token_check` seconds while sockets are open: close those whose token stopped
        working. One query per sweep, however many sockets and tokens."""
        while self.by_token:
            await asyncio.sleep(self.limits.token_check)
            tokens = list(self.by_token)
            if not tokens:
                return
            try:
                working = await self.tokens.recheck(tokens)
            except Unavailable as exc:
                log.warning(
                    "cannot re-check WebSocket tokens now (%s); next try in %.0fs",
                    exc,
                    self.limits.token_check,
                )
                continue
            except Exception:
                log.exception("re-checking WebSocket tokens failed")
                continue
            for token in tokens:
                if token not in working:
                    for socket in list(self.by_token.pop(token, ())):
                        await socket.revoke()


async def _close(send: Send, code: int, reason: str) -> None:
    with contextlib.suppress(Exception):  # the peer may be gone already
        await send({"type": "websocket.close", "code": code, "reason": reason})


class _Closed(Exception):
    """The socket is closing; stop reading it."""


class _Socket:
    def __init__(self, server: GraphQLWS, dialect: Dialect, receive: Receive, send: Send) -> None:
        self.server = server
        self.dialect = dialect
        self.receive = receive
        self._send = send
        self.init_received = False
        self.acknowledged = False
        self.principal: Principal | None = None
        self.token: str | None = None
        self.context: Any = None
        self.operations: dict[str, asyncio.Task[None]] = {}
        self.keep_alive: asyncio.Task[None] | None = None
        self.closed = False

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.server.limits.init_timeout
        while True:
            try:
                if self.init_received:
                    message = await self.receive()
                else:
                    message = await asyncio.wait_for(self.receive(), deadline - loop.time())
            except TimeoutError:
                await self.close(Close.INIT_TIMEOUT, "Connection initialisation timeout")
                return
            if message["type"] == "websocket.disconnect":
                self.closed = True
                return
            try:
                await self.handle(message)
            except _Closed:
                return

    async def stop(self) -> None:
        tasks = list(self.operations.values())
        if self.keep_alive is not None:
            tasks.append(self.keep_alive)
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    async def close(self, code: int, reason: str) -> None:
        if not self.closed:
            self.closed = True
            await _close(self._send, code, reason)
        raise _Closed

    async def revoke(self) -> None:
        """Close from outside the read loop: the token stopped working."""
        if self.closed:
            return
        self.closed = True
        for task in self.operations.values():
            task.cancel()
        await _close(self._send, Close.FORBIDDEN, "Forbidden: the token was revoked or expired")

    async def send(self, text: str) -> None:
        if self.closed:
            return
        try:
            await self._send({"type": "websocket.send", "text": text})
        except Exception:  # the peer went away; the read loop sees the disconnect
            self.closed = True

    async def send_json(self, message: dict[str, Any]) -> None:
        await self.send(orjson.dumps(message).decode())

    # --- messages ---------------------------------------------------------------------

    async def handle(self, message: Message) -> None:
        text = message.get("text")
        if text is None:
            await self.close(Close.INVALID_MESSAGE, "Messages must be text (JSON)")
            return
        try:
            parsed = orjson.loads(text)
        except orjson.JSONDecodeError:
            await self.close(Close.INVALID_MESSAGE, "Messages must be JSON objects")
            return
        kind = parsed.get("type") if isinstance(parsed, dict) else None
        if not isinstance(kind, str):
            await self.close(Close.INVALID_MESSAGE, "Messages need a string `type`")
            return
        d = self.dialect
        if kind == "connection_init":
            await self.init(parsed.get("payload"))
        elif kind == "ping" and d is TRANSPORT:
            await self.send_json({"type": "pong"})
        elif kind == "pong" and d is TRANSPORT:
            return
        elif kind == d.subscribe:
            await self.start(parsed.get("id"), parsed.get("payload"))
        elif kind == d.stop:
            self.end(parsed.get("id"))
        elif kind == "connection_terminate" and d is LEGACY:
            await self.close(Close.NORMAL, "")
        else:
            await self.close(Close.INVALID_MESSAGE, f"Unexpected message type {kind[:40]!r}")

    async def init(self, payload: Any) -> None:
        if self.init_received:
            await self.close(Close.TOO_MANY_INIT_REQUESTS, "Too many initialisation requests")
        self.init_received = True
        raw = None
        if isinstance(payload, dict):
            raw = payload.get("authorization") or payload.get("Authorization")
        token = bearer(raw) if isinstance(raw, str) else None
        try:
            principal = await self.server.tokens.principal(token)
        except Unavailable:
            await self.close(Close.TRY_AGAIN_LATER, "Try again later: database unavailable")
            return
        if principal is None:
            if self.dialect.refuse_with_message:
                message = {"message": "a valid bearer token is required"}
                await self.send_json({"type": "connection_error", "payload": message})
            await self.close(Close.FORBIDDEN, "Forbidden")
            return
        self.principal = principal
        self.token = token
        self.context = self.server.context(principal)
        self.acknowledged = True
        self.server.unauthenticated -= 1
        self.server.remember(self)
        await self.send_json({"type": "connection_ack"})
        if self.dialect.keep_alive is not None:
            self.keep_alive = asyncio.create_task(self._keep_alive(self.dialect.keep_alive))

    async def _keep_alive(self, kind: str) -> None:
        frame = orjson.dumps({"type": kind}).decode()
        while not self.closed:
            await self.send(frame)
            await asyncio.sleep(self.server.limits.keep_alive)

    async def start(self, op_id: Any, payload: Any) -> None:
        if not self.acknowledged:
            await self.close(Close.UNAUTHORIZED, "Unauthorized")
        if not isinstance(op_id, str) or not op_id:
            await self.close(Close.INVALID_MESSAGE, "An operation needs a string `id`")
        assert isinstance(op_id, str)
        if op_id in self.operations:
            await self.close(
                Close.DUPLICATE_OPERATION, f"Subscriber for {op_id[:80]} already exists"
            )
        try:
            revoked = await self.server.tokens.grant(self.token) is None
        except Unavailable:
            revoked = False  # checked again by the sweep; the operation answers `unavailable`
        if revoked:
            self.server.forget(self)
            await self.close(Close.FORBIDDEN, "Forbidden: the token was revoked or expired")
        request = _request(payload)
        if request is None:
            await self.error(op_id, "the payload needs a `query` string and `variables` object")
            return
        limit = self.server.limits.max_operations
        if len(self.operations) >= limit:
            await self.error(op_id, f"at most {limit} operations at once on one socket")
            return
        self.operations[op_id] = asyncio.create_task(self._run(op_id, request))

    def end(self, op_id: Any) -> None:
        task = self.operations.pop(op_id, None) if isinstance(op_id, str) else None
        if task is not None:
            task.cancel()

    async def error(self, op_id: str, message: str) -> None:
        errors = [{"message": message, "extensions": {"code": "invalid_input"}}]
        await self._error(op_id, errors)

    async def _error(self, op_id: str, errors: list[dict[str, Any]]) -> None:
        # The legacy protocol's `error` carries one error; the current one a list.
        payload: Any = errors if self.dialect is TRANSPORT else errors[0]
        await self.send_json({"id": op_id, "type": "error", "payload": payload})

    async def _run(self, op_id: str, request: Request) -> None:
        engine = self.server.engine
        try:
            if await engine.operation_type(request) is OperationType.SUBSCRIPTION:
                stream = await engine.subscribe(request, self.context, sharing=self.principal)
                if isinstance(stream, Outcome):
                    await self._single(op_id, stream)
                    return
                try:
                    async for outcome in stream:
                        await self._next(op_id, outcome)
                finally:
                    await stream.aclose()
            else:
                await self._single(op_id, await engine.execute(request, self.context))
                return
            await self.send_json({"id": op_id, "type": self.dialect.complete})
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("operation %s failed on a WebSocket", op_id[:80])
            errors = [{"message": "Internal server error.", "extensions": {"code": "internal"}}]
            await self._error(op_id, errors)
        finally:
            if self.operations.get(op_id) is asyncio.current_task():
                del self.operations[op_id]

    async def _single(self, op_id: str, outcome: Outcome) -> None:
        if outcome.refused:
            await self._error(op_id, outcome.errors)
            return
        await self._next(op_id, outcome)
        await self.send_json({"id": op_id, "type": self.dialect.complete})

    async def _next(self, op_id: str, outcome: Outcome) -> None:
        payload = outcome.text()
        head = orjson.dumps(op_id).decode()
        await self.send(f'{{"id":{head},"type":"{self.dialect.next}","payload":{payload}}}')


def _request(payload: Any) -> Request | None:
    if not isinstance(payload, dict):
        return None
    query, variables = payload.get("query"), payload.get("variables")
    name = payload.get("operationName")
    if not isinstance(query, str) or not query:
        return None
    if variables is not None and not isinstance(variables, dict):
        return None
    if name is not None and not isinstance(name, str):
        return None
    return Request(query, variables, name)
