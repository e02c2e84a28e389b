"""What every door's handler gets: the caller and the services (a GraphQL resolver's context,
an MCP tool's, the webhook renderer's)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from baton.access.principals import Principal
from baton.errors import Forbidden
from baton.live.hub import EventHub
from baton.services.retention import Retention
from baton.services.runs import RunService
from baton.services.tasks import TaskService
from baton.services.webhooks import WebhookService
from baton.store.records import EventRecord, RunEventRecord


@dataclass(slots=True)  # one per open WebSocket: thousands idle in a process
class Context:
    """Per HTTP request, or per WebSocket connection (whose principal is set at
    `connection_init`)."""

    caller: Principal | None
    service: TaskService
    runs: RunService
    hub: EventHub[EventRecord] | None = None
    run_hub: EventHub[RunEventRecord] | None = None
    connection_params: dict[str, Any] | None = None
    webhooks: WebhookService | None = None
    retention: Retention | None = None

    @property
    def principal(self) -> Principal:
        if self.caller is None:
            raise Forbidden("not authenticated")
        return self.caller

    @property
    def events(self) -> EventHub[EventRecord]:
        if self.hub is None:
            raise RuntimeError("live events are not running in this process")
        return self.hub

    @property
    def run_events(self) -> EventHub[RunEventRecord]:
        if self.run_hub is None:
            raise RuntimeError("live events are not running in this process")
        return self.run_hub

    @property
    def webhook_service(self) -> WebhookService:
        if self.webhooks is None:
            raise RuntimeError("webhooks are not running in this process")
        return self.webhooks
