"""Small leaks in input, closed: links that run script, reserved owners, blank titles.

Against a real `baton serve` (/readyz and /metrics are tested in test_readyz.py, test_http.py
and test_metrics.py).
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from baton.access.principals import ADMIN, Principal
from baton.protocol import task_object
from baton.protocol.handoff import TaskState
from baton.protocol.pipeline import RunStatus
from baton.services.runs import RunService
from baton.services.tasks import TaskService
from baton.store.db import Database
from tests.conftest import LiveServer
from tests.helpers import PACKET_INPUT, RESULT_INPUT, World
from tests.runs_helpers import Runs

SCRIPT_URLS = [
    "javascript:alert(document.cookie)",
    "JavaScript://example.com/%0Aalert(1)",
    "data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==",
    "vbscript:msgbox(1)",
    "file:///etc/passwd",
]
BLANK_TITLES = [
    "\u200b",  # zero-width space
    " \u200c\u200d ",  # joiners between spaces
    "\ufeff\u2060",  # BOM, word joiner
    "\u202e\u2066\u2069",  # direction controls
    "\u3164\u2800",  # Hangul filler, blank Braille
    "\u00a0\u3000\t",  # no-break and ideographic spaces, a tab
    "\u0301\ufe0f",  # combining marks with no base
]


@dataclass
class Api:
    client: httpx.AsyncClient
    server: LiveServer

    async def as_(self, principal: Principal, query: str, **variables: Any) -> dict[str, Any]:
        token = await self.server.token(principal)
        response = await self.client.post(
            "/graphql",
            json={"query": query, "variables": variables},
            headers={"Authorization": f"Bearer {token}"},
        )
        body = response.json()
        assert response.status_code == 200 and "errors" not in body, body
        return next(iter(body["data"].values()))  # type: ignore[no-any-return]


@pytest.fixture
async def api(live_server: LiveServer) -> AsyncIterator[Api]:
    async with httpx.AsyncClient(base_url=live_server.url, timeout=30) as client:
        yield Api(client, live_server)


# --- links: http and https only --------------------------------------------------------------

SUBMIT = """mutation($id: ID!, $result: ResultInput!) { submitResult(input: {id: $id,
    result: $result}) { __typename ... on InvalidInputError { field }
    ... on MoveSuccess { task { state result { evidence { url } } } } } }"""


@pytest.mark.parametrize("url", SCRIPT_URLS)
async def test_evidence_links_that_are_not_http_are_invalid_input(
    api: Api, service: TaskService, url: str
) -> None:
    world = World(service)
    task = await world.task_in(TaskState.working)
    evidence = [RESULT_INPUT["evidence"][0], {"kind": "link", "summary": "see", "url": url}]
    answer = await api.as_(
        world.roles["assignee"],
        SUBMIT,
        id=task.id,
        result={**RESULT_INPUT, "evidence": evidence},
    )
    assert answer == {"__typename": "InvalidInputError", "field": "result.evidence[1].url"}
    assert (await service.get(ADMIN, task.id)).version == task.version


async def test_http_and_https_evidence_links_are_kept(api: Api, service: TaskService) -> None:
    world = World(service)
    task = await world.task_in(TaskState.working)
    links = ["https://example.com/pr/1", "HTTP://example.com/build/2?x=1#log"]
    evidence = [{"kind": "link", "summary": "see", "url": u} for u in links]
    answer = await api.as_(
        world.roles["assignee"], SUBMIT, id=task.id, result={**RESULT_INPUT, "evidence": evidence}
    )
    assert answer["task"]["result"]["evidence"] == [{"url": u} for u in links]


OPEN_PR = """mutation($id: ID!, $url: String!) { openPullRequest(input: {id: $id, url: $url}) {
    __typename ... on InvalidInputError { field } } }"""


@pytest.mark.parametrize("url", SCRIPT_URLS)
async def test_pull_request_links_that_are_not_http_are_invalid_input(
    api: Api, db: Database, url: str
) -> None:
    runs = Runs(RunService(db))
    run = await runs.run_in(RunStatus.in_progress)
    answer = await api.as_(runs.daemon, OPEN_PR, id=run.id, url=url)
    assert answer == {"__typename": "InvalidInputError", "field": "url"}
    assert await runs.service.get(ADMIN, run.id) == run


# --- reserved owners ---------------------------------------------------------------------------

CREATE = """mutation($owner: String, $title: String!) { createRun(input: {project: "p",
    title: $title, owner: $owner}) { __typename ... on InvalidInputError { field }
    ... on RunMoveSuccess { run { owner title } } } }"""


@pytest.mark.parametrize("reserved", ["system", "admin", ""])
async def test_admin_cannot_create_a_run_owned_by_a_reserved_handle(
    api: Api, reserved: str
) -> None:
    answer = await api.as_(ADMIN, CREATE, owner=reserved, title="Fix it")
    assert answer == {"__typename": "InvalidInputError", "field": "owner"}


async def test_admin_creates_a_run_for_a_real_owner(api: Api) -> None:
    owner = f"o{secrets.token_hex(4)}"
    answer = await api.as_(ADMIN, CREATE, owner=owner, title="Fix it")
    assert answer["run"] == {"owner": owner, "title": "Fix it"}


# --- titles that show nothing ------------------------------------------------------------------


@pytest.mark.parametrize("title", BLANK_TITLES)
async def test_a_run_title_of_invisible_characters_is_invalid_input(
    api: Api, db: Database, title: str
) -> None:
    runs = Runs(RunService(db))
    answer = await api.as_(runs.owner, CREATE, owner=None, title=title)
    assert answer == {"__typename": "InvalidInputError", "field": "title"}


HAND_OFF = """mutation($r: String!, $a: String!, $packet: PacketInput!) { handOff(input: {
    project: "p", requester: $r, assignee: $a, packet: $packet}) { __typename
    ... on InvalidInputError { field } ... on HandOffSuccess { task { packet { task } } } } }"""


@pytest.mark.parametrize("title", BLANK_TITLES)
async def test_a_task_of_invisible_characters_is_invalid_input(
    api: Api, service: TaskService, title: str
) -> None:
    world = World(service)
    answer = await api.as_(
        world.roles["requester"],
        HAND_OFF,
        r=world.requester,
        a=world.assignee,
        packet={**PACKET_INPUT, "task": title},
    )
    assert answer == {"__typename": "InvalidInputError", "field": "packet.task"}


@pytest.mark.parametrize("title", ["🚀", "e\u0301", "\u200bFix it\u200b", "修正", "ㅎ"])
async def test_titles_with_something_visible_are_kept(
    api: Api, service: TaskService, title: str
) -> None:
    world = World(service)
    answer = await api.as_(
        world.roles["requester"],
        HAND_OFF,
        r=world.requester,
        a=world.assignee,
        packet={**PACKET_INPUT, "task": title},
    )
    assert answer["task"]["packet"]["task"] == title
    run = await api.as_(world.roles["requester_owner"], CREATE, owner=None, title=title)
    assert run["run"]["title"] == title


def test_visible_reads_unicode_categories_not_strip() -> None:
    assert not any(task_object.visible(t) for t in BLANK_TITLES)
    assert task_object.visible("a") and task_object.visible("\u200ba")
