"""The pieces of GraphQL over SSE on their own: the vocabulary, the settings, and a stream's
queue and endings against an ASGI peer that stops reading (a `send` that never returns)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator
from typing import Any

import pytest

from baton.access.grants import TokenCache
from baton.engine.runner import Outcome
from baton.settings import ConfigErrors, Settings
from baton.web.graphql_sse import (
    CLOSE_GRACE_SECONDS,
    REVOKED,
    GraphQLSSE,
    StreamLimits,
    _Stream,
)
from baton.web.sse_protocol import COMPLETE, next_event, wants_event_stream
from tests.helpers import ENGINE


@pytest.mark.parametrize(
    ("accept", "wanted"),
    [
        ("text/event-stream", True),
        ("TEXT/Event-Stream", True),
        ("application/json, text/event-stream;q=0.5", True),
        ("text/event-stream; charset=utf-8", True),
        ("text/event-stream;q=0", False),
        ("text/event-stream; q=0.0", False),
        ("text/event-stream;q=soon", False),
        ("text/html,application/xhtml+xml,*/*;q=0.8", False),
        ("application/json", False),
        ("", False),
    ],
)
def test_an_event_stream_is_wanted_only_when_accept_names_it(accept: str, wanted: bool) -> None:
    assert wants_event_stream(accept) is wanted


def test_events_are_framed_as_the_protocol_says() -> None:
    assert next_event('{"data":{"a":"b\\nc"}}') == b'event: next\ndata: {"data":{"a":"b\\nc"}}\n\n'
    assert COMPLETE == b"event: complete\ndata:\n\n"


def test_the_stream_settings_are_read_and_checked() -> None:
    base = {"BATON_DATABASE_URL": "postgresql://u@db/x"}
    settings = Settings.from_env(
        {
            **base,
            "BATON_SSE_KEEP_ALIVE_SECONDS": "2.5",
            "BATON_SSE_MAX_STREAMS": "7",
            "BATON_SSE_MAX_STREAMS_PER_TOKEN": "2",
            "BATON_SSE_MAX_QUEUED_BYTES": "4096",
        }
    )
    assert (
        settings.sse_keep_alive_seconds,
        settings.sse_max_streams,
        settings.sse_max_streams_per_token,
        settings.sse_max_queued_bytes,
    ) == (2.5, 7, 2, 4096)
    defaults = Settings.from_env(base)
    assert defaults.sse_max_queued_bytes == 1024 * 1024 and defaults.sse_keep_alive_seconds == 15
    with pytest.raises(ConfigErrors) as bad:
        Settings.from_env(
            {**base, "BATON_SSE_MAX_QUEUED_BYTES": "10", "BATON_SSE_MAX_STREAMS": "0"}
        )
    assert {e.variable for e in bad.value.errors} == {
        "BATON_SSE_MAX_QUEUED_BYTES",
        "BATON_SSE_MAX_STREAMS",
    }


async def never(message: Any) -> None:
    raise AssertionError("nothing is written before the stream serves")


async def test_the_queue_takes_one_frame_of_any_size_then_holds_to_its_bound() -> None:
    stream = _Stream(100, never)  # not serving yet: frames are queued
    assert stream.write(b"x" * 500)  # alone in the queue: any event the engine allows fits
    assert stream.take() == b"x" * 500 and stream.queued == 0
    assert stream.write(b"a" * 60) and stream.write(b"b" * 40)
    assert not stream.dropped
    assert not stream.write(b"c")
    assert stream.dropped and stream.over.is_set()


async def test_revoking_discards_what_waits_and_queues_the_error_then_complete() -> None:
    stream = _Stream(1000, never)
    stream.write(next_event('{"data":1}'))
    stream.revoke()
    assert stream.take() == next_event(REVOKED) + COMPLETE
    assert stream.finished and stream.revoked and stream.over.is_set()


class Peer:
    """An ASGI client: records what is sent; `stalls_after` sends, it stops reading (every
    later `send` waits forever, as uvicorn's does on a full socket)."""

    def __init__(self, stalls_after: int | None = None) -> None:
        self.sent: list[dict[str, Any]] = []
        self.stalls_after = stalls_after
        self.got_event = asyncio.Event()

    async def send(self, message: Any) -> None:
        if self.stalls_after is not None and len(self.sent) >= self.stalls_after:
            await asyncio.Event().wait()
        self.sent.append(message)
        if b"event: next" in message.get("body", b""):
            self.got_event.set()

    async def receive(self) -> Any:
        await asyncio.Event().wait()  # the client never leaves

    def body(self) -> bytes:
        return b"".join(m.get("body", b"") for m in self.sent)


def handler(**limits: Any) -> GraphQLSSE:
    async def nobody(token: str) -> None:
        return None

    async def none_work(tokens: Any) -> set[str]:
        return set()

    return GraphQLSSE(ENGINE, TokenCache(nobody, none_work), lambda p: None, StreamLimits(**limits))


def events(closed: asyncio.Event, pause: float) -> AsyncGenerator[Outcome, None]:
    async def source() -> AsyncGenerator[Outcome, None]:
        try:
            n = 0
            while True:
                n += 1
                yield Outcome({"n": n, "pad": "p" * 1000})
                await asyncio.sleep(pause)
        finally:
            closed.set()

    return source()


def serving(sse: GraphQLSSE, stream: _Stream, source: Any, peer: Peer) -> asyncio.Task[None]:
    sse.streams.add(stream)  # as `__call__` does: the keep-alive timer goes over these
    return asyncio.create_task(sse._serve(stream, source, peer.receive))


async def test_events_are_written_without_a_task_while_the_client_keeps_up() -> None:
    peer, closed = Peer(), asyncio.Event()
    stream = _Stream(1 << 20, peer.send)
    task = serving(handler(), stream, events(closed, 0.01), peer)
    await asyncio.wait_for(peer.got_event.wait(), 5)
    while peer.body().count(b"event: next") < 5:
        assert stream.flusher is None and not stream.frames
        await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert closed.is_set()


async def test_a_revoked_stream_whose_client_does_not_read_ends_after_the_grace_period() -> None:
    """Closing never waits on the peer: its last events get `CLOSE_GRACE_SECONDS`."""
    peer, closed = Peer(stalls_after=1), asyncio.Event()
    stream = _Stream(1 << 20, peer.send)
    task = serving(handler(max_queued_bytes=1 << 20), stream, events(closed, 0.01), peer)
    await asyncio.sleep(0.2)  # events pile up behind the stalled send
    assert stream.queued > 0 and stream.flusher is not None and not task.done()
    started = time.monotonic()
    stream.revoke()
    await asyncio.wait_for(task, CLOSE_GRACE_SECONDS + 5)
    assert time.monotonic() - started >= CLOSE_GRACE_SECONDS - 0.1
    assert closed.is_set()  # the subscription's source is closed


async def test_a_revoked_stream_whose_client_reads_ends_with_the_error_and_complete() -> None:
    peer, closed = Peer(), asyncio.Event()
    stream = _Stream(1 << 20, peer.send)
    task = serving(handler(), stream, events(closed, 0.05), peer)
    await asyncio.wait_for(peer.got_event.wait(), 5)
    stream.revoke()
    await asyncio.wait_for(task, CLOSE_GRACE_SECONDS)
    assert peer.body().endswith(next_event(REVOKED) + COMPLETE)
    assert peer.sent[-1]["more_body"] is False
    assert closed.is_set()


async def test_a_stream_whose_client_stops_reading_is_dropped_past_its_bound() -> None:
    peer, closed = Peer(stalls_after=1), asyncio.Event()
    stream = _Stream(64 * 1024, peer.send)
    task = serving(handler(), stream, events(closed, 0), peer)
    await asyncio.wait_for(task, 10)
    assert stream.dropped and not stream.revoked
    assert stream.queued <= 64 * 1024
    assert closed.is_set()
    assert len(peer.sent) == 1  # nothing more went out, and the body was never ended


async def test_a_quiet_stream_sends_comments_and_events_in_between() -> None:
    peer, closed = Peer(), asyncio.Event()
    stream = _Stream(1 << 20, peer.send)
    task = serving(handler(keep_alive=0.05), stream, events(closed, 0.3), peer)
    await asyncio.sleep(0.7)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    body = peer.body()
    assert body.count(b"event: next") >= 2
    assert body.count(b":\n\n") >= 4  # several comments between events 0.3 s apart
