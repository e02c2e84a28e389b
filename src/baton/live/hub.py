"""One reader per event log per process, fanning new events out to its subscribers.

An event log (tasks', runs') is the source of truth; broadcaster only wakes readers up, carrying
an event id. On a wake-up (or every `poll_interval`, in case a wake-up was lost) the hub reads
the events after its position once, in id order, and hands each to every subscriber's queue.
Only news wakes it: a commit while it has subscribers, an announced id it has not heard before
(a process hears its own announcements come back), so a server nobody watches spends no
wake-up per commit.
Every read stops below the log's horizon (`baton.store.eventlog`): ids there are final, so
"after id N" never skips an event that commits later. An event announced while an older
transaction still runs lies above the horizon for a moment; the hub reads again shortly after
(`RECHECK_FIRST`, doubling to `RECHECK_MAX`) until it has passed it.

A subscriber with a cursor replays from the log first and then takes live events, skipping any
id it has already sent; one that falls too far behind is switched back to reading the log.
A replay from a cursor below the log's floor (events after it were removed with finished work,
`baton.store.retention`) ends the stream with `CursorExpired` rather than skip them; the floor
is read after each read of the log, so a removal that races the replay is caught too. The
reader reads the floor with each of its reads as well (in the same statement: one snapshot
sees a removal and the floor it raised, or neither): events above the horizon are removed
before it passes them when a transaction runs longer than the retention period, and then every
subscriber reads the log again from its own cursor, as after falling behind, so one whose
cursor is below the floor ends with `CursorExpired` instead of missing them.

What one subscriber holds is bounded in bytes as well as in events (sizes are the events' JSON
encoding), so a consumer that stops reading pins little: its live queue falls back to the log
past `QUEUE_BYTES`, and a replay reads the log in batches of about `REPLAY_BYTES`.

A live event reaches a subscriber whose stream waits with nothing queued through the sink the
layers above pushed down (`baton.live.streams`): the filter, the answer shared by its group
and the frame's write run in the reader's own loop over its subscribers, with no task woken.
Otherwise (the stream is replaying, behind, or a layer cannot take the event now) the event
goes into the subscriber's queue and wakes its stream, which skips what the sink took (the
cursor is the subscriber's, shared by both ways). The loop lets the event loop run other work
every `FAN_OUT_SECONDS`: the position has moved past the events first, so a subscriber that
joins meanwhile starts after them, and every subscriber it reaches gets each event once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Generic, Protocol, TypeVar, cast

import orjson
from broadcaster import Broadcast

from baton.access.principals import Principal
from baton.errors import CursorExpired
from baton.live.streams import Passing, Sink
from baton.metrics import DELIVERIES, LIVE_SUBSCRIPTIONS
from baton.store.db import Connection, Database
from baton.store.eventlog import READABLE_BELOW, floor, floor_sql, newest_readable
from baton.store.sql import Params

log = logging.getLogger("baton.live")

BATCH = 500  # events one read of the log returns at most
QUEUE_LIMIT = 10_000  # events waiting for one live subscriber
QUEUE_BYTES = 4 * 1024 * 1024  # and their size (the events are shared by every subscriber)
REPLAY_BYTES = 256 * 1024  # about the size of one replay batch, read for one subscriber alone
FIRST_REPLAY = 16  # events in a replay's first batch, before their size is known
READ_GAP = 0.005  # seconds between reads of the log that found events
STOP_SECONDS = 5.0  # the most `stop()` waits for its tasks and the broker's disconnect
RECHECK_FIRST = 0.002  # seconds before reading again while an announced event is not readable
RECHECK_MAX = 0.1  # the longest wait between such reads
RECHECK_GIVE_UP = 30.0  # then only the poll reads again (an announcement from a wiped log)
FAN_OUT_SECONDS = 0.005  # the longest the fan-out runs before other work gets a turn
FAN_OUT_CHUNK = 16  # subscribers between two looks at the clock


class Event(Protocol):
    @property
    def id(self) -> int: ...

    @property
    def at(self) -> datetime: ...


E = TypeVar("E", bound=Event)
T = TypeVar("T")


class Filter(Protocol[E]):  # type: ignore[misc]
    """Which events a subscriber gets, as a test on one event and as SQL for replay."""

    def matches(self, event: E, principal: Principal) -> bool: ...

    def where(self, principal: Principal, p: Params) -> str: ...


@dataclass(frozen=True)
class EventLog(Generic[E]):
    """Where a lifecycle's events are and how to read them: `select` reads events beside
    their subject (`e` the log, its subject aliased as filters expect)."""

    channel: str  # broadcaster channel that carries "committed up to id N"
    table: str
    subject: str  # the log's column naming the subject (task_id, run_id)
    select: str
    parse: Callable[[Mapping[str, Any]], E]

    @property
    def name(self) -> str:
        """The log's name in errors and webhooks: task, run."""
        return self.table.removesuffix("_events")

    async def floor(self, conn: Connection) -> int:
        """Every event removed from this log has an id at most this (0: none ever was)."""
        return await floor(conn, self.table)

    async def check_cursor(self, conn: Connection, cursor: int) -> None:
        """`CursorExpired` if events after `cursor` may have been removed; read after the
        events it guards, so a removal committed before that read is seen."""
        oldest = await self.floor(conn)
        if cursor < oldest:
            raise CursorExpired(self.name, cursor, oldest)

    async def newest(self, conn: Connection, subject: str | None = None) -> int:
        """The newest id a reader may pass; or the newest event of one subject, which needs
        no horizon: a subject's later events always have larger ids."""
        if subject is None:
            return await newest_readable(conn, self.table)
        sql = f"SELECT coalesce(max(id), 0) FROM {self.table} WHERE {self.subject} = $1"
        return int(await conn.fetchval(sql, subject))

    async def after(
        self,
        conn: Connection,
        cursor: int,
        limit: int,
        where: str = "TRUE",
        params: Sequence[Any] = (),
    ) -> list[E]:
        """Events after `cursor` in id order, below the horizon (an extra condition's
        parameters start at $3)."""
        sql = self._after_sql(where)
        return [self.parse(r) for r in await conn.fetch(sql, cursor, limit, *params)]

    async def after_and_floor(
        self, conn: Connection, cursor: int, limit: int
    ) -> tuple[list[E], int]:
        """`after` and `floor` in one statement, so from one snapshot: a removal that the read
        missed events to is seen in the floor, as when the floor is read after it, one round
        trip sooner (the reader does this for every commit)."""
        sql = (
            f"SELECT f.floor AS log_floor, q.* FROM (VALUES ({floor_sql(self.table)})) "
            f"AS f(floor) LEFT JOIN LATERAL ({self._after_sql()}) q ON TRUE ORDER BY q.event_id"
        )
        rows = await conn.fetch(sql, cursor, limit)
        floor = int(rows[0]["log_floor"])
        return [self.parse(r) for r in rows if r["event_id"] is not None], floor

    async def ids_after(
        self,
        conn: Connection,
        cursor: int,
        limit: int,
        where: str = "TRUE",
        params: Sequence[Any] = (),
    ) -> list[int]:
        """The ids `after` would return: finding matching events costs the same whatever
        their size, and holding their ids costs nothing."""
        sql = f"SELECT q.event_id FROM ({self._after_sql(where)}) q ORDER BY q.event_id"
        return [r[0] for r in await conn.fetch(sql, cursor, limit, *params)]

    def _after_sql(self, where: str = "TRUE") -> str:
        """The events after $1 matching `where`, below the horizon, the first $2 in id order."""
        return (
            f"{self.select} WHERE e.id > $1 AND e.id < {READABLE_BELOW} AND ({where}) "
            "ORDER BY e.id LIMIT $2"
        )

    async def by_ids(self, conn: Connection, ids: Sequence[int]) -> list[E]:
        """The events with these ids, in id order."""
        sql = f"{self.select} WHERE e.id = ANY($1::bigint[]) ORDER BY e.id"
        return [self.parse(r) for r in await conn.fetch(sql, list(ids))]


