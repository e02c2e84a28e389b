"""The A2A door is loaded on its first request: building the app imports none of the A2A SDK,
and the first requests, however many at once, are answered by the door once it is loaded,
while the server answers other requests (a real app served by uvicorn, in a process of its
own so that nothing else has imported the SDK before)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from baton.a2a import deferred, push

PROGRAM = textwrap.dedent(
    """
    import asyncio, sys
    import httpx
    from baton.app import create_app
    from baton.settings import Settings
    from tests.helpers import uvicorn_serving

    def sdk():
        return sorted(m for m in sys.modules if m == "a2a" or m.startswith("a2a."))

    app = create_app(Settings(database_url="postgresql://nowhere/x"), run_migrations=False)
    print("at start:", sdk()[:5])

    async def main():
        async with uvicorn_serving(app) as port, httpx.AsyncClient(
            base_url=f"http://127.0.0.1:{port}", timeout=60
        ) as http:
            card = "/a2a/agents/bob/coder/.well-known/agent-card.json"
            cards = [http.get(card) for _ in range(4)]
            answers = await asyncio.gather(*cards, http.get("/healthz"))
        assert [a.status_code for a in answers] == [200] * 5, answers
        assert len({a.text for a in answers[:4]}) == 1
        assert answers[0].json()["name"] == "bob/coder"
        print("after:", "a2a.server.request_handlers" in sys.modules)

    asyncio.run(main())
    """
)


def test_the_sdk_is_imported_by_the_first_a2a_request_not_by_the_start() -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["at start: []", "after: True"], done.stdout


def test_push_notifications_carry_the_token_in_the_header_push_names() -> None:
    assert deferred.TOKEN_HEADER == push.TOKEN_HEADER
