"""A stream asked to replay from a cursor while the sweep removes events after that cursor gets
every event after it, in order, or `cursor_expired` naming the oldest valid cursor after a
prefix with no gap: never a silent gap.

Over a real `baton serve`, through GraphQL over WebSocket (graphql-transport-ws) and over
Server-Sent Events: both doors run the same subscription, whose replay is the event hub's
(`baton.live.hub.EventHub._replay`: list the ids after the cursor, read the floor, then read
the events in chunks). The removal is the sweep's own batch (`baton.store.retention`), run
from the test. The interleavings that matter are made on purpose: the test holds the batch's
transaction, or a lock on the table the replay's next statement reads, from connections of its
own, until PostgreSQL shows the server's replay waiting at that statement; then lets the
removal commit. A stress part then races the real `Retention.sweep` against replays started
at random moments and checks each outcome.

The stream's live part is held to the same: events a replay left to it (above the horizon,
while a long transaction runs) and the sweep removed before it could read them end the stream
with `cursor_expired` too (the hub's reader reads the floor with each of its reads).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import random
import time
from collections.abc import AsyncIterator, Awaitable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

import pytest

from baton.access.tokens import create_token
from baton.live.hub import FIRST_REPLAY
from baton.protocol.handoff import TaskState
from baton.services.retention import Retention
from baton.store import retention as store
from baton.store.db import Connection, Database
from baton.store.eventlog import floor_sql, newest_readable
from baton.store.tasks import TASKS
from tests.conftest import start_server, stop_server
from tests.helpers import ADMIN, World, owner
from tests.live.client import TRANSPORT_WS, SubscriptionError, WSClient
from tests.retention.conftest import DAY, Place
from tests.sse import client as sse

KEEP = 30 * DAY
OLD = 40 * DAY
HANG = 30.0  # seconds: only a hung build waits this long
DOORS = ("websocket", "sse")
EVENTS = (
    "subscription($after: ID, $filter: TaskEventFilter) "
    "{ taskEvents(after: $after, filter: $filter) { id taskId } }"
)
# The statements of the replay the test stops it at (what the server's pool sends).
FLOOR_CHECK = f"SELECT {floor_sql('task_events')}"
EVENTS_READ = "e.id = ANY($1::bigint[])"
HOLDER = "replay-race"
T = TypeVar("T")


@pytest.fixture(scope="module")
def server(own_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    log = tmp_path_factory.mktemp("replay-race") / "serve.log"
    url, process = start_server(
        # Commits made by the test reach the server's streams by its polling: poll often.
        {
            "BATON_DATABASE_URL": own_url,
            "BATON_DATABASE_POOL_SIZE": "6",
            "BATON_POLL_SECONDS": "0.1",
        },
        log,
    )
    yield url
    stop_server(process)


@dataclass
class Watcher:
    """An administrator's stream of every event, open all along: the server's hub keeps
    reading the log (one nobody watches reads the log's newest id, and the floor with it, when
    a stream joins: a statement of its own the locks below would stop first), and the test
    knows how far that reader got."""

    newest: int = 0

    async def passed(self, event_id: int) -> None:
        """Until the hub's reader has read `event_id`."""
        deadline = time.monotonic() + HANG
        while self.newest < event_id:
            assert time.monotonic() < deadline, "the server's hub never read the log"
            await asyncio.sleep(0.01)

    async def watch(self, url: str, token: str) -> None:
        while True:
            client = await WSClient.open(url, token, TRANSPORT_WS)
            try:
                await client.subscribe(EVENTS)
                while True:
                    try:
                        data = await client.next(3600)
                    except SubscriptionError:
                        break  # it missed removed events (cursor_expired): follow from now on
                    assert data is not None
                    self.newest = max(self.newest, int(data["taskEvents"]["id"]))
            finally:
                await client.close()


@pytest.fixture(scope="module")
async def watcher(server: str, place: Place) -> AsyncIterator[Watcher]:
    watcher = Watcher()
    watching = asyncio.create_task(watcher.watch(server, await create_token(place.db, ADMIN)))
    yield watcher
    watching.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await watching


@dataclass
class Scene:
    """Tasks of one project, some finished and due (doomed), some open (kept), and a cursor
    just before all of them."""

    world: World
    token: str
    cursor: int
    expected: list[int]  # every event of the project after the cursor, in order
    doomed: dict[str, int]  # each doomed task's newest event
    gone: set[int]  # the doomed tasks' events

    def kept_after(self, cursor: int) -> list[int]:
        return [e for e in self.expected if e > cursor and e not in self.gone]


