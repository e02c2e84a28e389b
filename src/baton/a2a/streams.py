"""SendStreamingMessage and SubscribeToTask over Server-Sent Events, written by the door: the
SDK's writer sends no `id:`, and an A2A stream here resumes by it (`baton.a2a.frames`).

A stream sends the Task first, then every update of the task in order, and ends at a final
state. Each event is `id: <frame id>` and `data:` the update (JSON-RPC: the JSON-RPC response
holding it; HTTP+JSON: the StreamResponse itself). A stream ended by the server for a reason
ends with one `event: error` (the binding's error, with Baton's code in its data).

A live update reaches an idle stream (its task waiting with nothing queued) pushed by the
event hub's fan-out (`baton.live.streams`, `BatonHandler._follow`), which writes its frame at
once, as GraphQL over SSE does: no task is woken per update. A write that would wait, and
whatever comes while it does, goes through a flusher task, within the bounds below.

Bounds, with GraphQL over SSE's settings, counted apart from its streams:
- open streams per token (BATON_SSE_MAX_STREAMS_PER_TOKEN, 429) and per process
  (BATON_SSE_MAX_STREAMS, 503), both with Retry-After, counted before the operation runs; a
  blocking SendMessage waiting on its task holds a place too (with none free it answers at
  once);
- a client that stops reading: its stream queues at most BATON_SSE_MAX_QUEUED_BYTES of updates
  besides the one being written, and is dropped past that (an `error` event with code
  `slow_reader` if the client takes it within a second; its connection is closed anyway). What
  a stream holds counts against its token's and the process's bytes waiting for clients
  (`Metered`, around the door);
- a token that stops working ends its streams within BATON_TOKEN_CHECK_SECONDS (one re-check
  of every open stream's token per period): an `error` event with code `unauthenticated`;
- a quiet stream gets a comment line after BATON_SSE_KEEP_ALIVE_SECONDS to half as long again
  without updates (one timer for every stream of the process);
- a server that stops ends its streams with no error: their clients resume, with
  `Last-Event-ID`, from another process or this one once it is back.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import AsyncGenerator, Callable, Iterator
from dataclasses import dataclass
from functools import partial
from typing import Final

from a2a.utils.errors import A2AError, InvalidRequestError
from starlette.types import Message, Receive, Send
from uvicorn.protocols.http.httptools_impl import RequestResponseCycle

from baton.a2a.errors import unexpected
from baton.a2a.frames import Frame
from baton.access.grants import TokenCache
from baton.errors import Unavailable
from baton.live.streams import Pushable
from baton.sending import Waiting, chunk_of, finish_send, send_now, write_chunked

log = logging.getLogger("baton.a2a")

HEADERS: Final = [
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-cache"),
    # nginx buffers proxied responses unless told not to; an update must not wait there.
    (b"x-accel-buffering", b"no"),
]
KEEP_ALIVE: Final = b": keep-alive\n\n"
# How long a stream the server ends may take to write its last bytes before it is cut off.
CLOSE_GRACE_SECONDS: Final = 1.0
DROPPED: Final = "dropped an A2A stream whose client stopped reading"

Render = Callable[[Frame], bytes]
RenderError = Callable[[A2AError], bytes]  # an `error` event, in the stream's binding


@dataclass(frozen=True)
class StreamLimits:
    keep_alive: float = 15.0
    max_streams: int = 10_000
    max_streams_per_token: int = 100
    max_queued_bytes: int = 1024 * 1024
    token_check: float = 5.0


class Refused(Exception):
    """No place for a stream: 429 (the token's) or 503 (the process's), with Retry-After."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message


