"""The board in a real Chromium against a real `baton serve`, with other clients over HTTP."""

from __future__ import annotations

import asyncio

from playwright.async_api import Page, WebSocketRoute, expect

from baton.access.principals import Principal, PrincipalKind
from tests.board.conftest import Team, artifact, hand_off, move, sign_in
from tests.conftest import LiveServer


def card(page: Page, state: str, task_id: str):  # type: ignore[no-untyped-def]
    return page.locator(f'section[data-state="{state}"] li[data-task-id="{task_id}"]')


async def test_sign_in_refuses_a_bad_or_revoked_token_and_signs_out(
    page: Page, team: Team, live_server: LiveServer
) -> None:
    await page.goto(live_server.url)
    await page.fill("#token", "baton_not-a-token")
    await page.click("form button.primary")
    await expect(page.locator("#signin-error")).to_contain_text("not accepted")
    await page.screenshot(path=artifact("sign-in-refused.png"))

    # A token that was revoked (its row is gone) is refused the same way.
    revoked = await live_server.token(Principal(PrincipalKind.OWNER, team.owner))
    await live_server.db.execute("DELETE FROM api_tokens WHERE handle = $1", team.owner)
    await page.fill("#token", revoked)
    await page.click("form button.primary")
    await expect(page.locator("#signin-error")).to_contain_text("revoked")

    good = await live_server.token(Principal(PrincipalKind.OWNER, team.owner))
    await sign_in(page, live_server.url, good)
    await expect(page.locator("#who")).to_have_text(f"{team.owner} (owner)")
    await expect(page.locator("#live")).to_have_text("Live")
    # The token is kept for the tab: a reload stays signed in.
    await page.reload()
    await page.wait_for_selector("#view[data-ready]")
    await page.click("#sign-out")
    await expect(page.locator("#signin-error")).to_have_text("You are signed out.")
    assert await page.evaluate("sessionStorage.length") == 0


async def test_a_refused_socket_signs_out_with_a_message(
    page: Page, team: Team, live_server: LiveServer
) -> None:
    """When the server closes the socket with 4403 (a token revoked mid-session), the page
    says so and asks for a new token."""
    routes: list[WebSocketRoute] = []

    def handler(ws: WebSocketRoute) -> None:
        ws.connect_to_server()
        routes.append(ws)

    await page.route_web_socket("**/graphql", handler)
    await sign_in(page, live_server.url, team.owner_token)
    await expect(page.locator("#live")).to_have_text("Live")
    await routes[-1].close(code=4403, reason="Forbidden")
    await expect(page.locator("#signin-error")).to_contain_text("revoked")


async def test_a_hand_off_appears_in_its_column_and_moves_live(
    page: Page, team: Team, live_server: LiveServer
) -> None:
    """Live, over the socket (no reload); how fast is bench.board's figure."""
    await sign_in(page, live_server.url, team.owner_token)
    await expect(page.locator("#live")).to_have_text("Live")
    requester = await team.agent(f"{team.owner}/r")
    assignee = await team.agent(f"{team.owner}/a")
    task = (await hand_off(requester, team.project, f"{team.owner}/r", f"{team.owner}/a"))["task"]
    assert task["state"] == "routed"  # same owner: the gate allows it
    await expect(card(page, "routed", task["id"])).to_be_visible()
    await expect(page.locator('section[data-state="routed"] .count')).to_have_text("1")
    loads = await page.evaluate("() => performance.getEntriesByType('navigation').length")

    await move(assignee, "acceptTask", task["id"])
    await expect(card(page, "accepted", task["id"])).to_be_visible()
    assert await page.evaluate("() => performance.getEntriesByType('navigation').length") == loads
    await expect(card(page, "routed", task["id"])).to_have_count(0)
    await expect(page.locator('section[data-state="accepted"] .count')).to_have_text("1")
    await expect(page.locator('section[data-state="routed"] .count')).to_have_text("0")
    await page.screenshot(path=artifact("board.png"))

    # Filters: another project's task is not on a board filtered to this project.
    await hand_off(requester, f"q{team.owner}", f"{team.owner}/r", f"{team.owner}/a")
    await page.fill("#filter-project", team.project)
    await page.click(".filters button.primary")
    await page.wait_for_selector("#view[data-ready]")
    await expect(page.locator("li.card")).to_have_count(1)


