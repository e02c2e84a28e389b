"""CancelTask: the `cancelTask` move, idempotent on a cancelled task, refused on another final
one, and exact when it races the assignee's last move."""

from __future__ import annotations

import asyncio

from a2a.client import Client
from a2a.types.a2a_pb2 import CancelTaskRequest, Task
from a2a.utils.errors import A2AError, InvalidRequestError, TaskNotCancelableError

from baton.protocol.handoff import TaskState
from baton.store.records import TaskRecord
from tests.a2a.conftest import a2a_client, agent_url, code_of, get, graphql_as, refused, state
from tests.conftest import LiveServer
from tests.helpers import RESULT_INPUT, World
from tests.live.client import HTTPClient

SUBMIT = """mutation($id: ID!, $result: ResultInput!) {
  submitResult(input: {id: $id, result: $result}) { __typename
    ... on MoveSuccess { task { state } } ... on Error { code } } }"""


async def test_cancelling_twice_answers_the_cancelled_task_both_times(
    live_server: LiveServer, world: World, binding: str
) -> None:
    task = await world.task_in(TaskState.working)
    token = await live_server.token(world.roles["requester"])
    async with a2a_client(agent_url(live_server, world.assignee), token, binding) as client:
        first = await client.cancel_task(CancelTaskRequest(id=task.id))
        again = await client.cancel_task(CancelTaskRequest(id=task.id))
    assert state(first) == state(again) == "TASK_STATE_CANCELED"
    # The second cancel moved nothing: the same version.
    assert first.metadata["baton"]["version"] == again.metadata["baton"]["version"]


async def test_a_task_final_otherwise_is_not_cancelable(
    live_server: LiveServer, world: World, binding: str
) -> None:
    completed = await world.task_in(TaskState.completed)
    rejected = await world.task_in(TaskState.rejected)
    token = await live_server.token(world.roles["requester"])
    async with a2a_client(agent_url(live_server, world.assignee), token, binding) as client:
        for task in (completed, rejected):
            error = await refused(client.cancel_task(CancelTaskRequest(id=task.id)))
            assert isinstance(error, TaskNotCancelableError), error
            assert (error.data or {}) == {"code": "invalid_state", "state": task.state.value}


async def test_the_assignee_sees_the_task_but_may_not_cancel_it(
    live_server: LiveServer, world: World, binding: str
) -> None:
    task = await world.task_in(TaskState.working)
    token = await live_server.token(world.roles["assignee"])
    async with a2a_client(agent_url(live_server, world.assignee), token, binding) as client:
        error = await refused(client.cancel_task(CancelTaskRequest(id=task.id)))
        assert state(await get(client, task.id)) == "TASK_STATE_WORKING"
    assert isinstance(error, InvalidRequestError) and code_of(error) == "forbidden"


async def _race(client: Client, assignee: HTTPClient, task: TaskRecord) -> tuple[object, str]:
    cancel = client.cancel_task(CancelTaskRequest(id=task.id))
    submit = assignee(SUBMIT, id=task.id, result=RESULT_INPUT)
    cancelled, submitted = await asyncio.gather(cancel, submit, return_exceptions=True)
    assert not isinstance(submitted, BaseException), submitted
    return cancelled, submitted["submitResult"]["__typename"]


async def test_a_cancel_racing_the_last_move_either_wins_or_is_not_cancelable(
    live_server: LiveServer, world: World, binding: str
) -> None:
    token = await live_server.token(world.roles["requester"])
    outcomes = set()
    async with (
        a2a_client(agent_url(live_server, world.assignee), token, binding) as client,
        graphql_as(live_server, world.roles["assignee"]) as assignee,
    ):
        for _ in range(6):
            task = await world.task_in(TaskState.working)
            cancelled, submitted = await _race(client, assignee, task)
            final = await get(client, task.id)
            if isinstance(cancelled, Task):  # the cancel won: the result was refused
                assert submitted != "MoveSuccess"
                assert state(cancelled) == state(final) == "TASK_STATE_CANCELED"
                outcomes.add("cancelled")
            else:  # the result won (AUTO: completed at once): the cancel came too late
                assert isinstance(cancelled, TaskNotCancelableError), cancelled
                assert isinstance(cancelled, A2AError) and code_of(cancelled) == "invalid_state"
                assert submitted == "MoveSuccess"
                assert state(final) == "TASK_STATE_COMPLETED"
                outcomes.add("completed")
            assert final.metadata["baton"]["state"] in ("cancelled", "completed")
    assert outcomes  # every race ended one of the two ways, never both, never an error
