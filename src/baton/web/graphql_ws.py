"""GraphQL over WebSocket: both subprotocols, on the engine.

One coroutine per socket reads messages; each operation runs as its own task. The token comes
in `connection_init` (`{"authorization": "Bearer …"}`); until the connection is acknowledged
nothing runs, and a socket that sends no `connection_init` within the init timeout is closed
(4408, both subprotocols). At most `max_unauthenticated` sockets per process wait to be
acknowledged, and at most `max_sockets` are open; when a newcomer finds either cap reached, the
oldest socket that has not sent `connection_init` is closed (1013) to make room, so idle
sockets cannot lock out clients that log in, and if every socket has, the newcomer is closed
with 1013 (try again later) as soon as it is accepted. One token holds at most `max_per_token`
acknowledged sockets per process; past it `connection_init` is refused with 1008. Once
acknowledged, a socket's token is re-checked every `token_check` seconds by one sweep per
process, which asks the database about every open socket's token in one query and closes those
whose token was revoked or has expired with 4403; each new operation also checks the token
(through the short-lived cache). While the database is unavailable a `connection_init` is
answered by closing with 1013 (try again later).

Each event of a subscription goes out as one text frame; the engine shares one execution (and
one encoded payload) among subscribers of the same document, variables and principal, so here
a frame is that payload with the operation's id put in front, made once per event for every
operation of the same id. A live event for an operation that waits for one, on a socket with
nothing waiting before it, is written by the hub's fan-out itself (`baton.live.streams`), with
no task woken; otherwise the operation's task sends it. An operation whose result is being
sent waits until the connection takes it (the peer's pace sets the stream's). What waits
for one socket's peer (messages being sent and the connection's write buffer) is capped at
`max_queued_bytes`, and a peer may take none of it for at most `send_timeout` seconds: past
either the socket is closed with 1008 (policy violation). One message larger than the cap
still goes out when nothing else waits. The same bytes count against the token's and the
process's bytes waiting for clients (`baton.web.outbound`; before `connection_ack`, the
process's only): past either budget the connection holding the most is reset at once (its
peer has not read what came before, so a close frame could not reach it either).

An error in a subscription's source (the task is not visible, the cursor is not one, the
stream fails) ends that operation with an `error` message carrying its errors, as
graphql-transport-ws specifies; the legacy protocol's `error` carries the first. Errors in one
event's fields arrive in that event's `next` beside its data, and the stream goes on.

Closing never waits on the peer. Whoever closes a socket (the read loop, the token sweep, the
caps) cancels its operations first, then sends the close frame from a task of its own with a
deadline of `close_timeout` seconds; a peer that takes nothing gets its TCP connection reset
then, and one that took the frame but does not answer it, `close_timeout` seconds later. So
each socket closes on its own time: one stuck peer delays no other close, nor the sweep.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import struct
import time
from collections.abc import Callable
from contextvars import Context
from dataclasses import dataclass
from socket import SO_LINGER, SOL_SOCKET
from typing import Any, Protocol, cast

import orjson
from graphql import OperationType
from starlette.types import Message, Receive, Scope, Send

from baton.access.grants import TokenCache, bearer
from baton.access.principals import Principal
from baton.engine.runner import Engine, Outcome, Request
from baton.errors import Unavailable
from baton.live.streams import Pushable
from baton.telemetry.requests import answered
from baton.web.outbound import Account, Ledger
from baton.web.ws_connection import text_frame
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
    max_queued_bytes: int = 4 * 1024 * 1024  # output waiting for one socket's peer
    send_timeout: float = 30.0  # seconds a peer may take none of the waiting output
    max_per_token: int = 20  # acknowledged sockets of one token, per process
    close_timeout: float = 5.0  # seconds a close waits for the peer; then the connection is cut
    max_sockets: int = 20_000  # sockets open at once, per process


class GraphQLWS:
    def __init__(
        self,
        engine: Engine,
        tokens: TokenCache,
        context: ContextFactory,
        limits: SocketLimits = SocketLimits(),
        ledger: Ledger | None = None,
    ) -> None:
        self.engine = engine
        self.tokens = tokens
        self.context = context
        self.limits = limits
        self.ledger = ledger  # bytes waiting for clients, shared with the other doors
        # Sockets open and not yet acknowledged, oldest first (the cap evicts from the front).
        self.unacknowledged: dict[_Socket, None] = {}
        self.by_token: dict[str, set[_Socket]] = {}  # acknowledged sockets, by token
        self.open = 0  # sockets accepted and not yet finished
        self._sweeper: asyncio.Task[None] | None = None
        self._watcher: asyncio.Task[None] | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        message = await receive()
        if message["type"] != "websocket.connect":
            return
        dialect = choose(list(scope.get("subprotocols") or ()))
        socket = _Socket(self, dialect or TRANSPORT, receive, send)
        if self.ledger is not None:
            self.ledger.attach(socket.account)
        if dialect is None:
            await send({"type": "websocket.accept"})
            socket.terminate(Close.SUBPROTOCOL_NOT_ACCEPTABLE, "Subprotocol not acceptable")
            await socket.finish()
            return
        await send(
            {"type": "websocket.accept", "subprotocol": dialect.name, "headers": answered(scope)}
        )
        if self.open >= self.limits.max_sockets and not self._evict():
            # Accepted first so that the client reads a close code it can act on (1013: try
            # again later, which graphql-ws clients retry), not a bare refused upgrade.
            socket.terminate(
                Close.TRY_AGAIN_LATER, f"Try again later: {self.open} WebSockets are open"
            )
            await socket.finish()
            return
        if len(self.unacknowledged) >= self.limits.max_unauthenticated and not self._evict():
            socket.terminate(Close.TRY_AGAIN_LATER, "Too many connections waiting to start")
            await socket.finish()
            return
        self.open += 1
        self.unacknowledged[socket] = None
        if self._watcher is None or self._watcher.done():
            # The process's watchers run in a context of their own, not in the request's
            # that started them (its log lines, its trace).
            self._watcher = asyncio.create_task(
                self._watch(), name="baton-ws-stall-watch", context=Context()
            )
        try:
            await socket.run()
        finally:
            self.open -= 1
            self.unacknowledged.pop(socket, None)
            self.forget(socket)
            await socket.stop()
            await socket.finish()

    def _evict(self) -> bool:
        """Make room for a newcomer by closing the oldest socket that has not even sent
        `connection_init`: idle sockets cannot lock out clients that log in. False when every
        waiting socket is already logging in."""
        for socket in self.unacknowledged:
            if not socket.init_received:
                del self.unacknowledged[socket]
                socket.terminate(Close.TRY_AGAIN_LATER, "Try again later: too many connections")
                return True
        return False

    # --- token re-checks and stalled peers -----------------------------------------------

    def remember(self, socket: _Socket) -> None:
        assert socket.token is not None
        self.unacknowledged.pop(socket, None)
        self.by_token.setdefault(socket.token, set()).add(socket)
        if self._sweeper is None or self._sweeper.done():
            self._sweeper = asyncio.create_task(
                self._sweep(), name="baton-ws-token-sweep", context=Context()
            )

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
        working. One query per sweep, however many sockets and tokens; closing waits on no
        peer (each socket closes on its own, within `close_timeout`)."""
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
                        socket.revoke()

    async def _watch(self) -> None:
        """While sockets are open: close those whose peer has taken none of the waiting output
        for `send_timeout` seconds (it stopped reading; what waits for it is held in memory).
        Sockets not yet acknowledged too: their read loop may be the one waiting to send."""
        limit = self.limits.send_timeout
        while self.by_token or self.unacknowledged:
            await asyncio.sleep(min(1.0, limit / 4))
            now = time.monotonic()
            sockets = [
                *self.unacknowledged,
                *(s for group in self.by_token.values() for s in group),
            ]
            for socket in sockets:
                if socket.sending and now - socket.progress_at > limit:
                    socket.terminate(
                        Close.POLICY_VIOLATION, f"Too slow: took nothing sent for {limit:g} s"
                    )


