"""Webhooks in the schema: endpoint and delivery types, their queries and mutations.

Deliberately no `from __future__ import annotations`: the resolvers' annotations must be real
types for Strawberry to read (as in `baton.api.mutations`).
"""

from collections.abc import Sequence
from datetime import datetime
from enum import Enum
from typing import Annotated, Any, cast

import strawberry
from strawberry.scalars import JSON
from strawberry.types import Info
from strawberry.types.field import StrawberryField

from baton.api.errors import ForbiddenError, InvalidInputError, NotFoundError
from baton.api.expected import expected
from baton.api.pages import MAX_PAGE, check_page_size
from baton.api.subscriptions import RunEventFilter, TaskEventFilter
from baton.engine.cost import list_size
from baton.engine.plans import batched
from baton.errors import InvalidInput
from baton.numbers import MAX_BIGINT, ascii_int
from baton.services.context import Context
from baton.services.webhooks import (
    DEFAULT_GRACE_SECONDS,
    MAX_DESCRIPTION,
    MAX_GRACE_SECONDS,
    WebhookService,
    WithSecret,
)
from baton.store.webhooks import (
    KEPT_DELIVERIES,
    MAX_ENDPOINTS,
    MAX_PENDING_MANUAL,
    DeliveryRecord,
    DeliveryStatus,
    EndpointRecord,
)


@strawberry.enum(description="What became of a webhook delivery.")
class WebhookDeliveryStatus(Enum):
    PENDING = "pending"
    DELIVERED = "delivered"
    FAILED = "failed"


@strawberry.enum(description="What a webhook delivery carries.")
class WebhookDeliveryKind(Enum):
    EVENT = "event"
    PING = "ping"
    REDELIVERY = "redelivery"


@strawberry.enum(description="Which event log a webhook delivery's event is from.")
class WebhookEventLog(Enum):
    TASK = "task"
    RUN = "run"


def _service(info: Info[Context, None]) -> WebhookService:
    return info.context.webhook_service


@strawberry.type(
    description="One message to one endpoint and what became of it: an event's delivery (one "
    "per event, however many attempts), a ping, or a manual redelivery. Each endpoint keeps "
    f"its newest {KEPT_DELIVERIES:,} (pending ones always)."
)
class WebhookDelivery:
    record: strawberry.Private[DeliveryRecord]

    @strawberry.field
    def id(self) -> strawberry.ID:
        return strawberry.ID(str(self.record.id))

    @strawberry.field
    def endpoint_id(self) -> strawberry.ID:
        return strawberry.ID(self.record.endpoint_id)

    @strawberry.field
    def kind(self) -> WebhookDeliveryKind:
        return WebhookDeliveryKind(self.record.kind.value)

    @strawberry.field(description="The log of the event delivered (null for a ping).")
    def log(self) -> WebhookEventLog | None:
        return WebhookEventLog(self.record.log) if self.record.log else None

    @strawberry.field(description="The event's id in its log (`TaskEvent.id` / `RunEvent.id`).")
    def event_id(self) -> strawberry.ID | None:
        return strawberry.ID(str(self.record.event_id)) if self.record.event_id else None

    @strawberry.field(
        description="The `webhook-id` header: the same for every attempt at an event and its "
        "redeliveries, so a receiver can drop a message it has seen."
    )
    def message_id(self) -> str:
        return self.record.message_id

    @strawberry.field(
        description="PENDING: not acknowledged yet (an event's next attempt is at "
        "`nextAttemptAt`, or when its disabled endpoint is enabled). DELIVERED: answered 2xx. "
        "FAILED: a ping or redelivery whose one attempt failed."
    )
    def status(self) -> WebhookDeliveryStatus:
        return WebhookDeliveryStatus(self.record.status.value)

    @strawberry.field
    def attempts(self) -> int:
        return self.record.attempts

    @strawberry.field(description="The HTTP status of the last attempt's answer, if any.")
    def response_status(self) -> int | None:
        return self.record.response_status

    @strawberry.field(description="The first 1 KiB of the last answer's body, if any.")
    def response_body(self) -> str | None:
        return self.record.response_body

    @strawberry.field(description="How long the last attempt took, in milliseconds.")
    def duration_ms(self) -> int | None:
        return self.record.duration_ms

    @strawberry.field(description="Why the last attempt failed (null when it succeeded).")
    def last_error(self) -> str | None:
        return self.record.last_error

    @strawberry.field
    def next_attempt_at(self) -> datetime | None:
        return self.record.next_attempt_at

    @strawberry.field
    def created_at(self) -> datetime:
        return self.record.created_at

    @strawberry.field(description="When the last attempt was made.")
    def updated_at(self) -> datetime:
        return self.record.updated_at

    @strawberry.field
    def delivered_at(self) -> datetime | None:
        return self.record.delivered_at


