"""What every resolver gets: the caller, the service, and per-request loaders."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from strawberry.dataloader import DataLoader

from baton.access.principals import Principal
from baton.service import TaskService
from baton.store.records import TaskRecord


@dataclass
class Context:
    principal: Principal
    service: TaskService
    # Batched per request, so a list of tasks with their edges costs two queries, not 2N.
    tasks: DataLoader[str, TaskRecord | None] = field(init=False)
    dependents: DataLoader[str, list[TaskRecord]] = field(init=False)

    def __post_init__(self) -> None:
        self.tasks = DataLoader(load_fn=self._load_tasks)
        self.dependents = DataLoader(load_fn=self._load_dependents)

    async def _load_tasks(self, keys: Sequence[str]) -> list[TaskRecord | None]:
        found = {t.id: t for t in await self.service.visible_by_ids(self.principal, keys)}
        return [found.get(key) for key in keys]

    async def _load_dependents(self, keys: Sequence[str]) -> list[list[TaskRecord]]:
        found = await self.service.dependents_of(self.principal, keys)
        return [
            sorted((t for t in found if key in t.packet["depends_on"]), key=lambda t: t.id)
            for key in keys
        ]