def _same(event: E) -> E:
    return event


def size_of(event: object) -> int:
    """An event's size as JSON: what it weighs against the bounds on what is held for one
    subscriber (a fair measure of the memory its strings and lists take)."""
    return len(orjson.dumps(event, default=str))


class Subscriber(Generic[E, T]):
    """One live stream's inbox. Idle (the usual state of thousands of subscriptions) it holds
    no queue, only the future its stream waits on: an `asyncio.Queue` with its deques and
    event weighed about 3 KB per subscription (bench/idle_memory.py). Its stream yields
    `make` of each event it passes; so does its sink take them."""

    __slots__ = (
        "_events",
        "_waiter",
        "cursor",
        "make",
        "overflowed",
        "principal",
        "queued_bytes",
        "sink",
        "where",
    )

    def __init__(self, principal: Principal, where: Filter[E], make: Callable[[E], T]) -> None:
        self._events: deque[tuple[E, int]] | None = None
        self._waiter: asyncio.Future[None] | None = None
        self.queued_bytes = 0
        self.overflowed = False
        self.principal = principal
        self.where = where
        self.make = make
        self.cursor = 0  # the last event id its stream has passed, by either way
        self.sink: Sink[T] | None = None  # takes matching live events past the stream's task

    def push_to(self, sink: Sink[T]) -> None:
        self.sink = sink

    def deliver(self, going: _Going[E]) -> bool:
        """Hand an event on: True when the sink sent it, at once; else (the event did not
        match, or is queued for the stream) False."""
        event = going.event
        sink = self.sink
        waiter = self._waiter
        if (
            sink is None
            or waiter is None
            or waiter.done()  # woken already: what it was woken for comes first
            or self._events is not None
            or self.overflowed
        ):
            self.offer(event, going.size)
            return False
        if event.id <= self.cursor:
            return False
        if not going.matches(self.where, self.principal):
            self.cursor = event.id
            return False
        try:
            taken = sink(going.made(self.make))
        except Exception:  # the stream's own task meets it again, and answers for it
            log.exception("event hub: pushing event %d to a subscriber failed", event.id)
            taken = False
        if not taken:
            self.offer(event, going.size)
            return False
        self.cursor = event.id
        return True

    def offer(self, event: E, size: int) -> None:
        if self.overflowed:
            return
        events = self._events
        if events is None:
            events = self._events = deque()
        if len(events) >= QUEUE_LIMIT or self.queued_bytes + size > QUEUE_BYTES:
            # Too slow to keep up: drop the backlog; the stream re-reads the log from its cursor.
            self.reread()
            return
        events.append((event, size))
        self.queued_bytes += size
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def reread(self) -> None:
        """Drop what waits: the stream reads the log again from its cursor."""
        self.overflowed = True
        self._events = None
        self.queued_bytes = 0
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def close(self) -> None:
        """Its stream has ended: nothing more is pushed or queued (a fan-out that took it in
        its list before may still reach it)."""
        self.sink = None
        self.reread()

    async def take(self) -> E | None:
        """The next event, or None once the subscriber has overflowed."""
        while True:
            if self.overflowed:
                return None
            events = self._events
            if events:
                event, size = events.popleft()
                self.queued_bytes -= size
                if not events:
                    self._events = None
                return event
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None


