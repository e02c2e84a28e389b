"""A blocking SendMessage waits for its task at most BATON_A2A_BLOCKING_SECONDS, then answers
with the task as it is (against `bounded_server`, which waits 1 s)."""

from __future__ import annotations

import time

import pytest

from baton.access.gate import GateDecision
from baton.settings import ConfigErrors, Settings
from tests.a2a.conftest import LIMITS, BoundedServer, a2a_client, agent_url, message, send, state
from tests.helpers import World

WAIT = float(LIMITS["BATON_A2A_BLOCKING_SECONDS"])
SLACK = 3.0  # a hand-off and a loaded machine; the default (10 s) is well past it


async def test_a_blocking_send_answers_after_the_configured_wait_with_the_task_as_it_is(
    bounded_server: BoundedServer, world: World, binding: str
) -> None:
    await world.decide(GateDecision.ALLOW)  # routed: not final, not interrupted
    token = await bounded_server.token(world.roles["requester"])
    async with a2a_client(agent_url(bounded_server, world.assignee), token, binding) as client:
        started = time.monotonic()
        answered = await send(
            client, message(data={"project": world.project}), return_immediately=False
        )
        took = time.monotonic() - started
    assert state(answered) == "TASK_STATE_SUBMITTED"
    assert WAIT <= took < WAIT + SLACK, took


def test_the_wait_is_a_setting_of_0_to_60_seconds() -> None:
    base = {"BATON_DATABASE_URL": "postgresql://u@db/x"}
    assert Settings.from_env(base).a2a_blocking_seconds == 10.0
    assert Settings.from_env({**base, "BATON_A2A_BLOCKING_SECONDS": "0"}).a2a_blocking_seconds == 0
    for bad in ("61", "-1", "soon"):
        with pytest.raises(ConfigErrors) as refused:
            Settings.from_env({**base, "BATON_A2A_BLOCKING_SECONDS": bad})
        [error] = refused.value.errors
        assert str(error).startswith("BATON_A2A_BLOCKING_SECONDS: ") and "\n" not in str(error)
