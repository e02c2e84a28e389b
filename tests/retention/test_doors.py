"""A cursor older than what is kept is refused on every door that takes one, naming the oldest
cursor still valid; a cursor at it is taken; old open work is followed whatever its age. Over a
real `baton serve` on the module's own database, after a sweep there."""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

import mcp_types as types
import pytest
from mcp.client.session import IncomingMessage

from baton.access.principals import Principal
from baton.access.tokens import create_token
from baton.protocol.handoff import TaskState
from baton.protocol.pipeline import RunStatus
from baton.store.db import Database
from tests.conftest import start_server, stop_server
from tests.helpers import agent, owner
from tests.live.client import TRANSPORT_WS, HTTPClient, SubscriptionError, WSClient
from tests.mcp.conftest import http_client, ok
from tests.retention.conftest import DAY, Place
from tests.runs_helpers import Runs
from tests.sse import client as sse

OLD = 40 * DAY
TASK_EVENTS = "subscription($after: ID) { taskEvents(after: $after) { id taskId version } }"
RUN_EVENTS = "subscription($after: ID) { runEvents(after: $after) { id runId } }"
TASK_UPDATED = "subscription($id: ID!) { taskUpdated(id: $id) { id state version } }"


@dataclass
class History:
    """A server on a database whose old finished work was swept away."""

    url: str
    owner_token: str  # the requester's owner: sees the tasks
    runner_token: str  # the runs' owner
    assignee_token: str
    # Old, working, kept, their events all below the floor: one for each test that moves one
    # (a move puts the task's newest event above the floor).
    open_tasks: dict[str, str]
    open_task_events: int
    gone_task: str
    task_floor: int
    run_floor: int
    below: str  # a task cursor below the floor


