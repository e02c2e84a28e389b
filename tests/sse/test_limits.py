"""Event streams are bounded: per token and per process (429 / 503 before anything runs), in
bytes queued for a client that stops reading (dropped), and kept alive by comments while quiet.

Against `sse_server` (tests/sse/conftest.py: 3 streams per token, 5 per process, 64 KiB queued,
a comment after 0.3 s of silence).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import time
from contextlib import AsyncExitStack

import httpx

from baton.access.gate import GateDecision
from tests.helpers import World
from tests.live.client import TASK_EVENTS
from tests.sse.client import (
    dechunk,
    events_in,
    gauge,
    raw_request,
    read_until_closed,
    subscribe,
)
from tests.sse.conftest import LIMITS, SSEServer

PER_TOKEN = int(LIMITS["BATON_SSE_MAX_STREAMS_PER_TOKEN"])
PER_PROCESS = int(LIMITS["BATON_SSE_MAX_STREAMS"])
KEEP_ALIVE = float(LIMITS["BATON_SSE_KEEP_ALIVE_SECONDS"])
SUBSCRIPTIONS = "baton_live_subscriptions"
DROPPED = "dropped an event stream whose client stopped reading"


async def subscriptions_become(server: SSEServer, value: int, within: float = 20) -> None:
    """Wait until the server holds `value` live subscriptions (fails after `within`)."""
    deadline = time.monotonic() + within
    while (now := await gauge(server.url, server.metrics_token, SUBSCRIPTIONS)) != value:
        assert time.monotonic() < deadline, f"{now} live subscriptions, not {value}"
        await asyncio.sleep(0.05)


async def post_stream(
    server: SSEServer, token: str, query: str, **variables: object
) -> httpx.Response:
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
        return await client.post(
            "/graphql",
            json={"query": query, "variables": variables},
            headers={"Authorization": f"Bearer {token}", "Accept": "text/event-stream"},
        )


async def test_streams_past_the_token_cap_are_429_and_past_the_process_cap_503(
    sse_server: SSEServer, world: World
) -> None:
    await world.decide(GateDecision.ALLOW)
    first, second, third = [
        await sse_server.token(world.roles[role])
        for role in ("requester", "requester_owner", "assignee")
    ]
    watch = {"filter": {"projects": [world.project]}}
    hand_off = """mutation($input: HandOffInput!) { handOff(input: $input) { __typename } }"""
    task_input = {
        "id": f"capped-{world.tag}",
        "project": world.project,
        "requester": world.requester,
        "assignee": world.assignee,
        "packet": {"task": "t", "deliverableType": "doc", "acceptanceCriteria": ["a"]},
    }
    await subscriptions_become(sse_server, 0)
    async with AsyncExitStack() as open_streams:
        for _ in range(PER_TOKEN):
            await open_streams.enter_async_context(
                subscribe(sse_server.url, first, TASK_EVENTS, watch)
            )
        refused = await post_stream(sse_server, first, hand_off, input=task_input)
        assert refused.status_code == 429
        assert refused.headers["retry-after"]
        error = refused.json()["errors"][0]
        assert error["extensions"]["code"] == "too_many_streams"
        assert f"at most {PER_TOKEN} event streams" in error["message"]
        created = await sse_server.db.fetchval(
            "SELECT count(*) FROM tasks WHERE id = $1", f"{world.req_owner}_capped-{world.tag}"
        )
        assert created == 0  # refused before anything ran

        for _ in range(PER_PROCESS - PER_TOKEN):
            await open_streams.enter_async_context(
                subscribe(sse_server.url, second, TASK_EVENTS, watch)
            )
        busy = await post_stream(sse_server, third, "{ viewer { handle } }")
        assert busy.status_code == 503
        assert busy.headers["retry-after"]
        assert busy.json()["errors"][0]["extensions"]["code"] == "unavailable"

    # Closed by their clients, the streams free their places.
    deadline = time.monotonic() + 10
    while (
        again := await post_stream(sse_server, third, "{ viewer { handle } }")
    ).status_code != 200:
        assert time.monotonic() < deadline, again.text
        await asyncio.sleep(0.1)
    assert events_in(again.content) == ["next", "complete"]


async def test_a_quiet_stream_gets_a_comment_every_keep_alive_period(
    sse_server: SSEServer, world: World
) -> None:
    token = await sse_server.token(world.roles["requester"])
    watch = {"filter": {"projects": [world.project]}}
    received = b""
    async with subscribe(sse_server.url, token, TASK_EVENTS, watch) as stream:
        started = time.monotonic()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(KEEP_ALIVE * 6):
                async for chunk in stream.response.aiter_raw():
                    received += chunk
        took = time.monotonic() - started
    comments = received.count(b":\n\n")
    assert received.replace(b":\n\n", b"") == b""  # nothing but comments
    # The first is sent as the stream opens, then one per quiet period.
    assert 3 <= comments <= took / KEEP_ALIVE + 2, (comments, took)


BIG = ", ".join(
    f"p{n}: packet {{ acceptanceCriteria files context }}" for n in range(19)
)  # 19 aliases of a full packet: about 560 KB per event
BIG_EVENTS = f"""
subscription($filter: TaskEventFilter, $after: ID) {{
  taskEvents(filter: $filter, after: $after) {{ id task {{ {BIG} }} }}
}}
"""


async def test_a_client_that_stops_reading_is_dropped_and_can_resume_from_its_cursor(
    sse_server: SSEServer, world: World
) -> None:
    """About 12 MB of events for a reader that reads nothing: more than the kernel's socket
    buffers, uvicorn's write buffer and the stream's 64 KiB queue hold. The server drops the
    stream (its subscription ends) while the client still has not read a byte; the client then
    finds the stream cut short, with no `complete`, and can resume from the last id it got."""
    tasks = [
        await world.hand_off(
            acceptance_criteria=[f"{n}" * 500] * 20,
            files=[f"src/{n}/" + "f" * 290] * 50,
            context="c" * 4000,
        )
        for n in range(10)
    ]
    first = await sse_server.db.fetchval(
        "SELECT min(id) FROM task_events WHERE task_id = $1", tasks[0].id
    )
    token = await sse_server.token(world.roles["requester"])
    body = json.dumps(
        {
            "query": BIG_EVENTS,
            "variables": {"filter": {"projects": [world.project]}, "after": str(first - 1)},
        }
    ).encode()
    host = sse_server.url.removeprefix("http://")
    head = "\r\n".join(
        [
            "POST /graphql HTTP/1.1",
            f"Host: {host}",
            "Accept: text/event-stream",
            "Content-Type: application/json",
            f"Authorization: Bearer {token}",
            f"Content-Length: {len(body)}",
        ]
    )
    drops = sse_server.log.read_text().count(DROPPED)
    sock = await raw_request(sse_server.url, head, body, rcvbuf=4096)
    try:
        deadline = time.monotonic() + 30
        while sse_server.log.read_text().count(DROPPED) == drops:  # unread, it is dropped
            assert time.monotonic() < deadline, "the stream was not dropped"
            await asyncio.sleep(0.05)
        await subscriptions_become(sse_server, 0)  # and its subscription has ended
        raw = await read_until_closed(sock, 30)
    finally:
        sock.close()
    assert raw.startswith(b"HTTP/1.1 200 ")
    body, ended = dechunk(raw.partition(b"\r\n\r\n")[2])
    assert not ended  # the chunked body was cut, not finished
    frames = [f for f in body.split(b"\n\n") if f.startswith(b"event: next\ndata: ")]
    names = events_in(body)
    assert "complete" not in names
    got = [int(i) for i in re.findall(rb'"taskEvents":\{"id":"(\d+)"', b"\n\n".join(frames))]
    all_ids = [
        row["id"]
        for row in await sse_server.db.fetch(
            "SELECT id FROM task_events WHERE task_id = ANY($1::text[]) ORDER BY id",
            [t.id for t in tasks],
        )
    ]
    assert len(all_ids) == 2 * len(tasks)
    assert 0 < len(got) < len(all_ids)  # cut short
    assert got == all_ids[: len(got)]

    # Resuming replays the rest at once, ~20 KB an event against a 64 KiB queue: a reader that
    # a loaded machine starves can be dropped again, and resumes again from what it got. Only
    # a drop the server reports is taken for one.
    received = list(got)
    for _ in range(5):
        variables = {"filter": {"projects": [world.project]}, "after": str(received[-1])}
        drops = sse_server.log.read_text().count(DROPPED)
        try:
            async with subscribe(sse_server.url, token, BIG_EVENTS, variables) as stream:
                while len(received) < len(all_ids):
                    [result] = await stream.results(1, wait=30)
                    received.append(int(result["taskEvents"]["id"]))
            break
        except httpx.RemoteProtocolError:
            await asyncio.sleep(0.5)  # the log line follows the close
            assert sse_server.log.read_text().count(DROPPED) > drops, "closed, not dropped"
    assert received == all_ids
