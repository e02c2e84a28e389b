"""The bounds of A2A push notification configs, as README's Limits table states them (it is
generated from the same constants), at their edges through the A2A door of a real `baton
serve`: the last value in is accepted, one past it is `InvalidParamsError` naming the field."""

from __future__ import annotations

from typing import Any

from a2a.client import Client
from a2a.types.a2a_pb2 import (
    AuthenticationInfo,
    ListTaskPushNotificationConfigsRequest,
    TaskPushNotificationConfig,
)
from a2a.utils.errors import InvalidParamsError

from baton.services.task_webhooks import MAX_CONFIG_ID, MAX_CREDENTIALS, MAX_TOKEN
from baton.services.tasks import TaskService
from baton.services.webhook_addresses import MAX_URL_LENGTH
from baton.store.db import Database
from baton.store.webhooks import MAX_ENDPOINTS_PER_TASK
from tests.a2a.conftest import a2a_client, agent_url, message, refused, send
from tests.conftest import LiveServer
from tests.helpers import World
from tests.webhooks.conftest import (  # noqa: F401  (fixtures)
    Receiver,
    receiver,
    webhook_database,
    webhook_server,
)


async def refused_field(client: Client, config: TaskPushNotificationConfig) -> str | None:
    error = await refused(client.create_task_push_notification_config(config))
    assert isinstance(error, InvalidParamsError), error
    data = error.data or {}
    assert data.get("code") == "invalid_input", data
    field = data.get("field")
    return str(field) if field is not None else None


async def test_each_value_of_a_config_is_taken_up_to_its_bound_and_refused_past_it(
    webhook_server: LiveServer,  # noqa: F811
    webhook_database: tuple[str, Database],  # noqa: F811
    receiver: Receiver,  # noqa: F811
    binding: str,
) -> None:
    world = World(TaskService(webhook_database[1]))
    token = await webhook_server.token(world.roles["requester"])
    async with a2a_client(agent_url(webhook_server, world.assignee), token, binding) as client:
        task = await send(client, message(data={"project": world.project}))

        def config(name: str, **given: Any) -> TaskPushNotificationConfig:
            given.setdefault("url", receiver.at("/bounds"))
            return TaskPushNotificationConfig(task_id=task.id, id=name, **given)

        def credentials(length: int) -> AuthenticationInfo:
            return AuthenticationInfo(scheme="Bearer", credentials="k" * length)

        path = "/" + "u" * (MAX_URL_LENGTH - len(receiver.url) - 1)
        assert len(receiver.at(path)) == MAX_URL_LENGTH
        edges = [
            (config("i" * MAX_CONFIG_ID), config("i" * (MAX_CONFIG_ID + 1)), "id"),
            (config("t", token="t" * MAX_TOKEN), config("t", token="t" * (MAX_TOKEN + 1)), "token"),
            (
                config("k", authentication=credentials(MAX_CREDENTIALS)),
                config("k", authentication=credentials(MAX_CREDENTIALS + 1)),
                "authentication.credentials",
            ),
            (config("u", url=receiver.at(path)), config("u", url=receiver.at(path + "u")), "url"),
        ]
        for taken, past, field in edges:
            made = await client.create_task_push_notification_config(taken)
            assert made.id == taken.id, field
            assert await refused_field(client, past) == field


async def test_a_task_holds_its_bound_of_configs_per_owner_and_one_more_is_refused(
    webhook_server: LiveServer,  # noqa: F811
    webhook_database: tuple[str, Database],  # noqa: F811
    receiver: Receiver,  # noqa: F811
    binding: str,
) -> None:
    world = World(TaskService(webhook_database[1]))
    token = await webhook_server.token(world.roles["requester"])
    async with a2a_client(agent_url(webhook_server, world.assignee), token, binding) as client:
        task = await send(client, message(data={"project": world.project}))
        for n in range(MAX_ENDPOINTS_PER_TASK):
            await client.create_task_push_notification_config(
                TaskPushNotificationConfig(task_id=task.id, id=f"c{n}", url=receiver.at("/cap"))
            )
        one_more = TaskPushNotificationConfig(task_id=task.id, id="over", url=receiver.at("/cap"))
        assert await refused_field(client, one_more) == "taskId"
        # Made again, a config is replaced: no new one, so the bound does not refuse it.
        again = TaskPushNotificationConfig(task_id=task.id, id="c0", url=receiver.at("/cap2"))
        assert (await client.create_task_push_notification_config(again)).url == again.url
        listed = await client.list_task_push_notification_configs(
            ListTaskPushNotificationConfigsRequest(task_id=task.id)
        )
    assert sorted(c.id for c in listed.configs) == sorted(
        f"c{n}" for n in range(MAX_ENDPOINTS_PER_TASK)
    )
    assert listed.next_page_token == ""
