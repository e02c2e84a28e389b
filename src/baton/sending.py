"""Writing a stream's frames onto an HTTP connection, for every door that streams them from the
live fan-out (`baton.live.streams`): GraphQL over SSE, A2A's streams.

`send_now` runs an ASGI `send` in its caller until it would wait. Most writes never wait
(uvicorn's `send` returns at once unless its write buffer is full), and a task per write would
cost every stream a switch per event: at 10,000 subscribers the events reached them twice as
late (bench.live_delivery). A write that does wait is finished by a task of its caller's
(`finish_send`), which later writes queue behind.

Given the request's uvicorn cycle (`cycle_of` its scope, where the connection put it,
`baton.web.http_connection`), a chunk of the body that may go at once skips the `send` chain
altogether (`write_chunk`): the layers of `send` (uvicorn's, the front door's, any
middleware's) each cost a coroutine per event, for a chunk uvicorn would write as
`<size>\\r\\n<body>\\r\\n` onto the same transport. It is written at once, as a WebSocket frame
is: a chunk is whole, and waiting for the end of the loop's turn would cost a callback per
stream.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Generator
from typing import Any

from starlette.types import Message, Scope, Send
from uvicorn.protocols.http.httptools_impl import RequestResponseCycle

# The request's own uvicorn cycle, in its ASGI scope, by a weak reference: the cycle holds the
# scope, and a strong one would make every request a reference cycle, freed only by the
# collector.
CYCLE_KEY = "baton.cycle"


def cycle_of(scope: Scope) -> RequestResponseCycle | None:
    """The uvicorn cycle of the request `scope` belongs to, if its connection keeps one."""
    ref = scope.get(CYCLE_KEY)
    return ref() if isinstance(ref, weakref.ref) else None


# A write that had to wait: its steps, and what it waits on.
Waiting = tuple[Generator[Any, None, None], Any]


def send_now(
    send: Send, message: Message, cycle: RequestResponseCycle | None = None
) -> Waiting | None:
    """Run `send(message)` in the caller until it would wait (None: it did not); a body chunk
    that is not the last goes straight onto `cycle`'s connection when it may."""
    if cycle is not None and message.get("more_body") and write_chunk(cycle, message["body"]):
        return None
    steps = send(message).__await__()
    try:
        return steps, steps.send(None)
    except StopIteration:
        return None


async def finish_send(steps: Generator[Any, None, None], waiting: Any) -> None:
    """Go on with a write `send_now` began, as a task would: wait for what it waits on, then
    resume it, until it returns."""
    try:
        while True:
            if asyncio.isfuture(waiting):
                await asyncio.wait((waiting,))
            else:  # a bare yield: one turn of the loop
                await asyncio.sleep(0)
            try:
                waiting = steps.send(None)
            except StopIteration:
                return
    except BaseException:
        steps.close()
        raise


def chunk_of(body: bytes) -> bytes:
    """`body` (not empty) as one chunk of a chunked answer, as uvicorn's `send` frames it: a
    stream's event made once for every stream it goes to (`write_chunked`)."""
    return b"%x\r\n%b\r\n" % (len(body), body)


def write_chunk(cycle: RequestResponseCycle | None, body: bytes) -> bool:
    """Write `body` as the next chunk of `cycle`'s answer, as uvicorn's `send` would, when it
    may go now (`write_chunked`). False: nothing written; send it the ordinary way."""
    return bool(body) and write_chunked(cycle, chunk_of(body))


def write_chunked(cycle: RequestResponseCycle | None, chunk: bytes) -> bool:
    """Write `chunk` (`chunk_of` a body) onto `cycle`'s connection when it may go now: the head
    is out, the answer is chunked and not over, and the client has taken everything before
    (the writer is not paused, and the connection's account, if its transport keeps one,
    holds nothing). False: nothing written; send the body the ordinary way, which waits for
    the client. Never the last chunk: the end of the answer goes through `send`, which closes
    the cycle."""
    if (
        cycle is None
        or not cycle.response_started
        or cycle.response_complete
        or not cycle.chunked_encoding
        or cycle.disconnected
        or cycle.flow.write_paused
    ):
        return False
    transport = cycle.transport
    # A corked transport (`baton.web.http_connection`) keeps the connection's account of
    # bytes waiting for the client, and writes after what waits, at once.
    write_now = getattr(transport, "write_now", None)
    if write_now is None:
        transport.write(chunk)
        return True
    account = getattr(transport, "account", None)
    if account is not None and (account.cut or account.buffered or account.held):
        return False  # the budgets' way (`baton.web.metered`), through `send`
    write_now(chunk)
    return True
