"""An endpoint's URL is looked up and checked once for the messages of a turn (`attempt.Way`),
again once that look-up is `ROUTE_SECONDS` old or an attempt failed (each look-up is checked:
`resolve`, whose refusals `test_addresses` covers)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from baton.services import webhook_addresses
from baton.services.webhook_addresses import Address, Policy, Refused
from baton.webhooks import attempt
from tests.helpers import uvicorn_serving

LOCAL = Policy(allow_private=True, allow_http=True)


@pytest.fixture
def look_ups(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The hosts looked up, in order: the real look-up, counted."""
    seen: list[str] = []
    real = webhook_addresses._look_up

    async def counted(parts: webhook_addresses.SplitResult) -> list[Address]:
        seen.append(str(parts.hostname))
        return await real(parts)

    monkeypatch.setattr(webhook_addresses, "_look_up", counted)
    yield seen


def _app(statuses: list[int]) -> Starlette:
    async def handle(request: Request) -> Response:
        await request.body()
        return Response(b"", statuses.pop(0) if statuses else 200)

    return Starlette(routes=[Route("/{path:path}", handle, methods=["POST"])])


async def test_the_messages_of_a_turn_share_one_look_up(look_ups: list[str]) -> None:
    async with uvicorn_serving(_app([])) as port:
        client = attempt.client(2)
        way = attempt.Way(f"http://localhost:{port}/in", LOCAL)
        answers = [await attempt.send(client, way, {}, b"{}", 5) for _ in range(5)]
        client.close()
    assert all(a is not None and a.delivered for a in answers)
    assert look_ups == ["localhost"]


async def test_a_failed_attempt_and_an_old_look_up_are_looked_up_again(
    look_ups: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    async with uvicorn_serving(_app([200, 503, 200])) as port:
        client = attempt.client(2)
        way = attempt.Way(f"http://localhost:{port}/in", LOCAL)
        delivered = [
            (a is not None and a.delivered)
            for a in [await attempt.send(client, way, {}, b"{}", 5) for _ in range(3)]
        ]
        assert delivered == [True, False, True]
        assert look_ups == ["localhost", "localhost"]  # the 503 dropped the route
        monkeypatch.setattr(attempt, "ROUTE_SECONDS", 0.0)
        await attempt.send(client, way, {}, b"{}", 5)
        await attempt.send(client, way, {}, b"{}", 5)
        client.close()
    assert len(look_ups) == 4


def test_a_url_no_endpoint_may_have_is_refused_when_its_way_is_made() -> None:
    with pytest.raises(Refused):
        attempt.Way("http://localhost/in", Policy())  # http:// without the setting
