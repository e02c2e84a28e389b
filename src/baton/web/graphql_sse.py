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
`CLOSE_GRACE_SECONDS`); or, with no `complete`, when the server stops, or when its client
stops reading: while a client is behind, its stream queues at most `max_queued_bytes` of
events besides the first, and is dropped past that. What a stream queues counts, with what its
connection buffers, against its token's and the process's bytes waiting for clients
(`baton.web.outbound`); past either budget the connection holding the most is reset, and a
stream whose connection is reset ends. A client that reconnects with `after` set to the last
event id it saw misses nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextvars import Context
from dataclasses import dataclass
from functools import partial
from typing import Any

import orjson
from graphql import OperationType
from starlette.types import Receive, Scope, Send
from uvicorn.protocols.http.httptools_impl import RequestResponseCycle

from baton.access.grants import TokenCache, bearer
from baton.access.principals import Principal
from baton.engine.runner import Engine, Outcome, Request
from baton.errors import Unavailable
from baton.live.streams import Pushable
from baton.sending import Waiting, chunk_of, cycle_of, finish_send, send_now, write_chunked
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
from baton.web.metered import graphql_envelope, send_refusal
from baton.web.outbound import SCOPE_KEY, Account, Ledger, Refusal, admit_answer, carry
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
        ledger: Ledger | None = None,
    ) -> None:
        self.engine = engine
        self.tokens = tokens
        self.context = context
        self.limits = limits
        self.ledger = ledger  # bytes waiting for clients, shared with the other doors
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
        account = scope.get(SCOPE_KEY)
        if self.ledger is None or not isinstance(account, Account):
            account = None  # another server than `baton serve`'s: nothing is counted
        else:
            self.ledger.attach(account)  # every answer counts, unauthenticated ones too
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
        if account is not None and self.ledger is not None:
            room = self.ledger.room(token)  # refused now, it runs nothing
            if room is not None:
                await send_refusal(send, room, graphql_envelope)
                return
            self.ledger.assign(account, token)
        stream = _Stream(limits.max_queued_bytes, send, account, cycle_of(scope))
        self._loop = asyncio.get_running_loop()
        self.streams.add(stream)
        self.watch.add(token, stream)
        try:
            await self._answer(stream, principal, request, headers, receive, send, token)
        finally:
            self.streams.discard(stream)
            self.watch.discard(token, stream)
            stream.forget_queue()  # a dropped stream's frames are not sent

    async def _answer(
        self,
        stream: _Stream,
        principal: Principal,
        request: Request,
        headers: dict[bytes, bytes],
        receive: Receive,
        send: Send,
        token: str,
    ) -> None:
        engine, context = self.engine, self.context(principal)
        try:
            kind = await engine.operation_type(request)
            if kind is OperationType.SUBSCRIPTION:
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
            mutation = kind is OperationType.MUTATION
            await self._single(result, headers, send, stream.account, token, mutation)
            return
        await _start(send, KEEP_ALIVE)  # the headers now, before the first event
        await self._serve(stream, result, receive)

    async def _single(
        self,
        outcome: Outcome,
        headers: dict[bytes, bytes],
        send: Send,
        account: Account | None,
        token: str,
        mutation: bool,
    ) -> None:
        if _unavailable_in(outcome):
            await send_body(send, 503, outcome.encoded(), JSON, UNAVAILABLE_HEADERS)
            return
        accept = headers.get(b"accept", b"").decode("latin-1")
        if outcome.refused and accepts(accept, (JSON, GRAPHQL_RESPONSE)):
            media_type = _negotiate(accept)
            await send_body(send, _status(outcome, media_type), outcome.encoded(), media_type)
            return
        body = next_event(outcome.encoded()) + COMPLETE
        # An answer as large as the response budget: admitted as over plain HTTP (a mutation's
        # goes out whatever the budgets: it changed something).
        admitted: Refusal | int = 0
        if account is not None and self.ledger is not None:
            if mutation:
                admitted = carry(account, len(body))
            else:
                admitted = admit_answer(self.ledger, account, token, len(body))
        if isinstance(admitted, Refusal):
            await send_refusal(send, admitted, graphql_envelope)
            return
        try:
            await _start(send, body, more=False)
        finally:
            if admitted and account is not None:
                account.sent(admitted)

    async def _serve(
        self, stream: _Stream, source: AsyncGenerator[Outcome, None], receive: Receive
    ) -> None:
        """Events from `source` to the client until either ends, or the stream is ended."""
        stream.serve()
        if isinstance(source, Pushable):
            source.push_to(partial(_push, stream))
        producer = asyncio.create_task(_produce(stream, source))
        stream.producer = producer
        if stream.closing:  # revoked or stopped before it began: nothing more is wanted
            producer.cancel()
        if self._keep_alive is None or self._keep_alive.done():
            # Every stream's, so not in the context of the request that started it.
            self._keep_alive = asyncio.create_task(
                self._keep_quiet_streams_alive(), context=Context()
            )
        gone = asyncio.create_task(_disconnected(receive))
        over = asyncio.create_task(stream.over.wait())
        try:
            await asyncio.wait((over, gone), return_when=asyncio.FIRST_COMPLETED)
            if stream.closing and not stream.sent_all.is_set() and not gone.done():
                # Its last events are queued; they get a bounded time, never longer.
                sent = asyncio.create_task(stream.sent_all.wait())
                await asyncio.wait((sent, gone), timeout=CLOSE_GRACE_SECONDS)
                sent.cancel()
            if stream.dropped:
                log.warning(
                    "dropped an event stream whose client stopped reading (%d bytes waiting)",
                    stream.queued,
                )
        finally:
            tasks = [producer, gone, over]
            if stream.flusher is not None:
                tasks.append(stream.flusher)
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
                if stream.serving and stream.written_at <= quiet:
                    stream.write(KEEP_ALIVE)


