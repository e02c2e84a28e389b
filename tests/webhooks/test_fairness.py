"""One owner's hanging receivers slow only that owner: delivery slots are shared between owners,
pings are bounded per endpoint, and a failed ping counts against its endpoint like any message.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from baton.access.principals import Principal, PrincipalKind
from baton.access.tokens import create_token
from baton.services.tasks import TaskService
from baton.store.webhooks import MAX_ENDPOINTS, MAX_PENDING_MANUAL
from baton.webhooks import fairness
from tests.conftest import start_server, stop_server
from tests.helpers import World
from tests.webhooks.conftest import FAST, Receiver, create_endpoint, graphql, own_database
from tests.webhooks.test_delivery import endpoint_state, eventually, verified

PING = """mutation($id: ID!) { pingWebhookEndpoint(input: {id: $id}) {
    __typename ... on WebhookDeliverySuccess { delivery { id status } }
    ... on InvalidInputError { field message } } }"""


def owner(handle: str) -> Principal:
    return Principal(PrincipalKind.OWNER, handle)


async def ping(url: str, token: str, endpoint_id: str) -> dict[str, Any]:
    answer = await graphql(url, token, PING, {"id": endpoint_id})
    return answer["pingWebhookEndpoint"]  # type: ignore[no-any-return]


@asynccontextmanager
async def serve(
    server_url: str, tmp_path: Path, **settings: str
) -> AsyncIterator[tuple[str, World]]:
    """A `baton serve` of its own on a database of its own (FAST, then `settings`)."""
    async with own_database(server_url) as (database_url, db):
        env = {"BATON_DATABASE_URL": database_url, **FAST, **settings}
        url, process = await asyncio.to_thread(start_server, env, tmp_path / "serve.log")
        try:
            yield f"{url}/graphql", World(TaskService(db))
        finally:
            await asyncio.to_thread(stop_server, process)


# --- sharing slots: the rule itself ------------------------------------------------------------


def test_an_owner_alone_takes_all_but_a_share_of_the_slots() -> None:
    hog = [(f"h{n}", "hog") for n in range(20)]
    picked = fairness.pick(hog, {}, 16, 16)
    assert len(picked) == 12 == 16 - fairness.share(16)
    assert picked == [f"h{n}" for n in range(12)]  # in the order found


def test_an_owner_under_its_share_gets_a_free_slot_before_one_over_it() -> None:
    # The hog holds 12 slots; the four free go to others first, however many the hog has due.
    candidates = [("h12", "hog"), ("v0", "victim"), ("h13", "hog"), ("w0", "witness")]
    assert fairness.pick(candidates, {"hog": 12}, 4, 16) == ["v0", "w0"]
    # Slots go round-robin: the owner holding the fewest first.
    candidates = [("a1", "a"), ("a2", "a"), ("b1", "b"), ("c1", "c"), ("c2", "c")]
    assert fairness.pick(candidates, {"a": 1}, 4, 16) == ["b1", "c1", "a1", "c2"]


def test_two_busy_owners_leave_a_share_free_for_a_third() -> None:
    candidates = [(f"{o}{n}", o) for n in range(20) for o in ("a", "b")]
    picked = fairness.pick(candidates, {}, 16, 16)
    assert len(picked) == 12
    assert sum(1 for p in picked if p.startswith("a")) == 6
    # A third owner's endpoint then gets one of the four slots left at once.
    assert fairness.pick([("c0", "c"), ("a6", "a")], {"a": 6, "b": 6}, 4, 16) == ["c0"]


@pytest.mark.parametrize("concurrency", [1, 2, 3, 4, 16, 1000])
def test_every_concurrency_lets_an_owner_deliver(concurrency: int) -> None:
    assert 1 <= fairness.share(concurrency) <= concurrency
    assert fairness.pick([("x", "o")], {}, concurrency, concurrency) == ["x"]


# --- end to end -----------------------------------------------------------------------------


@pytest.fixture
async def patient(server_url: str, tmp_path: Path) -> AsyncIterator[tuple[str, World]]:
    """Attempts wait 10 s for an answer (the default), so a hanging one is still hanging
    when the test has made its point."""
    async with serve(server_url, tmp_path, BATON_WEBHOOK_TIMEOUT_SECONDS="10") as found:
        yield found


async def test_another_owners_message_arrives_while_one_owners_20_endpoints_hang(
    patient: tuple[str, World], receiver: Receiver
) -> None:
    """One owner's 20 endpoints all hang, four pings queued at each: 80 attempts that would
    each hold a slot until they time out, against 16 slots. The owner alone gets all but a
    share of them (12); another owner's message is delivered while every one of those is still
    hanging: before any hanging attempt ended."""
    url, world = patient
    db = world.service.db
    hog = await create_token(db, owner(f"hog{world.tag}"))
    victim = await create_token(db, owner(world.req_owner))
    ids = []
    for n in range(MAX_ENDPOINTS):
        path = f"/hang{n}"
        receiver.holds[path] = asyncio.Event()  # never answered during the test
        made = await create_endpoint(url, hog, receiver.at(path), runEvents={})
        ids.append(made["endpoint"]["id"])
    pings = await asyncio.gather(*(ping(url, hog, id) for id in ids for _ in range(4)))
    assert {p["__typename"] for p in pings} == {"WebhookDeliverySuccess"}
    hanging = [f"/hang{n}" for n in range(MAX_ENDPOINTS)]

    async def held() -> int:
        return sum(len(receiver.got[p]) for p in hanging)

    alone = 16 - fairness.share(16)
    await eventually(lambda: _at_least(held, alone))
    made = await create_endpoint(url, victim, receiver.at("/victim"))
    await world.hand_off()
    message = (await receiver.wait_for("/victim", 1))[0]
    assert verified(made["secret"], message)["data"]["taskEvents"]["toState"] == "requested"
    ended = [at for p in hanging for at in receiver.ended[p]]
    assert ended == [] or min(ended) > message.at, "a hanging attempt ended first"
    in_flight = sum(1 for p in hanging for r in receiver.got[p] if r.at < message.at)
    assert in_flight == alone  # every one of them still hanging


async def _at_least(count: Any, n: int) -> bool:
    return bool(await count() >= n)


SET_ENABLED = """mutation($id: ID!, $e: Boolean!) {
    updateWebhookEndpoint(input: {id: $id, enabled: $e}) { __typename } }"""


@pytest.mark.parametrize("enabled", [True, False], ids=["enabled", "disabled by its owner"])
async def test_a_hanging_ping_holds_its_slot_for_one_timeout_and_the_endpoint_backs_off(
    server_url: str, tmp_path: Path, receiver: Receiver, enabled: bool
) -> None:
    """Four pings queued at a hanging endpoint: the first times out (2 s), counts as a failure
    and the endpoint backs off (the first retry is a minute away here); the other three wait
    for it rather than each holding a slot for another timeout. Pings to a disabled endpoint
    back off alike."""
    async with serve(server_url, tmp_path, BATON_WEBHOOK_RETRY_SECONDS="60") as (url, world):
        token = await create_token(world.service.db, owner(world.req_owner))
        receiver.holds["/slow"] = asyncio.Event()
        made = await create_endpoint(url, token, receiver.at("/slow"))
        endpoint_id = made["endpoint"]["id"]
        if not enabled:
            await graphql(url, token, SET_ENABLED, {"id": endpoint_id, "e": False})
        for _ in range(4):
            assert (await ping(url, token, endpoint_id))["__typename"] == "WebhookDeliverySuccess"

        async def failed() -> dict[str, Any] | None:
            state = await endpoint_state(url, token, endpoint_id)  # type: ignore[arg-type]
            return state if state["failures"] else None

        started = time.monotonic()
        state = await eventually(failed)
        assert len(receiver.got["/slow"]) == 1  # the one ping that timed out
        assert len(receiver.ended["/slow"]) == 1
        assert state["enabled"] is enabled
        assert state["failures"] == 1 and state["nextAttemptAt"]
        statuses = sorted(d["status"] for d in state["deliveries"])
        assert statuses == ["FAILED", "PENDING", "PENDING", "PENDING"]
        (attempted,) = [d for d in state["deliveries"] if d["status"] == "FAILED"]
        assert "no answer within 2 s" in attempted["lastError"]
        assert time.monotonic() - started < 50  # still before the retry: nothing else went
        assert len(receiver.got["/slow"]) == 1
        # Enabling starts a fresh schedule: the waiting pings go at once, now answered.
        receiver.holds["/slow"].set()
        for value in (False, True):
            await graphql(url, token, SET_ENABLED, {"id": endpoint_id, "e": value})
        await receiver.wait_for("/slow", 4)


async def test_pings_waiting_at_an_endpoint_are_bounded(
    webhook_server: Any, world: World, receiver: Receiver
) -> None:
    token = await webhook_server.token(owner(world.req_owner))
    receiver.holds["/bounded"] = asyncio.Event()
    made = await create_endpoint(webhook_server, token, receiver.at("/bounded"))
    endpoint_id = made["endpoint"]["id"]
    # Never answering: the first ping hangs (then fails, and the endpoint backs off); the
    # others wait, up to the bound.
    answers = [await ping(webhook_server.graphql, token, endpoint_id) for _ in range(12)]
    kinds = [a["__typename"] for a in answers]
    accepted = kinds.count("WebhookDeliverySuccess")
    assert accepted >= MAX_PENDING_MANUAL  # one may have been sent (failed) meanwhile
    refused = [a for a in answers if a["__typename"] == "InvalidInputError"]
    assert refused and refused[0]["field"] == "id"
    assert f"at most {MAX_PENDING_MANUAL} pings and redeliveries" in refused[0]["message"]
    pending = await webhook_server.db.fetchval(
        "SELECT count(*) FROM webhook_deliveries WHERE endpoint_id = $1 AND status = 'pending'",
        endpoint_id,
    )
    assert pending <= MAX_PENDING_MANUAL
    receiver.holds["/bounded"].set()


async def test_a_ping_answered_410_disables_the_endpoint(
    webhook_server: Any, world: World, receiver: Receiver
) -> None:
    token = await webhook_server.token(owner(world.req_owner))
    receiver.status["/ping-gone"] = 410
    made = await create_endpoint(webhook_server, token, receiver.at("/ping-gone"))
    endpoint_id = made["endpoint"]["id"]
    await ping(webhook_server.graphql, token, endpoint_id)

    async def disabled() -> dict[str, Any] | None:
        state = await endpoint_state(webhook_server, token, endpoint_id)
        return state if not state["enabled"] else None

    state = await eventually(disabled)
    assert state["disabledReason"] == "the receiver answered 410 Gone"
    (delivery,) = state["deliveries"]
    assert delivery["kind"] == "PING" and delivery["status"] == "FAILED"
    assert delivery["responseStatus"] == 410


async def test_a_redelivery_answered_410_disables_the_endpoint_too(
    webhook_server: Any, world: World, receiver: Receiver
) -> None:
    token = await webhook_server.token(owner(world.req_owner))
    made = await create_endpoint(
        webhook_server, token, receiver.at("/later-gone"), taskEvents={"states": ["requested"]}
    )
    endpoint_id = made["endpoint"]["id"]
    await world.hand_off()
    await receiver.wait_for("/later-gone", 1)

    async def delivered() -> dict[str, Any] | None:
        state = await endpoint_state(webhook_server, token, endpoint_id)
        done = [d for d in state["deliveries"] if d["status"] == "DELIVERED"]
        return done[0] if done else None

    delivery = await eventually(delivered)
    receiver.status["/later-gone"] = 410
    await graphql(
        webhook_server,
        token,
        "mutation($id: ID!) { redeliverWebhook(input: {deliveryId: $id}) { __typename } }",
        {"id": delivery["id"]},
    )

    async def disabled() -> dict[str, Any] | None:
        state = await endpoint_state(webhook_server, token, endpoint_id)
        return state if not state["enabled"] else None

    state = await eventually(disabled)
    assert state["disabledReason"] == "the receiver answered 410 Gone"
    assert len(receiver.got["/later-gone"]) == 2