class _Stream:
    """One open stream: what waits to be written, and how it ends. A frame is written at once
    while the stream is idle (serving, nothing queued, no write waiting, not ending), most of
    the time: uvicorn's `send` returns without waiting unless its write buffer is full
    (`baton.sending`), so an update pushed from the live fan-out wakes no task. A write
    that would wait is finished by a flusher task, and frames written meanwhile queue behind
    it (at most `limit` bytes besides the one being written); the flusher writes them, then
    the stream's end, and stops once nothing waits."""

    def __init__(
        self, limit: int, error: RenderError, cycle: RequestResponseCycle | None = None
    ) -> None:
        self.limit = limit
        self.error = error
        self.cycle = cycle  # its uvicorn cycle: a frame may skip the `send` chain
        self.queue: deque[bytes] = deque()
        self.queued = 0
        self.send: Send | None = None  # the headers are out: frames may be written
        self.flusher: asyncio.Task[None] | None = None  # writing what the client is behind on
        self.ending: bytes | None = None  # written last; then the body ends
        self.closing = asyncio.Event()  # ended by the server: drop, revocation, stop
        self.done = asyncio.Event()  # the body has ended, or writing it failed
        self.dropped = False
        self.written_at = time.monotonic()  # the last write, for keep-alive comments

    def serve(self, send: Send) -> None:
        """The headers are out: write through `send` from now on (what was queued or ended
        before, by the flusher)."""
        self.send = send
        if self.queue or self.ending is not None:
            self._flush_soon()

    def write(self, frame: bytes) -> bool:
        """Write `frame`, or queue it behind what waits; False when the stream takes nothing
        more: it is ending, or `frame` did not fit (the stream is dropped). One frame always
        fits, however large: the limit is on what waits besides it."""
        if self.ending is not None or self.done.is_set():
            return False
        send = self.send
        if send is not None and self.flusher is None and not self.queue:
            message = {"type": "http.response.body", "body": frame, "more_body": True}
            try:
                waiting = send_now(send, message, self.cycle)
            except Exception as exc:  # never into the caller: the producer, the fan-out
                log.debug("writing an A2A stream failed (%r)", exc)
                self.done.set()
                return False
            self.written_at = time.monotonic()
            if waiting is not None:  # it waits for the client to take what came before
                self.flusher = asyncio.create_task(self._flush(waiting))
            return True
        if self.queue and self.queued + len(frame) > self.limit:
            self.dropped = True
            refusal = InvalidRequestError(
                f"{DROPPED}: more than {self.limit} bytes waited for it; resume with Last-Event-ID",
                data={"code": "slow_reader"},
            )
            self.close(self.error(refusal), keep=False)
            return False
        self.queue.append(frame)
        self.queued += len(frame)
        self._flush_soon()
        return True

    def write_at_once(self, chunk: bytes) -> bool:
        """Write `chunk` (a frame as a chunk of the body, `chunk_of`) straight onto the
        connection, when the stream is idle and it may go now (`write_chunked`); False:
        nothing written, `write` the frame instead."""
        if (
            self.send is not None
            and self.flusher is None
            and not self.queue
            and self.ending is None
            and not self.done.is_set()
            and write_chunked(self.cycle, chunk)
        ):
            self.written_at = time.monotonic()
            return True
        return False

    def end(self, last: bytes = b"") -> None:
        """The stream is over: what is queued goes out, then `last`, then the body ends."""
        if self.ending is None:
            self.ending = last
            self._flush_soon()

    def close(self, last: bytes, *, keep: bool) -> None:
        """The server ends the stream: `last` after what is queued (`keep`) or instead."""
        if self.ending is not None and self.closing.is_set():
            return
        if not keep:
            self.queue.clear()
            self.queued = 0
        self.ending = last
        self.closing.set()
        self._flush_soon()

    def revoke(self) -> None:
        refusal = InvalidRequestError(
            "the bearer token no longer works", data={"code": "unauthenticated"}
        )
        self.close(self.error(refusal), keep=False)

    def take(self) -> bytes:
        body = b"".join(self.queue)
        self.queue.clear()
        self.queued = 0
        return body

    def _flush_soon(self) -> None:
        if self.send is not None and self.flusher is None and not self.done.is_set():
            self.flusher = asyncio.create_task(self._flush(None))

    async def _flush(self, waiting: Waiting | None) -> None:
        """Finish a write the client was slow to take, then write what was queued meanwhile
        (all of it in one write each time), and the end once the stream is over; stop when
        nothing waits."""
        send = self.send
        assert send is not None, "flushed once serving"
        try:
            if waiting is not None:
                await finish_send(*waiting)
                self.written_at = time.monotonic()
            while True:
                if self.queue:
                    await _body(send, self.take(), more=True)
                    self.written_at = time.monotonic()
                elif self.ending is not None:
                    await _body(send, self.ending, more=False)
                    self.done.set()
                    return
                else:
                    self.flusher = None
                    return
        except Exception as exc:  # the connection is gone
            log.debug("writing an A2A stream failed (%r)", exc)
            self.done.set()