async def test_approve_and_deny_from_the_inbox(
    page: Page, team: Team, live_server: LiveServer
) -> None:
    requester = await team.agent(f"{team.other}/r")
    held = []
    for title in ("Approve me", "Deny me"):
        result = await hand_off(
            requester, team.project, f"{team.other}/r", f"{team.owner}/a", title=title
        )
        assert result["task"]["state"] == "waiting"  # another owner: the gate asks
        held.append(result["task"]["id"])
    await sign_in(page, live_server.url, team.owner_token, "#/inbox")
    items = page.locator("#inbox-held > li")
    await expect(items).to_have_count(2)
    await expect(page.locator("#inbox-count")).to_have_text("2")
    await page.screenshot(path=artifact("inbox.png"))

    await page.locator(f'li[data-task-id="{held[0]}"] button', has_text="Approve").click()
    await expect(page.locator(f'#inbox-held > li[data-task-id="{held[0]}"]')).to_have_count(0)

    await page.locator(f'li[data-task-id="{held[1]}"] button', has_text="Deny").click()
    dialog = page.locator("dialog[open]")
    await expect(dialog).to_contain_text("Deny")
    await dialog.get_by_label("Reason").fill("Not this quarter")
    await dialog.locator("button.danger").click()
    await expect(items).to_have_count(0)
    await expect(page.locator("#inbox-count")).to_have_text("")

    # The board shows where each went; the reason is on the event.
    await page.click('nav a[href="#/board"]')
    await expect(card(page, "routed", held[0])).to_be_visible()
    await expect(card(page, "rejected", held[1])).to_be_visible()
    owner = await team.as_owner(team.owner)
    data = await owner(
        "query($id: ID!) { task(id: $id) { events { edges { node { move reason } } } } }",
        id=held[1],
    )
    assert data["task"]["events"]["edges"][-1]["node"] == {
        "move": "DENY",
        "reason": "Not this quarter",
    }


async def test_a_version_conflict_is_shown_in_words_and_offers_a_reload(
    page: Page, team: Team, live_server: LiveServer
) -> None:
    requester = await team.agent(f"{team.owner}/r")
    assignee = await team.agent(f"{team.owner}/a")
    task = (await hand_off(requester, team.project, f"{team.owner}/r", f"{team.owner}/a"))["task"]

    held: list[str] = []
    hold = False
    sockets: list[WebSocketRoute] = []

    def handler(ws: WebSocketRoute) -> None:
        server = ws.connect_to_server()
        sockets.append(ws)

        def to_page(message: str | bytes) -> None:
            if hold and '"next"' in str(message):
                held.append(str(message))
            else:
                ws.send(message)

        server.on_message(to_page)
        ws.on_message(lambda message: server.send(message))

    await page.route_web_socket("**/graphql", handler)
    await sign_in(page, live_server.url, team.owner_token, f"#/task/{task['id']}")
    await expect(page.locator("#live")).to_have_text("Live")
    await expect(page.locator("button.move")).to_have_count(2)  # accept and cancel
    await page.screenshot(path=artifact("task-page.png"), full_page=True)

    hold = True  # the page does not hear of the next change
    await move(assignee, "acceptTask", task["id"])
    await page.locator('button.move[data-move="ACCEPT"]').click()
    message = page.locator("#move-message")
    await expect(message).to_contain_text("Someone changed this first")
    await expect(message).to_contain_text("version 2, and it is now at version 3")
    await page.screenshot(path=artifact("version-conflict.png"))

    hold = False
    for frame in held:
        sockets[-1].send(frame)
    await message.get_by_role("button", name="Reload the task").click()
    await expect(page.locator("#task-version")).to_have_text("3")
    await expect(page.locator(".task-head .badge.state")).to_have_text("Accepted")
    await expect(page.locator("#timeline li")).to_have_count(3)


