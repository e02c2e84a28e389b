"""What a newcomer tripped over on the board, checked in a real Chromium against `baton serve`:
the runs view shows what the API returns, the board fits a laptop screen, dialogs behave, counts
read as words, and an owner is told when a button acts for one of its agents."""

from __future__ import annotations

from typing import Any

from playwright.async_api import Page, expect

from baton.access.principals import Principal, PrincipalKind
from tests.board.conftest import Team, artifact, hand_off, move, sign_in
from tests.board.test_runs import drive, input_types
from tests.conftest import LiveServer

CHECKPOINTS = (
    "plans_complete",
    "generation_complete",
    "verification_complete",
    "reviews_addressed",
    "summary_complete",
)


async def test_the_runs_view_shows_failures_answers_pull_requests_and_status_colours(
    page: Page, team: Team, live_server: LiveServer
) -> None:
    owner = await team.as_owner(team.owner)
    runner = await team.agent(f"{team.owner}/runner")
    types = await input_types(runner)

    async def run(title: str, *steps: tuple[str, dict[str, Any]]) -> str:
        made = await drive(owner, types, "createRun", project=team.project, title=title)
        for mutation, fields in steps:
            who = owner if mutation == "provideUserInput" else runner
            await drive(who, types, mutation, id=made["id"], **fields)
        return str(made["id"])

    failed = await run(
        "Failing run",
        ("claimRun", {}),
        ("failRun", {"reason": "tests failed: 3 of 120 (auth suite)"}),
    )
    reviewed = await run(
        "Run in review",
        ("claimRun", {}),
        *(("reachCheckpoint", {"checkpoint": c}) for c in CHECKPOINTS),
        ("openPullRequest", {"url": "https://example.org/acme/web/pull/7"}),
    )
    done = await run(
        "Completed run",
        ("claimRun", {}),
        *(("reachCheckpoint", {"checkpoint": c}) for c in CHECKPOINTS),
        ("openPullRequest", {"url": "https://example.org/acme/web/pull/8"}),
        ("mergePullRequest", {}),
    )
    asking = await run(
        "Asking run",
        ("claimRun", {}),
        ("requestUserInput", {"questions": ["Which branch?", "Squash the commits?"]}),
    )
    fresh = await run("Fresh run")

    await sign_in(page, live_server.url, team.owner_token, "#/runs")

    def item(run_id: str):  # type: ignore[no-untyped-def]
        return page.locator(f'#runs li[data-run-id="{run_id}"]')

    # Why a run failed.
    await expect(item(failed).locator(".run-failure")).to_have_text(
        "Why it failed: tests failed: 3 of 120 (auth suite)"
    )
    # The pull request, as a link.
    link = item(reviewed).locator(".run-pr a")
    await expect(link).to_have_attribute("href", "https://example.org/acme/web/pull/7")

    # A completed run says "Done" once, and its steps are all reached; no step is "none".
    await expect(item(done).locator(".meta .badge")).to_have_count(1)
    await expect(item(done).locator(".meta .badge")).to_have_text("Done")
    steps = item(done).locator(".steps li")
    await expect(steps).to_have_count(7)
    await expect(item(done).locator(".steps li.done")).to_have_count(7)
    await expect(steps.first).to_contain_text("plans complete")
    await expect(page.locator('.steps li[data-checkpoint="none"]')).to_have_count(0)
    # A fresh run waits in the queue: nothing reached, nothing being worked towards yet.
    await expect(item(fresh).locator(".steps li.done")).to_have_count(0)
    await expect(item(fresh).locator(".steps li.current")).to_have_count(0)
    await expect(item(fresh).locator(".steps li.todo").first).to_contain_text("○ plans complete")

    # Each status has its own colour ("Failed" is not the blue of "In review").
    colours = {}
    for run_id in (failed, reviewed, done, asking, fresh):
        badge = item(run_id).locator(".run-status")
        colours[run_id] = await badge.evaluate("el => getComputedStyle(el).backgroundColor")
    assert len(set(colours.values())) == 5, colours

    # Answers stay on the page with their questions once they are sent.
    await item(asking).get_by_label("Which branch?").fill("main")
    await item(asking).get_by_label("Squash the commits?").fill("yes")
    await item(asking).get_by_role("button", name="Send answers").click()
    await expect(item(asking)).to_have_attribute("data-status", "backlog")
    answers = item(asking).locator(".qa")
    await expect(answers).to_contain_text("Which branch?")
    await expect(answers.locator("dd").first).to_have_text("main")
    await expect(answers.locator("dd").nth(1)).to_have_text("yes")
    await page.screenshot(path=artifact("runs-first-hour.png"), full_page=True)


async def test_at_1400_px_every_column_and_the_activity_placeholder_are_in_sight(
    page: Page, team: Team, live_server: LiveServer
) -> None:
    await page.set_viewport_size({"width": 1400, "height": 900})
    requester = await team.agent(f"{team.owner}/r")
    for n in range(12):  # a long column must not push the others away
        await hand_off(
            requester, team.project, f"{team.owner}/r", f"{team.owner}/a", title=f"Task {n}"
        )
    await sign_in(page, live_server.url, team.owner_token)
    columns = page.locator("section.column")
    await expect(columns).to_have_count(10)
    for i in range(10):
        box = await columns.nth(i).bounding_box()
        heading = await columns.nth(i).locator("h2").bounding_box()
        assert box is not None and heading is not None
        name = await columns.nth(i).get_attribute("data-state")
        assert box["x"] >= 0 and box["x"] + box["width"] <= 1400, (name, box)
        assert heading["y"] + heading["height"] <= 900, (name, heading)  # without scrolling
    assert await page.evaluate("document.documentElement.scrollWidth <= innerWidth")
    # An empty column says so.
    await expect(page.locator('section[data-state="completed"] .none')).to_be_visible()
    await expect(page.locator('section[data-state="routed"] .none')).to_be_hidden()

    # The live activity box explains itself while empty, and fills as things happen.
    placeholder = page.locator("#activity-empty")
    await expect(placeholder).to_be_visible()
    await expect(placeholder).to_contain_text("appear here as they happen")
    await page.screenshot(path=artifact("board-1400.png"))
    await hand_off(requester, team.project, f"{team.owner}/r", f"{team.owner}/a")
    await expect(page.locator("#activity li")).to_have_count(2)  # handed off, routed by the gate
    await expect(placeholder).to_be_hidden()


