"""The board's Webhooks page in a real Chromium: endpoints, deliveries, redeliver, enable."""

from __future__ import annotations

from playwright.async_api import Page, expect

from baton.access.principals import Principal, PrincipalKind
from tests.board.conftest import artifact, browser, page, sign_in  # noqa: F401  (fixtures)
from tests.conftest import LiveServer
from tests.helpers import World
from tests.webhooks.conftest import Receiver, create_endpoint
from tests.webhooks.test_delivery import eventually


async def test_the_webhooks_page_shows_endpoints_and_deliveries_and_acts_on_them(
    page: Page,  # noqa: F811
    webhook_server: LiveServer,
    world: World,
    receiver: Receiver,
) -> None:
    token = await webhook_server.token(Principal(PrincipalKind.OWNER, world.req_owner))
    receiver.status["/gone"] = 410
    ok = await create_endpoint(
        webhook_server, token, receiver.at("/ok"), description="CI", taskEvents={}
    )
    gone = await create_endpoint(webhook_server, token, receiver.at("/gone"))
    await world.hand_off()
    await receiver.wait_for("/ok", 2)

    async def disabled() -> bool:
        value = await webhook_server.db.fetchval(
            "SELECT enabled FROM webhook_endpoints WHERE id = $1", gone["endpoint"]["id"]
        )
        return value is False

    await eventually(disabled)
    await sign_in(page, webhook_server.url, token, "#/webhooks")
    live = page.locator(f'section.webhook[data-id="{ok["endpoint"]["id"]}"]')
    dead = page.locator(f'section.webhook[data-id="{gone["endpoint"]["id"]}"]')
    await expect(live.locator("tr")).to_have_count(2, timeout=10_000)
    await expect(live).to_contain_text("active")
    await expect(live.locator('tr[data-status="DELIVERED"]')).to_have_count(2)
    await expect(dead).to_contain_text("disabled: the receiver answered 410 Gone")
    await expect(dead.locator('tr[data-status="PENDING"]')).to_have_count(1)
    await page.screenshot(path=artifact("webhooks.png"), full_page=True)

    await live.locator("tr").first.get_by_role("button", name="Redeliver").click()
    await receiver.wait_for("/ok", 3)
    receiver.status["/gone"] = 200
    await dead.get_by_role("button", name="Enable").click()
    await receiver.wait_for("/gone", 3)  # the 410'd event again, then the next
    await expect(dead).to_contain_text("active", timeout=10_000)
