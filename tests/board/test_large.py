"""The board at size, in Chromium against `baton serve`: 1,000 tasks on the board and a graph of
500, filled, paged, live; and the page's files within their size budget.

How fast is measured by `python -m bench.board` (the README's budget table), not here: these
tests check that the same things work, with the same helpers, and assert no duration.
"""

from __future__ import annotations

from bench.board import BUDGET_GZIP_BYTES, asset_sizes, graph_deps, seed, time_move
from playwright.async_api import Page, expect

from baton.access.principals import Principal, PrincipalKind
from baton.services.tasks import TaskService
from tests.board.conftest import Team, artifact, sign_in
from tests.conftest import LiveServer


def test_the_pages_files_are_within_their_size_budget() -> None:
    raw, packed = asset_sizes()
    assert 0 < packed < raw
    assert packed <= BUDGET_GZIP_BYTES


async def test_the_sign_in_page_paints(page: Page, live_server: LiveServer) -> None:
    await page.goto(live_server.url)
    await expect(page.locator("#token")).to_be_visible()
    painted = await page.evaluate("() => performance.getEntriesByType('paint').map((e) => e.name)")
    assert "first-contentful-paint" in painted


async def test_board_with_a_thousand_tasks(
    page: Page, team: Team, live_server: LiveServer, service: TaskService
) -> None:
    await seed(service, team.owner, 1000)
    await sign_in(page, live_server.url, team.owner_token)
    await page.reload()  # the token is saved: this load goes straight to the board
    await page.wait_for_selector("#view[data-ready]")
    marks = await page.evaluate("() => performance.getEntriesByName('baton:board-ready').length")
    assert marks == 1  # what bench.board reads as "filled and usable"
    routed = page.locator('section[data-state="routed"]')
    await expect(routed.locator(".count")).to_have_text("1,000")
    await expect(routed.locator("li.card")).to_have_count(50)

    for shown in range(100, 1001, 50):  # page the column to the end, 50 at a time
        await routed.locator("button.more").click()
        await expect(routed.locator("li.card")).to_have_count(shown)
    await expect(routed.locator("button.more")).to_be_hidden()

    # A move reaches a board showing 1,000 cards.
    last = await routed.locator("li.card").last.get_attribute("data-task-id")
    assert last is not None
    assignee = await live_server.token(Principal(PrincipalKind.AGENT, f"{team.owner}/a"))
    shown_at = f'section[data-state="accepted"] [data-task-id="{last}"]'
    assert await time_move(page, assignee, "acceptTask", last, shown_at) > 0
    await expect(page.locator(shown_at)).to_have_count(1)
    await expect(routed.locator(f'[data-task-id="{last}"]')).to_have_count(0)
    await expect(routed.locator(".count")).to_have_text("999")
    await page.screenshot(path=artifact("board-1000.png"))


async def test_graph_of_five_hundred_tasks(
    page: Page, team: Team, live_server: LiveServer, service: TaskService
) -> None:
    """A binary tree of dependents under one root, each task also depending on a second,
    earlier one: 500 nodes, 9 levels, 995 edges."""
    name = f"{team.owner}_g"  # client id `g<i>` handed off by an agent of the owner
    await seed(service, team.owner, 500, ids=lambda i: f"g{i}", deps=graph_deps(name))
    await sign_in(page, live_server.url, team.owner_token, f"#/graph/{name}0?depth=12")
    await expect(page.locator("#graph a[data-task-id]")).to_have_count(500)
    await expect(page.locator("#graph path.edge")).to_have_count(995)
    measured = await page.evaluate(
        """() => ["baton:graph-layout", "baton:graph-draw"].map(
             (n) => performance.getEntriesByName(n).length)"""
    )
    assert all(n >= 1 for n in measured)  # what bench.board reads

    assignee = await live_server.token(Principal(PrincipalKind.AGENT, f"{team.owner}/a"))
    shown = f'#graph a[data-task-id="{name}250"].state-accepted'
    assert await time_move(page, assignee, "acceptTask", f"{name}250", shown) > 0
    await page.get_by_role("button", name="Fit").click()
    await page.screenshot(path=artifact("graph-500.png"))
    for _ in range(12):
        await page.get_by_role("button", name="Zoom in").click()
    await page.screenshot(path=artifact("graph-500-zoomed.png"))
