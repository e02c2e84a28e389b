"""The runs view in a real Chromium, against pipeline runs as API.md section 6 names them.

The view is feature-detected (it shows itself only when the schema has a `Run` type); the
schema has runs, so the test requires the type rather than skipping without it.
"""

from __future__ import annotations

from typing import Any

from playwright.async_api import Page, expect

from tests.board.conftest import Team, artifact, sign_in
from tests.conftest import LiveServer
from tests.live.client import HTTPClient

RUN = "id status checkpoint version"


async def input_types(client: HTTPClient) -> dict[str, str]:
    """Each mutation's `input` type name, so the test names no type the spec leaves open."""
    data = await client(
        '{ __type(name: "Mutation") {'
        " fields { name args { name type { name ofType { name } } } } } }"
    )
    out = {}
    for field in data["__type"]["fields"]:
        for arg in field["args"]:
            if arg["name"] == "input":
                out[field["name"]] = arg["type"]["name"] or arg["type"]["ofType"]["name"]
    return out


async def drive(client: HTTPClient, types: dict[str, str], mutation: str, **input: Any) -> Any:
    data = await client(
        f"""mutation($input: {types[mutation]}!) {{
          {mutation}(input: $input) {{
            __typename ... on RunMoveSuccess {{ run {{ {RUN} }} }} ... on Error {{ code message }}
          }}
        }}""",
        input=input,
    )
    result = data[mutation]
    assert result["__typename"] == "RunMoveSuccess", result
    return result["run"]


async def test_a_run_driven_through_its_checkpoints_fills_the_progress_bar(
    page: Page, team: Team, live_server: LiveServer
) -> None:
    owner = await team.as_owner(team.owner)
    assert (await owner('{ __type(name: "Run") { name } }'))["__type"] == {"name": "Run"}
    runner = await team.agent(f"{team.owner}/runner")
    types = await input_types(runner)
    run = await drive(runner, types, "createRun", project=team.project, title="Ship the board")
    await sign_in(page, live_server.url, team.owner_token, "#/runs")
    item = page.locator(f'#runs li[data-run-id="{run["id"]}"]')
    progress = item.locator("progress")
    await expect(progress).to_have_attribute("value", "0")
    await expect(item).to_contain_text("Backlog")
    # A run in the queue has reached nothing and nobody works towards anything yet.
    steps = item.locator("ol.steps li")
    await expect(steps).to_have_count(7)
    await expect(item.locator("ol.steps li.todo")).to_have_count(7)
    await expect(steps.first).to_contain_text("○")

    # The owner interrupts and resumes it from the page.
    await item.get_by_role("button", name="Interrupt run").click()
    await expect(item).to_have_attribute("data-status", "interrupted")
    await item.get_by_role("button", name="Resume run").click()
    await expect(item).to_have_attribute("data-status", "backlog")

    # The runner asks a question; the owner answers it on the page.
    run_id = run["id"]
    await drive(runner, types, "claimRun", id=run_id)
    # Claimed: the first checkpoint is the one being worked towards, and only it.
    await expect(item.locator("ol.steps li.current")).to_have_count(1)
    current = item.locator('ol.steps li.current[data-checkpoint="plans_complete"]')
    await expect(current).to_contain_text("◐")
    await expect(item.locator("ol.steps li.done")).to_have_count(0)
    await drive(runner, types, "requestUserInput", id=run_id, questions=["Which branch?"])
    await expect(item).to_contain_text("Needs your input")
    await item.get_by_label("Which branch?").fill("main")
    await item.get_by_role("button", name="Send answers").click()
    await expect(item).to_have_attribute("data-status", "backlog")

    # Then it runs to the end; the bar fills as the checkpoints are reached.
    await drive(runner, types, "claimRun", id=run_id)
    for checkpoint in (
        "plans_complete",
        "generation_complete",
        "verification_complete",
        "reviews_addressed",
        "summary_complete",
    ):
        await drive(runner, types, "reachCheckpoint", id=run_id, checkpoint=checkpoint)
    await expect(progress).to_have_attribute("value", "5")
    await drive(runner, types, "openPullRequest", id=run_id, url="https://example.org/pr/1")
    await drive(runner, types, "mergePullRequest", id=run_id)
    await expect(item).to_have_attribute("data-status", "completed")
    await expect(progress).to_have_attribute("value", "7")
    await expect(progress).to_have_attribute("max", "7")
    await page.screenshot(path=artifact("runs.png"), full_page=True)