class _Stream:
    """One open event stream. A frame is written at once while the client keeps up (most of
    the time: uvicorn's `send` returns without waiting unless its write buffer is full), with
    no task in between; while the client is behind, frames are queued, at most `limit` bytes
    of them besides the first, for a task that writes them as the client reads. What is
    queued, or waits to be written, counts in `account`, the connection's bytes waiting for
    its client (`baton.web.outbound`); what is written, the connection counts itself."""

    def __init__(
        self,
        limit: int,
        send: Send,
        account: Account | None = None,
        cycle: RequestResponseCycle | None = None,
    ) -> None:
        self.limit = limit
        self.send = send
        self.cycle = cycle  # its uvicorn cycle: an event may skip the `send` chain
        self.account = account
        self.frames: deque[bytes] = deque()
        self.queued = 0
        self.flusher: asyncio.Task[None] | None = None  # writing what the client is behind on
        self.serving = False  # the headers are out: frames may be written
        self.finished = False  # the last frame is written or queued
        self.sent_all = asyncio.Event()  # the end of the body is written
        self.over = asyncio.Event()  # stop serving: all written, dropped, or ended
        self.closing = False  # ended by the server: its last frames get a bounded time
        self.revoked = False
        self.dropped = False
        self.producer: asyncio.Task[None] | None = None
        self.written_at = time.monotonic()

    def serve(self) -> None:
        self.serving = True
        if self.frames:  # queued before the headers went out (revoked or stopped meanwhile)
            self.flusher = asyncio.create_task(self._flush(None, last=False))

    def write(self, frame: bytes, *, last: bool = False) -> bool:
        """Write `frame`, or queue it behind what waits; False (and the stream is dropped)
        when it does not fit. The last frame always fits, and nothing comes after it."""
        if self.finished or self.dropped:
            return True
        account = self.account
        if account is not None and account.cut and not last:
            self.dropped = True  # its connection was reset to keep a budget, or is gone
            self.over.set()
            return False
        self.finished = last
        if self.serving and self.flusher is None and not self.frames:
            message = {"type": "http.response.body", "body": frame, "more_body": not last}
            try:
                waiting = send_now(self.send, message, self.cycle)
            except Exception:  # never into the caller: a producer, the keep-alive, the sweep
                log.exception("writing an event stream failed")
                self.over.set()
                return True
            if waiting is None:
                self._written(last)
                return True
            # It waits for the client to take what came before: held here until written.
            held = len(frame) if account is not None and account.hold(len(frame)) else 0
            self.flusher = asyncio.create_task(self._flush(waiting, last=last, held=held))
            return True
        if not last and self.frames and self.queued + len(frame) > self.limit:
            self.dropped = True
            self.over.set()
            return False
        self.frames.append(frame)
        self.queued += len(frame)
        if self.account is not None and not self.account.hold(len(frame)):
            self.dropped = True  # reset to keep a budget (it may have been this one)
            self.over.set()
            return False
        if self.serving and self.flusher is None:
            self.flusher = asyncio.create_task(self._flush(None, last=False))
        return True

    def write_at_once(self, chunk: bytes) -> bool:
        """Write `chunk` (a frame as a chunk of the body, `chunk_of`) straight onto the
        connection, when the stream is idle and it may go now (`write_chunked`); False:
        nothing written, `write` the frame instead."""
        if (
            self.serving
            and self.flusher is None
            and not self.frames
            and not self.finished
            and not self.dropped
            and write_chunked(self.cycle, chunk)
        ):
            self.written_at = time.monotonic()
            return True
        return False

    def take(self) -> bytes:
        """What is queued, in one piece: its bytes stay held in `account` until the caller
        has written them (`Account.sent`)."""
        frames = b"".join(self.frames)
        self.frames.clear()
        self.queued = 0
        return frames

    def forget_queue(self) -> None:
        """What is queued will not be sent: neither held any more."""
        if self.account is not None and self.queued:
            self.account.hold(-self.queued)
        self.frames.clear()
        self.queued = 0

    def _written(self, last: bool) -> None:
        self.written_at = time.monotonic()
        if last:
            self.sent_all.set()
            self.over.set()

    async def _flush(self, waiting: Waiting | None, *, last: bool, held: int = 0) -> None:
        """Finish a write the client was slow to take (`held` of its bytes counted in
        `account`), then write what was queued meanwhile (all of it in one write each time)
        until nothing waits."""
        try:
            if waiting is not None:
                await self._counted(finish_send(*waiting), held)
                self._written(last)
            # Nothing goes after the end of the body, not even a revocation queued meanwhile.
            while self.frames and not self.sent_all.is_set():
                last = self.finished  # nothing is queued after the last frame
                body = self.take()
                message = {"type": "http.response.body", "body": body, "more_body": not last}
                await self._counted(self.send(message), len(body))
                self._written(last)
            self.flusher = None
        except Exception:
            log.exception("writing an event stream failed")
            self.over.set()

    async def _counted(self, write: Awaitable[None], held: int) -> None:
        """Run `write`, whose `held` bytes `account` counts until it is done: then as
        written (the connection counts what its client has not taken), or as gone."""
        account = self.account
        try:
            await write
        except BaseException:
            if account is not None and held:
                account.hold(-held)
            raise
        if account is not None and held:
            account.sent(held)

    def revoke(self) -> None:
        """The token stopped working: what is queued is not sent; the error and `complete`
        are. Called by the token sweep; it waits for nothing."""
        if self.closing or self.dropped or self.sent_all.is_set():
            return
        self.revoked = True
        self.forget_queue()
        self.finished = False
        self._close(next_event(REVOKED) + COMPLETE)

    def stop(self) -> None:
        """The server is stopping: what is queued is sent, then the body ends, with no
        `complete`."""
        if not (self.closing or self.dropped or self.sent_all.is_set()):
            self._close(b"")

    def _close(self, last: bytes) -> None:
        self.closing = True
        if self.producer is not None:
            self.producer.cancel()
        self.write(last, last=True)
        self.over.set()


