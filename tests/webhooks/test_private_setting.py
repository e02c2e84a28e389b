"""Processes sharing a database that differ in BATON_WEBHOOK_ALLOW_PRIVATE treat an endpoint
alike: the endpoint keeps whether its URL needed the setting when it was saved. A process
without the setting leaves such an endpoint alone (it neither fails nor disables it); a process
with it delivers no endpoint saved with a public address to a private one."""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from baton.access.principals import Principal, PrincipalKind
from baton.access.tokens import create_token
from baton.services.tasks import TaskService
from baton.store.db import Database
from tests.conftest import start_server, stop_server
from tests.helpers import World
from tests.webhooks.conftest import FAST, Receiver, create_endpoint, own_database
from tests.webhooks.test_delivery import event_ids, eventually, verified

STRICT = {"BATON_WEBHOOK_ALLOW_PRIVATE": "false"}


def owner(handle: str) -> Principal:
    return Principal(PrincipalKind.OWNER, handle)


@pytest.fixture
async def own(server_url: str) -> AsyncIterator[tuple[str, Database, World]]:
    async with own_database(server_url) as (url, db):
        yield url, db, World(TaskService(db))


async def _start(database_url: str, log: Path, **extra: str) -> tuple[str, subprocess.Popen[bytes]]:
    env = {"BATON_DATABASE_URL": database_url, **FAST, **extra}
    return await asyncio.to_thread(start_server, env, log)


async def _stop(process: subprocess.Popen[bytes]) -> None:
    await asyncio.to_thread(stop_server, process)


async def _rows(db: Database, endpoint_id: str) -> list[Any]:
    rows = await db.fetch(
        "SELECT status, attempts, attempted_by, last_error FROM webhook_deliveries "
        "WHERE endpoint_id = $1",
        endpoint_id,
    )
    return list(rows)


async def test_a_process_without_the_setting_leaves_a_private_endpoint_alone(
    own: tuple[str, Database, World], receiver: Receiver, tmp_path: Path
) -> None:
    database_url, db, world = own
    url, lenient = await _start(database_url, tmp_path / "lenient.log")
    token = await create_token(db, owner(world.req_owner))
    made = await create_endpoint(f"{url}/graphql", token, receiver.at("/local"))
    assert made["__typename"] == "WebhookSecretSuccess"
    endpoint_id = made["endpoint"]["id"]
    stored = await db.fetchval(
        "SELECT allow_private FROM webhook_endpoints WHERE id = $1", endpoint_id
    )
    assert stored is True  # its URL is at 127.0.0.1
    await _stop(lenient)

    _, strict = await _start(database_url, tmp_path / "strict.log", **STRICT)
    try:
        task = await world.hand_off()
        expected = await event_ids(db, task.id)
        # Five of the strict process's polls (0.2 s): it would have tried, been refused and
        # counted a failure within the first.
        await asyncio.sleep(1.0)
        assert receiver.got["/local"] == []
        assert await _rows(db, endpoint_id) == []
        state = await db.fetchrow(
            "SELECT enabled, failures FROM webhook_endpoints WHERE id = $1", endpoint_id
        )
        assert state["enabled"] and state["failures"] == 0
        # Both processes running: only the one with the setting delivers, each message once.
        url, lenient = await _start(database_url, tmp_path / "lenient2.log")
        try:
            more = await world.hand_off()
            expected += await event_ids(db, more.id)
            messages = await receiver.wait_for("/local", len(expected))
            ids = [int(verified(made["secret"], m)["data"]["taskEvents"]["id"]) for m in messages]
            assert ids == expected

            async def recorded() -> list[Any]:
                rows = await _rows(db, endpoint_id)
                return rows if len(rows) == len(expected) else []

            rows = await eventually(recorded)
            assert {(r["status"], r["attempts"], r["last_error"]) for r in rows} == {
                ("delivered", 1, None)
            }
            pids = {r["attempted_by"].split(":")[1] for r in rows}
            assert pids == {str(lenient.pid)}
        finally:
            await _stop(lenient)
    finally:
        await _stop(strict)


async def test_an_endpoint_saved_with_a_public_address_is_never_sent_to_a_private_one(
    own: tuple[str, Database, World], receiver: Receiver, tmp_path: Path
) -> None:
    """As if its name resolved to a public address when it was saved and to the receiver's
    loopback address now: even a process with the setting refuses it."""
    database_url, db, world = own
    url, process = await _start(database_url, tmp_path / "lenient.log")
    try:
        token = await create_token(db, owner(world.req_owner))
        made = await create_endpoint(f"{url}/graphql", token, receiver.at("/rebound"))
        endpoint_id = made["endpoint"]["id"]
        await db.execute(
            "UPDATE webhook_endpoints SET allow_private = FALSE WHERE id = $1", endpoint_id
        )
        await world.hand_off()

        async def refused() -> list[Any]:
            return [r for r in await _rows(db, endpoint_id) if r["last_error"]]

        (row, *_) = await eventually(refused)
        assert "resolves to 127.0.0.1, a loopback address" in row["last_error"]
        assert receiver.got["/rebound"] == []
    finally:
        await _stop(process)
