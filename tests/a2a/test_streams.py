"""SendStreamingMessage and SubscribeToTask: the Task first, then every update in order until a
final state, each with the id a client resumes after; a cut stream resumed with Last-Event-ID
misses nothing and repeats nothing."""

from __future__ import annotations

import asyncio
from typing import Any

from a2a.client import ClientCallContext
from a2a.types.a2a_pb2 import SendMessageRequest, StreamResponse, SubscribeToTaskRequest
from a2a.types.a2a_pb2 import TaskState as A2AState
from a2a.utils.errors import InvalidParamsError, UnsupportedOperationError

from baton.access.gate import GateDecision
from baton.protocol.handoff import TaskState
from tests.a2a.conftest import (
    a2a_client,
    agent_url,
    code_of,
    graphql_as,
    message,
    move,
    refused,
)
from tests.a2a.sse import Update, stream, subscribe
from tests.conftest import LiveServer
from tests.helpers import RESULT_INPUT, World

PROGRESS = "Half way through"


def state_of(response: StreamResponse) -> str:
    kind = response.WhichOneof("payload")
    if kind == "task":
        return A2AState.Name(response.task.status.state)
    if kind == "status_update":
        return A2AState.Name(response.status_update.status.state)
    return f"artifact:{response.artifact_update.artifact.artifact_id}"


async def work(assignee: Any, task_id: str) -> None:
    """The assignee's whole part: accept, start, a checkpoint, the result (AUTO: completed)."""
    await move(assignee, "acceptTask", task_id)
    await move(assignee, "startTask", task_id)
    await move(assignee, "saveCheckpoint", task_id, checkpoint={"progress": PROGRESS})
    await move(assignee, "submitResult", task_id, result=RESULT_INPUT)


AFTER_WORK = [
    "TASK_STATE_WORKING",  # accepted
    "TASK_STATE_WORKING",  # started
    "TASK_STATE_WORKING",  # the checkpoint
    "artifact:result",
    "artifact:evidence",
    "TASK_STATE_WORKING",  # the result, verified in the same step (AUTO)
    "TASK_STATE_COMPLETED",
]


async def test_a_streamed_hand_off_gives_the_task_then_every_update_until_completed(
    live_server: LiveServer, world: World, binding: str
) -> None:
    await world.decide(GateDecision.ALLOW)
    token = await live_server.token(world.roles["requester"])
    base = agent_url(live_server, world.assignee)
    request = SendMessageRequest(message=message(data={"project": world.project}))
    async with (
        a2a_client(base, token, binding, streaming=True) as client,
        graphql_as(live_server, world.roles["assignee"]) as assignee,
    ):
        updates = client.send_message(request)
        first = await anext(updates)
        assert state_of(first) == "TASK_STATE_SUBMITTED"
        worker = asyncio.create_task(work(assignee, first.task.id))
        rest = [u async for u in updates]  # the stream ends by itself, at completed
        await worker
    assert [state_of(u) for u in rest] == AFTER_WORK
    checkpoint = rest[2].status_update.status.message
    assert checkpoint.parts[0].text == PROGRESS
    assert all(
        (u.status_update if u.HasField("status_update") else u.artifact_update).task_id
        == first.task.id
        for u in rest
    )
    generations = [
        u.status_update.metadata["generation"] for u in rest if u.HasField("status_update")
    ]
    assert generations == sorted(generations) and len(set(generations)) == len(generations)


async def test_subscribing_gives_the_task_then_its_updates_and_a_final_task_is_refused(
    live_server: LiveServer, world: World, binding: str
) -> None:
    task = await world.task_in(TaskState.routed)
    done = await world.task_in(TaskState.completed)
    token = await live_server.token(world.roles["requester"])
    async with (
        a2a_client(
            agent_url(live_server, world.assignee), token, binding, streaming=True
        ) as client,
        graphql_as(live_server, world.roles["assignee"]) as assignee,
    ):
        updates = client.subscribe(SubscribeToTaskRequest(id=task.id))
        first = await anext(updates)
        assert first.task.id == task.id and state_of(first) == "TASK_STATE_SUBMITTED"
        worker = asyncio.create_task(work(assignee, task.id))
        rest = [u async for u in updates]
        await worker
        final = await refused(anext(client.subscribe(SubscribeToTaskRequest(id=done.id))))
    assert [state_of(u) for u in rest] == AFTER_WORK
    assert isinstance(final, UnsupportedOperationError) and code_of(final) == "invalid_state"


def ids(updates: list[Update]) -> list[tuple[int, int]]:
    """Each update's id as (event id, place among its event's updates; last: a big number)."""
    out = []
    for update in updates:
        head, _, tail = update.id.partition(".")
        out.append((int(head), int(tail) if tail else 1 << 30))
    return out


