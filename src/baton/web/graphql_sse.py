"""GraphQL over Server-Sent Events: the `graphql-sse` protocol's distinct connections mode.

A request with `Accept: text/event-stream` on /graphql, or any request on /graphql/stream, is a
GraphQL request (POST with a JSON body, or GET with the query string, as over plain HTTP)
answered with an event stream (`baton.web.sse_protocol`): a query or mutation as one `next`
and `complete`, a subscription as one `next` per event until it completes or the client goes
away. The single connection mode (a stream reserved by PUT, operations posted beside it) is not
served: with `baton serve --workers N` its requests for one stream could reach different
processes.

Before the stream, answers are plain HTTP with the GraphQL error envelope in JSON: no or a bad
bearer token 401; a body past BATON_MAX_BODY_BYTES 413; not JSON 415; not a GraphQL request
400; a mutation over GET, or another method, 405; more open streams than a token may have 429,
or than the process may have 503 (both with Retry-After); the database unavailable 503. A
document refused before execution (it does not parse or validate, or is past a limit) is
answered in the stream, one `next` with the errors and `complete`, as the protocol requires
(graphql-sse's client accepts only text/event-stream); a client that also accepts JSON gets
GraphQL over HTTP's answer instead (400 for `application/graphql-response+json`).

Once open, a stream ends with `complete` when its operation does (a subscription's source
failing included: its errors come first, in a `next`); when the client goes away; when its
token stops working (one `next` with an `unauthenticated` error, then `complete`, within the
token check period, `baton.web.revocation`; a client that does not read is cut off after
`CLOSE_GRACE_SECONDS`); or, with no `complete`, when its client stops reading: each stream
queues at most `max_queued_bytes` of events besides the one being written, and is dropped past
that. A client that reconnects with `after` set to the last event id it saw misses nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass
from typing import Any

import orjson
from graphql import OperationType
from starlette.types import Receive, Scope, Send

from baton.access.principals import Principal
from baton.engine.runner import Engine, Outcome, Request
from baton.errors import Unavailable
from baton.web.auth import TokenCache, bearer
from baton.web.graphql_http import (
    GRAPHQL_RESPONSE,
    JSON,
    UNAVAILABLE_HEADERS,
    BadRequest,
    _from_body,
    _from_query_string,
    _negotiate,
    _status,
    _unavailable,
    _unavailable_in,
    error_body,
    send_body,
)
from baton.web.revocation import TokenWatch
from baton.web.sse_protocol import COMPLETE, HEADERS, KEEP_ALIVE, accepts, next_event

log = logging.getLogger("baton.sse")

ContextFactory = Callable[[Principal], Any]

# How long a stream being ended by the server may take to write its last events: a client
# that does not read them in this time is cut off.
CLOSE_GRACE_SECONDS = 1.0
RETRY_AFTER = [(b"retry-after", b"5")]
REVOKED = orjson.dumps(
    {
        "errors": [
            {
                "message": "the bearer token was revoked or has expired",
                "extensions": {"code": "unauthenticated"},
            }
        ]
    }
).decode()
INTERNAL = orjson.dumps(
    {"errors": [{"message": "Internal server error.", "extensions": {"code": "internal"}}]}
).decode()


@dataclass(frozen=True)
class StreamLimits:
    keep_alive: float = 15.0  # seconds of silence before a comment is sent
    max_streams: int = 10_000  # streams open at once in one process
    max_streams_per_token: int = 100  # streams open at once with one token, per process
    max_queued_bytes: int = 1024 * 1024  # events waiting for one slow client
    max_body_bytes: int = 1024 * 1024
    token_check: float = 5.0  # seconds between re-checks of open streams' tokens


class GraphQLSSE:
    def __init__(
        self,
        engine: Engine,
        tokens: TokenCache,
        context: ContextFactory,
        limits: StreamLimits = StreamLimits(),
    ) -> None:
        self.engine = engine
        self.tokens = tokens
        self.context = context
        self.limits = limits
        self.watch = TokenWatch(tokens, limits.token_check, "SSE stream")
        self.streams: set[_Stream] = set()  # open in this process
        self.stopping = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._keep_alive: asyncio.Task[None] | None = None

    def stop_soon(self) -> None:
        """The server is stopping; called from its signal handler, so the work is scheduled
        on the loop. Open streams end without `complete` (their operations are not over:
        clients reconnect, with `after`, to another process or this one once it is back);
        uvicorn would otherwise wait for them until its graceful shutdown timed out."""
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._stop_all)

    def _stop_all(self) -> None:
        self.stopping = True
        for stream in list(self.streams):
            stream.stop()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = dict(scope["headers"])
        method = scope["method"]
        if method not in ("GET", "POST"):
            body = error_body("use GET or POST", "invalid_input")
            await send_body(send, 405, body, JSON, [(b"allow", b"GET, POST")])
            return
        token = bearer(headers.get(b"authorization", b"").decode("latin-1"))
        try:
            principal = await self.tokens.principal(token)
        except Unavailable as exc:
            await _unavailable(send, exc)
            return
        if principal is None or token is None:
            body = error_body("a valid bearer token is required", "unauthenticated")
            await send_body(send, 401, body, JSON, [(b"www-authenticate", b'Bearer realm="baton"')])
            return
        try:
            if method == "GET":
                request = _from_query_string(scope.get("query_string", b""))
                if await self.engine.operation_type(request) is OperationType.MUTATION:
                    raise BadRequest(405, "mutations need POST", [(b"allow", b"POST")])
            else:
                request = await _from_body(headers, receive, self.limits.max_body_bytes)
        except BadRequest as bad:
            code = "payload_too_large" if bad.status == 413 else "invalid_input"
            await send_body(send, bad.status, error_body(bad.message, code), JSON, bad.headers)
            return
        # Counted before anything runs: a refused request executes nothing.
        limits = self.limits
        if self.stopping or len(self.streams) >= limits.max_streams:
            message = (
                "this server is stopping; try again"
                if self.stopping
                else f"this server has {limits.max_streams} event streams open; try again later"
            )
            await send_body(send, 503, error_body(message, "unavailable"), JSON, RETRY_AFTER)
            return
        if self.watch.count(token) >= limits.max_streams_per_token:
            message = (
                f"at most {limits.max_streams_per_token} event streams may be open at once "
                "with one token; close one first"
            )
            await send_body(send, 429, error_body(message, "too_many_streams"), JSON, RETRY_AFTER)
            return
        stream = _Stream(limits.max_queued_bytes)
        self._loop = asyncio.get_running_loop()
        self.streams.add(stream)
        self.watch.add(token, stream)
        try:
            await self._answer(stream, principal, request, headers, receive, send)
        finally:
            self.streams.discard(stream)
            self.watch.discard(token, stream)

    async def _answer(
        self,
        stream: _Stream,
        principal: Principal,
        request: Request,
        headers: dict[bytes, bytes],
        receive: Receive,
        send: Send,
    ) -> None:
        engine, context = self.engine, self.context(principal)
        try:
            if await engine.operation_type(request) is OperationType.SUBSCRIPTION:
                result = await engine.subscribe(request, context, sharing=principal)
            else:
                result = await engine.execute(request, context)
        except Unavailable as exc:
            await _unavailable(send, exc)
            return
        except Exception:
            log.exception("unexpected error answering a GraphQL request over SSE")
            await _start(send, next_event(INTERNAL) + COMPLETE, more=False)
            return
        if isinstance(result, Outcome):
            await self._single(result, headers, send)
            return
        await _start(send, KEEP_ALIVE)  # the headers now, before the first event
        await self._serve(stream, result, receive, send)

    async def _single(self, outcome: Outcome, headers: dict[bytes, bytes], send: Send) -> None:
        if _unavailable_in(outcome):
            await send_body(send, 503, outcome.encoded(), JSON, UNAVAILABLE_HEADERS)
            return
        accept = headers.get(b"accept", b"").decode("latin-1")
        if outcome.refused and accepts(accept, (JSON, GRAPHQL_RESPONSE)):
            media_type = _negotiate(accept)
            await send_body(send, _status(outcome, media_type), outcome.encoded(), media_type)
            return
        await _start(send, next_event(outcome.text()) + COMPLETE, more=False)

    async def _serve(
        self,
        stream: _Stream,
        source: AsyncGenerator[Outcome, None],
        receive: Receive,
        send: Send,
    ) -> None:
        """Events from `source` to the client until either ends, or the stream is ended."""
        producer = asyncio.create_task(_produce(stream, source))
        stream.producer = producer
        writer = asyncio.create_task(_write(stream, send))
        stream.serving = True
        if self._keep_alive is None or self._keep_alive.done():
            self._keep_alive = asyncio.create_task(self._keep_quiet_streams_alive())
        gone = asyncio.create_task(_disconnected(receive))
        ended = asyncio.create_task(stream.ended.wait())
        tasks = (producer, writer, gone, ended)
        try:
            await asyncio.wait((writer, gone, ended), return_when=asyncio.FIRST_COMPLETED)
            if stream.closing and not writer.done():
                # Its last events are queued; they get a bounded time, never longer.
                await asyncio.wait((writer, gone), timeout=CLOSE_GRACE_SECONDS)
            if stream.dropped:
                log.warning(
                    "dropped an event stream whose client stopped reading (%d bytes waiting)",
                    stream.queued,
                )
        finally:
            for task in tasks:
                task.cancel()
            for task in tasks:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task

    async def _keep_quiet_streams_alive(self) -> None:
        """One timer for every stream of the process (one per stream would be set again for
        each event): a stream that has written nothing for the keep-alive period gets a
        comment, within half a period more."""
        period = self.limits.keep_alive
        while self.streams:
            await asyncio.sleep(period / 2)
            quiet = time.monotonic() - period
            for stream in list(self.streams):
                if stream.serving and not stream.finished and stream.written_at <= quiet:
                    stream.put(KEEP_ALIVE)


class _Stream:
    """One open event stream: the events waiting for its client, at most `limit` bytes of
    them besides the first, and how it ends."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.frames: deque[bytes] = deque()
        self.queued = 0
        self._wake: asyncio.Future[None] | None = None  # the writer, waiting for frames
        self.serving = False
        self.written_at = time.monotonic()
        self.ended = asyncio.Event()  # stop serving (revoked or dropped)
        self.finished = False  # nothing comes after the frames queued now
        self.closing = False  # ended by the server: its last frames get a bounded time
        self.revoked = False
        self.dropped = False
        self.producer: asyncio.Task[None] | None = None

    def put(self, frame: bytes) -> bool:
        """Queue `frame`; False (and the stream is dropped) when it does not fit."""
        if self.frames and self.queued + len(frame) > self.limit:
            self.dropped = True
            self.ended.set()
            return False
        self.frames.append(frame)
        self.queued += len(frame)
        self._signal()
        return True

    def finish(self, frame: bytes) -> None:
        """Queue the last frame, whatever the bound (it is small), and end after it."""
        self.frames.append(frame)
        self.queued += len(frame)
        self.finished = True
        self._signal()

    def _signal(self) -> None:
        if self._wake is not None and not self._wake.done():
            self._wake.set_result(None)

    async def wait(self) -> None:
        """Until frames are queued (the writer's wait; one future, no timer)."""
        self._wake = asyncio.get_running_loop().create_future()
        try:
            await self._wake
        finally:
            self._wake = None

    def take(self) -> bytes:
        frames = b"".join(self.frames)
        self.frames.clear()
        self.queued = 0
        return frames

    def revoke(self) -> None:
        """The token stopped working: what is queued is not sent; the error and `complete`
        are. Called by the token sweep; it waits for nothing."""
        if self.closing or self.dropped:
            return
        self.revoked = True
        self.frames.clear()
        self.queued = 0
        self._close(next_event(REVOKED) + COMPLETE)

    def stop(self) -> None:
        """The server is stopping: what is queued is sent, then the body ends, with no
        `complete`."""
        if not (self.closing or self.dropped):
            self._close(b"")

    def _close(self, last: bytes) -> None:
        self.closing = True
        if self.producer is not None:
            self.producer.cancel()
        self.finish(last)
        self.ended.set()


async def _start(send: Send, body: bytes, *, more: bool = True) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": HEADERS})
    await send({"type": "http.response.body", "body": body, "more_body": more})


async def _produce(stream: _Stream, source: AsyncGenerator[Outcome, None]) -> None:
    try:
        async for outcome in source:
            if not stream.put(next_event(outcome.text())):
                return
        stream.finish(COMPLETE)
    except asyncio.CancelledError:
        raise
    except Exception:
        log.exception("a subscription failed on an event stream")
        stream.finish(next_event(INTERNAL) + COMPLETE)
    finally:
        await source.aclose()


async def _write(stream: _Stream, send: Send) -> None:
    """Send what is queued, all of it in one write, and the end of the body after the last
    frame."""
    while True:
        if not stream.frames:
            if stream.finished:
                await send({"type": "http.response.body", "body": b"", "more_body": False})
                return
            await stream.wait()
            continue
        body = stream.take()
        last = stream.finished and not stream.frames
        await send({"type": "http.response.body", "body": body, "more_body": not last})
        stream.written_at = time.monotonic()
        if last:
            return


async def _disconnected(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
