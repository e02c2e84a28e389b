"""Helpers for tests of the bytes waiting for clients: fat events, the ledger's metrics, and
whether the server ended a connection."""

from __future__ import annotations

import re
import secrets
import socket
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest

from baton.store.db import Database
from tests.conftest import LiveServer, start_server, stop_server
from tests.helpers import World
from tests.live.big_events import big_packet, until_async

MIB = 1024 * 1024
PACKET = "packet { task deliverableType acceptanceCriteria context files dependsOn }"
# Each event's task with four pages of its 100 dependents' packets: about 12 MB an event.
FAT_EVENTS = (
    "subscription($filter: TaskEventFilter, $after: ID) { taskEvents(filter: $filter, "
    "after: $after) { id task { "
    + " ".join(f"d{n}: dependents(first: 100) {{ id {PACKET} }}" for n in range(4))
    + " } } }"
)
EVENT_IDS = """
subscription($filter: TaskEventFilter, $after: ID) {
  taskEvents(filter: $filter, after: $after) { id }
}
"""
CUT = 'baton_queued_bytes_limited_total{{action="cut",budget="{}"}}'
REFUSED = 'baton_queued_bytes_limited_total{{action="refused",budget="{}"}}'


@dataclass
class BudgetServer(LiveServer):
    metrics_token: str = ""


def budget_server(
    database_url: str, db: Database, tmp: pytest.TempPathFactory, **settings: int
) -> Iterator[BudgetServer]:
    """A `baton serve` with `settings` (`max_queued_bytes=…` is BATON_MAX_QUEUED_BYTES) and a
    token for its /metrics, for a module-scoped fixture to `yield from`."""
    log = tmp.mktemp("budget") / "serve.log"
    metrics_token = secrets.token_urlsafe(16)
    env = {
        "BATON_DATABASE_URL": database_url,
        "BATON_METRICS_TOKEN": metrics_token,
        **{f"BATON_{name.upper()}": str(value) for name, value in settings.items()},
    }
    url, process = start_server(env, log)
    yield BudgetServer(url, db, process, metrics_token)
    stop_server(process)


async def hubs_with_fat_events(world: World, hubs: int = 3) -> list[str]:
    """`hubs` tasks (two events each), and 100 tasks with big packets depending on every one
    of them: each event of a hub is about 12 MB under `FAT_EVENTS`."""
    ids = [(await world.hand_off()).id for _ in range(hubs)]
    for n in range(100):
        await world.hand_off(**{**big_packet(n), "depends_on": ids})
    return ids


async def metric(url: str, metrics_token: str, name: str) -> float:
    """A sample of the server's /metrics (0 when it has none yet)."""
    headers = {"Authorization": f"Bearer {metrics_token}"}
    async with httpx.AsyncClient(base_url=url, headers=headers) as client:
        text = (await client.get("/metrics")).text
    found = re.search(rf"^{re.escape(name)} (\S+)$", text, re.M)
    return float(found.group(1)) if found else 0.0


async def released(url: str, metrics_token: str) -> None:
    """Until the ledger is back to zero: nothing is counted for clients that have gone."""

    async def zero() -> bool:
        return await metric(url, metrics_token, "baton_queued_bytes") == 0

    await until_async(zero, 10, "the ledger is back to zero")


def gone(sock: socket.socket) -> bool:
    """Whether the server ended the connection (reset or closed), without reading it."""
    return bool(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 8)[0] != 1)