class Streams:
    """The open A2A streams of this process: their places, token re-checks, and ends."""

    def __init__(self, tokens: TokenCache, limits: StreamLimits) -> None:
        self.tokens = tokens
        self.limits = limits
        self._by_token: dict[str, set[object]] = {}
        self._open = 0
        self._streams: set[_Stream] = set()
        self.stopping = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._sweeper: asyncio.Task[None] | None = None
        self._keep_alive: asyncio.Task[None] | None = None

    # --- places -------------------------------------------------------------------------

    def _take(self, token: str, holder: object) -> None:
        limits = self.limits
        if self.stopping:
            raise Refused(503, "unavailable", "this server is stopping; try again")
        if self._open >= limits.max_streams:
            raise Refused(
                503,
                "unavailable",
                f"this server has {limits.max_streams} A2A streams open; try again later",
            )
        if len(self._by_token.get(token, ())) >= limits.max_streams_per_token:
            raise Refused(
                429,
                "too_many_streams",
                f"at most {limits.max_streams_per_token} A2A streams may be open at once "
                "with one token; close one first",
            )
        self._by_token.setdefault(token, set()).add(holder)
        self._open += 1
        self._loop = asyncio.get_running_loop()
        if self._sweeper is None or self._sweeper.done():
            self._sweeper = asyncio.create_task(self._sweep(), name="baton-a2a-token-sweep")

    def _give_back(self, token: str, holder: object) -> None:
        held = self._by_token.get(token)
        if held is not None and holder in held:
            held.discard(holder)
            self._open -= 1
            if not held:
                del self._by_token[token]

    def open(
        self, token: str, error: RenderError, cycle: RequestResponseCycle | None = None
    ) -> _Stream:
        """A place for a stream of `token`, taken before its operation runs: `Refused` when
        none is free. Served with `serve`, or given back with `release` if the operation
        fails first. `cycle`: the request's uvicorn cycle, if it has one
        (`baton.sending.cycle_of`)."""
        stream = _Stream(self.limits.max_queued_bytes, error, cycle)
        self._take(token, stream)
        return stream

    def release(self, token: str, stream: _Stream) -> None:
        self._give_back(token, stream)

    @contextlib.contextmanager
    def place(self, token: str) -> Iterator[bool]:
        """A place held while a blocking call waits; False when there is none."""
        holder = object()
        try:
            self._take(token, holder)
        except Refused:
            yield False
            return
        try:
            yield True
        finally:
            self._give_back(token, holder)

    # --- serving ------------------------------------------------------------------------

    async def serve(
        self,
        token: str,
        stream: _Stream,
        frames: AsyncGenerator[Frame, None],
        render: Render,
        receive: Receive,
        send: Send,
    ) -> None:
        """Write `frames` as an event stream until they end, the client goes, or the server
        ends the stream; then give its place back. Live updates pushed past the producer
        (`Pushable` frames, `baton.live.streams`) are written by the fan-out that brings them."""
        self._streams.add(stream)
        if self.stopping:
            stream.close(b"", keep=True)
        if self._keep_alive is None or self._keep_alive.done():
            self._keep_alive = asyncio.create_task(self._keep_quiet_streams_alive())
        tasks: list[asyncio.Task[object]] = []
        try:
            try:
                await send({"type": "http.response.start", "status": 200, "headers": HEADERS})
            except Exception:  # the client is gone
                await frames.aclose()
                return
            stream.serve(send)
            if isinstance(frames, Pushable):
                frames.push_to(partial(_push, stream, render))
            producer = asyncio.create_task(_produce(stream, frames, render))
            gone = asyncio.create_task(_disconnected(receive))
            closing = asyncio.create_task(stream.closing.wait())
            done = asyncio.create_task(stream.done.wait())
            tasks += (producer, gone, closing, done)
            await asyncio.wait((done, gone, closing), return_when=asyncio.FIRST_COMPLETED)
            if closing.done() and not done.done() and not gone.done():
                producer.cancel()
                # Its last bytes get a bounded time, never longer.
                await asyncio.wait((done, gone), timeout=CLOSE_GRACE_SECONDS)
            if stream.dropped:
                log.warning("%s (%d bytes waiting)", DROPPED, stream.queued)
        finally:
            stream.done.set()  # nothing more is written, nor is a flusher started
            if stream.flusher is not None:
                tasks.append(stream.flusher)
            for task in tasks:
                task.cancel()
            for task in tasks:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
            self._streams.discard(stream)
            self._give_back(token, stream)

    async def _keep_quiet_streams_alive(self) -> None:
        """One timer for every stream of the process (one per stream would be set again for
        each update): a stream quiet for the keep-alive period gets a comment, within half a
        period more."""
        period = self.limits.keep_alive
        while self._streams:
            await asyncio.sleep(period / 2)
            quiet = time.monotonic() - period
            for stream in list(self._streams):
                if (
                    stream.written_at <= quiet
                    and stream.send is not None
                    and not stream.queue
                    and stream.ending is None
                ):
                    stream.write(KEEP_ALIVE)
                    stream.written_at = time.monotonic()

    # --- ending -------------------------------------------------------------------------

    def stop_soon(self) -> None:
        """The server is stopping (called from its signal handler): every stream ends now,
        what it queued sent, with no error (its client resumes with Last-Event-ID)."""
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._stop_all)
        else:
            self.stopping = True

    def _stop_all(self) -> None:
        self.stopping = True
        for stream in list(self._streams):
            stream.close(b"", keep=True)

    async def _sweep(self) -> None:
        """Every `token_check` seconds while streams are open: those of tokens that stopped
        working end. One query per sweep, however many streams."""
        period = self.limits.token_check
        while self._by_token:
            await asyncio.sleep(period)
            tokens = list(self._by_token)
            if not tokens:
                return
            try:
                async with asyncio.timeout(period):
                    working = await self.tokens.recheck(tokens)
            except (Unavailable, TimeoutError) as exc:
                log.warning("cannot re-check A2A stream tokens now (%s)", exc)
                continue
            except Exception:
                log.exception("re-checking A2A stream tokens failed")
                continue
            for token in tokens:
                if token not in working:
                    for holder in list(self._by_token.get(token, ())):
                        if isinstance(holder, _Stream):
                            holder.revoke()

    @property
    def count(self) -> int:
        """Streams open, and blocking calls waiting, in this process."""
        return self._open


