"""What every resolver gets: the caller, the service, and per-request loaders."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from strawberry.dataloader import DataLoader

from baton.access.principals import Principal
from baton.errors import Forbidden
from baton.live.hub import EventHub
from baton.service import TaskService
from baton.store.records import TaskRecord


@dataclass
class Context:
    """Per HTTP request, or per WebSocket connection (whose principal is set at
    `connection_init`, and whose loaders must not cache: the connection outlives the data)."""

    caller: Principal | None
    service: TaskService
    hub: EventHub | None = None
    cache: bool = True
    connection_params: dict[str, Any] | None = None
    # Batched per request, so a list of tasks with their edges costs two queries, not 2N.
    tasks: DataLoader[str, TaskRecord | None] = field(init=False)
    dependents: DataLoader[str, list[TaskRecord]] = field(init=False)

    def __post_init__(self) -> None:
        self.tasks = DataLoader(load_fn=self._load_tasks, cache=self.cache)
        self.dependents = DataLoader(load_fn=self._load_dependents, cache=self.cache)

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

    async def _load_tasks(self, keys: Sequence[str]) -> list[TaskRecord | None]:
        found = {t.id: t for t in await self.service.visible_by_ids(self.principal, keys)}
        return [found.get(key) for key in keys]

    async def _load_dependents(self, keys: Sequence[str]) -> list[list[TaskRecord]]:
        found = await self.service.dependents_of(self.principal, keys)
        return [
            sorted((t for t in found if key in t.packet["depends_on"]), key=lambda t: t.id)
            for key in keys
        ]
