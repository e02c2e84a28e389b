"""The PostgreSQL broadcast backend on a real server: channels subscribed at once (two event
hubs start together) each hear what is published on them, messages and channel names arrive
as sent whatever they hold, and without echo a process hears every other session but not
itself."""

from __future__ import annotations

import asyncio

import asyncpg  # type: ignore[import-untyped]
import pytest

from baton.live.backends import PostgresBackend
from baton.store.db import libpq_url


async def test_channels_subscribed_at_once_each_hear_their_notifications(
    database_url: str,
) -> None:
    backend = PostgresBackend(libpq_url(database_url))
    await backend.connect()
    try:
        channels = [f"baton_test_{n}" for n in range(4)]
        await asyncio.gather(*(backend.subscribe(c) for c in channels))
        for n, channel in enumerate(channels):
            await backend.publish(channel, str(n))
        heard = [await asyncio.wait_for(backend.next_published(), 5) for _ in channels]
        assert sorted((e.channel, e.message) for e in heard) == [
            (c, str(n)) for n, c in enumerate(channels)
        ]
    finally:
        await backend.disconnect()


AWKWARD = ["", "'", "''; SELECT 1; --", "back\\slash", "\\'", "naïve ☃ 𝄞", "x" * 7000, "1e3"]


async def test_awkward_messages_and_channel_names_arrive_as_sent(database_url: str) -> None:
    backend = PostgresBackend(libpq_url(database_url))
    await backend.connect()
    try:
        channels = ['baton_test "quoted"', "Baton Test Mixed Case"]
        for channel in channels:
            await backend.subscribe(channel)
        sent = [(c, m) for c in channels for m in AWKWARD]
        for channel, message in sent:
            await backend.publish(channel, message)
        heard = [await asyncio.wait_for(backend.next_published(), 5) for _ in sent]
        assert [(e.channel, e.message) for e in heard] == sent
        with pytest.raises(ValueError, match="NUL"):
            await backend.publish(channels[0], "a\x00b")
    finally:
        await backend.disconnect()


async def test_without_echo_a_backend_hears_others_but_not_itself(database_url: str) -> None:
    backend = PostgresBackend(libpq_url(database_url), echo=False)
    other = await asyncpg.connect(libpq_url(database_url))
    await backend.connect()
    try:
        await backend.subscribe("baton_test_echo")
        await backend.publish("baton_test_echo", "mine")
        await other.execute("SELECT pg_notify('baton_test_echo', 'theirs')")
        heard = await asyncio.wait_for(backend.next_published(), 5)
        assert heard.message == "theirs"
        await backend.publish("baton_test_echo", "mine again")
        await other.execute("SELECT pg_notify('baton_test_echo', 'theirs again')")
        assert (await asyncio.wait_for(backend.next_published(), 5)).message == "theirs again"
    finally:
        await other.close()
        await backend.disconnect()