async def deliveries_of(
    context: Context,
    parents: Sequence["WebhookEndpoint"],
    *,
    first: int = 20,
    before: strawberry.ID | None = None,
    status: WebhookDeliveryStatus | None = None,
) -> list[list[WebhookDelivery]]:
    check_page_size(first)
    cursor = _delivery_id(before, "before") if before is not None else None
    wanted = DeliveryStatus(status.value) if status is not None else None
    ids = [p.record.id for p in parents]
    found = await context.webhook_service.deliveries(ids, first, cursor, wanted)
    return [[WebhookDelivery(record=d) for d in found[p.record.id]] for p in parents]


@strawberry.type(
    description="An owner's webhook endpoint: Baton POSTs each event it may see that matches "
    "`taskEvents` / `runEvents` to `url`, signed (Standard Webhooks), at least once, in "
    "order within each log."
)
class WebhookEndpoint:
    record: strawberry.Private[EndpointRecord]

    @strawberry.field
    def id(self) -> strawberry.ID:
        return strawberry.ID(self.record.id)

    @strawberry.field(description="The owner whose view of the events the endpoint gets.")
    def owner(self) -> str:
        return self.record.owner

    @strawberry.field
    def url(self) -> str:
        return self.record.url

    @strawberry.field
    def description(self) -> str:
        return self.record.description

    @strawberry.field(
        description="The `TaskEventFilter` of the task events sent, as given (null: none sent)."
    )
    def task_events(self) -> JSON | None:
        return cast(JSON, self.record.task_filter)

    @strawberry.field(
        description="The `RunEventFilter` of the run events sent, as given (null: none sent)."
    )
    def run_events(self) -> JSON | None:
        return cast(JSON, self.record.run_filter)

    @strawberry.field(
        description="False once disabled: by its owner, by a 410 answer (to any message, a "
        "ping or redelivery too), or after `BATON_WEBHOOK_MAX_ATTEMPTS` failed attempts in a "
        "row (`disabledReason` says which). Nothing is lost meanwhile: enabling it resumes "
        "where it stopped, with no failures counted."
    )
    def enabled(self) -> bool:
        return self.record.enabled

    @strawberry.field
    def disabled_reason(self) -> str | None:
        return self.record.disabled_reason

    @strawberry.field
    def disabled_at(self) -> datetime | None:
        return self.record.disabled_at

    @strawberry.field(
        description="Failed attempts in a row: at the event at the head of its queue, and at "
        "pings and redeliveries alike (an acknowledged one starts the count again)."
    )
    def failures(self) -> int:
        return self.record.failures

    @strawberry.field(
        description="While it is failing, when it is tried again: its head event, and any ping "
        "or redelivery waiting (null: it is not backing off)."
    )
    def next_attempt_at(self) -> datetime | None:
        return self.record.next_attempt_at

    @strawberry.field(
        description="Until when the secret replaced by the last rotation still signs, beside "
        "the new one (null: no such secret)."
    )
    def previous_secret_expires_at(self) -> datetime | None:
        return self.record.previous_secret_until if self.record.previous_secret else None

    @strawberry.field
    def created_at(self) -> datetime:
        return self.record.created_at

    @strawberry.field
    def updated_at(self) -> datetime:
        return self.record.updated_at

    @strawberry.field(
        description="Its newest deliveries first (older than the delivery `before`; only "
        f"`status` ones if given): at most `first` (at most {MAX_PAGE}).",
        metadata={**batched(deliveries_of), **list_size(MAX_PAGE, "first", 20)},
    )
    async def deliveries(
        self,
        info: Info[Context, None],
        first: int = 20,
        before: strawberry.ID | None = None,
        status: WebhookDeliveryStatus | None = None,
    ) -> list[WebhookDelivery]:
        found = await deliveries_of(info.context, [self], first=first, before=before, status=status)
        return found[0]


