"""The A2A push notification config operations (`baton.a2a.push`), as the A2A handler calls
them: A2A's messages in and out, Baton's services and database underneath."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from a2a.types.a2a_pb2 import (
    AuthenticationInfo,
    DeleteTaskPushNotificationConfigRequest,
    GetTaskPushNotificationConfigRequest,
    ListTaskPushNotificationConfigsRequest,
    TaskPushNotificationConfig,
)
from google.protobuf import json_format

from baton.a2a import push
from baton.errors import InvalidInput, NotFound, Unavailable
from baton.services.context import Context
from baton.services.runs import RunService
from tests.helpers import World
from tests.webhooks.conftest import Receiver, own_database, receiver  # noqa: F401  (fixture)
from tests.webhooks.scoped import Deliveries, deliveries


@pytest.fixture(scope="module")
async def running(server_url: str) -> AsyncIterator[Deliveries]:
    async with own_database(server_url) as (_, db), deliveries(db, {}) as found:
        yield found


@pytest.fixture
def world(running: Deliveries) -> World:
    return running.world()


async def test_create_get_list_delete(
    running: Deliveries,
    world: World,
    receiver: Receiver,  # noqa: F811
) -> None:
    task = await world.hand_off()
    requester = running.context(world.roles["requester"])
    # As a client sends it (JSON, camelCase), with no id.
    given = json_format.Parse(
        f'{{"taskId": "{task.id}", "url": "{receiver.at("/a2a")}", "token": "tok",'
        ' "authentication": {"scheme": "Bearer", "credentials": "secret-creds"}}',
        TaskPushNotificationConfig(),
    )
    made = await push.create_config(requester, given)
    assert made == TaskPushNotificationConfig(
        id=task.id,  # no id given: the task's
        task_id=task.id,
        url=receiver.at("/a2a"),
        token="tok",
        authentication=AuthenticationInfo(scheme="Bearer", credentials="secret-creds"),
    )
    second = await push.create_config(
        requester,
        TaskPushNotificationConfig(id="second", task_id=task.id, url=receiver.at("/two")),
    )
    assert second.id == "second" and not second.HasField("authentication")

    # Read back by the requester's owner: no token, no credentials; the scheme is kept.
    owner = running.context(world.roles["requester_owner"])
    got = await push.get_config(
        owner, GetTaskPushNotificationConfigRequest(task_id=task.id, id=task.id)
    )
    assert got == TaskPushNotificationConfig(
        id=task.id,
        task_id=task.id,
        url=receiver.at("/a2a"),
        authentication=AuthenticationInfo(scheme="Bearer"),
    )
    default = await push.get_config(owner, GetTaskPushNotificationConfigRequest(task_id=task.id))
    assert default == got  # an empty id names the task's default config

    first_page = await push.list_configs(
        owner, ListTaskPushNotificationConfigsRequest(task_id=task.id, page_size=1)
    )
    assert len(first_page.configs) == 1 and first_page.next_page_token
    rest = await push.list_configs(
        owner,
        ListTaskPushNotificationConfigsRequest(
            task_id=task.id, page_token=first_page.next_page_token
        ),
    )
    assert rest.next_page_token == ""
    listed = [*first_page.configs, *rest.configs]
    assert sorted(c.id for c in listed) == sorted([task.id, "second"])
    assert all(c.token == "" and c.authentication.credentials == "" for c in listed)

    delete = DeleteTaskPushNotificationConfigRequest(task_id=task.id, id="second")
    assert await push.delete_config(requester, delete) is None
    await push.delete_config(requester, delete)  # again: no error
    with pytest.raises(NotFound):
        await push.get_config(
            owner, GetTaskPushNotificationConfigRequest(task_id=task.id, id="second")
        )
    whole = await push.list_configs(owner, ListTaskPushNotificationConfigsRequest(task_id=task.id))
    assert [c.id for c in whole.configs] == [task.id]


async def test_another_owner_sees_neither_the_configs_nor_the_task(
    running: Deliveries,
    world: World,
    receiver: Receiver,  # noqa: F811
) -> None:
    task = await world.hand_off()
    await push.create_config(
        running.context(world.roles["requester"]),
        TaskPushNotificationConfig(id="c", task_id=task.id, url=receiver.at("/x")),
    )
    assignee = running.context(world.roles["assignee"])  # sees the task, not the config
    with pytest.raises(NotFound) as missing:
        await push.get_config(
            assignee, GetTaskPushNotificationConfigRequest(task_id=task.id, id="c")
        )
    assert missing.value.kind == "push notification config"
    listed = await push.list_configs(
        assignee, ListTaskPushNotificationConfigsRequest(task_id=task.id)
    )
    assert list(listed.configs) == []
    outsider = running.context(world.roles["outsider_agent"])
    for call in (
        push.create_config(
            outsider, TaskPushNotificationConfig(id="c", task_id=task.id, url=receiver.at("/y"))
        ),
        push.get_config(outsider, GetTaskPushNotificationConfigRequest(task_id=task.id, id="c")),
        push.list_configs(outsider, ListTaskPushNotificationConfigsRequest(task_id=task.id)),
        push.delete_config(
            outsider, DeleteTaskPushNotificationConfigRequest(task_id=task.id, id="c")
        ),
    ):
        with pytest.raises(NotFound) as missing:
            await call
        assert missing.value.kind == "task"


async def test_bad_requests_are_refused_with_the_field_named(
    running: Deliveries,
    world: World,
    receiver: Receiver,  # noqa: F811
) -> None:
    task = await world.hand_off()
    context = running.context(world.roles["requester"])
    cases = [
        (TaskPushNotificationConfig(url=receiver.at("/z")), "taskId"),
        (TaskPushNotificationConfig(task_id=task.id), "url"),
        (TaskPushNotificationConfig(task_id=task.id, url="file:///etc/passwd"), "url"),
        (
            TaskPushNotificationConfig(
                task_id=task.id,
                url=receiver.at("/z"),
                authentication=AuthenticationInfo(credentials="no scheme"),
            ),
            "authentication.scheme",
        ),
        (
            TaskPushNotificationConfig(task_id=task.id, url=receiver.at("/z"), token="a\nb"),
            "token",
        ),
    ]
    for request, field in cases:
        with pytest.raises(InvalidInput) as refused:
            await push.create_config(context, request)
        assert refused.value.field == field, request
    with pytest.raises(InvalidInput) as refused:
        await push.list_configs(
            context, ListTaskPushNotificationConfigsRequest(task_id=task.id, page_size=-1)
        )
    assert refused.value.field == "pageSize"
    # A process without the webhook service says so rather than failing.
    bare = Context(world.roles["requester"], running.service, RunService(running.db))
    with pytest.raises(Unavailable):
        await push.list_configs(bare, ListTaskPushNotificationConfigsRequest(task_id=task.id))
