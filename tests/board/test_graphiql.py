"""GraphiQL and the board as a browser gets them: security headers, and GraphiQL opening ready
to use under its content security policy, in a real Chromium against `baton serve`."""

from __future__ import annotations

import re

import httpx
from playwright.async_api import Page, expect

from tests.board.conftest import Team, artifact, hand_off, sign_in
from tests.conftest import LiveServer

# Reports every CSP violation in the page to the console, where the test collects them.
WATCH_CSP = """
document.addEventListener("securitypolicyviolation", (e) =>
  console.log(`csp-violation ${e.violatedDirective} ${e.blockedURI}`));
"""


def directives(policy: str) -> dict[str, str]:
    out = {}
    for part in policy.split(";"):
        name, _, value = part.strip().partition(" ")
        if name:
            out[name] = value
    return out


async def test_graphiql_and_the_board_carry_a_strict_policy_and_refuse_framing(
    live_server: LiveServer,
) -> None:
    async with httpx.AsyncClient(base_url=live_server.url) as http:
        graphiql = await http.get("/graphql", headers={"accept": "text/html"})
        assert graphiql.status_code == 200
        policy = directives(graphiql.headers["content-security-policy"])
        assert policy["default-src"] == "'self'"
        assert policy["script-src"] == "'self'"  # no inline script, no eval
        assert policy["style-src"] == "'self'"
        assert policy["connect-src"] == "'self'"
        assert policy["frame-ancestors"] == "'none'"
        assert policy["object-src"] == "'none'" and policy["base-uri"] == "'none'"
        assert graphiql.headers["x-frame-options"] == "DENY"
        assert graphiql.headers["x-content-type-options"] == "nosniff"
        # Nothing inline that the policy would have to allow.
        assert "<style" not in graphiql.text
        assert all("src=" in tag for tag in re.findall(r"<script[^>]*>", graphiql.text))
        assert not re.search(r"\son\w+=", graphiql.text)  # no inline event handlers

        for path in ("/", "/board"):
            board = await http.get(path)
            policy = directives(board.headers["content-security-policy"])
            assert policy["frame-ancestors"] == "'none'", path
            assert policy["script-src"] == "'self'" and policy["default-src"] == "'self'", path
            assert board.headers["x-frame-options"] == "DENY", path

        icon = await http.get("/favicon.ico")
        assert icon.status_code == 200
        assert icon.headers["content-type"] == "image/x-icon"
        assert icon.content[:4] == b"\x00\x00\x01\x00"  # an ICO file
        assert '<link rel="icon" href="/favicon.ico">' in graphiql.text


async def test_neither_page_can_be_framed(page: Page, live_server: LiveServer) -> None:
    """Framed from another document, Chromium refuses both pages; /healthz (no policy) is the
    control that framing works at all."""
    await page.set_content(
        f'<iframe src="{live_server.url}/graphql"></iframe>'
        f'<iframe src="{live_server.url}/"></iframe>'
        f'<iframe src="{live_server.url}/healthz"></iframe>'
    )
    await page.wait_for_load_state("load")
    urls = [frame.url for frame in page.frames[1:]]
    assert len(urls) == 3, urls
    assert urls[0].startswith("chrome-error:") and urls[1].startswith("chrome-error:"), urls
    assert urls[2] == f"{live_server.url}/healthz"


async def editor(page: Page, which: str, text: str) -> None:
    """Sets a GraphiQL editor's text ("query" or "headers") as typing would."""
    selector = (
        ".graphiql-query-editor .CodeMirror"
        if which == "query"
        else ".graphiql-editor-tool .graphiql-editor:not(.hidden) .CodeMirror"
    )
    await page.locator(selector).evaluate("(el, text) => el.CodeMirror.setValue(text)", text)
    if which == "query":
        # GraphiQL parses the query after a short pause, then stores it: until then a click on
        # Run would send the previous document's kind (a subscription over HTTP).
        await page.wait_for_function(
            "text => localStorage.getItem('graphiql:query') === text", arg=text
        )