async def test_a_cut_stream_resumed_after_its_last_id_misses_and_repeats_nothing(
    live_server: LiveServer, world: World, binding: str
) -> None:
    task = await world.task_in(TaskState.routed)
    token = await live_server.token(world.roles["requester"])
    base = agent_url(live_server, world.assignee)
    async with graphql_as(live_server, world.roles["assignee"]) as assignee:
        async with subscribe(base, token, binding, task.id) as cut:
            first = await cut.take(1)
            assert first[0].kind == "task"
            await move(assignee, "acceptTask", task.id)
            seen = first + await cut.take(1)
        await move(assignee, "startTask", task.id)  # while no stream is open
        await move(assignee, "saveCheckpoint", task.id, checkpoint={"progress": PROGRESS})
        async with subscribe(base, token, binding, task.id, last_event_id=seen[-1].id) as again:
            resumed = await again.take(2)  # what happened while it was away, no Task first
            await move(assignee, "submitResult", task.id, result=RESULT_INPUT)
            resumed += await again.rest()
    whole = seen + resumed
    assert [u.label for u in whole[1:]] == AFTER_WORK
    assert ids(whole) == sorted(ids(whole)) and len(set(ids(whole))) == len(whole)
    # Every event of the task after the first one streamed, each once.
    events = [
        r["id"]
        for r in await live_server.db.fetch(
            "SELECT id FROM task_events WHERE task_id = $1 ORDER BY id", task.id
        )
    ]
    assert int(whole[0].id) in events
    streamed = sorted({event for event, _ in ids(whole[1:])})
    assert streamed == [e for e in events if e > int(whole[0].id)]


async def test_a_stream_cut_between_an_events_updates_resumes_with_the_rest_of_them(
    live_server: LiveServer, world: World, binding: str
) -> None:
    task = await world.task_in(TaskState.working)
    token = await live_server.token(world.roles["requester"])
    base = agent_url(live_server, world.assignee)
    async with graphql_as(live_server, world.roles["assignee"]) as assignee:
        async with subscribe(base, token, binding, task.id) as cut:
            await cut.take(1)
            await move(assignee, "submitResult", task.id, result=RESULT_INPUT)
            (artifact,) = await cut.take(1)
        assert artifact.kind == "artifactUpdate" and "." in artifact.id
        async with subscribe(base, token, binding, task.id, last_event_id=artifact.id) as again:
            rest = await again.rest()
    assert [u.label for u in rest] == [
        "artifact:evidence",
        "TASK_STATE_WORKING",
        "TASK_STATE_COMPLETED",
    ]
    assert rest[1].id == artifact.id.split(".")[0]


async def test_a_resumption_point_the_task_never_had_is_invalid_params(
    live_server: LiveServer, world: World, binding: str
) -> None:
    task = await world.task_in(TaskState.working)
    token = await live_server.token(world.roles["requester"])
    newest = await live_server.db.fetchval(
        "SELECT max(id) FROM task_events WHERE task_id = $1", task.id
    )
    base = agent_url(live_server, world.assignee)
    for last in ("yesterday", "-3", str(newest + 10**9), "12.x"):
        async with subscribe(base, token, binding, task.id, last_event_id=last) as bad:
            assert bad.response.status_code < 500
            body = await bad.response.aread()
        assert b"Last-Event-ID" in body, body
    async with a2a_client(base, token, binding, streaming=True) as client:
        headers = {"Last-Event-ID": "garbage"}
        error = await refused(
            anext(
                client.subscribe(
                    SubscribeToTaskRequest(id=task.id),
                    context=ClientCallContext(service_parameters=headers),
                )
            )
        )
    assert isinstance(error, InvalidParamsError) and code_of(error) == "invalid_input"


async def test_each_update_names_the_event_it_comes_from(
    live_server: LiveServer, world: World, binding: str
) -> None:
    await world.decide(GateDecision.ALLOW)
    token = await live_server.token(world.roles["requester"])
    base = agent_url(live_server, world.assignee)
    body = {
        "message": {
            "messageId": f"stream-{world.tag}",
            "role": "ROLE_USER",
            "parts": [{"text": "Write it"}, {"data": {"project": world.project}}],
        }
    }
    async with stream(base, token, binding, "SendStreamingMessage", body) as opened:
        assert opened.response.headers["content-type"].startswith("text/event-stream")
        (first,) = await opened.take(1)
    task_id = first.body["task"]["id"]
    newest = await live_server.db.fetchval(
        "SELECT max(id) FROM task_events WHERE task_id = $1", task_id
    )
    assert first.id == str(newest)
    assert first.body["task"]["metadata"]["baton"]["state"] == "routed"