class _Going(Generic[E]):
    """One event on its way to every subscriber, with what is the same for many of them
    worked out once: whether it matches a filter for a principal (subscribers of one filter
    and one token share both objects), and the item a stream makes of it."""

    __slots__ = ("event", "items", "matched", "sent", "size")

    def __init__(self, event: E) -> None:
        self.event = event
        self.size = size_of(event)
        self.items: dict[Callable[[E], Any], Any] = {}
        # By the filter's and the principal's identity: both live while the fan-out does.
        self.matched: dict[tuple[int, int], bool] = {}
        self.sent = 0  # subscribers it was pushed to since the fan-out last counted

    def matches(self, where: Filter[E], principal: Principal) -> bool:
        key = (id(where), id(principal))
        found = self.matched.get(key)
        if found is None:
            found = self.matched[key] = where.matches(self.event, principal)
        return found

    def made(self, make: Callable[[E], T]) -> T:
        item = self.items.get(make)
        if item is None:
            item = self.items[make] = make(self.event)
        return cast(T, item)


class EventHub(Generic[E]):
    def __init__(
        self,
        db: Database,
        broadcast: Broadcast,
        log: EventLog[E],
        *,
        poll_interval: float = 1.0,
    ) -> None:
        self.db = db
        self.broadcast = broadcast
        self.log = log
        self.poll_interval = poll_interval
        self.position = 0
        # True once the reader skipped reading because nobody listened: `position` may then be
        # behind the log, and must be brought forward before the next subscriber joins.
        self._stale = False
        self._subscribers: set[Subscriber[E, Any]] = set()
        self._wake = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._announce = asyncio.Event()
        self._newest_committed = 0
        # The newest committed id this process has heard of (its own commits, the broker's
        # messages): while the position is below it, an event waits for the horizon.
        self._announced = 0
        # The log's floor the reader last made its subscribers read again for (see `_read_new`).
        self._floor = 0
        self._stopping = False

    # --- lifecycle ------------------------------------------------------------------------

    async def start(self) -> None:
        """Start reading (the broadcast must be connected: the app connects it once for all
        hubs)."""
        async with self.db.connection() as conn:
            self.position = await self.log.newest(conn)
        self._tasks = [
            asyncio.create_task(self._listen(), name="baton-hub-listen"),
            asyncio.create_task(self._read(), name="baton-hub-read"),
            asyncio.create_task(self._announcer(), name="baton-hub-announce"),
        ]

    async def stop(self) -> None:
        """Stop reading and listening, within `STOP_SECONDS` whatever the broker is doing
        (a listener that is reconnecting included)."""
        self._stopping = True
        for task in self._tasks:
            task.cancel()
        if self._tasks:
            _, pending = await asyncio.wait(self._tasks, timeout=STOP_SECONDS)
            for task in pending:
                log.warning("event hub: %s did not stop in time", task.get_name())

    async def publish(self, event_id: int) -> None:
        """Tell every process (this one too) that events up to `event_id` are committed.

        Returns at once: this process's reader is woken directly, and one background task
        sends the newest id to the others, so concurrent commits share one message and a
        slow or absent broker never delays a mutation's answer.
        """
        self._newest_committed = max(self._newest_committed, event_id)
        self._announced = max(self._announced, event_id)
        self._announce.set()
        self._new_events()

    async def _announcer(self) -> None:
        while True:
            await self._announce.wait()
            self._announce.clear()
            try:
                await self.broadcast.publish(self.log.channel, str(self._newest_committed))
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the broker being down must not fail a committed move
                log.warning("broadcast: publish failed (%s); readers will poll", exc)
                await asyncio.sleep(0.1)

    async def _listen(self) -> None:
        delay = 0.1
        while not self._stopping:
            try:
                async with self.broadcast.subscribe(self.log.channel) as subscriber:
                    delay = 0.1
                    while True:
                        message = await subscriber.get()
                        if self._heard(message.message):
                            self._new_events()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                # broadcaster's `subscribe` can turn a cancellation into a KeyError when it
                # arrives before the subscription is registered: a stop must still end here.
                if self._stopping:
                    return
                log.warning("broadcast: listener failed (%s); retrying in %.1fs", exc, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)

    def _heard(self, message: str) -> bool:
        """Note the id another process announced; False when it tells nothing new (this
        process's own announcements come back so, and so do ids heard before). Anything
        else only wakes the reader."""
        try:
            announced = int(message)
        except ValueError:
            return True
        if announced <= self._announced:
            return False
        self._announced = announced
        return True

    def _new_events(self) -> None:
        """Events were committed: the reader reads them for the subscribers, and with none it
        only notes that its position is behind the log (for the next subscriber to bring
        forward), which costs no wake-up per commit."""
        if self._subscribers:
            self._wake.set()
        else:
            self._stale = True

    def _waiting(self) -> bool:
        """Whether an announced event is not delivered yet (it was above the horizon)."""
        return bool(self._subscribers) and self.position < self._announced

    async def _read(self) -> None:
        recheck, waited = RECHECK_FIRST, 0.0
        while True:
            waiting = self._waiting()
            if not self._wake.is_set():
                # A timer, not `wait_for`'s task: this runs for every commit under load.
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(recheck if waiting else self.poll_interval):
                        await self._wake.wait()
            self._wake.clear()
            try:
                found = await self._read_new()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("event hub: reading the log failed (%s); retrying", exc)
                await asyncio.sleep(min(self.poll_interval, 1.0))
                self._wake.set()
                continue
            if found:
                # Under a stream of commits, wake-ups gathered for a moment make one read of
                # many events instead of one read each: every process with subscribers reads
                # every event (docs/scaling.md).
                await asyncio.sleep(READ_GAP)
            if not self._waiting():
                recheck, waited = RECHECK_FIRST, 0.0
                continue
            waited += recheck
            recheck = min(recheck * 2, RECHECK_MAX)
            if waited > RECHECK_GIVE_UP:
                log.warning("event hub: event %d never became readable", self._announced)
                self._announced = self.position

    async def _read_new(self) -> bool:
        """Reads and hands out what is new; True if there was anything."""
        if not self._subscribers:
            self._stale = True  # nobody to deliver to: no need to read the log
            return False
        found = False
        while True:
            before = self.position
            async with self.db.connection() as conn:
                events, floor = await self.log.after_and_floor(conn, before, BATCH)
            if floor > before and floor > self._floor:
                # Events after the position were removed before this read: work that finished
                # while a transaction longer than the retention period held the horizon back
                # was removed before the reader could pass it. Every subscriber reads the log
                # again from its cursor; below the floor, that ends it with `CursorExpired`.
                self._floor = floor
                for subscriber in self._subscribers:
                    subscriber.reread()
            if not events:
                return found
            found = True
            # Moved past them first: a subscriber that joins while the fan-out yields starts
            # after these events, which it is not in the list to get.
            self.position = events[-1].id
            await self._fan_out(events)
            if len(events) < BATCH:
                return found

    async def _fan_out(self, events: list[E]) -> None:
        """Each event to every subscriber, subscriber by subscriber (one's events in order),
        letting other work run every `FAN_OUT_SECONDS`."""
        going = [_Going(event) for event in events]
        subscribers = list(self._subscribers)
        loop = asyncio.get_running_loop()
        began = loop.time()
        for start in range(0, len(subscribers), FAN_OUT_CHUNK):
            chunk = subscribers[start : start + FAN_OUT_CHUNK]
            if len(going) == 1:
                [one] = going
                for subscriber in chunk:
                    if subscriber.deliver(one):
                        one.sent += 1
            else:
                for subscriber in chunk:
                    for each in going:
                        if subscriber.deliver(each):
                            each.sent += 1
            now = datetime.now(UTC)
            for each in going:
                if each.sent:
                    # `at` is the writing transaction's timestamp, a hair before its commit.
                    DELIVERIES.sent(max(0.0, (now - each.event.at).total_seconds()), each.sent)
                    each.sent = 0
            if loop.time() - began > FAN_OUT_SECONDS:
                await asyncio.sleep(0)
                began = loop.time()

    # --- reading --------------------------------------------------------------------------

    async def read_after(
        self,
        cursor: int,
        limit: int,
        *,
        principal: Principal | None = None,
        where: Filter[E] | None = None,
    ) -> list[E]:
        async with self.db.connection() as conn:
            if principal is None or where is None:
                return await self.log.after(conn, cursor, limit)
            p = Params(start=2)  # $1 and $2 are the cursor and the limit
            condition = where.where(principal, p)
            return await self.log.after(conn, cursor, limit, condition, p.values)

    async def last_event_of(self, subject: str) -> int:
        async with self.db.connection() as conn:
            return await self.log.newest(conn, subject)

    # --- streams --------------------------------------------------------------------------

    async def _subscribe(self, subscriber: Subscriber[E, Any]) -> None:
        """Register `subscriber` (`stream` unregisters it; no context manager, whose objects
        every idle stream would hold)."""
        if self._stale:
            # Bring the position up to the log before registering: from here on, the reader
            # delivers everything after it, and a replaying subscriber reads the rest itself.
            async with self.db.connection() as conn:
                newest = await self.log.newest(conn)
            if self._stale:
                self.position = max(self.position, newest)
                self._stale = False
        self._subscribers.add(subscriber)
        LIVE_SUBSCRIPTIONS.inc()
        # A commit announced while it joined woke no reader (it had no subscriber yet).
        self._wake.set()

    def stream(
        self,
        principal: Principal,
        where: Filter[E],
        after: int | None = None,
        *,
        expires: bool = True,
    ) -> Passing[E]:
        """Matching events in id order: those after `after` from the log, then live ones.

        A replay from below the log's floor raises `CursorExpired`, unless `expires` is False:
        for a cursor the server took from one subject's own events (`last_event_of`) and a
        filter on that subject, whose events are removed only with it."""
        return self.stream_of(_same, principal, where, after, expires=expires)

    def stream_of(
        self,
        make: Callable[[E], T],
        principal: Principal,
        where: Filter[E],
        after: int | None = None,
        *,
        expires: bool = True,
    ) -> Passing[T]:
        """`stream`, yielding `make` of each event; live ones may be pushed past the stream's
        consumer (`Passing.push_to`). A resolver's items made here spare every subscription
        a generator of its own around the stream."""
        subscriber = Subscriber(principal, where, make)
        return Passing(self._stream(subscriber, after, expires), subscriber)

    async def _stream(
        self, subscriber: Subscriber[E, T], after: int | None, expires: bool
    ) -> AsyncGenerator[T, None]:
        await self._subscribe(subscriber)
        try:
            # Registered before reading, so nothing committed from here on can be missed.
            subscriber.cursor = self.position if after is None else after
            replaying = after is not None
            principal, where, make = subscriber.principal, subscriber.where, subscriber.make
            while True:
                if replaying or subscriber.overflowed:
                    subscriber.overflowed = False
                    replaying = False
                    replay = self._replay(subscriber.cursor, principal, where, expires)
                    async for event in replay:
                        subscriber.cursor = event.id
                        yield make(self._sent(event))
                        del event  # this stream's own copy: not kept while it waits
                    del replay
                    continue
                live = await subscriber.take()
                if live is None or live.id <= subscriber.cursor:  # None: overflowed, replay
                    continue
                subscriber.cursor = live.id
                if where.matches(live, principal):
                    yield make(self._sent(live))
                del live
        finally:
            subscriber.close()
            self._subscribers.discard(subscriber)
            LIVE_SUBSCRIPTIONS.dec()

    async def _replay(
        self, cursor: int, principal: Principal, where: Filter[E], expires: bool = True
    ) -> AsyncIterator[E]:
        """Matching events after `cursor` from the log, holding about `REPLAY_BYTES` of them
        at a time: the ids of a batch first, then the events in chunks sized by what the
        previous chunk weighed. With `expires`, `CursorExpired` when events after the cursor
        were removed (the floor past it after a read, or a listed event gone)."""
        chunk = FIRST_REPLAY
        while True:
            async with self.db.connection() as conn:
                p = Params(start=2)  # $1 and $2 are the cursor and the limit
                condition = where.where(principal, p)
                ids = await self.log.ids_after(conn, cursor, BATCH, condition, p.values)
                if expires:
                    await self.log.check_cursor(conn, cursor)
            start = 0
            while start < len(ids):
                wanted = ids[start : start + chunk]
                async with self.db.connection() as conn:
                    events = await self.log.by_ids(conn, wanted)
                    if expires and len(events) < len(wanted):  # removed since listed
                        await self.log.check_cursor(conn, cursor)
                start += chunk
                size = sum(size_of(event) for event in events)
                chunk = max(1, min(BATCH, REPLAY_BYTES * len(events) // max(size, 1)))
                for event in events:
                    yield event
            if len(ids) < BATCH:
                return
            cursor = ids[-1]

    @staticmethod
    def _sent(event: E) -> E:
        # `at` is the writing transaction's timestamp, a hair before its commit.
        DELIVERIES.sent(max(0.0, (datetime.now(UTC) - event.at).total_seconds()))
        return event