async def test_graphiql_asks_once_fetches_the_schema_and_keeps_the_token_for_the_tab(
    page: Page, team: Team, live_server: LiveServer
) -> None:
    violations: list[str] = []
    page.on(
        "console",
        lambda m: violations.append(m.text) if m.text.startswith("csp-violation") else None,
    )
    await page.add_init_script(WATCH_CSP)
    await page.goto(f"{live_server.url}/graphql")

    # Asked for a token first; a wrong one is said at once.
    await page.fill("#token", "baton_not-a-token")
    await page.click("button[type=submit]")
    await expect(page.locator("#token-error")).to_contain_text("not accepted")
    await page.fill("#token", team.owner_token)
    await page.click("button[type=submit]")

    # Ready without a Re-fetch: the Docs explorer has the schema.
    docs = page.locator(".graphiql-doc-explorer")
    await page.get_by_role("button", name="Show Documentation Explorer").click()
    await expect(docs).to_contain_text("Root Types")
    await expect(docs).not_to_contain_text("Error fetching schema")
    await editor(page, "query", "{ viewer { kind handle } }")
    await page.locator(".graphiql-execute-button").click()
    result = page.locator(".result-window")
    await expect(result).to_contain_text(f'"handle": "{team.owner}"')
    await page.screenshot(path=artifact("graphiql.png"))

    # A reload keeps the token: no question, the schema again.
    await page.reload()
    await page.get_by_role("button", name="Show Documentation Explorer").click()
    await expect(page.locator(".graphiql-doc-explorer")).to_contain_text("Root Types")
    await expect(page.locator("#token")).to_have_count(0)

    # A changed header fetches the schema again with it: refused, then accepted.
    await editor(page, "headers", '{"Authorization": "Bearer baton_wrong"}')
    await expect(docs).to_contain_text("Error fetching schema")
    await editor(page, "headers", f'{{"Authorization": "Bearer {team.owner_token}"}}')
    await expect(docs).to_contain_text("Root Types")
    await expect(docs).not_to_contain_text("Error fetching schema")

    # Subscriptions over the WebSocket, under the same policy.
    await editor(page, "query", "subscription { taskEvents { kind toState task { project } } }")
    await page.locator(".graphiql-execute-button").click()
    agent = await team.agent(f"{team.owner}/r")
    for _ in range(20):  # until the subscription is listening: each hand-off is one event
        await hand_off(agent, team.project, f"{team.owner}/r", f"{team.owner}/a")
        try:
            await expect(result).to_contain_text(f'"project": "{team.project}"', timeout=500)
            break
        except AssertionError:
            continue
    await expect(result).to_contain_text(f'"project": "{team.project}"')
    assert violations == [], violations


async def test_graphiql_uses_the_token_the_board_signed_in_with(
    page: Page, team: Team, live_server: LiveServer
) -> None:
    await sign_in(page, live_server.url, team.owner_token)
    await page.get_by_role("link", name="GraphiQL").click()
    await page.get_by_role("button", name="Show Documentation Explorer").click()
    await expect(page.locator(".graphiql-doc-explorer")).to_contain_text("Root Types")
    await expect(page.locator("#token")).to_have_count(0)
    headers = await page.evaluate("sessionStorage.getItem('baton.token')")
    assert headers == team.owner_token


async def test_signing_out_of_the_board_forgets_graphiqls_headers_too(
    page: Page, team: Team, live_server: LiveServer
) -> None:
    await sign_in(page, live_server.url, team.owner_token)
    await page.goto(f"{live_server.url}/graphql")
    await editor(page, "headers", f'{{"Authorization": "Bearer {team.owner_token}", "X-A": "1"}}')
    await page.wait_for_function("() => sessionStorage.getItem('baton.graphiql.headers') !== null")
    await page.goto(f"{live_server.url}/")
    await page.wait_for_selector("#view[data-ready]")
    await page.click("#sign-out")
    assert await page.evaluate("sessionStorage.length") == 0
    await page.goto(f"{live_server.url}/graphql")
    await expect(page.locator("#token")).to_be_visible()  # asked again