@pytest.fixture(scope="module")
def server(own_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    log = tmp_path_factory.mktemp("retention") / "serve.log"
    url, process = start_server({"BATON_DATABASE_URL": own_url}, log)
    yield url
    stop_server(process)


@pytest.fixture(scope="module")
async def history(server: str, place: Place) -> AsyncIterator[History]:
    w = place.world()
    # First: their events are older than the removed task's.
    kept = {
        use: await w.task_in(TaskState.working) for use in ("live", "updated", "auto", "legacy")
    }
    gone = await w.task_in(TaskState.completed)
    runs = Runs(place.runs)
    gone_run = await runs.run_in(RunStatus.completed)
    await place.age("tasks", [*(t.id for t in kept.values()), gone.id], OLD)
    await place.age("runs", [gone_run.id], OLD)
    async with place.db.connection() as conn:
        one = kept["updated"].id
        first = await conn.fetchval("SELECT min(id) FROM task_events WHERE task_id = $1", one)
        count = await conn.fetchval("SELECT count(*) FROM task_events WHERE task_id = $1", one)
        newest = await conn.fetchval(
            "SELECT max(id) FROM task_events WHERE task_id = ANY($1::text[])",
            [t.id for t in kept.values()],
        )
    swept = await place.sweep()
    assert swept.subjects["task"] >= 1 and swept.subjects["run"] >= 1
    assert newest < swept.floors["task"]
    db = place.db
    yield History(
        url=server,
        owner_token=await _token(db, owner(w.req_owner)),
        runner_token=await _token(db, runs.owner),
        assignee_token=await _token(db, agent(w.assignee)),
        open_tasks={use: task.id for use, task in kept.items()},
        open_task_events=count,
        gone_task=gone.id,
        task_floor=swept.floors["task"],
        run_floor=swept.floors["run"],
        below=str(first),
    )


async def _token(db: Database, principal: Principal) -> str:
    return await create_token(db, principal)


def _expired(errors: list[dict[str, Any]], log: str, oldest: int) -> None:
    (error,) = errors
    assert error["extensions"] == {
        "code": "cursor_expired",
        "log": log,
        "oldestCursor": str(oldest),
    }
    assert str(oldest) in error["message"]


@pytest.mark.parametrize("protocol", ["graphql-transport-ws", "graphql-ws"])
async def test_a_websocket_stream_after_an_expired_cursor_is_refused_naming_the_oldest(
    history: History, protocol: str
) -> None:
    client = await WSClient.open(history.url, history.owner_token, protocol)
    try:
        await client.subscribe(TASK_EVENTS, {"after": history.below})
        with pytest.raises(SubscriptionError) as refused:
            await client.next()
        _expired(refused.value.args[0], "task", history.task_floor)
        await client.subscribe(RUN_EVENTS, {"after": "0"})
        with pytest.raises(SubscriptionError) as refused:
            await client.next()
        # The owner sees no run of another owner; the refusal does not depend on what it sees.
        _expired(refused.value.args[0], "run", history.run_floor)
    finally:
        await client.close()


async def test_an_event_stream_after_an_expired_cursor_is_refused_naming_the_oldest(
    history: History,
) -> None:
    async with sse.subscribe(
        history.url, history.owner_token, TASK_EVENTS, {"after": history.below}
    ) as stream:
        messages = await stream.rest()
    assert [m.event for m in messages] == ["next", "complete"]
    _expired(messages[0].data["errors"], "task", history.task_floor)
    async with sse.subscribe(
        history.url, history.runner_token, RUN_EVENTS, {"after": "0"}, path="/graphql/stream"
    ) as stream:
        messages = await stream.rest()
    _expired(messages[0].data["errors"], "run", history.run_floor)


async def test_a_stream_after_the_oldest_cursor_is_taken_and_goes_on_live(
    history: History,
) -> None:
    client = await WSClient.open(history.url, history.owner_token, TRANSPORT_WS)
    http = HTTPClient(history.url, history.assignee_token)
    try:
        await client.subscribe(TASK_EVENTS, {"after": str(history.task_floor)})
        await _checkpoint(http, history.open_tasks["live"])
        (event,) = await client.collect(1)
        assert event["taskEvents"]["taskId"] == history.open_tasks["live"]
    finally:
        await client.close()
        await http.aclose()


async def test_old_open_work_is_followed_and_read_whatever_its_age(history: History) -> None:
    # taskUpdated starts after the task's own newest event, below the floor: never refused.
    client = await WSClient.open(history.url, history.owner_token, TRANSPORT_WS)
    http = HTTPClient(history.url, history.assignee_token)
    try:
        task = history.open_tasks["updated"]
        await client.subscribe(TASK_UPDATED, {"id": task})
        (now,) = await client.collect(1)
        assert now["taskUpdated"]["state"] == "working"
        await _checkpoint(http, task)
        (after,) = await client.collect(1)
        assert after["taskUpdated"]["version"] == now["taskUpdated"]["version"] + 1
    finally:
        await client.close()
    # A task's own events page from the start, whatever the floor.
    reader = HTTPClient(history.url, history.owner_token)
    try:
        data = await reader(
            'query($id: ID!, $gone: ID!) { task(id: $id) { events(after: "0", first: 100) '
            "{ edges { node { id } } } } gone: task(id: $gone) { id } "
            "retention { keepSeconds oldestTaskEvents oldestRunEvents } }",
            id=history.open_tasks["updated"],
            gone=history.gone_task,
        )
    finally:
        await reader.aclose()
        await http.aclose()
    assert len(data["task"]["events"]["edges"]) >= history.open_task_events
    assert data["gone"] is None
    assert data["retention"]["oldestTaskEvents"] == str(history.task_floor)
    assert data["retention"]["oldestRunEvents"] == str(history.run_floor)


@pytest.mark.parametrize("era", ["auto", "legacy"])
async def test_an_mcp_resource_of_old_open_work_is_followed(history: History, era: str) -> None:
    # MCP takes no event cursor: a resource subscription starts after the subject's own newest
    # event, which lies below the floor here, and must not be refused for it.
    task = history.open_tasks[era]
    uri = f"baton://tasks/{task}"
    updated: asyncio.Queue[str] = asyncio.Queue()

    async def on_message(message: IncomingMessage) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            updated.put_nowait(str(message.params.uri))

    http = HTTPClient(history.url, history.assignee_token)
    try:
        async with http_client(
            history.url, history.owner_token, mode=era, on_message=on_message
        ) as client:
            if era == "legacy":
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # resources/subscribe is the handshake era's
                    await client.subscribe_resource(uri)
                await _checkpoint(http, task)
                assert await asyncio.wait_for(updated.get(), 10) == uri
            else:
                async with client.listen(resource_subscriptions=[uri]) as subscription:
                    await _checkpoint(http, task)
                    event = await asyncio.wait_for(anext(aiter(subscription)), 10)
                    assert str(event.uri) == uri  # type: ignore[union-attr]
            read = ok(await client.call_tool("task", {"id": task}))
            assert read["task"]["state"] == "working"
    finally:
        await http.aclose()


async def _checkpoint(http: HTTPClient, task_id: str) -> None:
    data = await http(
        "mutation($id: ID!, $c: CheckpointInput!) { saveCheckpoint(input: {id: $id, "
        "checkpoint: $c}) { __typename ... on Error { message } } }",
        id=task_id,
        c={"progress": "still going", **_CHECKPOINT},
    )
    assert data["saveCheckpoint"]["__typename"] == "MoveSuccess", data


_CHECKPOINT = {"decisions": [], "filesTouched": [], "nextSteps": [], "openQuestions": []}
