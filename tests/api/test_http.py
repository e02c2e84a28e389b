"""The HTTP edge of a running `baton serve`: health, auth, and the error envelope."""

from __future__ import annotations

import re
from importlib import resources

import httpx

from baton.access.principals import ADMIN
from tests.conftest import LiveServer
from tests.helpers import PACKET_INPUT, agent, owner


async def test_health_needs_no_token(live_server: LiveServer) -> None:
    async with httpx.AsyncClient(base_url=live_server.url) as client:
        assert (await client.get("/healthz")).status_code == 200
        ready = await client.get("/readyz")
        assert ready.status_code == 200
        assert ready.json()["status"] == "ready"


async def test_graphql_without_a_valid_token_is_401_and_runs_nothing(
    live_server: LiveServer,
) -> None:
    async with httpx.AsyncClient(base_url=live_server.url) as client:
        for headers in ({}, {"Authorization": "Bearer baton_nope"}, {"Authorization": "Basic x"}):
            response = await client.post(
                "/graphql", json={"query": "{ viewer { handle } }"}, headers=headers
            )
            assert response.status_code == 401
            assert response.json()["errors"][0]["extensions"]["code"] == "unauthenticated"


async def test_viewer_is_the_tokens_principal(live_server: LiveServer) -> None:
    token = await live_server.token(owner("httpowner"))
    async with httpx.AsyncClient(base_url=live_server.url) as client:
        response = await client.post(
            "/graphql",
            json={"query": "{ viewer { kind handle owner } }"},
            headers={"Authorization": f"Bearer {token}"},
        )
    assert response.status_code == 200
    assert response.json() == {
        "data": {"viewer": {"kind": "OWNER", "handle": "httpowner", "owner": "httpowner"}}
    }


async def test_metrics_count_requests_and_move_outcomes(live_server: LiveServer) -> None:
    token = await live_server.token(agent("metricsowner/a"))
    mutation = """mutation($packet: PacketInput!) {
        handOff(input: {project: "m", requester: "metricsowner/a", assignee: "metricsowner/b",
                        packet: $packet}) { __typename } }"""
    async with httpx.AsyncClient(base_url=live_server.url) as client:
        answer = await client.post(
            "/graphql",
            json={"query": mutation, "variables": {"packet": PACKET_INPUT}},
            headers={"Authorization": f"Bearer {token}"},
        )
        assert answer.json()["data"]["handOff"]["__typename"] == "HandOffSuccess"
        admin = await live_server.token(ADMIN)
        metrics = (await client.get("/metrics", headers={"Authorization": f"Bearer {admin}"})).text
    samples = dict(
        line.rsplit(" ", 1) for line in metrics.splitlines() if line and not line.startswith("#")
    )
    assert float(samples['baton_moves_total{mutation="handOff",outcome="ok"}']) >= 1
    assert float(samples['baton_http_requests_total{path="/graphql",status="200"}']) >= 1


async def test_metrics_need_an_admin_token_by_default(live_server: LiveServer) -> None:
    async with httpx.AsyncClient(base_url=live_server.url) as client:
        assert (await client.get("/metrics")).status_code == 401
        for principal, status in ((owner("metricsowner"), 403), (ADMIN, 200)):
            token = await live_server.token(principal)
            answer = await client.get("/metrics", headers={"Authorization": f"Bearer {token}"})
            assert answer.status_code == status, answer.text
        assert "baton_http_requests_total" in answer.text
        nope = await client.get("/metrics", headers={"Authorization": "Bearer baton_nope"})
        assert nope.status_code == 401
        assert "baton_http_requests_total" not in nope.text


async def test_readyz_tells_its_reason_in_fixed_words(live_server: LiveServer) -> None:
    """Ready, it names the revision only; unready answers are tested with the database cut
    (tests/api/test_readyz.py)."""
    async with httpx.AsyncClient(base_url=live_server.url) as client:
        ready = (await client.get("/readyz")).json()
    assert set(ready) == {"status", "revision"}


async def test_graphiql_is_served_to_a_browser_without_a_token(live_server: LiveServer) -> None:
    async with httpx.AsyncClient(base_url=live_server.url) as client:
        page = await client.get("/graphql", headers={"Accept": "text/html"})
        assert page.status_code == 200
        assert "graphiql" in page.text.lower()

        # Every script and stylesheet is the server's own, and each is served.
        references = re.findall(r'(?:src|href)="([^"]+)"', page.text)
        assert references, page.text
        assert all(ref.startswith("/") and not ref.startswith("//") for ref in references)
        assert "http://" not in page.text and "https://" not in page.text
        assert (await client.get("/favicon.ico")).status_code == 200  # the board serves it
        for ref in (ref for ref in references if ref != "/favicon.ico"):
            asset = await client.get(ref)
            assert asset.status_code == 200, ref
            kind = "text/css" if ref.endswith(".css") else "text/javascript"
            assert asset.headers["content-type"].startswith(kind), ref
            name = ref.rsplit("/", 1)[1]
            packaged = resources.files("baton.web").joinpath("static", "graphiql", name)
            assert asset.content == packaged.read_bytes(), ref
        assert (await client.get("/graphiql/LICENSE.react")).status_code == 404
        assert (await client.get("/graphiql/..%2Fgraphiql.py")).status_code == 404

        # The headers pane starts with the tab's token as an Authorization header (the
        # browser checks in tests/board/test_graphiql.py run it).
        start = (await client.get("/graphiql/start.js")).text
        assert 'Authorization: "Bearer " + token' in start
        # A query by GET still needs the token.
        query = await client.get("/graphql", params={"query": "{ viewer { handle } }"})
        assert query.status_code == 401