async def test_task_page_shows_checkpoint_result_and_timeline(
    page: Page, team: Team, live_server: LiveServer
) -> None:
    requester = await team.agent(f"{team.owner}/r")
    assignee = await team.agent(f"{team.owner}/a")
    task = (await hand_off(requester, team.project, f"{team.owner}/r", f"{team.owner}/a"))["task"]
    await move(assignee, "acceptTask", task["id"])
    await move(assignee, "startTask", task["id"])
    data = await assignee(
        "mutation($input: SaveCheckpointInput!) { saveCheckpoint(input: $input) { __typename } }",
        input={
            "id": task["id"],
            "checkpoint": {
                "progress": "Half of the notes are written",
                "decisions": ["Group changes by area"],
                "nextSteps": ["Write the API section"],
                "openQuestions": ["Mention the old client?"],
            },
        },
    )
    assert data["saveCheckpoint"]["__typename"] == "MoveSuccess"
    await sign_in(page, live_server.url, team.owner_token, f"#/task/{task['id']}")
    await expect(page.locator("#sec-latest-checkpoint")).to_be_visible()
    body = page.locator(".task-body")
    await expect(body).to_contain_text("Half of the notes are written")
    await expect(body).to_contain_text("Mention the old client?")

    # The owner submits the result from the page (a form built from ResultInput).
    await page.locator('button.move[data-move="SUBMIT_RESULT"]').click()
    dialog = page.locator("dialog[open]")
    await dialog.get_by_label("Summary").first.fill("All changes covered")
    await dialog.get_by_label("Kind").select_option("link")
    await dialog.get_by_label("Summary").nth(1).fill("The rendered notes")
    await dialog.get_by_label("Url (optional)").fill("https://example.org/notes")
    await dialog.locator("button.primary").click()
    await expect(page.locator("#move-message")).to_contain_text("now Completed")
    await expect(page.locator(".evidence a")).to_have_attribute("href", "https://example.org/notes")
    timeline = page.locator("#timeline li")
    # created, routed by the gate, accepted, started, checkpoint, submitted, completed
    await expect(timeline).to_have_count(7)
    await expect(timeline.nth(2)).to_contain_text(f"{team.owner}/a · Accept: Routed → Accepted")
    await expect(timeline.nth(5)).to_contain_text(f"{team.owner} · Submit result")
    await page.screenshot(path=artifact("task-page-completed.png"), full_page=True)


async def test_the_graph_of_a_three_task_cycle_highlights_it(
    page: Page, team: Team, live_server: LiveServer
) -> None:
    requester = await team.agent(f"{team.owner}/r")
    assignee = await team.agent(f"{team.owner}/a")
    # Client ids are scoped to the requester's owner: `x` handed off by `owner/r` is `owner_x`.
    a, b, c, d = (f"{team.owner}_{x}" for x in "abcd")
    for me, deps in ((a, [c]), (b, [a]), (c, [b]), (d, [a, "the design doc"])):
        await hand_off(
            requester,
            team.project,
            f"{team.owner}/r",
            f"{team.owner}/a",
            id=me[-1],
            title=f"Part {me[-1]}",
            depends_on=deps,
        )
    await sign_in(page, live_server.url, team.owner_token, f"#/graph/{a}")
    for node in (a, b, c):
        await expect(page.locator(f'#graph a[data-task-id="{node}"] rect.in-cycle')).to_have_count(
            1
        )
    await expect(page.locator(f'#graph a[data-task-id="{d}"] rect.in-cycle')).to_have_count(0)
    await expect(page.locator("#graph path.edge.cycle")).to_have_count(3)
    await expect(page.locator("#cycles li")).to_have_text(f"{a} → {b} → {c} → {a}")
    await expect(page.locator("#unresolved li")).to_have_text("the design doc")
    await expect(page.locator("#graph .node.missing")).to_have_count(1)
    await page.screenshot(path=artifact("graph.png"))

    # Colours follow live events.
    await move(assignee, "acceptTask", b)
    node = page.locator(f'#graph a[data-task-id="{b}"]')
    await expect(node).to_have_class("node state-accepted")
    await expect(node.locator(".state-text")).to_have_text("Accepted")


