"""A hand-off through the A2A door, end to end: the official SDK's client hands a task to an
agent's card over either binding, the assignee and the owners work through GraphQL, and the
client reads the task as it goes (SendMessage, GetTask, ListTasks, and replies)."""

from __future__ import annotations

import asyncio

import httpx
from a2a.helpers.proto_helpers import get_data_parts
from a2a.types.a2a_pb2 import ListTasksRequest
from a2a.utils.errors import InvalidParamsError, UnsupportedOperationError

from baton.access.gate import GateDecision
from baton.protocol.handoff import TaskState as BatonState
from baton.protocol.handoff import WaitingOn
from tests.a2a.conftest import (
    a2a_client,
    agent_url,
    code_of,
    get,
    graphql_as,
    message,
    move,
    refused,
    send,
    state,
)
from tests.conftest import LiveServer
from tests.helpers import World

PROGRESS = "Half of the notes written"
RESULT = {
    "summary": "Release notes written",
    "evidence": [{"kind": "note", "summary": "every change covered", "content": "all 12"}],
}


async def test_a_held_hand_off_is_approved_worked_on_verified_and_completed(
    live_server: LiveServer, world: World, binding: str
) -> None:
    await world.decide(None)  # another owner's agent: the gate holds it for bob's approval
    token = await live_server.token(world.roles["requester"])
    sent = message(
        "Write the release notes",
        {"project": world.project, "deliverableType": "doc", "verification": "REVIEW"},
        context_id=f"conversation-{world.tag}",
    )
    async with (
        a2a_client(agent_url(live_server, world.assignee), token, binding) as client,
        graphql_as(live_server, world.roles["assignee"]) as assignee,
        graphql_as(live_server, world.roles["assignee_owner"]) as owner,
    ):
        task = await send(client, sent)
        assert state(task) == "TASK_STATE_AUTH_REQUIRED"
        assert task.context_id == f"conversation-{world.tag}"
        assert "owner" in task.status.message.parts[0].text
        assert task.metadata["baton"]["waitingOn"] == WaitingOn.owner_approval.value

        await move(owner, "approveTask", task.id)
        assert state(await get(client, task.id)) == "TASK_STATE_SUBMITTED"
        await move(assignee, "acceptTask", task.id)
        await move(assignee, "startTask", task.id)
        assert state(await get(client, task.id)) == "TASK_STATE_WORKING"

        await move(assignee, "saveCheckpoint", task.id, checkpoint={"progress": PROGRESS})
        working = await get(client, task.id)
        assert working.status.message.parts[0].text == PROGRESS  # the checkpoint, as a message
        assert get_data_parts([working.status.message.parts[1]])[0]["progress"] == PROGRESS

        await move(assignee, "submitResult", task.id, result=RESULT)
        review = await get(client, task.id)
        assert state(review) == "TASK_STATE_INPUT_REQUIRED"  # REVIEW: the requester's verdict
        result, evidence = review.artifacts
        assert (result.artifact_id, result.parts[0].text) == ("result", RESULT["summary"])
        assert evidence.artifact_id == "evidence"
        assert get_data_parts([evidence.parts[0]])[0]["evidence"][0]["content"] == "all 12"

        # A reply that names no move, where three are open to the requester: refused, naming them.
        ambiguous = await refused(send(client, message("Looks good", task_id=task.id)))
        assert isinstance(ambiguous, InvalidParamsError), ambiguous
        assert (ambiguous.data or {})["allowedMoves"] == "requestSignOff,completeTask,sendBackTask"
        done = await send(client, message("Looks good", {"move": "completeTask"}, task_id=task.id))
        assert state(done) == "TASK_STATE_COMPLETED" and done.id == task.id

        history = (await get(client, task.id, history=20)).history
        assert history[0].message_id == sent.message_id  # the hand-off, as the client sent it
        assert any(p.text == PROGRESS for m in history for p in m.parts)
        listed = await client.list_tasks(ListTasksRequest(context_id=task.context_id))
        assert [t.id for t in listed.tasks] == [task.id] and listed.total_size == 1


async def test_an_auto_verified_result_completes_the_task_with_its_artifacts(
    live_server: LiveServer, world: World, binding: str
) -> None:
    await world.decide(GateDecision.ALLOW)
    token = await live_server.token(world.roles["requester"])
    async with (
        a2a_client(agent_url(live_server, world.assignee), token, binding) as client,
        graphql_as(live_server, world.roles["assignee"]) as assignee,
    ):
        task = await send(client, message(data={"project": world.project}))
        assert state(task) == "TASK_STATE_SUBMITTED"
        assert task.context_id == task.id  # none given: the task's own id
        for name in ("acceptTask", "startTask"):
            await move(assignee, name, task.id)
        await move(assignee, "submitResult", task.id, result=RESULT)
        done = await get(client, task.id)
        assert state(done) == "TASK_STATE_COMPLETED"
        assert [a.artifact_id for a in done.artifacts] == ["result", "evidence"]


async def test_the_same_message_sent_again_is_the_same_task(
    live_server: LiveServer, world: World, binding: str
) -> None:
    await world.decide(GateDecision.ALLOW)
    token = await live_server.token(world.roles["requester"])
    async with a2a_client(agent_url(live_server, world.assignee), token, binding) as client:
        sent = message(data={"project": world.project})
        first = await send(client, sent)
        again = await send(client, sent)
        other = await send(client, message(data={"project": world.project}))
    assert again.id == first.id != other.id
    assert again.metadata["baton"]["version"] == first.metadata["baton"]["version"]


