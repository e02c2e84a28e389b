"""A delivery worker in the test's own process, on a database of its own, for endpoints scoped
to a task (A2A push notification configs).

A `baton serve` process writes only the payload formats its doors give it; these tests hand
the worker formats of their own (`Deliveries.formats`), so the database must be one no other
server delivers from (`own_database`). Tasks are moved through a service that publishes to
the worker's hub, as the server's do, so a commit wakes the worker at once.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TypeVar

from broadcaster import Broadcast

from baton.access.principals import Principal
from baton.live.hub import EventHub
from baton.live.logs import RUN_LOG, TASK_LOG
from baton.services.context import Context
from baton.services.runs import RunService
from baton.services.tasks import TaskService
from baton.services.webhook_addresses import Policy
from baton.services.webhook_secrets import SecretBox
from baton.services.webhooks import WebhookService
from baton.store.db import Database
from baton.store.records import EventRecord, RunEventRecord
from baton.store.webhooks import PayloadFormat
from baton.webhooks.formats import Format
from baton.webhooks.worker import DeliveryWorker, WorkerSettings
from tests.helpers import ENGINE, World

# The receiver is on the loopback address, over http; retries come quickly.
POLICY = Policy(allow_private=True, allow_http=True)
SETTINGS = WorkerSettings(POLICY, timeout=2.0, retry_first=0.05, max_attempts=5, poll_seconds=0.2)
KEY = "a key of 32 characters or more, for sealing in tests"

T = TypeVar("T")


@dataclass
class Deliveries:
    """Tasks, the webhook service and a running worker on one database."""

    db: Database
    service: TaskService
    webhooks: WebhookService
    worker: DeliveryWorker
    hub: EventHub[EventRecord]
    run_hub: EventHub[RunEventRecord]

    def world(self) -> World:
        return World(self.service)

    def context(self, principal: Principal) -> Context:
        """What a request of `principal` gets in this process (the webhook service too)."""
        return Context(
            principal,
            self.service,
            RunService(self.db),
            self.hub,
            self.run_hub,
            webhooks=self.webhooks,
        )


@asynccontextmanager
async def deliveries(
    db: Database, formats: Mapping[PayloadFormat, Format]
) -> AsyncIterator[Deliveries]:
    broadcast = Broadcast("memory://")
    await broadcast.connect()
    hub = EventHub(db, broadcast, TASK_LOG, poll_interval=SETTINGS.poll_seconds)
    run_hub = EventHub(db, broadcast, RUN_LOG, poll_interval=SETTINGS.poll_seconds)
    await hub.start()
    await run_hub.start()
    service = TaskService(db, on_commit=hub.publish)
    box = SecretBox(KEY)
    made: list[Deliveries] = []

    def context(principal: Principal) -> Context:
        return made[0].context(principal)

    worker = DeliveryWorker(
        db, ENGINE, context, (hub, run_hub), box, SETTINGS, payload_formats=formats
    )
    webhooks = WebhookService(db, box, POLICY, on_change=worker.wake)
    made.append(Deliveries(db, service, webhooks, worker, hub, run_hub))
    await worker.start()
    try:
        yield made[0]
    finally:
        await worker.stop()
        await hub.stop()
        await run_hub.stop()
        await broadcast.disconnect()


async def eventually(check: Callable[[], Awaitable[T]], seconds: float = 30.0) -> T:
    """Poll `check()` until it returns something true; that value."""
    deadline = time.monotonic() + seconds
    while True:
        value = await check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"not true within {seconds} s: {check}")
        await asyncio.sleep(0.05)
