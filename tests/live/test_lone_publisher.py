"""Without echo a publish is only for other processes: a process whose listener is the only one
on its database sends no NOTIFY for it, and one that begins to listen beside it says so, after
which the first publishes at once. Each test has a database of its own, so no other test's
server is listening there."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import asyncpg  # type: ignore[import-untyped]
import pytest

from baton.live import backends
from baton.live.backends import ALONE_SECONDS, PostgresBackend
from baton.store.db import libpq_url
from tests.helpers import fresh_database

CHANNEL = "baton_test_lone"


@pytest.fixture
async def own_database(server_url: str) -> AsyncIterator[str]:
    async with fresh_database(server_url, "baton_test_lone") as url:
        yield libpq_url(url)


class Tap:
    """A plain session listening on the channel (not a Baton listener: it is not counted)."""

    def __init__(self) -> None:
        self.heard: list[str] = []
        self.arrived = asyncio.Event()
        self.conn: asyncpg.Connection | None = None

    async def open(self, url: str) -> None:
        self.conn = await asyncpg.connect(url)
        await self.conn.add_listener(CHANNEL, self._heard)

    def _heard(self, *notification: object) -> None:
        self.heard.append(str(notification[3]))
        self.arrived.set()

    async def close(self) -> None:
        assert self.conn is not None
        await self.conn.close()


async def started(url: str) -> PostgresBackend:
    backend = PostgresBackend(url, echo=False)
    await backend.connect()
    await backend.subscribe(CHANNEL)
    return backend


async def test_a_lone_process_sends_nothing_and_begins_once_another_says_hello(
    own_database: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Its look at the other listeners holds for the whole test: only the hello can change it.
    monkeypatch.setattr(backends, "ALONE_SECONDS", 60.0)
    tap = Tap()
    await tap.open(own_database)
    first = await started(own_database)
    second: PostgresBackend | None = None
    try:
        assert await asyncio.wait_for(first_hello(tap), 5) == "__baton_hello__"  # its own
        tap.heard.clear()
        tap.arrived.clear()
        for n in range(5):
            await first.publish(CHANNEL, str(n))
        await asyncio.sleep(0.2)
        assert tap.heard == []  # nobody but a tap: no NOTIFY
        second = await started(own_database)  # it says hello on the channel
        heard = await asyncio.wait_for(first_hello(tap), 5)
        assert heard == "__baton_hello__"

        async def told() -> str:  # once the hello has reached the first process's listener
            while True:
                await first.publish(CHANNEL, "42")
                with contextlib.suppress(TimeoutError):
                    return (await asyncio.wait_for(second.next_published(), 0.1)).message

        assert await asyncio.wait_for(told(), 5) == "42"
        await asyncio.wait_for(until_heard(tap, "42"), 5)  # each session hears it in its time
    finally:
        await first.disconnect()
        if second is not None:
            await second.disconnect()
        await tap.close()


async def until_heard(tap: Tap, message: str) -> None:
    while True:
        tap.arrived.clear()
        if message in tap.heard:
            return
        await tap.arrived.wait()


async def first_hello(tap: Tap) -> str:
    await tap.arrived.wait()
    return tap.heard[0]


async def test_a_listener_that_leaves_stops_the_publishing_within_a_look(
    own_database: str,
) -> None:
    first = await started(own_database)
    second = await started(own_database)
    tap = Tap()
    await tap.open(own_database)
    try:
        await asyncio.sleep(0.2)
        await first.publish(CHANNEL, "both")
        assert (await asyncio.wait_for(second.next_published(), 5)).message == "both"
        await second.disconnect()
        await asyncio.sleep(ALONE_SECONDS + 0.2)  # the last look at the listeners runs out
        tap.heard.clear()
        await first.publish(CHANNEL, "alone")
        await asyncio.sleep(0.2)
        assert tap.heard == []
    finally:
        await first.disconnect()
        await tap.close()


async def test_with_echo_every_publish_is_sent_whoever_listens(own_database: str) -> None:
    backend = PostgresBackend(own_database)
    await backend.connect()
    try:
        await backend.subscribe(CHANNEL)
        await backend.publish(CHANNEL, "mine")
        assert (await asyncio.wait_for(backend.next_published(), 5)).message == "mine"
    finally:
        await backend.disconnect()