async def test_a_dropped_socket_reconnects_and_shows_what_it_missed(
    page: Page, team: Team, live_server: LiveServer
) -> None:
    requester = await team.agent(f"{team.owner}/r")
    assignee = await team.agent(f"{team.owner}/a")
    task = (await hand_off(requester, team.project, f"{team.owner}/r", f"{team.owner}/a"))["task"]

    down = False
    sockets: list[WebSocketRoute] = []
    refused = asyncio.Event()

    async def handler(ws: WebSocketRoute) -> None:
        if down:  # the network is out: refuse, and the page retries
            await ws.close(code=1013, reason="Try again later")
            refused.set()
            return
        ws.connect_to_server()
        sockets.append(ws)

    await page.route_web_socket("**/graphql", handler)
    await sign_in(page, live_server.url, team.owner_token)
    await expect(page.locator("#live")).to_have_text("Live")
    await expect(card(page, "routed", task["id"])).to_be_visible()

    down = True
    await sockets[-1].close(code=1001, reason="Going away")
    await expect(page.locator("#live")).to_have_text("Reconnecting…")
    missed = []
    missed += (await move(assignee, "acceptTask", task["id"]))["events"]
    missed += (await move(assignee, "startTask", task["id"]))["events"]
    second = await hand_off(requester, team.project, f"{team.owner}/r", f"{team.owner}/a")
    missed += second["events"]
    # The page tries again after these committed and is refused: it cannot have heard of them.
    refused.clear()
    await asyncio.wait_for(refused.wait(), 30)
    assert await card(page, "routed", task["id"]).count() == 1  # read now, not awaited
    assert await card(page, "working", task["id"]).count() == 0
    assert await card(page, "routed", second["task"]["id"]).count() == 0
    await expect(page.locator("#live")).to_have_text("Reconnecting…")
    await page.screenshot(path=artifact("reconnecting.png"))

    down = False
    await expect(page.locator("#live")).to_have_text("Live", timeout=15_000)
    await expect(card(page, "working", task["id"])).to_be_visible()
    await expect(card(page, "routed", second["task"]["id"])).to_be_visible()
    await expect(card(page, "routed", task["id"])).to_have_count(0)
    for event in missed:  # each missed event shown once: no gap, no duplicate
        await expect(page.locator(f'#activity li[data-event-id="{event["id"]}"]')).to_have_count(1)
    assert len(sockets) == 2
    await page.screenshot(path=artifact("reconnected.png"))


async def test_keyboard_alone_signs_in_opens_a_task_and_makes_a_move(
    page: Page, team: Team, live_server: LiveServer
) -> None:
    requester = await team.agent(f"{team.owner}/r")
    task = (await hand_off(requester, team.project, f"{team.owner}/r", f"{team.owner}/a"))["task"]
    await page.goto(live_server.url)
    await expect(page.locator("#token")).to_be_focused()  # the form is ready to type into
    await page.keyboard.type(team.owner_token)
    await page.keyboard.press("Enter")
    await page.wait_for_selector("#view[data-ready]")
    link = page.locator(f'li[data-task-id="{task["id"]}"] a.title')
    await link.focus()
    await page.keyboard.press("Enter")
    await page.wait_for_selector("#view[data-ready] button.move")
    # Tab to the first move, open its dialog, leave it with Escape, then accept.
    cancel = page.locator('button.move[data-move="CANCEL"]')
    await cancel.focus()
    await page.keyboard.press("Enter")
    dialog = page.locator("dialog[open]")
    await expect(dialog.get_by_label("Reason (optional)")).to_be_visible()
    await page.keyboard.press("Escape")
    await expect(dialog).to_have_count(0)
    await page.locator('button.move[data-move="ACCEPT"]').focus()
    await page.keyboard.press("Enter")
    await expect(page.locator(".task-head .badge.state")).to_have_text("Accepted")
    # Every form control on the board has a label.
    await page.goto(f"{live_server.url}/#/board")
    await page.wait_for_selector("#view[data-ready]")
    unlabelled = await page.evaluate(
        """() => [...document.querySelectorAll("input, select, textarea")]
             .filter((el) => !el.labels?.length && !el.getAttribute("aria-label"))
             .map((el) => el.id || el.name)"""
    )
    assert unlabelled == []
