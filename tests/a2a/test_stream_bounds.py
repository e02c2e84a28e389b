"""A2A streams are bounded: per token and per process (429 / 503 before anything runs), in bytes
queued for a client that stops reading (dropped, and it resumes from its last id), by tokens
that stop working (their streams end), and kept alive by comments while quiet.

Against `bounded_server` (tests/a2a/conftest.py: 3 streams per token, 5 per process, 64 KiB
queued, a comment after 0.3 s of quiet, tokens re-checked every second)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import time
from contextlib import AsyncExitStack
from typing import Any

import httpx

from baton.access.gate import GateDecision
from baton.access.tokens import create_token, digest, revoke_token
from baton.protocol.handoff import TaskState
from baton.store.records import TaskRecord
from tests.a2a.conftest import (
    LIMITS,
    BoundedServer,
    a2a_client,
    agent_url,
    message,
    send,
    state,
)
from tests.a2a.sse import Stream, subscribe
from tests.helpers import World, agent, checkpoint
from tests.sse.client import dechunk, raw_request, read_until_closed

PER_TOKEN = int(LIMITS["BATON_SSE_MAX_STREAMS_PER_TOKEN"])
PER_PROCESS = int(LIMITS["BATON_SSE_MAX_STREAMS"])
KEEP_ALIVE = float(LIMITS["BATON_SSE_KEEP_ALIVE_SECONDS"])
CHECK = float(LIMITS["BATON_TOKEN_CHECK_SECONDS"])
SLACK = 3.0  # a database round trip and a loaded machine
DROPPED = "dropped an A2A stream whose client stopped reading"


async def opened(base: str, token: str, binding: str, task_id: str) -> httpx.Response:
    """A SubscribeToTask answered with anything but a stream (its whole answer)."""
    async with subscribe(base, token, binding, task_id) as refused:
        await refused.response.aread()
        return refused.response


async def open_task(world: World) -> TaskRecord:
    return await world.task_in(TaskState.working)


def refusal(binding: str, answer: httpx.Response) -> tuple[int, str]:
    body = answer.json()["error"]
    details = body["data"] if binding == "JSONRPC" else body["details"]
    return answer.status_code, details[0]["metadata"]["code"]


async def test_streams_past_the_token_cap_are_429_and_past_the_process_cap_503(
    bounded_server: BoundedServer, world: World, binding: str
) -> None:
    task = await open_task(world)
    first, second, third = [
        await bounded_server.token(world.roles[role])
        for role in ("requester", "requester_owner", "assignee")
    ]
    base = agent_url(bounded_server, world.assignee)
    held: list[Stream] = []  # kept: a stream's reader, collected, would close its connection
    async with AsyncExitStack() as streams:
        for _ in range(PER_TOKEN):
            held.append(await streams.enter_async_context(subscribe(base, first, binding, task.id)))
            await held[-1].take(1)
        refused = await opened(base, first, binding, task.id)
        assert refusal(binding, refused) == (429, "too_many_streams")
        assert refused.headers["retry-after"]

        # A blocking SendMessage finds no place to wait in: it answers at once.
        await world.decide(GateDecision.ALLOW)
        async with a2a_client(base, first, binding) as client:
            sent = message(data={"project": world.project})
            answered = await send(client, sent, return_immediately=False)
        assert state(answered) == "TASK_STATE_SUBMITTED"

        for _ in range(PER_PROCESS - PER_TOKEN):
            held.append(
                await streams.enter_async_context(subscribe(base, second, binding, task.id))
            )
            await held[-1].take(1)
        busy = await opened(base, third, binding, task.id)
        assert refusal(binding, busy) == (503, "unavailable")
        assert busy.headers["retry-after"]

    # Closed by their clients, the streams give their places back.
    deadline = time.monotonic() + 10
    while True:
        async with subscribe(base, third, binding, task.id) as again:
            if again.response.status_code == 200:
                assert (await again.take(1))[0].kind == "task"
                break
        assert time.monotonic() < deadline, "the places were not given back"
        await asyncio.sleep(0.1)


async def test_a_quiet_stream_gets_a_comment_every_keep_alive_period(
    bounded_server: BoundedServer, world: World, binding: str
) -> None:
    task = await open_task(world)
    token = await bounded_server.token(world.roles["requester"])
    received = b""
    async with subscribe(agent_url(bounded_server, world.assignee), token, binding, task.id) as s:
        started = time.monotonic()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(KEEP_ALIVE * 6):
                async for chunk in s.response.aiter_raw():
                    received += chunk
        took = time.monotonic() - started
    frames = [f for f in received.split(b"\n\n") if f]
    assert frames[0].startswith(b"id: ")  # the Task
    comments = [f for f in frames[1:] if f.startswith(b":")]
    assert comments == frames[1:]  # then nothing but comments
    assert 3 <= len(comments) <= took / KEEP_ALIVE + 2, (len(comments), took)


async def revoke(server: BoundedServer, token: str) -> None:
    token_id = await server.db.fetchval(
        "SELECT id FROM api_tokens WHERE token_hash = $1", digest(token)
    )
    await revoke_token(server.db, token_id)


async def test_revoking_a_token_ends_its_streams_with_an_unauthenticated_error(
    bounded_server: BoundedServer, world: World, binding: str
) -> None:
    task = await open_task(world)
    token = await create_token(bounded_server.db, world.roles["requester"])
    other = await bounded_server.token(world.roles["requester_owner"])
    base = agent_url(bounded_server, world.assignee)
    async with (
        subscribe(base, token, binding, task.id) as revoked,
        subscribe(base, other, binding, task.id) as kept,
    ):
        await revoked.take(1)
        await kept.take(1)
        await revoke(bounded_server, token)
        started = time.monotonic()
        ending = await revoked.rest(wait=CHECK + SLACK)
        took = time.monotonic() - started
        assert [u.event for u in ending] == ["error"]
        error = ending[0].body["error"]
        details = error["data"] if binding == "JSONRPC" else error["details"]
        assert details[0]["metadata"]["code"] == "unauthenticated"
        assert took <= CHECK + SLACK
        # The other token's stream goes on.
        await world.service.save_checkpoint(agent(world.assignee), task.id, checkpoint())
        (update,) = await kept.take(1)
        assert update.kind == "statusUpdate"


def big_checkpoint(n: int) -> dict[str, Any]:
    """About 20 KB as an update: a third of the queue a stream may hold."""
    return checkpoint(
        progress=f"{n} " + "p" * 1990,
        files_touched=[f"src/{n}/" + "f" * 280] * 60,
    )


async def test_a_client_that_stops_reading_is_dropped_and_resumes_from_its_last_id(
    bounded_server: BoundedServer, world: World, binding: str
) -> None:
    """About 12 MB of updates for a reader that reads nothing: more than the kernel's socket
    buffers, uvicorn's write buffer and the stream's 64 KiB queue hold. The server drops the
    stream; the client finds it cut short, and resumes after the last id it got."""
    task = await open_task(world)
    token = await bounded_server.token(world.roles["requester"])
    base = agent_url(bounded_server, world.assignee)
    host = bounded_server.url.removeprefix("http://")
    path = f"/a2a/agents/{world.assignee}"
    if binding == "JSONRPC":
        payload = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "SubscribeToTask",
            "params": {"id": task.id},
        }
        body = json.dumps(payload).encode()
        line = f"POST {path} HTTP/1.1"
    else:
        body = b""
        line = f"GET {path}/tasks/{task.id}:subscribe HTTP/1.1"
    head = "\r\n".join(
        [
            line,
            f"Host: {host}",
            "Accept: text/event-stream",
            "Content-Type: application/json",
            "A2A-Version: 1.0",
            f"Authorization: Bearer {token}",
            f"Content-Length: {len(body)}",
        ]
    )
    drops = bounded_server.log.read_text().count(DROPPED)
    sock = await raw_request(bounded_server.url, head, body, rcvbuf=4096)
    try:
        for n in range(600):
            await world.service.save_checkpoint(agent(world.assignee), task.id, big_checkpoint(n))
        deadline = time.monotonic() + 30
        while bounded_server.log.read_text().count(DROPPED) == drops:  # unread, it is dropped
            assert time.monotonic() < deadline, "the stream was not dropped"
            await asyncio.sleep(0.05)
        raw = await read_until_closed(sock, 30)
    finally:
        sock.close()
    assert raw.startswith(b"HTTP/1.1 200 ")
    streamed, ended = dechunk(raw.partition(b"\r\n\r\n")[2])
    # Cut, or (when the client took its last bytes within the grace) ended with the reason.
    frames = [f for f in streamed.split(b"\n\n") if f and not f.startswith(b":")]
    assert not ended or (
        frames[-1].startswith(b"event: error\n") and b'"slow_reader"' in frames[-1]
    ), frames[-1][:300]
    got = [i.decode() for i in re.findall(rb"(?m)^id: (\S+)$", streamed)]
    events = [
        str(r["id"])
        for r in await bounded_server.db.fetch(
            "SELECT id FROM task_events WHERE task_id = $1 AND kind = 'checkpoint_saved' "
            "ORDER BY id",
            task.id,
        )
    ]
    assert len(events) == 600
    # The Task is as it was when the stream began (after some of the checkpoints, perhaps);
    # the updates after it come in order, and stop short.
    events = [e for e in events if int(e) > int(got[0])]
    assert 1 < len(got) < len(events) + 1
    assert got[1:] == events[: len(got) - 1]

    # Resuming after the last id it got gives the rest, each once; a reader a loaded machine
    # starves may be dropped again, and resumes again.
    received = got[1:]
    for _ in range(5):
        try:
            async with subscribe(base, token, binding, task.id, last_event_id=received[-1]) as s:
                while len(received) < len(events):
                    (update,) = await s.take(1, wait=30)
                    assert update.event != "error", update.body
                    received.append(update.id)
            break
        except (httpx.RemoteProtocolError, AssertionError):
            await asyncio.sleep(0.5)
    assert received == events