async def _scene(
    place: Place,
    watcher: Watcher,
    order: str,
    doomed: int = 2,
    kept: int = 6,
    states: tuple[TaskState, TaskState] = (TaskState.completed, TaskState.working),
    newest_first: bool = False,
) -> Scene:
    """`order`: doomed first, kept first, or alternating; `states`: the doomed tasks' and the
    kept tasks' (working tasks have more events than routed ones, completed than cancelled).
    A sweep takes the doomed tasks in the order they finished, or the other way round when
    `newest_first` (the floor then jumps past them all with the first batch)."""
    w = place.world()
    async with place.db.connection() as conn:
        cursor = await newest_readable(conn, "task_events")  # at or above the floor
    kinds = {
        "doomed first": ["d"] * doomed + ["k"] * kept,
        "kept first": ["k"] * kept + ["d"] * doomed,
        "alternating": [
            k for pair in itertools.zip_longest("k" * kept, "d" * doomed) for k in pair if k
        ],
    }[order]
    tasks = {(await w.task_in(states[k == "k"])).id: k for k in kinds}
    ids = [t for t, k in tasks.items() if k == "d"]
    if newest_first:
        for i, task in enumerate(ids):
            await place.age("tasks", [task], OLD + timedelta(seconds=i))
    else:
        await place.age("tasks", ids, OLD)
    scene = await _scene_of(place, w, cursor, [t for t in tasks if t not in ids], ids)
    # Read by the server's hub: what the sweep removes from here on is behind its reader.
    await watcher.passed(scene.expected[-1])
    return scene


async def _scene_of(
    place: Place, w: World, cursor: int, kept: list[str], doomed: list[str]
) -> Scene:
    rows = await place.db.fetch(
        "SELECT e.id, e.task_id FROM task_events e JOIN tasks t ON t.id = e.task_id "
        "WHERE t.project = $1 AND e.id > $2 ORDER BY e.id",
        w.project,
        cursor,
    )
    assert {r["task_id"] for r in rows} == {*kept, *doomed}
    newest = {r["task_id"]: r["id"] for r in rows if r["task_id"] in doomed}  # the last wins
    gone = {r["id"] for r in rows if r["task_id"] in doomed}
    token = await create_token(place.db, owner(w.req_owner))
    return Scene(w, token, cursor, [r["id"] for r in rows], newest, gone)


async def _follow(
    door: str, url: str, scene: Scene, cursor: int, received: list[int]
) -> dict[str, Any] | None:
    """Follow the project's events after `cursor` into `received` until one newer than the
    scene's (the marker, handed off once the removal is done) arrives: None. Or the stream's
    error, which ends it."""
    variables = {"after": str(cursor), "filter": {"projects": [scene.world.project]}}
    past = scene.expected[-1]
    if door == "websocket":
        client = await WSClient.open(url, scene.token, TRANSPORT_WS)
        try:
            await client.subscribe(EVENTS, variables)
            while True:
                try:
                    data = await client.next(HANG)
                except SubscriptionError as refused:
                    (error,) = refused.args[0]
                    return error  # type: ignore[no-any-return]
                assert data is not None, "the stream completed without an error"
                received.append(int(data["taskEvents"]["id"]))
                if received[-1] > past:
                    return None
        finally:
            await client.close()
    async with sse.subscribe(url, scene.token, EVENTS, variables) as stream:
        while True:
            message = await stream.message(HANG)
            assert message is not None and message.event == "next", message
            if "errors" in message.data:
                (error,) = message.data["errors"]
                return error  # type: ignore[no-any-return]
            received.append(int(message.data["data"]["taskEvents"]["id"]))
            if received[-1] > past:
                return None


def _judge(
    scene: Scene, received: list[int], error: dict[str, Any] | None, floors: set[int]
) -> int | None:
    """Every event after the cursor, in order, then the marker; or a prefix of them and
    `cursor_expired` naming a floor the removal raised. The oldest cursor named, if any."""
    if error is None:
        assert received[:-1] == scene.expected, "a replay left events out"
        assert received[-1] > scene.expected[-1]
        return None
    assert error["extensions"]["code"] == "cursor_expired", error
    assert error["extensions"]["log"] == "task"
    oldest = int(error["extensions"]["oldestCursor"])
    assert oldest > scene.cursor and oldest in floors, (oldest, floors)
    assert received == scene.expected[: len(received)], "events skipped before the refusal"
    return oldest


@contextlib.asynccontextmanager
async def _batch(db: Database) -> AsyncIterator[Connection]:
    """A sweep's batch transaction, held open: bounded, holding the sweep lock and the lease
    as `Retention` takes them, but waiting longer for the test's own locks."""
    async with db.transaction() as conn:
        assert await store.bound(conn)
        assert await store.hold(conn, HOLDER, 60)
        await conn.execute("SET LOCAL lock_timeout = '30s'")
        yield conn
    await store.release(db, HOLDER)