def _delivery_id(raw: strawberry.ID, field: str) -> int:
    value = ascii_int(str(raw), MAX_BIGINT)
    if value is None:
        raise InvalidInput(field, "is not a webhook delivery id")
    return value


def _variables(value: TaskEventFilter | RunEventFilter) -> dict[str, Any]:
    """A filter input as the subscription's variables (camelCase keys, enum values by name),
    as stored and handed to the subscription document."""
    value.to_filter()  # bounds (values per list) are checked once here
    names = {
        "task_ids": "taskIds",
        "run_ids": "runIds",
        "projects": "projects",
        "kinds": "kinds",
        "states": "states",
        "requester": "requester",
        "assignee": "assignee",
        "events": "events",
        "statuses": "statuses",
    }
    found: dict[str, Any] = {}
    for attribute, key in names.items():
        item = getattr(value, attribute, None)
        if item is None:
            continue
        if isinstance(item, list):
            found[key] = sorted({v.value if isinstance(v, Enum) else str(v) for v in item})
        else:
            found[key] = item
    return found


# --- queries --------------------------------------------------------------------------------


@strawberry.type
class WebhookQueries:
    @strawberry.field(
        name="webhookEndpoints",
        description="Webhook endpoints by id: an owner's own; admin's everyone's, or `owner`'s. "
        f"At most `first` (at most {MAX_PAGE}) after the endpoint id `after`; an owner has at "
        f"most {MAX_ENDPOINTS}. Agents may not list them (forbidden).",
        metadata=list_size(MAX_PAGE, "first", 50),
    )
    async def webhook_endpoints(
        self,
        info: Info[Context, None],
        owner: str | None = None,
        first: int = 50,
        after: strawberry.ID | None = None,
    ) -> list[WebhookEndpoint]:
        check_page_size(first)
        found = await _service(info).endpoints(
            info.context.principal, owner, first, str(after) if after is not None else None
        )
        return [WebhookEndpoint(record=e) for e in found]

    @strawberry.field(
        name="webhookEndpoint",
        description="One endpoint (its owner or admin); null when there is none the caller "
        "may manage (always for an agent; another owner's answers as a missing one).",
    )
    async def webhook_endpoint(
        self, info: Info[Context, None], id: strawberry.ID
    ) -> WebhookEndpoint | None:
        found = await _service(info).get(info.context.principal, str(id))
        return WebhookEndpoint(record=found) if found is not None else None


# --- mutations ------------------------------------------------------------------------------


@strawberry.input
class CreateWebhookEndpointInput:
    url: str = strawberry.field(
        description="https:// (http:// only with BATON_WEBHOOK_ALLOW_HTTP); refused when it "
        "resolves to an address that is not public (loopback, private, link-local, "
        "site-local, or an IPv6 form of such an IPv4 address), unless "
        "BATON_WEBHOOK_ALLOW_PRIVATE: then the endpoint is delivered to only by processes "
        "with that setting."
    )
    task_events: TaskEventFilter | None = strawberry.field(
        default=None, description="Send the task events matching this filter ({} for all)."
    )
    run_events: RunEventFilter | None = strawberry.field(
        default=None, description="Send the run events matching this filter ({} for all)."
    )
    description: str = strawberry.field(
        default="", description=f"At most {MAX_DESCRIPTION} characters."
    )
    owner: str | None = strawberry.field(
        default=None, description="Admin only: the owner the endpoint belongs to."
    )


