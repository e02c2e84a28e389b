"""A2A push notifications delivered: a real receiver (an HTTP server in the test) gets, and
checks, every update of a task driven through its whole life as A2A `StreamResponse`s, with
the config's token and authentication, until the task's final update; then the config ends."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from a2a.types.a2a_pb2 import (
    AuthenticationInfo,
    GetTaskPushNotificationConfigRequest,
    StreamResponse,
    TaskPushNotificationConfig,
)
from a2a.types.a2a_pb2 import TaskState as A2AState
from google.protobuf import json_format

from baton.a2a import mapping, push
from baton.access.gate import GateDecision
from baton.live.logs import TASK_LOG
from baton.protocol.handoff import MoveName, Verification, WaitingOn
from baton.services.task_contexts import TaskContexts
from baton.store.webhooks import PayloadFormat
from baton.webhooks.formats import Format
from baton.webhooks.worker import message_id
from tests.helpers import World, agent, checkpoint, result
from tests.webhooks.conftest import Receiver, own_database, receiver  # noqa: F401  (fixture)
from tests.webhooks.scoped import Deliveries, deliveries, eventually

# What the app hands the worker for the `a2a` payload format.
A2A = Format(push.render, token_header=push.TOKEN_HEADER)


@pytest.fixture(scope="module")
async def running(server_url: str) -> AsyncIterator[Deliveries]:
    async with (
        own_database(server_url) as (_, db),
        deliveries(db, {PayloadFormat.A2A: A2A}) as found,
    ):
        yield found


def received(message: Any) -> StreamResponse:
    """What the receiver makes of a request: a StreamResponse, parsed strictly (an unknown
    field fails), and one update in it."""
    assert message.headers["content-type"] == "application/json"
    update = json_format.Parse(message.body, StreamResponse())
    assert update.WhichOneof("payload") in ("status_update", "artifact_update"), update
    return update


def state_of(update: StreamResponse) -> str:
    if update.HasField("artifact_update"):
        return f"artifact:{update.artifact_update.artifact.artifact_id}"
    return A2AState.Name(update.status_update.status.state)


async def test_a_receiver_gets_every_update_of_a_tasks_life_then_the_config_ends(
    running: Deliveries,
    receiver: Receiver,  # noqa: F811
) -> None:
    world: World = running.world()
    task = await world.hand_off(decision=GateDecision.ASK, verification=Verification.REVIEW)
    await TaskContexts(running.db).keep(task.id, "ctx-push", "msg-push")
    requester = running.context(agent(world.requester))
    made = await push.create_config(
        requester,
        TaskPushNotificationConfig(
            id="client-1",
            task_id=task.id,
            url=receiver.at("/a2a"),
            token="task-token-7",
            authentication=AuthenticationInfo(scheme="Bearer", credentials="receiver-key"),
        ),
    )
    assert made.id == "client-1"

    # The task's whole life: held for the owner, approved, worked on with a checkpoint and a
    # pause, a result sent back for changes, a second result, completed by the requester.
    task = await world.move(task, MoveName.APPROVE)
    task = await world.move(task, MoveName.ACCEPT)
    task = await world.move(task, MoveName.START)
    await running.service.save_checkpoint(
        agent(world.assignee), task.id, checkpoint(progress="Drafted the outline")
    )
    task = await world.move(task, MoveName.PAUSE, waiting_on=WaitingOn.human)
    task = await world.move(task, MoveName.RESUME)
    task = await world.move(task, MoveName.SUBMIT_RESULT, result=result())
    task = await world.move(task, MoveName.SEND_BACK, reason="add the migration notes")
    task = await world.move(task, MoveName.SUBMIT_RESULT, result=result(summary="Second try"))
    task = await world.move(task, MoveName.COMPLETE)

    # What a stream of the task gives for the same events (`mapping.updates_of`, over the
    # events as the log holds them), after the config was made.
    async with running.db.connection() as conn:
        logged = await TASK_LOG.after(conn, 0, 100, "e.task_id = $3", [task.id])
    config = await running.webhooks.for_task(agent(world.requester), task.id, "client-1")
    events = [e for e in logged if e.id > config.task_cursor]
    assert events[0].move is MoveName.APPROVE
    expected = [u for e in events for u in mapping.updates_of(e, "ctx-push")]

    got = await receiver.wait_for("/a2a", len(expected))
    updates = [received(m) for m in got]
    assert updates == expected
    assert [state_of(u) for u in updates] == [
        "TASK_STATE_SUBMITTED",  # approved: routed to the assignee
        "TASK_STATE_WORKING",  # accepted
        "TASK_STATE_WORKING",  # started
        "TASK_STATE_WORKING",  # the checkpoint
        "TASK_STATE_WORKING",  # paused on a person: still the assignee's
        "TASK_STATE_WORKING",  # resumed
        "artifact:result",
        "artifact:evidence",
        "TASK_STATE_INPUT_REQUIRED",  # the requester's verdict
        "TASK_STATE_WORKING",  # sent back
        "artifact:result",
        "artifact:evidence",
        "TASK_STATE_INPUT_REQUIRED",
        "TASK_STATE_COMPLETED",
    ]
    for update in updates:
        which = update.status_update if update.HasField("status_update") else None
        about = which or update.artifact_update
        assert (about.task_id, about.context_id) == (task.id, "ctx-push")
    checkpoint_update = updates[3].status_update.status.message
    assert checkpoint_update.parts[0].text == "Drafted the outline"
    sent_back = updates[9].status_update.status.message
    assert "add the migration notes" in sent_back.parts[0].text
    assert updates[10].artifact_update.artifact.parts[0].text == "Second try"
    final = updates[-1].status_update
    assert final.metadata["generation"] == task.version
    assert final.metadata["eventId"] == str(events[-1].id)

    # Every request carries the config's token and authentication, and its own id.
    for message in got:
        assert message.headers["x-a2a-notification-token"] == "task-token-7"
        assert message.headers["authorization"] == "Bearer receiver-key"
    ids = [m.headers["webhook-id"] for m in got]
    assert len(set(ids)) == len(ids)
    result_event = events[6]
    first = message_id(config.id, "task", result_event.id)
    assert ids[6:9] == [first, f"{first}_1", f"{first}_2"]  # one event, three updates

    async def ended() -> bool:
        found = await running.webhooks.for_task(agent(world.requester), task.id, "client-1")
        return found.ended

    await eventually(ended)
    # Still readable until deleted: its owner sees what it was.
    kept = await push.get_config(
        requester, GetTaskPushNotificationConfigRequest(task_id=task.id, id="client-1")
    )
    assert kept.url == receiver.at("/a2a") and kept.token == ""
