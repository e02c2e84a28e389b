"""Browser fixtures: Debian's Chromium, headless, driven by Playwright against `live_server`.

Playwright never downloads a browser here: it launches /usr/bin/chromium (or BATON_CHROMIUM),
each time with a fresh profile directory of its own. Without Chromium the browser tests skip,
except under CI, where `.ci/run` installs it and its absence is a failure. Screenshots go to
test-artifacts/board/ (or BATON_TEST_ARTIFACTS/board/).
"""

from __future__ import annotations

import os
import secrets
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from bench.board import CHROMIUM, CHROMIUM_FLAGS, VIEWPORT
from playwright.async_api import Browser, Page, async_playwright

from baton.access.principals import Principal, PrincipalKind
from tests.conftest import LiveServer
from tests.live.client import HTTPClient
from tests.tools import missing

ARTIFACTS = (
    Path(os.environ.get("BATON_TEST_ARTIFACTS", Path(__file__).parents[2] / "test-artifacts"))
    / "board"
)


def have_chromium() -> bool:
    return CHROMIUM.is_file()


@pytest.fixture(scope="session")
async def browser() -> AsyncIterator[Browser]:
    if not have_chromium():
        missing("chromium", f"apt-get install chromium, or BATON_CHROMIUM; looked at {CHROMIUM}")
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(
            executable_path=str(CHROMIUM), args=CHROMIUM_FLAGS, headless=True
        )
        yield browser
        await browser.close()


@pytest.fixture
async def page(browser: Browser) -> AsyncIterator[Page]:
    """A page in a fresh context; fails the test on an uncaught error in the page."""
    context = await browser.new_context(viewport=VIEWPORT)
    page = await context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    yield page
    await context.close()
    assert not errors, errors


def artifact(name: str) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS / name


@dataclass
class Team:
    """An owner unique to one test, its agents' clients over HTTP, and another owner."""

    server: LiveServer
    owner: str
    other: str
    owner_token: str
    clients: dict[str, HTTPClient]

    @property
    def project(self) -> str:
        return f"p{self.owner}"

    async def client(self, principal: Principal) -> HTTPClient:
        key = f"{principal.kind.value}:{principal.handle}"
        if key not in self.clients:
            self.clients[key] = HTTPClient(self.server.url, await self.server.token(principal))
        return self.clients[key]

    async def agent(self, handle: str) -> HTTPClient:
        return await self.client(Principal(PrincipalKind.AGENT, handle))

    async def as_owner(self, owner: str) -> HTTPClient:
        return await self.client(Principal(PrincipalKind.OWNER, owner))


@pytest.fixture
async def team(live_server: LiveServer) -> AsyncIterator[Team]:
    tag = secrets.token_hex(4)
    owner, other = f"o{tag}", f"x{tag}"
    token = await live_server.token(Principal(PrincipalKind.OWNER, owner))
    team = Team(live_server, owner, other, token, {})
    yield team
    for client in team.clients.values():
        await client.aclose()


async def sign_in(page: Page, url: str, token: str, path: str = "") -> None:
    await page.goto(f"{url}/{path}")
    await page.fill("#token", token)
    await page.click("form button.primary")
    try:
        await page.wait_for_selector("#view[data-ready]", timeout=10_000)
    except Exception:
        await page.screenshot(path=artifact("failed-sign-in.png"))
        raise


HAND_OFF = """
mutation($input: HandOffInput!) {
  handOff(input: $input) {
    __typename
    ... on HandOffSuccess { task { id state version } events { id } }
    ... on Error { code message }
  }
}
"""


async def hand_off(
    client: HTTPClient, project: str, requester: str, assignee: str, **extra: Any
) -> dict[str, Any]:
    packet = {
        "task": extra.pop("title", "Write the release notes"),
        "deliverableType": "doc",
        "acceptanceCriteria": ["covers every change"],
        "dependsOn": extra.pop("depends_on", []),
    }
    data = await client(
        HAND_OFF,
        input={
            "project": project,
            "requester": requester,
            "assignee": assignee,
            "packet": packet,
            **extra,
        },
    )
    result: dict[str, Any] = data["handOff"]
    assert result["__typename"] == "HandOffSuccess", result
    return result


async def move(client: HTTPClient, mutation: str, task_id: str, **fields: Any) -> dict[str, Any]:
    data = await client(
        f"""
        mutation($input: {mutation[0].upper()}{mutation[1:]}Input!) {{
          {mutation}(input: $input) {{
            __typename
            ... on MoveSuccess {{ task {{ state version }} events {{ id }} }}
            ... on Error {{ code message }}
          }}
        }}""",
        input={"id": task_id, **fields},
    )
    result: dict[str, Any] = data[mutation]
    assert result["__typename"] == "MoveSuccess", result
    return result