@strawberry.input
class UpdateWebhookEndpointInput:
    id: strawberry.ID
    url: str | None = None
    description: str | None = None
    task_events: TaskEventFilter | None = strawberry.field(
        default=strawberry.UNSET, description="A new filter; null stops task events."
    )
    run_events: RunEventFilter | None = strawberry.field(
        default=strawberry.UNSET, description="A new filter; null stops run events."
    )
    enabled: bool | None = strawberry.field(
        default=None,
        description="false pauses deliveries; true resumes them where they stopped.",
    )


@strawberry.input
class WebhookEndpointIdInput:
    id: strawberry.ID


@strawberry.input
class RotateWebhookSecretInput:
    id: strawberry.ID
    grace_seconds: int = strawberry.field(
        default=DEFAULT_GRACE_SECONDS,
        description="How long the replaced secret still signs beside the new one (0 to "
        f"{MAX_GRACE_SECONDS}).",
    )


@strawberry.input
class RedeliverWebhookInput:
    delivery_id: strawberry.ID


@strawberry.type(
    description="The endpoint, and its signing secret: shown this once, never readable again."
)
class WebhookSecretSuccess:
    endpoint: WebhookEndpoint
    secret: str = strawberry.field(description="`whsec_` and 32 random bytes in base64.")

    @classmethod
    def of(cls, made: WithSecret) -> "WebhookSecretSuccess":
        return cls(endpoint=WebhookEndpoint(record=made.endpoint), secret=made.secret)


@strawberry.type
class WebhookEndpointSuccess:
    endpoint: WebhookEndpoint


@strawberry.type
class WebhookDeliverySuccess:
    delivery: WebhookDelivery = strawberry.field(
        description="The new delivery, pending: one attempt is made soon."
    )


WebhookSecretResult = Annotated[
    WebhookSecretSuccess | InvalidInputError | ForbiddenError | NotFoundError,
    strawberry.union("WebhookSecretResult"),
]
WebhookEndpointResult = Annotated[
    WebhookEndpointSuccess | InvalidInputError | ForbiddenError | NotFoundError,
    strawberry.union("WebhookEndpointResult"),
]
WebhookDeliveryResult = Annotated[
    WebhookDeliverySuccess | InvalidInputError | ForbiddenError | NotFoundError,
    strawberry.union("WebhookDeliveryResult"),
]


@strawberry.mutation(
    name="createWebhookEndpoint",
    description="Add an endpoint (owner, or admin naming `owner`); it gets the matching "
    "events committed from now on. The secret is in the answer once. An owner has at most "
    f"{MAX_ENDPOINTS} endpoints.",
)
async def create_webhook_endpoint(
    info: Info[Context, None], input: CreateWebhookEndpointInput
) -> WebhookSecretResult:
    async def run() -> WebhookSecretSuccess:
        made = await _service(info).create(
            info.context.principal,
            owner=input.owner,
            url=input.url,
            description=input.description,
            task_filter=_variables(input.task_events) if input.task_events is not None else None,
            run_filter=_variables(input.run_events) if input.run_events is not None else None,
        )
        return WebhookSecretSuccess.of(made)

    return await expected("createWebhookEndpoint", run())