async def _start(send: Send, body: bytes, *, more: bool = True) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": HEADERS})
    await send({"type": "http.response.body", "body": body, "more_body": more})


def _push(stream: _Stream, outcome: Outcome) -> bool:
    """An event from the live fan-out, with no task woken (`baton.live.streams`): written as
    `_produce` would (its task waits with nothing queued), the frame made once per event for
    every stream, as a chunk of the body too. A stream it overflows is dropped (its producer is
    cancelled)."""
    chunk = outcome.frame(_NEXT_CHUNK)
    if chunk is None:
        frame = outcome.frame(_NEXT) or next_event(outcome.encoded())
        chunk = outcome.keep_frame(_NEXT_CHUNK, chunk_of(frame))
    if not stream.write_at_once(chunk):
        stream.write(_next_frame(outcome))
    return True


def _next_frame(outcome: Outcome) -> bytes:
    frame = outcome.frame(_NEXT)
    return outcome.keep_frame(_NEXT, next_event(outcome.encoded())) if frame is None else frame


_NEXT = "sse next"  # the key of an SSE `next` event's frame (`Outcome.framed`)
_NEXT_CHUNK = "sse next chunk"  # and of that frame as a chunk of the body


async def _produce(stream: _Stream, source: AsyncGenerator[Outcome, None]) -> None:
    try:
        async for outcome in source:
            if not stream.write(_next_frame(outcome)):
                return
        stream.write(COMPLETE, last=True)
    except asyncio.CancelledError:
        raise
    except Exception:
        log.exception("a subscription failed on an event stream")
        stream.write(next_event(INTERNAL) + COMPLETE, last=True)
    finally:
        await source.aclose()


async def _disconnected(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
