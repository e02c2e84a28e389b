"""/metrics on its own address, behind BATON_METRICS_TOKEN or an admin API token."""

from __future__ import annotations

import httpx

from baton.access.principals import ADMIN
from tests.conftest import TunedServer
from tests.helpers import owner


async def test_metrics_need_the_metrics_token_on_the_metrics_address(
    tuned_server: TunedServer,
) -> None:
    async with httpx.AsyncClient() as client:
        assert (await client.get(f"{tuned_server.url}/metrics")).status_code == 404
        assert (await client.get(f"{tuned_server.metrics_url}/metrics")).status_code == 401
        wrong = {"Authorization": "Bearer nope"}
        assert (
            await client.get(f"{tuned_server.metrics_url}/metrics", headers=wrong)
        ).status_code == 401
        right = {"Authorization": f"Bearer {tuned_server.metrics_token}"}
        metrics = await client.get(f"{tuned_server.metrics_url}/metrics", headers=right)
        assert metrics.status_code == 200
        assert "baton_http_requests_total" in metrics.text
        # An admin API token works there too; another principal's does not.
        admin = {"Authorization": f"Bearer {await tuned_server.token(ADMIN)}"}
        by_admin = await client.get(f"{tuned_server.metrics_url}/metrics", headers=admin)
        assert by_admin.status_code == 200
        agent = {"Authorization": f"Bearer {await tuned_server.token(owner('metricsaddr'))}"}
        by_agent = await client.get(f"{tuned_server.metrics_url}/metrics", headers=agent)
        assert by_agent.status_code == 403
        # The metrics address serves nothing else; the main one still serves the rest.
        assert (await client.get(f"{tuned_server.metrics_url}/healthz")).status_code == 404
        assert (await client.get(f"{tuned_server.url}/healthz")).status_code == 200
