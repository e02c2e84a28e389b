"""Another owner's task through the A2A door: every operation answers as for a task that does
not exist, so a token cannot find out which ids are taken."""

from __future__ import annotations

from a2a.types.a2a_pb2 import CancelTaskRequest, ListTasksRequest
from a2a.utils.errors import A2AError, TaskNotFoundError

from baton.protocol.handoff import TaskState
from tests.a2a.conftest import a2a_client, agent_url, get, message, refused, send
from tests.conftest import LiveServer
from tests.helpers import World


def _same(hidden: A2AError, missing: A2AError, hidden_id: str, missing_id: str) -> None:
    assert isinstance(hidden, TaskNotFoundError) and isinstance(missing, TaskNotFoundError)
    assert hidden.data == {"code": "not_found", "id": hidden_id}
    assert missing.data == {"code": "not_found", "id": missing_id}
    assert str(hidden).replace(hidden_id, "ID") == str(missing).replace(missing_id, "ID")


async def test_another_owners_task_is_missing_to_every_operation(
    live_server: LiveServer, world: World, binding: str
) -> None:
    task = await world.task_in(TaskState.working)
    nowhere = f"{world.req_owner}_never-{world.tag}"
    for outsider in ("outsider_agent", "outsider_owner"):
        token = await live_server.token(world.roles[outsider])
        async with a2a_client(agent_url(live_server, world.assignee), token, binding) as client:
            for call in (
                lambda task_id: get(client, task_id),
                lambda task_id: client.cancel_task(CancelTaskRequest(id=task_id)),
                lambda task_id: send(client, message("done", task_id=task_id)),
            ):
                _same(await refused(call(task.id)), await refused(call(nowhere)), task.id, nowhere)
            listed = await client.list_tasks(ListTasksRequest())
            assert task.id not in {t.id for t in listed.tasks}
    # What it could not see, it did not change.
    assert (await world.service.get(world.roles["admin"], task.id)).state is TaskState.working