async def test_a_blocking_send_answers_once_the_task_is_final(
    live_server: LiveServer, world: World, binding: str
) -> None:
    await world.decide(GateDecision.ALLOW)
    token = await live_server.token(world.roles["requester"])
    client_id = f"blocking-{world.tag}"
    task_id = f"{world.req_owner}_{client_id}"
    async with (
        a2a_client(agent_url(live_server, world.assignee), token, binding) as client,
        graphql_as(live_server, world.roles["assignee"]) as assignee,
    ):
        sent = message(data={"project": world.project, "id": client_id})
        blocking = asyncio.create_task(send(client, sent, return_immediately=False))
        async with httpx.AsyncClient(base_url=live_server.url) as http:
            while True:  # the hand-off is made, the call still waits
                query = "query($id: ID!) { task(id: $id) { state } }"
                found = await http.post(
                    "/graphql",
                    json={"query": query, "variables": {"id": task_id}},
                    headers={"Authorization": f"Bearer {token}"},
                )
                if found.json()["data"]["task"] is not None:
                    break
                await asyncio.sleep(0.05)
        assert not blocking.done()
        for name in ("acceptTask", "startTask"):
            await move(assignee, name, task_id)
        await move(assignee, "submitResult", task_id, result=RESULT)
        done = await asyncio.wait_for(blocking, 30)
    assert done.id == task_id and state(done) == "TASK_STATE_COMPLETED"


async def test_a_blocking_send_answers_at_once_when_the_gate_holds_or_refuses(
    live_server: LiveServer, world: World, binding: str
) -> None:
    token = await live_server.token(world.roles["requester"])
    async with a2a_client(agent_url(live_server, world.assignee), token, binding) as client:
        await world.decide(None)
        held = await send(
            client, message(data={"project": world.project}), return_immediately=False
        )
        await world.decide(GateDecision.DENY)
        denied = await send(
            client, message(data={"project": world.project}), return_immediately=False
        )
    assert state(held) == "TASK_STATE_AUTH_REQUIRED"
    assert state(denied) == "TASK_STATE_REJECTED"


async def test_a_reply_where_no_move_is_the_callers_or_to_a_final_task_is_unsupported(
    live_server: LiveServer, world: World, binding: str
) -> None:
    signing = await world.task_in(BatonState.approval)  # the requester's owner signs off
    finished = await world.task_in(BatonState.completed)
    token = await live_server.token(world.roles["requester"])
    async with a2a_client(agent_url(live_server, world.assignee), token, binding) as client:
        assert state(await get(client, signing.id)) == "TASK_STATE_INPUT_REQUIRED"
        not_mine = await refused(send(client, message("ok", task_id=signing.id)))
        final = await refused(send(client, message("ok", task_id=finished.id)))
    assert isinstance(not_mine, UnsupportedOperationError) and code_of(not_mine) == "invalid_move"
    assert isinstance(final, UnsupportedOperationError) and code_of(final) == "invalid_state"


async def test_the_one_move_open_to_the_caller_is_the_reply(
    live_server: LiveServer, world: World, binding: str
) -> None:
    paused = await world.task_in(BatonState.waiting, WaitingOn.human)
    token = await live_server.token(world.roles["assignee"])
    async with a2a_client(agent_url(live_server, world.assignee), token, binding) as client:
        resumed = await send(client, message("the person answered", task_id=paused.id))
    assert state(resumed) == "TASK_STATE_WORKING"
    assert resumed.metadata["baton"]["state"] == "working"


async def test_batons_own_url_delegates_to_the_agent_a_data_part_names(
    live_server: LiveServer, world: World, binding: str
) -> None:
    await world.decide(GateDecision.ALLOW)
    token = await live_server.token(world.roles["requester"])
    async with a2a_client(f"{live_server.url}/a2a", token, binding) as client:
        task = await send(
            client, message(data={"project": world.project, "assignee": world.assignee})
        )
        assert task.metadata["baton"]["assignee"] == world.assignee
        assert (await get(client, task.id)).id == task.id


async def test_a_packet_the_service_refuses_is_invalid_params_naming_the_field(
    live_server: LiveServer, world: World, binding: str
) -> None:
    token = await live_server.token(world.roles["requester"])
    async with a2a_client(agent_url(live_server, world.assignee), token, binding) as client:
        long = await refused(send(client, message("x" * 501, {"project": world.project})))
        empty = await refused(send(client, message(None, {"project": world.project})))
        bad_type = await refused(
            send(client, message("x", {"project": world.project, "deliverableType": "poem"}))
        )
    for error, field in (
        (long, "packet.task"),
        (empty, "packet.task"),
        (bad_type, "packet.deliverableType"),
    ):
        assert isinstance(error, InvalidParamsError), error
        assert code_of(error) == "invalid_input" and (error.data or {})["field"] == field


async def test_a_task_is_listed_and_read_only_at_its_own_agents_url(
    live_server: LiveServer, world: World, binding: str
) -> None:
    mine = await world.task_in(BatonState.routed)
    token = await live_server.token(world.roles["requester"])
    elsewhere = agent_url(live_server, f"{world.asg_owner}/other")
    async with a2a_client(elsewhere, token, binding) as client:
        listed = await client.list_tasks(ListTasksRequest())
        missing = await refused(get(client, mine.id))
    assert mine.id not in {t.id for t in listed.tasks}
    assert code_of(missing) == "not_found"
