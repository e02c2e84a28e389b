"""A stopping server ends its event streams at once, without `complete` (their operations are
not over: clients reconnect with `after`), instead of holding the shutdown for the 5 s that
open requests get."""

from __future__ import annotations

import asyncio
import signal
import time
from pathlib import Path

import httpx

from baton.access.tokens import create_token
from baton.cli import GRACEFUL_SHUTDOWN_SECONDS
from baton.store.db import Database
from tests.conftest import start_server
from tests.helpers import World
from tests.live.client import TASK_EVENTS


async def test_stopping_ends_open_streams_without_complete_and_without_waiting(
    database_url: str, db: Database, world: World, tmp_path: Path
) -> None:
    log = tmp_path / "serve.log"
    url, process = start_server({"BATON_DATABASE_URL": database_url}, log)
    try:
        token = await create_token(db, world.roles["requester"])
        async with httpx.AsyncClient(base_url=url, timeout=30) as client:
            request = client.build_request(
                "POST",
                "/graphql",
                json={"query": TASK_EVENTS, "variables": {"filter": {"projects": [world.project]}}},
                headers={"Authorization": f"Bearer {token}", "Accept": "text/event-stream"},
            )
            response = await client.send(request, stream=True)
            assert response.status_code == 200
            body = asyncio.create_task(response.aread())
            started = time.monotonic()
            process.send_signal(signal.SIGINT)
            received = await asyncio.wait_for(body, GRACEFUL_SHUTDOWN_SECONDS)
            while process.poll() is None:
                assert time.monotonic() - started < GRACEFUL_SHUTDOWN_SECONDS, "still running"
                await asyncio.sleep(0.05)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 0
    assert received.replace(b":\n\n", b"") == b""  # no event, and no `complete`
    assert "Traceback" not in log.read_text()