async def _remove(conn: Connection, scene: Scene) -> int:
    """Remove the scene's doomed tasks in the batch `conn`: the floor it raises."""
    removed = await store.remove_batch(conn, TASKS, datetime.now(UTC) - KEEP, 100)
    assert removed.subjects == len(scene.doomed)
    assert removed.floor == max(scene.gone)
    return removed.floor


async def _until_waiting(db: Database, statement: str, following: asyncio.Task[Any]) -> None:
    """Until a session of this database waits for a lock while running `statement`
    (containing it). The replay is the only one to read events by their ids, and the only one
    to read the floor alone (the hub's reader, which a stream that joins wakes, reads it in
    its read of the log's new events)."""
    deadline = time.monotonic() + HANG
    while (
        await db.fetchval(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND wait_event_type = 'Lock' AND strpos(query, $1) > 0",
            statement,
        )
        < 1
    ):
        assert not following.done(), following.result()
        assert time.monotonic() < deadline, f"the replay never got to {statement!r}"
        await asyncio.sleep(0.005)


async def _until_received(received: list[int], count: int, following: asyncio.Task[Any]) -> None:
    deadline = time.monotonic() + HANG
    while len(received) < count:
        assert not following.done(), following.result()
        assert time.monotonic() < deadline, f"{len(received)} of {count} events"
        await asyncio.sleep(0.01)


async def _marker(scene: Scene) -> None:
    """A new task in the project: its events come after everything the scene holds, so a
    stream that has them has had everything before them it will ever get."""
    await scene.world.hand_off()


@pytest.mark.parametrize("door", DOORS)
async def test_a_removal_between_the_replays_read_and_its_floor_check_refuses_the_cursor(
    server: str, watcher: Watcher, place: Place, door: str
) -> None:
    scene = await _scene(place, watcher, "doomed first")
    received: list[int] = []
    async with _batch(place.db) as batch:
        # Deleted but not committed: the replay lists every id, then waits to read the floor.
        await batch.execute("LOCK TABLE retention_floors IN ACCESS EXCLUSIVE MODE")
        floor = await _remove(batch, scene)
        following = asyncio.create_task(_follow(door, server, scene, scene.cursor, received))
        await _until_waiting(place.db, FLOOR_CHECK, following)
    await _marker(scene)
    error = await asyncio.wait_for(following, HANG)
    # Its list had the removed events; the floor, read after it, says they went.
    assert _judge(scene, received, error, {floor}) == floor
    assert received == []
    await _follow_from_the_oldest(door, server, scene, floor)


@pytest.mark.parametrize("order", ["doomed first", "kept first"])
@pytest.mark.parametrize("door", DOORS)
async def test_a_removal_between_the_floor_check_and_the_events_read_refuses_after_a_prefix(
    server: str, watcher: Watcher, place: Place, door: str, order: str
) -> None:
    scene = await _scene(place, watcher, order)
    received: list[int] = []
    async with contextlib.AsyncExitStack() as stack:
        batch = await stack.enter_async_context(_batch(place.db))
        async with place.db.transaction() as pause:
            await pause.execute("LOCK TABLE retention_floors IN ACCESS EXCLUSIVE MODE")
            following = asyncio.create_task(_follow(door, server, scene, scene.cursor, received))
            await _until_waiting(place.db, FLOOR_CHECK, following)
            # The replay has listed the ids; its next read of events will wait for the batch.
            await batch.execute("LOCK TABLE task_events IN ACCESS EXCLUSIVE MODE")
        # The floor was read as it was (below the cursor): the replay goes on to the events.
        await _until_waiting(place.db, EVENTS_READ, following)
        floor = await _remove(batch, scene)
    await _marker(scene)
    error = await asyncio.wait_for(following, HANG)
    assert _judge(scene, received, error, {floor}) == floor
    # Its first chunk had removed events (none sent), or had none (sent, then the refusal).
    if order == "doomed first":
        assert received == []
    else:
        assert scene.expected.index(min(scene.gone)) >= FIRST_REPLAY
        assert received == scene.expected[:FIRST_REPLAY]
    await _follow_from_the_oldest(door, server, scene, floor)


