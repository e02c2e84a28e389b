"""Push notifications through the A2A door, end to end: the official SDK's client makes a
config on the task it handed off (over either binding), `baton serve` pushes every later
update of the task to a real receiver as A2A `StreamResponse`s while the owner approves and
the assignee works over GraphQL and the client completes the task; the receiver checks each
request, and the last one agrees with what GetTask answers."""

from __future__ import annotations

from typing import Any

from a2a.types.a2a_pb2 import (
    AuthenticationInfo,
    DeleteTaskPushNotificationConfigRequest,
    GetTaskPushNotificationConfigRequest,
    ListTaskPushNotificationConfigsRequest,
    StreamResponse,
    TaskPushNotificationConfig,
)
from a2a.types.a2a_pb2 import TaskState as A2AState
from google.protobuf import json_format

from baton.services.tasks import TaskService
from baton.store.db import Database
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
from tests.webhooks.conftest import (  # noqa: F401  (fixtures)
    Receiver,
    receiver,
    webhook_database,
    webhook_server,
)
from tests.webhooks.test_delivery import eventually

RESULT = {
    "summary": "Release notes written",
    "evidence": [{"kind": "note", "summary": "every change covered", "content": "all 12"}],
}


def pushed(message: Any, token: str) -> StreamResponse:
    """A request as the receiver checks it: the config's token and authentication, JSON that
    parses strictly as a StreamResponse."""
    assert message.headers["x-a2a-notification-token"] == token
    assert message.headers["authorization"] == "Bearer receiver-key"
    assert message.headers["content-type"] == "application/json"
    return json_format.Parse(message.body, StreamResponse())


def described(update: StreamResponse) -> str:
    if update.HasField("artifact_update"):
        return f"artifact:{update.artifact_update.artifact.artifact_id}"
    return A2AState.Name(update.status_update.status.state)


async def test_a_client_gets_pushed_every_update_of_its_task_until_it_completes(
    webhook_server: LiveServer,  # noqa: F811
    webhook_database: tuple[str, Database],  # noqa: F811
    receiver: Receiver,  # noqa: F811
    binding: str,
) -> None:
    world = World(TaskService(webhook_database[1]))
    await world.decide(None)  # no rule: the gate holds it for the assignee owner's approval
    token = await webhook_server.token(world.roles["requester"])
    path = f"/push-{binding}"
    async with (
        a2a_client(agent_url(webhook_server, world.assignee), token, binding) as client,
        graphql_as(webhook_server, world.roles["assignee"]) as assignee,
        graphql_as(webhook_server, world.roles["assignee_owner"]) as owner,
    ):
        sent = message(
            "Write the release notes",
            {"project": world.project, "deliverableType": "doc", "verification": "REVIEW"},
            context_id=f"conversation-{world.tag}",
        )
        task = await send(client, sent)
        assert state(task) == "TASK_STATE_AUTH_REQUIRED"
        config = TaskPushNotificationConfig(
            task_id=task.id,
            id="release-notes",
            url=receiver.at(path),
            token=f"token-{world.tag}",
            authentication=AuthenticationInfo(scheme="Bearer", credentials="receiver-key"),
        )
        made = await client.create_task_push_notification_config(config)
        assert made == config
        read = await client.get_task_push_notification_config(
            GetTaskPushNotificationConfigRequest(task_id=task.id, id="release-notes")
        )
        assert (read.url, read.token, read.authentication.scheme) == (config.url, "", "Bearer")
        assert read.authentication.credentials == ""  # never answered back
        listed = await client.list_task_push_notification_configs(
            ListTaskPushNotificationConfigsRequest(task_id=task.id)
        )
        assert [c.id for c in listed.configs] == ["release-notes"]
        # Another owner's agent sees neither the task nor its configs.
        outsider = await webhook_server.token(world.roles["outsider_agent"])
        async with a2a_client(
            agent_url(webhook_server, world.assignee), outsider, binding
        ) as stranger:
            missing = await refused(
                stranger.get_task_push_notification_config(
                    GetTaskPushNotificationConfigRequest(task_id=task.id, id="release-notes")
                )
            )
            assert code_of(missing) == "not_found"

        await move(owner, "approveTask", task.id)
        await move(assignee, "acceptTask", task.id)
        await move(assignee, "startTask", task.id)
        await move(assignee, "saveCheckpoint", task.id, checkpoint={"progress": "Half done"})
        await move(assignee, "submitResult", task.id, result=RESULT)
        done = await send(client, message("Good", {"move": "completeTask"}, task_id=task.id))
        assert state(done) == "TASK_STATE_COMPLETED"

        got = await receiver.wait_for(path, 8)
        updates = [pushed(m, config.token) for m in got]
        assert [described(u) for u in updates] == [
            "TASK_STATE_SUBMITTED",  # approved
            "TASK_STATE_WORKING",  # accepted
            "TASK_STATE_WORKING",  # started
            "TASK_STATE_WORKING",  # the checkpoint
            "artifact:result",
            "artifact:evidence",
            "TASK_STATE_INPUT_REQUIRED",  # the requester's verdict
            "TASK_STATE_COMPLETED",
        ]
        assert updates[3].status_update.status.message.parts[0].text == "Half done"
        assert {u.status_update.context_id or u.artifact_update.context_id for u in updates} == {
            f"conversation-{world.tag}"
        }
        # The last update says what GetTask says of the task now.
        final = await get(client, task.id)
        assert updates[-1].status_update.status == final.status
        assert updates[4].artifact_update.artifact == final.artifacts[0]
        assert len({m.headers["webhook-id"] for m in got}) == len(got)

        # Its task's final update delivered, the config ends; it is readable until deleted.
        async def ended() -> bool:
            row = await webhook_database[1].fetchrow(
                "SELECT enabled, disabled_reason FROM webhook_endpoints "
                "WHERE task_id = $1 AND config_id = 'release-notes'",
                task.id,
            )
            return row is not None and not row["enabled"]

        await eventually(ended)
        await client.delete_task_push_notification_config(
            DeleteTaskPushNotificationConfigRequest(task_id=task.id, id="release-notes")
        )
        after = await client.list_task_push_notification_configs(
            ListTaskPushNotificationConfigsRequest(task_id=task.id)
        )
        assert list(after.configs) == []