class _Transport(Protocol):
    """What Baton uses of the connection under a socket (asyncio's and uvloop's transports)."""

    def get_write_buffer_size(self) -> int: ...

    def get_extra_info(self, name: str) -> Any: ...

    def abort(self) -> None: ...


def _transport_of(send: Send) -> _Transport | None:
    """The connection under `send`, or None. ASGI has no way to cut a connection, but each
    of uvicorn's WebSocket implementations hands the app a method of its protocol object,
    whose `transport` is the connection."""
    transport = getattr(getattr(send, "__self__", None), "transport", None)
    needed = ("get_write_buffer_size", "get_extra_info", "abort")
    if transport is None or not all(callable(getattr(transport, n, None)) for n in needed):
        return None
    return cast(_Transport, transport)


def _account_of(send: Send) -> Account:
    """The connection's account of bytes waiting for its peer (`LeanWebSocketProtocol`'s),
    or one of the socket's own, which counts only what the socket holds, under another
    server."""
    account = getattr(getattr(send, "__self__", None), "account", None)
    return account if isinstance(account, Account) else Account()


def _writer_of(send: Send, name: str = "write_text") -> Callable[[bytes], bool] | None:
    """The connection's way to write a text frame now, past ASGI (`LeanWebSocketProtocol`'s
    `write_text`, or `write_frame` for a frame made already), or None under another server."""
    write = getattr(getattr(send, "__self__", None), name, None)
    return cast(Callable[[bytes], bool], write) if callable(write) else None


