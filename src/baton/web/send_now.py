"""An ASGI `send` run in its caller until it would wait, for the doors that write a stream's
frames from the live fan-out (`baton.live.streams`): GraphQL over SSE, A2A's streams.

Most writes never wait (uvicorn's `send` returns at once unless its write buffer is full), and a
task per write would cost every stream a switch per event: at 10,000 subscribers the events
reached them twice as late (bench.live_delivery). A write that does wait is finished by a task
of its caller's (`finish_send`), which later writes queue behind. Given the request's uvicorn
cycle, a chunk of the body that may go at once skips the `send` chain altogether
(`baton.web.http_connection.write_chunk`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Generator
from typing import Any

from starlette.types import Message, Send
from uvicorn.protocols.http.httptools_impl import RequestResponseCycle

from baton.web.http_connection import write_chunk

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