async def test_a_dialog_left_open_is_cancelled_by_back(
    page: Page, team: Team, live_server: LiveServer
) -> None:
    requester = await team.agent(f"{team.owner}/r")
    task = (await hand_off(requester, team.project, f"{team.owner}/r", f"{team.owner}/a"))["task"]
    await sign_in(page, live_server.url, team.owner_token)
    await page.locator(f'li[data-task-id="{task["id"]}"] a.title').click()
    await page.wait_for_selector("#view[data-ready] button.move")
    await page.locator('button.move[data-move="CANCEL"]').click()
    await expect(page.locator("dialog[open]")).to_have_count(1)
    await page.go_back()
    await expect(page.locator("dialog")).to_have_count(0)
    await expect(page.locator("section.column")).to_have_count(10)  # the board again
    still = await requester("query($id: ID!) { task(id: $id) { state } }", id=task["id"])
    assert still["task"]["state"] == "routed"  # nothing was cancelled


async def test_the_submit_form_keeps_its_buttons_in_sight(
    page: Page, team: Team, live_server: LiveServer
) -> None:
    await page.set_viewport_size({"width": 1280, "height": 720})
    requester = await team.agent(f"{team.owner}/r")
    assignee = await team.agent(f"{team.owner}/a")
    task = (await hand_off(requester, team.project, f"{team.owner}/r", f"{team.owner}/a"))["task"]
    await move(assignee, "acceptTask", task["id"])
    await move(assignee, "startTask", task["id"])
    await sign_in(page, live_server.url, team.owner_token, f"#/task/{task['id']}")
    await page.locator('button.move[data-move="SUBMIT_RESULT"]').click()
    dialog = page.locator("dialog[open]")
    await dialog.get_by_role("button", name="Add to evidence").click()  # a longer form still
    for name in ("Cancel", "Submit result"):
        button = dialog.get_by_role("button", name=name, exact=True)
        box = await button.bounding_box()
        assert box is not None and box["y"] >= 0 and box["y"] + box["height"] <= 720, (name, box)
    # The fields scroll between the title and the buttons.
    body = dialog.locator(".dialog-body")
    assert await body.evaluate("el => el.scrollHeight > el.clientHeight")
    await page.screenshot(path=artifact("submit-dialog.png"))
    await dialog.get_by_label("Summary").first.fill("Done")
    await dialog.get_by_label("Summary").nth(1).fill("All green")
    await dialog.get_by_label("Summary").nth(2).fill("Screenshots")
    await dialog.get_by_role("button", name="Submit result", exact=True).click()
    await expect(page.locator("#move-message")).to_contain_text("done")


async def test_an_owner_is_told_which_buttons_act_for_its_agents(
    page: Page, team: Team, live_server: LiveServer
) -> None:
    requester = await team.agent(f"{team.owner}/r")
    task = (await hand_off(requester, team.project, f"{team.owner}/r", f"{team.owner}/a"))["task"]
    await sign_in(page, live_server.url, team.owner_token, f"#/task/{task['id']}")
    accept = page.locator('button.move[data-move="ACCEPT"]')
    await expect(accept).to_have_attribute("data-acts-for", f"{team.owner}/a")
    await expect(accept).to_contain_text(f"for {team.owner}/a")
    cancel = page.locator('button.move[data-move="CANCEL"]')
    await expect(cancel).to_have_attribute("data-acts-for", f"{team.owner}/r")
    note = page.locator("#acting-for")
    await expect(note).to_contain_text(f"signed in as {team.owner} (owner)")
    await expect(note).to_contain_text(f"records it as made by {team.owner}")
    await page.screenshot(path=artifact("task-acting-for.png"))

    # The agent itself sees its own buttons, with no such note.
    token = await live_server.token(Principal(PrincipalKind.AGENT, f"{team.owner}/a"))
    await page.locator("#sign-out").click()
    await sign_in(page, live_server.url, token, f"#/task/{task['id']}")
    await expect(page.locator('button.move[data-move="ACCEPT"]')).to_have_text("Accept")
    await expect(page.locator("#acting-for")).to_have_count(0)


async def test_the_graph_counts_in_words(page: Page, team: Team, live_server: LiveServer) -> None:
    requester = await team.agent(f"{team.owner}/r")
    a, b = f"{team.owner}_one", f"{team.owner}_two"
    await hand_off(
        requester, team.project, f"{team.owner}/r", f"{team.owner}/a", id="one", depends_on=[b]
    )
    await hand_off(
        requester, team.project, f"{team.owner}/r", f"{team.owner}/a", id="two", depends_on=[a]
    )
    await sign_in(page, live_server.url, team.owner_token, f"#/graph/{a}")
    summary = page.locator("#graph-summary")
    await expect(summary).to_contain_text("2 tasks, 2 dependencies, 1 cycle, 0 unresolved")