def _reason(text: str) -> str:
    """A close reason as the protocol allows it: at most 123 bytes of UTF-8."""
    raw = text.encode()
    return text if len(raw) <= 123 else raw[:123].decode(errors="ignore")


def shown(text: str, limit: int = 80) -> str:
    """Client-controlled text as it may appear in a log line: bounded, and escaped so it
    can never start a line of its own (newlines, other control characters, quotes)."""
    return repr(text[:limit] + ("…" if len(text) > limit else ""))


class _Closed(Exception):
    """The socket is closing; stop reading it."""


class _Socket:
    # Slots: thousands of sockets sit idle in one process, and a dict of these would
    # weigh about 1 KB each.
    __slots__ = (
        "__weakref__",
        "_abandoned",
        "_reader",
        "_send",
        "account",
        "acknowledged",
        "closed",
        "closing",
        "context",
        "dialect",
        "init_received",
        "keep_alive",
        "operations",
        "pending",
        "principal",
        "progress_at",
        "receive",
        "sending",
        "server",
        "token",
        "transport",
        "write_frame",
        "write_now",
    )

    def __init__(self, server: GraphQLWS, dialect: Dialect, receive: Receive, send: Send) -> None:
        self.server = server
        self.dialect = dialect
        self.receive = receive
        self._send = send
        # The server's own `send` under any middleware's wrapper (tracing's: functools.wraps).
        under = inspect.unwrap(send)
        self.transport = _transport_of(under)
        self.write_now = _writer_of(under)
        self.write_frame = _writer_of(under, "write_frame")
        self.account = _account_of(under)
        self.init_received = False
        self.acknowledged = False
        self.principal: Principal | None = None
        self.token: str | None = None
        self.context: Any = None
        self.operations: dict[str, asyncio.Task[None]] = {}
        self.keep_alive: asyncio.Task[None] | None = None
        self.closed = False  # nothing more goes out: closing or closed
        self.closing: asyncio.Task[None] | None = None
        self.pending = 0  # bytes of messages being sent, not yet in the transport's buffer
        self.sending = 0  # messages being sent
        self.progress_at = 0.0  # when a send last completed (or the first waiting one began)
        self._reader: asyncio.Task[Any] | None = None  # the task in `run`, while it reads
        self._abandoned = False  # `run` was cancelled: the connection could not be cut

    async def run(self) -> None:
        self._reader = asyncio.current_task()
        try:
            await self._read()
        except asyncio.CancelledError:
            if not self._abandoned:
                raise
            assert self._reader is not None
            self._reader.uncancel()
        finally:
            self._reader = None

    async def _read(self) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.server.limits.init_timeout
        while True:
            try:
                if self.init_received:
                    message = await self.receive()
                else:
                    message = await asyncio.wait_for(self.receive(), deadline - loop.time())
            except TimeoutError:
                self.terminate(Close.INIT_TIMEOUT, "Connection initialisation timeout")
                return
            if message["type"] == "websocket.disconnect":
                self.closed = True
                return
            try:
                await self.handle(message)
            except _Closed:
                return
            # The message (a subscription's whole document) would stay here while the socket
            # waits for the next one, which may be the whole life of the subscription.
            del message

    async def stop(self) -> None:
        tasks = list(self.operations.values())
        if self.keep_alive is not None:
            tasks.append(self.keep_alive)
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    async def finish(self) -> None:
        """Wait for a close this side began (it ends within `close_timeout`)."""
        if self.closing is not None:
            await self.closing

    async def close(self, code: int, reason: str) -> None:
        """Close from the read loop, and stop reading."""
        self.terminate(code, reason)
        raise _Closed

    def terminate(self, code: int, reason: str) -> None:
        """Close the socket without waiting for anything: its operations are cancelled now,
        and the close frame goes out in a task of its own, which cuts the connection when the
        peer does not take it within `close_timeout`."""
        if self.closed:
            return
        self.closed = True
        self.server.forget(self)
        for task in self.operations.values():
            task.cancel()
        if self.keep_alive is not None:
            self.keep_alive.cancel()
        self.closing = asyncio.create_task(self._close(code, _reason(reason)))

    async def _close(self, code: int, reason: str) -> None:
        limit = self.server.limits.close_timeout
        try:
            async with asyncio.timeout(limit):
                await self._send({"type": "websocket.close", "code": code, "reason": reason})
        except TimeoutError:  # the peer takes nothing: not even room for the close frame
            self.abort()
            return
        except Exception:  # the peer is gone already
            return
        # The peer has `limit` seconds to take the close frame and answer; the connection
        # is cut then if it is still there (a no-op once it is gone).
        asyncio.get_running_loop().call_later(limit, self.abort)

    def abort(self) -> None:
        """End the connection now, discarding what the peer has not taken (a TCP reset: a
        plain close would wait until it reads everything sent before)."""
        transport = self.transport
        if transport is None:
            # Nothing to cut: stop reading instead, so the app returns and the server closes.
            if self._reader is not None and not self._abandoned:
                self._abandoned = True
                self._reader.cancel()
            return
        sock = transport.get_extra_info("socket")
        with contextlib.suppress(OSError, AttributeError):
            if sock is not None and sock.fileno() >= 0:  # -1 once the connection is closed
                sock.setsockopt(SOL_SOCKET, SO_LINGER, struct.pack("ii", 1, 0))
        transport.abort()

    def revoke(self) -> None:
        """Close from outside the read loop: the token stopped working."""
        self.terminate(Close.FORBIDDEN, "Forbidden: the token was revoked or expired")

    async def send(self, data: bytes) -> None:
        """Send one message (UTF-8 JSON): written to the connection at once when nothing waits
        before it, else through ASGI, waiting for the peer as long as the limits allow."""
        if self.closed:
            return
        size = len(data)
        waiting = self.pending + (self.transport.get_write_buffer_size() if self.transport else 0)
        cap = self.server.limits.max_queued_bytes
        # One message goes out whatever its size when nothing else waits for the peer.
        if waiting and waiting + size > cap:
            self.terminate(Close.POLICY_VIOLATION, f"Too slow: over {cap} bytes waiting to go")
            return
        if not self.sending and self.write_now is not None and self.write_now(data):
            return  # written: the connection counts what its peer leaves unsent
        account = self.account
        if not account.hold(size):  # reset to keep a budget; the read loop sees it go
            self.closed = True
            return
        if not self.sending:
            self.progress_at = time.monotonic()
        self.pending += size
        self.sending += 1
        try:
            await self._send({"type": "websocket.send", "text": data.decode()})
        except Exception:  # the peer went away; the read loop sees the disconnect
            self.closed = True
        else:
            self.progress_at = time.monotonic()
        finally:
            self.pending -= size
            self.sending -= 1
            account.sent(size)

    def write_at_once(self, frame: bytes) -> bool:
        """Write a whole frame (`text_frame`) now, when nothing waits before it; False when
        `send` must carry the message (it waits for the peer, or closes the socket past the
        cap). The connection writes only while its transport holds nothing unsent."""
        write = self.write_frame
        if self.sending or write is None:
            return False
        return write(frame)

    async def send_json(self, message: dict[str, Any]) -> None:
        await self.send(orjson.dumps(message))

    # --- messages ---------------------------------------------------------------------

    async def handle(self, message: Message) -> None:
        if self.closed:  # closed from outside the read loop; what is still queued is dropped
            raise _Closed
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
        if self.closed:  # closed while the token was looked up (a cap, a stalled peer)
            raise _Closed
        if principal is None:
            await self.refuse("a valid bearer token is required", Close.FORBIDDEN, "Forbidden")
            return
        assert token is not None
        most = self.server.limits.max_per_token
        if len(self.server.by_token.get(token, ())) >= most:
            await self.refuse(
                f"at most {most} WebSockets per token",
                Close.POLICY_VIOLATION,
                f"Too many WebSockets for this token (at most {most})",
            )
            return
        self.principal = principal
        self.token = token
        self.context = self.server.context(principal)
        self.acknowledged = True
        if self.server.ledger is not None:
            self.server.ledger.assign(self.account, token)
        self.server.remember(self)
        await self.send_json({"type": "connection_ack"})
        if self.dialect.keep_alive is not None:
            self.keep_alive = asyncio.create_task(self._keep_alive(self.dialect.keep_alive))

    async def refuse(self, message: str, code: int, reason: str) -> None:
        """Refuse a `connection_init` (the legacy protocol says why in a message first)."""
        if self.dialect.refuse_with_message:
            await self.send_json({"type": "connection_error", "payload": {"message": message}})
        await self.close(code, reason)

    async def _keep_alive(self, kind: str) -> None:
        frame = orjson.dumps({"type": kind})
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
        if self.closed:  # closed while the token was checked
            raise _Closed
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
        payload: Any = errors if self.dialect is TRANSPORT else (errors or [{}])[0]
        await self.send_json({"id": op_id, "type": "error", "payload": payload})

    async def _run(self, op_id: str, request: Request) -> None:
        engine = self.server.engine
        try:
            if await engine.operation_type(request) is OperationType.SUBSCRIPTION:
                stream = await engine.subscribe(request, self.context, sharing=self.principal)
                # The stream has what it needs: the document and variables as sent need not
                # stay for its whole life.
                del request
                if isinstance(stream, Outcome):  # refused, or its source could not start
                    await self._error(op_id, stream.errors)
                    return
                if isinstance(stream, Pushable):
                    stream.push_to(_Pusher(self, op_id, self.dialect))
                try:
                    async for outcome in stream:
                        if outcome.final_error:
                            await self._error(op_id, outcome.errors)
                            return
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
            log.exception("operation %s failed on a WebSocket", shown(op_id))
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
        # The payload as encoded once for every subscriber of the event, in bytes as written.
        middle = self.dialect.next_middle
        await self.send(b"".join((b'{"id":', orjson.dumps(op_id), middle, outcome.encoded(), b"}")))


class _Pusher:
    """Sends an operation's `next` from the live fan-out, with no task woken (`Sink`,
    `baton.live.streams`), written at once. The frame is made once per event for every
    operation of the same id (clients that number their operations share one)."""

    __slots__ = ("head", "socket", "task")

    def __init__(self, socket: _Socket, op_id: str, dialect: Dialect) -> None:
        self.socket = socket
        self.task = asyncio.current_task()  # the operation's
        self.head = b"".join((b'{"id":', orjson.dumps(op_id), dialect.next_middle))

    def __call__(self, outcome: Outcome) -> bool:
        socket = self.socket
        if socket.closed or (self.task is not None and self.task.cancelling()):
            return True  # the operation is over: nothing more of it goes out
        head = self.head
        frame = outcome.frame(head)
        if frame is None:
            frame = outcome.keep_frame(head, text_frame(b"".join((head, outcome.encoded(), b"}"))))
        return socket.write_at_once(frame)


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