@strawberry.mutation(
    name="updateWebhookEndpoint",
    description="Change an endpoint's URL, description, filters, or pause and resume it. "
    "The change holds from the next message: once this has answered, nothing more is sent "
    "from the endpoint as it was (a message already on its way is not counted as a failure).",
)
async def update_webhook_endpoint(
    info: Info[Context, None], input: UpdateWebhookEndpointInput
) -> WebhookEndpointResult:
    async def run() -> WebhookEndpointSuccess:
        changes: dict[str, Any] = {}
        if input.task_events is not strawberry.UNSET:
            tasks = input.task_events
            changes["task_filter"] = _variables(tasks) if tasks is not None else None
        if input.run_events is not strawberry.UNSET:
            runs = input.run_events
            changes["run_filter"] = _variables(runs) if runs is not None else None
        updated = await _service(info).update(
            info.context.principal,
            str(input.id),
            url=input.url,
            description=input.description,
            enabled=input.enabled,
            **changes,
        )
        return WebhookEndpointSuccess(endpoint=WebhookEndpoint(record=updated))

    return await expected("updateWebhookEndpoint", run())


@strawberry.mutation(
    name="deleteWebhookEndpoint",
    description="Remove an endpoint and its deliveries; the answer shows it as it was.",
)
async def delete_webhook_endpoint(
    info: Info[Context, None], input: WebhookEndpointIdInput
) -> WebhookEndpointResult:
    async def run() -> WebhookEndpointSuccess:
        gone = await _service(info).delete(info.context.principal, str(input.id))
        return WebhookEndpointSuccess(endpoint=WebhookEndpoint(record=gone))

    return await expected("deleteWebhookEndpoint", run())


@strawberry.mutation(
    name="rotateWebhookSecret",
    description="A new signing secret (in the answer once). During `graceSeconds` every "
    "message carries two signatures, the new secret's and the replaced one's.",
)
async def rotate_webhook_secret(
    info: Info[Context, None], input: RotateWebhookSecretInput
) -> WebhookSecretResult:
    async def run() -> WebhookSecretSuccess:
        made = await _service(info).rotate(
            info.context.principal, str(input.id), input.grace_seconds
        )
        return WebhookSecretSuccess.of(made)

    return await expected("rotateWebhookSecret", run())


@strawberry.mutation(
    name="pingWebhookEndpoint",
    description="Send one `ping` message (type `ping`), even to a disabled endpoint: at once, "
    "or when the endpoint's backoff ends if it is failing (`nextAttemptAt`); its delivery shows "
    "the answer. A failed ping counts as any failed message: the endpoint backs off, and is "
    "disabled after `BATON_WEBHOOK_MAX_ATTEMPTS` in a row, or at once by a 410. At most "
    f"{MAX_PENDING_MANUAL} pings and redeliveries wait per endpoint (past it: "
    "InvalidInputError).",
)
async def ping_webhook_endpoint(
    info: Info[Context, None], input: WebhookEndpointIdInput
) -> WebhookDeliveryResult:
    async def run() -> WebhookDeliverySuccess:
        ping = await _service(info).ping(info.context.principal, str(input.id))
        return WebhookDeliverySuccess(delivery=WebhookDelivery(record=ping))

    return await expected("pingWebhookEndpoint", run())


@strawberry.mutation(
    name="redeliverWebhook",
    description="Send a delivery's message once more (same `webhook-id`, signed anew), even "
    "to a disabled endpoint, as a new REDELIVERY delivery; it waits and counts as a ping "
    "does (`pingWebhookEndpoint`).",
)
async def redeliver_webhook(
    info: Info[Context, None], input: RedeliverWebhookInput
) -> WebhookDeliveryResult:
    async def run() -> WebhookDeliverySuccess:
        delivery_id = _delivery_id(input.delivery_id, "deliveryId")
        again = await _service(info).redeliver(info.context.principal, delivery_id)
        return WebhookDeliverySuccess(delivery=WebhookDelivery(record=again))

    return await expected("redeliverWebhook", run())


WEBHOOK_FIELDS: list[StrawberryField] = [
    create_webhook_endpoint,
    update_webhook_endpoint,
    delete_webhook_endpoint,
    rotate_webhook_secret,
    ping_webhook_endpoint,
    redeliver_webhook,
]