async def _produce(stream: _Stream, frames: AsyncGenerator[Frame, None], render: Render) -> None:
    try:
        async for frame in frames:
            if stream.queue:
                # The writer's turn first: a replay reads events faster than any client takes
                # them, and what the writer has handed to the connection waits here no more.
                await asyncio.sleep(0)
            if not stream.write(render(frame)):
                return
        stream.end()
    except asyncio.CancelledError:
        raise
    except A2AError as exc:  # the handler's refusal, after the stream began
        stream.end(stream.error(exc))
    except Exception as exc:
        stream.end(stream.error(unexpected(exc)))
    finally:
        await frames.aclose()


def _push(stream: _Stream, render: Render, frame: Frame) -> bool:
    """A live update from the fan-out, with no task woken (`baton.live.streams`): written as
    `_produce` would write it (its task waits with nothing queued). False when the stream
    takes nothing more (ending, or dropped by this frame)."""
    body = render(frame)
    return stream.write_at_once(chunk_of(body)) or stream.write(body)


async def _body(send: Send, body: bytes, *, more: bool) -> None:
    await send({"type": "http.response.body", "body": body, "more_body": more})


async def _disconnected(receive: Receive) -> None:
    while True:
        message: Message = await receive()
        if message["type"] == "http.disconnect":
            return
