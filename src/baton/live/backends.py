"""broadcaster backends that survive their broker restarting.

broadcaster 0.3.1's own backends go silent for good when their connection drops (upstream
issues #66, #130, #144), its Postgres backend shares one connection between LISTEN and
concurrent publishes (#22), and its Redis backend receives nothing with redis-py 8 because it
marks itself ready before it has subscribed. These subclasses of its `BroadcastBackend` keep the
same interface and fix all three: a dropped connection is noticed, re-established with backoff
and re-subscribed, publishes are serialised, and after every reconnect a `RECONNECTED` event is
queued so the reader knows messages may have been missed and re-reads the event log.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any
from urllib.parse import urlsplit

import asyncpg
from broadcaster import Event
from broadcaster._backends.base import BroadcastBackend
from broadcaster._backends.memory import MemoryBackend
from redis import asyncio as aioredis
from redis.exceptions import RedisError

from baton.store.db import behind_pooler
from baton.store.sql import quote_identifier, quote_literal

log = logging.getLogger("baton.live")

RECONNECTED = "__baton_reconnected__"
BACKOFF_START = 0.1
BACKOFF_MAX = 5.0
# The PostgreSQL backend's listening sessions go by this name, so that a process can tell
# whether any other is listening; and each says it has begun with this message.
LISTENER_NAME = "baton-listen"
HELLO = "__baton_hello__"
ALONE_SECONDS = 1.0  # how long a look at the other listeners holds


class SessionNeeded(Exception):
    """LISTEN was asked of a connection that goes through a connection pooler."""


class PostgresBackend(BroadcastBackend):
    """LISTEN/NOTIFY on a dedicated connection; NOTIFY on a second one, one at a time.

    With `echo=False` a process does not hear its own publishes (PostgreSQL names the session
    that sent each notification): for a publisher that has already told its own readers, the
    round through the broker would only wake them again.

    Without echo, a publish is only for other processes, so it is not sent while no other
    session of this name listens (`LISTENER_NAME`, looked up at most once per `ALONE_SECONDS`):
    a lone `baton serve` spends no NOTIFY, and no wake-up of the two backends it involves, on
    every move. A process that begins to listen says so on each channel (`HELLO`), and a
    process that hears another's begins to publish at once; a notice lost to the race between
    the two costs the newcomer's readers a wait for their poll, never an event (the log is read).

    Both connections must be sessions of their own, never a transaction pooler's: a LISTEN
    made through one listens in whichever server session ran it, which then serves other
    clients, and the publisher's session id (for `echo`) would be the pooler's, not the one
    PostgreSQL names. Connecting through a pooler raises `SessionNeeded`."""

    def __init__(self, url: str, *, echo: bool = True) -> None:
        self._url = url
        self._echo = echo
        self._publisher_pid: int | None = None  # the publishing session, while it is open
        self._channels: set[str] = set()
        self._queue: asyncio.Queue[Event] = asyncio.Queue()
        self._listen: asyncpg.Connection | None = None
        self._publish: asyncpg.Connection | None = None
        self._publish_lock = asyncio.Lock()
        # One LISTEN or UNLISTEN at a time: a connection runs one statement at once, and two
        # hubs start at once (asyncpg refuses the second: "another operation is in progress").
        self._listen_lock = asyncio.Lock()
        self._reconnecting: asyncio.Task[None] | None = None
        self._closed = False
        self._listener_pid: int | None = None
        self._alone = False  # no other process listens (without echo: nothing to publish)
        self._alone_until = 0.0  # the monotonic time until which `_alone` holds

    async def connect(self) -> None:
        self._listen = await self._open_listener()

    async def _open_listener(self) -> asyncpg.Connection:
        # No statement cache: nothing here takes parameters, and through a pooler a named
        # statement would be left behind in a server session other clients get next.
        conn = await asyncpg.connect(
            self._url, statement_cache_size=0, server_settings={"application_name": LISTENER_NAME}
        )
        try:
            pooled = await behind_pooler(conn)
        except BaseException:
            conn.terminate()
            raise
        if pooled:
            await conn.close()
            raise SessionNeeded(
                "LISTEN/NOTIFY needs a session of its own, and this PostgreSQL URL goes "
                "through a connection pooler"
            )
        conn.add_termination_listener(self._on_terminated)
        for channel in self._channels:
            await conn.add_listener(channel, self._on_notify)
        self._listener_pid = conn.get_server_pid()
        return conn

    def _on_terminated(self, conn: asyncpg.Connection) -> None:
        if not self._closed and (self._reconnecting is None or self._reconnecting.done()):
            log.warning("broadcast: lost the PostgreSQL LISTEN connection; reconnecting")
            self._reconnecting = asyncio.get_running_loop().create_task(self._reconnect())

    async def _reconnect(self) -> None:
        delay = BACKOFF_START
        while not self._closed:
            try:
                self._listen = await self._open_listener()
            except (OSError, asyncpg.PostgresError, SessionNeeded) as exc:
                level = logging.ERROR if isinstance(exc, SessionNeeded) else logging.INFO
                log.log(level, "broadcast: PostgreSQL not back (%s); retrying in %.1fs", exc, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, BACKOFF_MAX)
                continue
            log.warning("broadcast: PostgreSQL LISTEN connection re-established")
            for channel in self._channels:
                self._queue.put_nowait(Event(channel, RECONNECTED))
                await self._hello(channel)
            return

    async def disconnect(self) -> None:
        self._closed = True
        if self._reconnecting is not None:
            self._reconnecting.cancel()
        for conn in (self._listen, self._publish):
            if conn is not None and not conn.is_closed():
                with contextlib.suppress(Exception):
                    await conn.close(timeout=2)

    async def subscribe(self, channel: str) -> None:
        self._channels.add(channel)
        async with self._listen_lock:
            if self._listen is not None and not self._listen.is_closed():
                await self._listen.add_listener(channel, self._on_notify)
        await self._hello(channel)

    async def _hello(self, channel: str) -> None:
        """Tell the processes already listening on `channel` that this one listens now."""
        if self._echo:
            return  # it publishes everything anyway, and so does everyone it would tell
        try:
            await self._send(channel, HELLO)
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
            log.info("broadcast: could not say hello on %s (%s)", channel, exc)

    async def unsubscribe(self, channel: str) -> None:
        self._channels.discard(channel)
        async with self._listen_lock:
            if self._listen is not None and not self._listen.is_closed():
                await self._listen.remove_listener(channel, self._on_notify)

    async def publish(self, channel: str, message: Any) -> None:
        await self._send(channel, str(message), skip_alone=not self._echo)

    async def _send(self, channel: str, message: str, *, skip_alone: bool = False) -> None:
        # One NOTIFY in the simple query protocol, the values quoted in its text: a quarter
        # less of this process's CPU than `pg_notify` with parameters (no statement to look up
        # and bind), for a message sent after every commit that is not coalesced.
        sql = f"NOTIFY {quote_identifier(channel)}, {quote_literal(message)}"
        async with self._publish_lock:
            if self._publish is None or self._publish.is_closed():
                self._publish = await asyncpg.connect(self._url, statement_cache_size=0)
                self._publisher_pid = self._publish.get_server_pid()
            try:
                if skip_alone and await self._nobody_else(self._publish):
                    return
                await self._publish.execute(sql)
            except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError):
                with contextlib.suppress(Exception):
                    self._publish.terminate()
                # A later session may be given the same process id: it is not ours.
                self._publish, self._publisher_pid = None, None
                raise

    async def _nobody_else(self, conn: asyncpg.Connection) -> bool:
        """Whether no other listening session is open on this database, as last seen."""
        now = time.monotonic()
        if now >= self._alone_until:
            # Any session of the name but this process's own listener (while that one is being
            # re-opened, its old id names no session); with none yet, every one counts.
            self._alone = bool(
                await conn.fetchval(
                    "SELECT NOT EXISTS (SELECT FROM pg_stat_activity WHERE application_name = "
                    f"{quote_literal(LISTENER_NAME)} AND datname = current_database() "
                    f"AND pid IS DISTINCT FROM {self._listener_pid or 'NULL'})"
                )
            )
            self._alone_until = now + ALONE_SECONDS
        return self._alone

    def _on_notify(self, conn: Any, pid: int, channel: str, payload: str) -> None:
        if payload == HELLO:
            if pid != self._publisher_pid:  # another process listens now: tell it everything
                self._alone, self._alone_until = False, time.monotonic() + ALONE_SECONDS
            return
        if pid == self._publisher_pid and not self._echo:
            return
        self._queue.put_nowait(Event(channel, payload))

    async def next_published(self) -> Event:
        return await self._queue.get()


class RedisBackend(BroadcastBackend):
    """Redis pub/sub with a listener that resubscribes after the connection drops."""

    def __init__(self, url: str) -> None:
        self._url = url
        self._client = aioredis.Redis.from_url(url)
        self._channels: set[str] = set()
        self._queue: asyncio.Queue[Event] = asyncio.Queue()
        self._changed = asyncio.Event()
        self._listener: asyncio.Task[None] | None = None

    async def connect(self) -> None:
        await self._client.ping()
        self._listener = asyncio.create_task(self._listen())

    async def disconnect(self) -> None:
        if self._listener is not None:
            self._listener.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._listener
        await self._client.aclose()

    async def subscribe(self, channel: str) -> None:
        self._channels.add(channel)
        self._changed.set()

    async def unsubscribe(self, channel: str) -> None:
        self._channels.discard(channel)
        self._changed.set()

    async def publish(self, channel: str, message: Any) -> None:
        await self._client.publish(channel, str(message))

    async def next_published(self) -> Event:
        return await self._queue.get()

    async def _listen(self) -> None:
        delay = BACKOFF_START
        first = True
        while True:
            if not self._channels:
                self._changed.clear()
                await self._changed.wait()
                continue
            pubsub = self._client.pubsub()
            try:
                # Subscribe first, then listen: the order broadcaster gets wrong.
                subscribed = set(self._channels)
                await pubsub.subscribe(*subscribed)
                await _confirm_subscriptions(pubsub, subscribed, wait=5.0)
                if not first:
                    log.warning("broadcast: Redis subscription re-established")
                    for channel in subscribed:
                        self._queue.put_nowait(Event(channel, RECONNECTED))
                first, delay = False, BACKOFF_START
                self._changed.clear()
                while subscribed == self._channels:
                    message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=1.0)
                    if message is not None and message["type"] == "message":
                        self._queue.put_nowait(
                            Event(message["channel"].decode(), message["data"].decode())
                        )
            except (RedisError, OSError) as exc:
                log.warning("broadcast: Redis connection lost (%s); retrying in %.1fs", exc, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, BACKOFF_MAX)
            finally:
                with contextlib.suppress(Exception):
                    await pubsub.aclose()


async def _confirm_subscriptions(pubsub: Any, channels: set[str], wait: float) -> None:
    """Wait for the server's confirmation of each channel: redis-py subscribes lazily, and
    a wake-up sent before the subscription is live would be lost."""
    pending = {c.encode() for c in channels}
    deadline = asyncio.get_running_loop().time() + wait
    while pending:
        if asyncio.get_running_loop().time() > deadline:
            raise RedisError("no subscription confirmation from Redis")
        message = await pubsub.get_message(timeout=0.5)
        if message is not None and message["type"] == "subscribe":
            pending.discard(message["channel"])


def make_backend(url: str, *, echo: bool = True) -> BroadcastBackend:
    """The backend for `url`; with `echo=False` one that may leave out what this process
    published itself (only PostgreSQL's does)."""
    scheme = urlsplit(url).scheme
    if scheme in ("postgres", "postgresql"):
        return PostgresBackend(url, echo=echo)
    if scheme in ("redis", "rediss"):
        return RedisBackend(url)
    if scheme == "memory":
        return MemoryBackend(url)
    raise ValueError(f"unsupported BATON_BROADCAST_URL scheme {scheme!r}")
