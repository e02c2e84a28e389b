"""The PostgreSQL broadcast backend on a real server: channels subscribed at once (two event
hubs start together) each hear what is published on them."""

from __future__ import annotations

import asyncio

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
