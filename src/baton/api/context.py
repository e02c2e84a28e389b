"""What every resolver gets: the caller and the services."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from baton.access.principals import Principal
from baton.errors import Forbidden
from baton.live.hub import EventHub
from baton.services.tasks import TaskService


@dataclass
class Context:
    """Per HTTP request, or per WebSocket connection (whose principal is set at
    `connection_init`)."""

    caller: Principal | None
    service: TaskService
    hub: EventHub | None = None
    connection_params: dict[str, Any] | None = None

    @property
    def principal(self) -> Principal:
        if self.caller is None:
            raise Forbidden("not authenticated")
        return self.caller

    @property
    def events(self) -> EventHub:
        if self.hub is None:
            raise RuntimeError("live events are not running in this process")
        return self.hub
