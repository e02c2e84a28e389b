"""Helpers for tests with big events and peers that stop reading."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from baton.access.tokens import digest, revoke_token
from tests.conftest import LiveServer
from tests.helpers import World


def big_packet(n: int) -> dict[str, Any]:
    """A packet near the schema's bounds: about 36 KB in every event of its task."""
    return {
        "task": f"task {n} " + "t" * 480,
        "acceptance_criteria": [f"criterion {i} " + "c" * 480 for i in range(20)],
        "context": "x" * 4000,
        "files": [f"src/file_{i}_" + "f" * 280 for i in range(50)],
        "depends_on": [f"free text {i} " + "d" * 280 for i in range(20)],
    }


async def big_tasks(world: World, count: int) -> list[str]:
    """`count` tasks with big packets in `world` (two events each: created, routed)."""
    return [(await world.hand_off(**big_packet(n))).id for n in range(count)]


async def until(condition: Callable[[], bool], seconds: float, what: str) -> float:
    """Wait for `condition` (polled); how long it took. Fails after `seconds`."""
    started = time.monotonic()
    while not condition():
        if time.monotonic() - started > seconds:
            raise AssertionError(f"not within {seconds:g} s: {what}")
        await asyncio.sleep(0.05)
    return time.monotonic() - started


async def until_async(check: Callable[[], Awaitable[bool]], seconds: float, what: str) -> None:
    """`until` for a check that has to await (an HTTP request)."""
    started = time.monotonic()
    while not await check():
        if time.monotonic() - started > seconds:
            raise AssertionError(f"not within {seconds:g} s: {what}")
        await asyncio.sleep(0.05)


async def revoke(server: LiveServer, token: str) -> None:
    token_id = await server.db.fetchval(
        "SELECT id FROM api_tokens WHERE token_hash = $1", digest(token)
    )
    await revoke_token(server.db, token_id)


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")
