"""A2A push notifications: the config operations, and the bodies the webhook worker sends.

A push notification config is a webhook endpoint scoped to one task
(`baton.services.task_webhooks`): these operations are that service's, through the caller's
`Context`, as GraphQL's and MCP's are. What A2A leaves to the server, decided here:

- **Whose.** A config is its owner's: an agent's configs are its owner's, shared with the
  owner's other agents that see the task. Whoever sees the task manages its owner's configs on
  it; another owner's answer as missing ones, and a task the caller may not see as a missing
  task. Admin reads and deletes every owner's and makes none.
- **Ids.** A config without an id gets the task's (as the SDK's stores do), so a create retried
  without one replaces what it made. Made again with its id, a config is replaced: URL, token
  and authentication as now given.
- **Secrets.** The token and the authentication credentials are kept sealed and sent only to
  the receiver: a create answers with the values it was given, Get and List never with them
  (the scheme is kept; the token and credentials are empty).
- **Life.** A config takes the task's updates committed from its creation on, and ends once the
  task's final update has been delivered (one made for a task that ended sends nothing). It
  stays readable until deleted or until its task is removed.
- **Bounds.** `MAX_ENDPOINTS_PER_TASK` per task and owner; `MAX_TASK_ENDPOINTS` live configs per
  owner (see `baton.store.webhooks`). URLs are held to the webhook address policy (no private,
  loopback or link-local address unless BATON_WEBHOOK_ALLOW_PRIVATE; https unless
  BATON_WEBHOOK_ALLOW_HTTP), checked when saved and again at every request.
- **Delivery.** By the webhook worker: at least once, in order, retried on its schedule; each
  request carries `X-A2A-Notification-Token` (the token), `Authorization: <scheme>
  <credentials>` when both are given, and the Standard Webhooks `webhook-id` (the same for every
  attempt at one message: a receiver drops repeats by it).

- **Bodies.** One request per A2A update: each of a task's events makes the updates a stream
  of the task gives for it (`updates.updates_json`: a returned result's artifact updates, then a
  status update), each posted as a `StreamResponse` in A2A's JSON (camelCase, as the SDK's own
  sender posts them), with the task's A2A context id (its own id for a task handed off through
  another door). `render` writes them; the app hands it to the worker as the `a2a` format.

Refusals are Baton's errors (`InvalidInput`, `NotFound`, `Forbidden`), for the door to map.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import orjson
from a2a.types.a2a_pb2 import (
    AuthenticationInfo,
    DeleteTaskPushNotificationConfigRequest,
    GetTaskPushNotificationConfigRequest,
    ListTaskPushNotificationConfigsRequest,
    ListTaskPushNotificationConfigsResponse,
    TaskPushNotificationConfig,
)

from baton.a2a.updates import updates_json
from baton.errors import InvalidInput, Unavailable
from baton.services.context import Context
from baton.services.task_contexts import TaskContext, TaskContexts
from baton.services.task_webhooks import Authentication
from baton.services.webhooks import WebhookService
from baton.store.records import EventRecord
from baton.store.webhooks import MAX_ENDPOINTS_PER_TASK, EndpointRecord, PayloadFormat

# Where a request carries the config's token (the header the SDK's own sender uses).
TOKEN_HEADER = "X-A2A-Notification-Token"


def _service(context: Context) -> WebhookService:
    if context.webhooks is None:
        raise Unavailable("push notifications are not running in this process")
    return context.webhooks


def _task_id(task_id: str) -> str:
    if not task_id:
        raise InvalidInput("taskId", "name the task")
    return task_id


def _config(endpoint: EndpointRecord) -> TaskPushNotificationConfig:
    """A config as Get and List answer it: without its token and credentials."""
    assert endpoint.task_id is not None and endpoint.config_id is not None
    config = TaskPushNotificationConfig(
        id=endpoint.config_id, task_id=endpoint.task_id, url=endpoint.url
    )
    if endpoint.auth_scheme:
        config.authentication.CopyFrom(AuthenticationInfo(scheme=endpoint.auth_scheme))
    return config


async def create_config(
    context: Context, request: TaskPushNotificationConfig
) -> TaskPushNotificationConfig:
    """CreateTaskPushNotificationConfig: a new config on a task the caller sees, or its
    owner's config of that id made again."""
    authentication = None
    if request.HasField("authentication"):
        given = request.authentication
        authentication = Authentication(given.scheme, given.credentials or None)
    made = await _service(context).create_for_task(
        context.principal,
        _task_id(request.task_id),
        config_id=request.id or None,
        url=request.url,
        token=request.token or None,
        authentication=authentication,
        payload_format=PayloadFormat.A2A,
    )
    answer = _config(made)
    # The caller's own values, as it gave them (checked by the service, kept sealed).
    answer.token = request.token
    if request.HasField("authentication"):
        answer.authentication.CopyFrom(request.authentication)
    return answer


async def get_config(
    context: Context, request: GetTaskPushNotificationConfigRequest
) -> TaskPushNotificationConfig:
    """GetTaskPushNotificationConfig: the caller's owner's config `id` on a task it sees (an
    empty id names the task's default config, as a create without one made)."""
    task_id = _task_id(request.task_id)
    found = await _service(context).for_task(context.principal, task_id, request.id or task_id)
    return _config(found)


async def list_configs(
    context: Context, request: ListTaskPushNotificationConfigsRequest
) -> ListTaskPushNotificationConfigsResponse:
    """ListTaskPushNotificationConfigs: a page of the caller's owner's configs on a task it
    sees, in one order (their endpoints' ids) page after page; at most
    `MAX_ENDPOINTS_PER_TASK` a page (0 asks for that many)."""
    if request.page_size < 0:
        raise InvalidInput("pageSize", "0 or more")
    size = request.page_size or MAX_ENDPOINTS_PER_TASK
    page, after = await _service(context).list_for_task(
        context.principal, _task_id(request.task_id), size, request.page_token or None
    )
    return ListTaskPushNotificationConfigsResponse(
        configs=[_config(found) for found in page], next_page_token=after or ""
    )


async def delete_config(context: Context, request: DeleteTaskPushNotificationConfigRequest) -> None:
    """DeleteTaskPushNotificationConfig: the caller's owner's config `id` on a task it sees is
    deleted; one that is not there is no error (a delete retried answers as the first did)."""
    task_id = _task_id(request.task_id)
    await _service(context).delete_for_task(context.principal, task_id, request.id or task_id)


# --- the bodies -----------------------------------------------------------------------------


async def render(
    context: Context, endpoint: EndpointRecord, events: Sequence[EventRecord]
) -> list[list[bytes]]:
    """The bodies of each of `events` (one task's, in order) for a config: its updates as
    `StreamResponse`s, what a stream of the task gives for the same events. The context is
    the config owner's; the events are ones it may see (the worker read them for it)."""
    kept = await TaskContexts(context.service.db).of(list({e.task_id for e in events}))
    return [
        [orjson.dumps(update) for update in updates_json(event, context_id(event.task_id, kept))]
        for event in events
    ]


def context_id(task_id: str, kept: Mapping[str, TaskContext]) -> str:
    """A task's A2A context id: the one it was handed off in, else its own id."""
    found = kept.get(task_id)
    return found.context_id if found is not None else task_id