@pytest.mark.parametrize("door", DOORS)
async def test_a_removal_after_the_replay_leaves_it_whole_and_refuses_the_cursor_next_time(
    server: str, watcher: Watcher, place: Place, door: str
) -> None:
    scene = await _scene(place, watcher, "alternating")
    received: list[int] = []
    following = asyncio.create_task(_follow(door, server, scene, scene.cursor, received))
    await _until_received(received, len(scene.expected), following)
    async with _batch(place.db) as batch:
        floor = await _remove(batch, scene)
    await _marker(scene)
    assert _judge(scene, received, await asyncio.wait_for(following, HANG), {floor}) is None
    again: list[int] = []
    error = await asyncio.wait_for(_follow(door, server, scene, scene.cursor, again), HANG)
    assert _judge(scene, again, error, {floor}) == floor


@pytest.mark.parametrize("door", DOORS)
async def test_events_removed_before_the_horizon_let_the_stream_read_them_end_it_not_skipped(
    server: str, watcher: Watcher, place: Place, door: str
) -> None:
    """A transaction that runs longer than the period holds back what readers may pass (the
    horizon, `baton.store.eventlog`): the replay stops below it and the stream goes on live.
    Work that finishes meanwhile may be removed before the horizon lets the stream read it."""
    w = place.world()
    async with place.db.connection() as conn:
        cursor = await newest_readable(conn, "task_events")
    kept = await w.task_in(TaskState.working)
    async with place.db.transaction() as long:
        await long.fetchval("SELECT pg_current_xact_id()")  # it writes: readers wait for it
        doomed = await w.task_in(TaskState.completed)
        await place.age("tasks", [doomed.id], OLD)
        scene = await _scene_of(place, w, cursor, kept=[kept.id], doomed=[doomed.id])
        received: list[int] = []
        following = asyncio.create_task(_follow(door, server, scene, scene.cursor, received))
        # The replay had what is below the horizon: the kept task's events, and stopped.
        await _until_received(received, len(scene.kept_after(cursor)), following)
        async with _batch(place.db) as batch:
            floor = await _remove(batch, scene)
    await _marker(scene)
    error = await asyncio.wait_for(following, HANG)
    assert _judge(scene, received, error, {floor}) == floor


async def test_replays_racing_a_sweep_get_every_event_or_a_refusal_never_a_gap(
    server: str, watcher: Watcher, place: Place
) -> None:
    """The real sweep, a task per batch, against replays started at random moments around
    it, through both doors; each outcome is checked. The tests above force each interleaving;
    this one checks that nothing between them lets a gap through."""
    rng = random.Random(29)
    outcomes: dict[str, int] = {}
    cheap = (TaskState.cancelled, TaskState.routed)
    for turn in range(20):
        door = DOORS[turn % 2]
        scene = await _scene(
            place,
            watcher,
            "alternating",
            doomed=4,
            kept=4,
            states=cheap,
            newest_first=turn % 4 >= 2,
        )
        floors = await _floors_on_the_way(place.db, scene)
        retention = Retention(place.db, KEEP.total_seconds(), batch=1, pace=0, min_pause=0)
        received: list[int] = []
        # The sweep starts up to 20 ms before the stream is asked for, or up to 40 ms after.
        lead = rng.uniform(-0.02, 0.04)
        following = asyncio.create_task(
            _later(max(0.0, -lead), _follow(door, server, scene, scene.cursor, received))
        )
        swept = await _later(max(0.0, lead), retention.sweep())
        assert swept is not None and swept.subjects["task"] == len(scene.doomed)
        await _marker(scene)
        error = await asyncio.wait_for(following, HANG)
        oldest = _judge(scene, received, error, floors)
        outcome = "all" if oldest is None else f"refused after {len(received)}"
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
    print(f"replays racing a sweep: {outcomes}")


async def _later(seconds: float, call: Awaitable[T]) -> T:
    await asyncio.sleep(seconds)
    return await call


async def _floors_on_the_way(db: Database, scene: Scene) -> set[int]:
    """The floors a sweep of one task per batch raises, one after the other (it removes
    them in the order they finished)."""
    rows = await db.fetch(
        "SELECT id FROM tasks WHERE id = ANY($1::text[]) ORDER BY updated_at, id",
        list(scene.doomed),
    )
    floors, highest = set(), 0
    for r in rows:
        highest = max(highest, scene.doomed[r["id"]])
        floors.add(highest)
    return floors


async def _follow_from_the_oldest(door: str, url: str, scene: Scene, oldest: int) -> None:
    """The cursor a refusal names is taken, and what is kept after it follows, with nothing
    missing, then the marker."""
    received: list[int] = []
    error = await asyncio.wait_for(_follow(door, url, scene, oldest, received), HANG)
    assert error is None, error
    assert received[:-1] == scene.kept_after(oldest)
    assert received[-1] > scene.expected[-1]
