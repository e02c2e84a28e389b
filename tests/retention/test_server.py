"""`BATON_RETENTION` on a real `baton serve`: the server sweeps by itself, says what it keeps,
and the board says what a user loses and when, and reads again when its stream's cursor is
older than what is kept."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import datetime, timedelta

import pytest
from playwright.async_api import Page, WebSocketRoute, expect

from baton.access.tokens import create_token
from baton.protocol.handoff import TaskState
from tests.board.conftest import artifact, browser, page, sign_in
from tests.conftest import start_server, stop_server
from tests.helpers import owner
from tests.live.client import HTTPClient
from tests.retention.conftest import DAY, Place

__all__ = ["browser", "page"]  # the board tests' fixtures

KEEP = 30 * DAY


@pytest.fixture(scope="module")
def server(own_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    log = tmp_path_factory.mktemp("retention-server") / "serve.log"
    url, process = start_server(
        {"BATON_DATABASE_URL": own_url, "BATON_RETENTION": "30d", "BATON_POLL_SECONDS": "0.2"},
        log,
    )
    yield url
    stop_server(process)


@pytest.fixture
def short(own_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A server that keeps finished work one second (it looks every second)."""
    log = tmp_path_factory.mktemp("retention-short") / "serve.log"
    url, process = start_server({"BATON_DATABASE_URL": own_url, "BATON_RETENTION": "1s"}, log)
    yield url
    stop_server(process)


async def test_the_server_removes_finished_work_by_itself(short: str, place: Place) -> None:
    w = place.world()
    done = await w.task_in(TaskState.completed)
    kept = await w.task_in(TaskState.working)
    for _ in range(300):
        if await place.db.fetchval("SELECT count(*) FROM tasks WHERE id = $1", done.id) == 0:
            break
        await asyncio.sleep(0.1)
    else:
        raise AssertionError("the finished task was never removed")
    assert await place.db.fetchval("SELECT count(*) FROM tasks WHERE id = $1", kept.id) == 1
    token = await create_token(place.db, owner(w.req_owner))
    client = HTTPClient(short, token)
    try:
        data = await client("{ retention { keepSeconds oldestTaskEvents } }")
    finally:
        await client.aclose()
    assert data["retention"]["keepSeconds"] == 1
    assert int(data["retention"]["oldestTaskEvents"]) > 0


async def test_the_board_says_when_finished_work_goes(
    page: Page, server: str, place: Place
) -> None:
    w = place.world()
    done = await w.task_in(TaskState.completed)
    token = await create_token(place.db, owner(w.req_owner))
    await sign_in(page, server, token, f"#/task/{done.id}")
    removal = page.locator("#removal")
    await expect(removal).to_contain_text("Finished work is kept 30 days")
    at = datetime.fromisoformat(await removal.locator("time").get_attribute("datetime") or "")
    assert abs(at - (done.updated_at + KEEP)) < timedelta(seconds=1)
    await page.screenshot(path=artifact("task-page-removal.png"))
    await page.goto(f"{server}/#/board")
    await expect(page.locator("#retention")).to_contain_text("removed 30 days after they finish")
    open_task = await w.task_in(TaskState.working)
    await page.goto(f"{server}/#/task/{open_task.id}")
    await expect(page.locator("#task-version")).to_be_visible()
    assert await page.locator("#removal").count() == 0  # open work is never removed


async def test_a_board_away_for_longer_than_is_kept_reads_again_and_follows(
    page: Page, server: str, place: Place
) -> None:
    w = place.world()
    token = await create_token(place.db, owner(w.req_owner))
    down = False
    refused = asyncio.Event()
    sockets: list[WebSocketRoute] = []

    async def handler(ws: WebSocketRoute) -> None:
        if down:  # the network is out: refuse, and the page retries
            await ws.close(code=1013, reason="Try again later")
            refused.set()
            return
        ws.connect_to_server()
        sockets.append(ws)

    await page.route_web_socket("**/graphql", handler)
    await sign_in(page, server, token)
    await expect(page.locator("#live")).to_have_text("Live")
    down = True
    await sockets[-1].close(code=1001, reason="Going away")
    # Away: work finishes and is removed after the period; new work is handed off.
    gone = await w.task_in(TaskState.completed)
    await place.age("tasks", [gone.id], 40 * DAY)
    await place.sweep(KEEP)
    new = await w.task_in(TaskState.routed)
    refused.clear()
    await asyncio.wait_for(refused.wait(), 30)
    down = False
    # Its cursor is older than what is kept: it starts again from now and reads the board.
    await expect(page.locator("#live")).to_have_text("Live", timeout=15_000)
    card = page.locator(f'section[data-state="routed"] li[data-task-id="{new.id}"]')
    await expect(card).to_be_visible(timeout=15_000)
    assert await page.locator(f'li[data-task-id="{gone.id}"]').count() == 0
    await page.screenshot(path=artifact("board-read-again.png"))
