"""Endpoints scoped to one task (A2A's push notification configs), below the A2A door: who may
make, read and delete them, their bounds, and their delivery by the worker to a real receiver
(at least once, with the config's token and authentication, in the config's payload format,
until the task's final event)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

import orjson
import pytest

from baton.access.gate import GateDecision
from baton.access.principals import ADMIN
from baton.errors import Forbidden, InvalidInput, NotFound
from baton.protocol.handoff import HANDOFF, MoveName, TaskState
from baton.services.context import Context
from baton.services.task_webhooks import MAX_CONFIG_ID, Authentication, opened
from baton.services.webhook_addresses import Policy
from baton.services.webhooks import WebhookService
from baton.store import webhooks as store
from baton.store.records import EventRecord
from baton.store.webhooks import (
    MAX_ENDPOINTS_PER_TASK,
    MAX_TASK_ENDPOINTS,
    TASK_ENDED,
    EndpointRecord,
    PayloadFormat,
)
from baton.webhooks.formats import Format
from baton.webhooks.worker import message_id
from tests.helpers import World, agent, checkpoint, owner, result
from tests.webhooks.conftest import Receiver, own_database
from tests.webhooks.scoped import Deliveries, deliveries, eventually
from tests.webhooks.test_delivery import verified


async def _render(
    context: Context, endpoint: EndpointRecord, events: Sequence[EventRecord]
) -> list[list[bytes]]:
    """A format of the test's own: one body per event naming it and its reader, and a second
    one after a task's final event (so an event of several requests is proved too)."""
    bodies: list[list[bytes]] = []
    for event in events:
        one = {
            "event": event.id,
            "task": event.task_id,
            "kind": event.kind,
            "state": event.to_state,
            "reader": context.principal.handle,
            "config": endpoint.config_id,
        }
        bodies.append([orjson.dumps(one)])
        if event.to_state is not None and HANDOFF.is_terminal(event.to_state):
            bodies[-1].append(orjson.dumps({"final": event.id}))
    return bodies


FORMAT = Format(_render, token_header="X-Test-Token")


@pytest.fixture(scope="module")
async def running(server_url: str) -> AsyncIterator[Deliveries]:
    async with (
        own_database(server_url) as (_, db),
        deliveries(db, {PayloadFormat.A2A: FORMAT}) as found,
    ):
        yield found


@pytest.fixture
def world(running: Deliveries) -> World:
    return running.world()


def bodies(got: Sequence[Any]) -> list[dict[str, Any]]:
    return [orjson.loads(m.body) for m in got]


async def task_events_after(running: Deliveries, task_id: str, after: int) -> list[int]:
    rows = await running.db.fetch(
        "SELECT id FROM task_events WHERE task_id = $1 AND id > $2 ORDER BY id", task_id, after
    )
    return [r["id"] for r in rows]


async def test_a_config_gets_its_tasks_events_with_its_token_until_the_final_one_then_ends(
    running: Deliveries, world: World, receiver: Receiver
) -> None:
    task = await world.hand_off()  # routed
    other = await world.hand_off()  # the same owners' other task: none of its events go
    made = await running.webhooks.create_for_task(
        agent(world.requester),
        task.id,
        config_id="watch",
        url=receiver.at("/life"),
        token="client-token-1",
        authentication=Authentication("Bearer", "receiver-credentials"),
    )
    assert made.scoped and made.enabled and made.config_id == "watch"
    assert made.owner == world.req_owner  # an agent's config is its owner's
    assert made.task_cursor > 0
    # The token and the credentials are kept sealed, bound to the endpoint.
    assert "client-token-1" not in (made.token or "")
    assert "receiver-credentials" not in (made.auth_credentials or "")
    assert opened(running.webhooks.box, made) == ("client-token-1", "receiver-credentials")

    task = await world.move(task, MoveName.ACCEPT)
    await world.move(other, MoveName.ACCEPT)
    task = await world.move(task, MoveName.START)
    await running.service.save_checkpoint(agent(world.assignee), task.id, checkpoint())
    await world.move(task, MoveName.SUBMIT_RESULT, result=result())  # verifying, completed
    expected = await task_events_after(running, task.id, made.task_cursor)
    assert len(expected) == 5

    got = await receiver.wait_for("/life", len(expected) + 1)  # the final event sends two
    sent = bodies(got)
    assert [b.get("event") for b in sent[:-1]] == expected
    assert [b["state"] for b in sent[:-1]] == [
        "accepted",
        "working",
        "working",  # the checkpoint, saved while it works
        "verifying",
        "completed",
    ]
    assert sent[2]["kind"] == "checkpoint_saved"
    assert sent[-1] == {"final": expected[-1]}
    assert {b["task"] for b in sent[:-1]} == {task.id}
    assert {b["reader"] for b in sent[:-1]} == {world.req_owner}  # rendered for the owner
    for message in got:
        assert message.headers["x-test-token"] == "client-token-1"
        assert message.headers["authorization"] == "Bearer receiver-credentials"
    # Each request has its own id, the same on every attempt; the final event's second
    # request is named after its first.
    ids = [m.headers["webhook-id"] for m in got]
    last = message_id(made.id, "task", expected[-1])
    assert ids[-2:] == [last, f"{last}_1"]
    assert len(set(ids)) == len(ids)

    async def ended() -> EndpointRecord | None:
        found = await running.webhooks.for_task(owner(world.req_owner), task.id, "watch")
        return found if found.ended else None

    done = await eventually(ended)
    assert not done.enabled and done.disabled_reason == TASK_ENDED
    assert done.failures == 0
    # An ended config is not due, whatever the log holds after it.
    due, _ = await store.due_and_next(
        running.db, [], 100, 1000, allow_private=True, allow_http=True
    )
    assert made.id not in {id for id, _ in due}


async def test_a_failing_receiver_gets_the_same_message_again_until_it_acknowledges(
    running: Deliveries, world: World, receiver: Receiver
) -> None:
    task = await world.hand_off()
    made = await running.webhooks.create_for_task(
        owner(world.req_owner), task.id, config_id=None, url=receiver.at("/flaky")
    )
    receiver.failures["/flaky"] = 3
    await world.move(task, MoveName.CANCEL)
    (cancelled,) = await task_events_after(running, task.id, made.task_cursor)
    got = await receiver.wait_for("/flaky", 4 + 1)  # 3 failures, then both requests
    assert {m.headers["webhook-id"] for m in got[:4]} == {message_id(made.id, "task", cancelled)}
    assert [b.get("event") for b in bodies(got)] == [cancelled] * 4 + [None]
    assert all("authorization" not in m.headers and "x-test-token" not in m.headers for m in got)

    async def ended() -> bool:
        found = await running.webhooks.for_task(owner(world.req_owner), task.id, task.id)
        return found.ended

    await eventually(ended)
    kept = await store.deliveries(running.db, [made.id], 10, None, None)
    assert [(d.event_id, d.status.value, d.attempts) for d in kept[made.id]] == [
        (cancelled, "delivered", 4)
    ]


async def test_a_config_of_the_standard_format_sends_what_the_owners_subscription_would(
    running: Deliveries, world: World, receiver: Receiver
) -> None:
    task = await world.hand_off(decision=GateDecision.ASK)  # held for the owner's approval
    made = await running.webhooks.create_for_task(
        owner(world.asg_owner),
        task.id,
        config_id="plain",
        url=receiver.at("/standard"),
        token="not sent: the standard format has no token header",
        payload_format=PayloadFormat.STANDARD,
    )
    await world.move(task, MoveName.DENY, reason="no capacity")
    (rejected,) = await task_events_after(running, task.id, made.task_cursor)
    (message,) = await receiver.wait_for("/standard", 1)
    secret = running.webhooks.box.open(made.secret, made.id)
    body = verified(secret, message)
    assert body["type"] == "taskEvents"
    event = body["data"]["taskEvents"]
    assert (int(event["id"]), event["toState"], event["reason"]) == (
        rejected,
        "rejected",
        "no capacity",
    )
    assert "x-test-token" not in message.headers

    async def ended() -> bool:
        found = await running.webhooks.for_task(owner(world.asg_owner), task.id, "plain")
        return found.ended

    await eventually(ended)


async def test_a_config_made_for_a_task_that_ended_sends_nothing(
    running: Deliveries, world: World, receiver: Receiver
) -> None:
    task = await world.task_in(TaskState.cancelled)
    made = await running.webhooks.create_for_task(
        owner(world.req_owner), task.id, config_id="late", url=receiver.at("/late")
    )
    assert made.ended and made.disabled_reason == TASK_ENDED
    due, _ = await store.due_and_next(
        running.db, [], 100, 1000, allow_private=True, allow_http=True
    )
    assert made.id not in {id for id, _ in due}
    # Made again, it stays ended: the task cannot come back.
    again = await running.webhooks.create_for_task(
        owner(world.req_owner), task.id, config_id="late", url=receiver.at("/late2")
    )
    assert again.id == made.id and again.ended and again.url == receiver.at("/late2")


async def test_made_again_with_its_id_a_config_is_replaced_not_added(
    running: Deliveries, world: World, receiver: Receiver
) -> None:
    task = await world.hand_off()
    requester = agent(world.requester)
    first = await running.webhooks.create_for_task(
        requester, task.id, config_id=None, url=receiver.at("/old"), token="one"
    )
    assert first.config_id == task.id  # no id given: the task's
    second = await running.webhooks.create_for_task(
        requester, task.id, config_id=None, url=receiver.at("/new"), token="two"
    )
    assert second.id == first.id and second.url == receiver.at("/new")
    assert opened(running.webhooks.box, second) == ("two", None)
    page, more = await running.webhooks.list_for_task(requester, task.id, 10, None)
    assert [c.id for c in page] == [first.id] and more is None

    await world.move(task, MoveName.CANCEL)
    got = await receiver.wait_for("/new", 2)
    assert got[0].headers["x-test-token"] == "two"
    assert receiver.got["/old"] == []


async def test_who_sees_which_configs(
    running: Deliveries, world: World, receiver: Receiver
) -> None:
    task = await world.hand_off()
    webhooks = running.webhooks
    roles = world.roles
    made = await webhooks.create_for_task(
        roles["requester"], task.id, config_id="mine", url=receiver.at("/seen")
    )
    # The requester's owner and its agents that see the task share its configs.
    for who in ("requester", "requester_owner"):
        found = await webhooks.for_task(roles[who], task.id, "mine")
        assert found.id == made.id
    # The assignee's side sees the task, not the requester owner's configs: a missing one.
    for who in ("assignee", "assignee_owner"):
        with pytest.raises(NotFound) as refused:
            await webhooks.for_task(roles[who], task.id, "mine")
        assert refused.value.kind == "push notification config"
        page, _ = await webhooks.list_for_task(roles[who], task.id, 10, None)
        assert page == []
        assert await webhooks.delete_for_task(roles[who], task.id, "mine") == 0
    # Whoever does not see the task gets a missing task, whatever it asks, before any URL
    # is looked up (a name that does not resolve would say so otherwise).
    for who in ("outsider_agent", "outsider_owner", "requester_sibling"):
        with pytest.raises(NotFound) as refused:
            await webhooks.create_for_task(
                roles[who], task.id, config_id="x", url="http://no-such-host.invalid/"
            )
        assert refused.value.kind == "task"
        for call in (
            webhooks.for_task(roles[who], task.id, "mine"),
            webhooks.list_for_task(roles[who], task.id, 10, None),
            webhooks.delete_for_task(roles[who], task.id, "mine"),
        ):
            with pytest.raises(NotFound) as refused:
                await call
            assert refused.value.kind == "task"
    # Admin reads and deletes every owner's, and makes none (a config is an owner's).
    assert (await webhooks.for_task(ADMIN, task.id, "mine")).id == made.id
    with pytest.raises(Forbidden):
        await webhooks.create_for_task(ADMIN, task.id, config_id="a", url=receiver.at("/a"))
    # The owners' endpoints never show a config, and it takes no room among them.
    requester_owner = roles["requester_owner"]
    assert await webhooks.get(requester_owner, made.id) is None
    assert made.id not in {e.id for e in await webhooks.endpoints(requester_owner, None, 50, None)}
    with pytest.raises(NotFound):
        await webhooks.update(requester_owner, made.id, enabled=False)
    with pytest.raises(NotFound):
        await webhooks.ping(requester_owner, made.id)
    with pytest.raises(NotFound):
        await webhooks.delete(requester_owner, made.id)

    assert await webhooks.delete_for_task(roles["requester"], task.id, "mine") == 1
    assert await webhooks.delete_for_task(roles["requester"], task.id, "mine") == 0
    with pytest.raises(NotFound):
        await webhooks.for_task(roles["requester_owner"], task.id, "mine")


async def test_an_owner_has_a_bounded_number_of_configs_per_task(
    running: Deliveries, world: World, receiver: Receiver
) -> None:
    task = await world.hand_off()
    who = owner(world.req_owner)
    for n in range(MAX_ENDPOINTS_PER_TASK):
        await running.webhooks.create_for_task(
            who, task.id, config_id=f"c{n}", url=receiver.at(f"/c{n}")
        )
    with pytest.raises(InvalidInput) as refused:
        await running.webhooks.create_for_task(
            who, task.id, config_id="one-more", url=receiver.at("/c")
        )
    assert refused.value.field == "taskId"
    # Another owner's room on the task is its own; making one of the ten again is no addition.
    await running.webhooks.create_for_task(
        owner(world.asg_owner), task.id, config_id="c0", url=receiver.at("/theirs")
    )
    await running.webhooks.create_for_task(who, task.id, config_id="c0", url=receiver.at("/x"))
    # Pages of the owner's configs, by id, each once.
    seen: list[str] = []
    after: str | None = None
    while True:
        page, after = await running.webhooks.list_for_task(who, task.id, 3, after)
        assert len(page) <= 3
        seen += [c.config_id or "" for c in page]
        if after is None:
            break
    assert sorted(seen) == sorted(f"c{n}" for n in range(MAX_ENDPOINTS_PER_TASK))


async def test_an_owner_has_a_bounded_number_of_live_configs(
    running: Deliveries, receiver: Receiver
) -> None:
    world = running.world()
    who = owner(world.req_owner)
    tasks = [await world.hand_off() for _ in range(MAX_TASK_ENDPOINTS // MAX_ENDPOINTS_PER_TASK)]
    for task in tasks:
        for n in range(MAX_ENDPOINTS_PER_TASK):
            await running.webhooks.create_for_task(
                who, task.id, config_id=f"c{n}", url=receiver.at("/bound")
            )
    spare = await world.hand_off()
    with pytest.raises(InvalidInput) as refused:
        await running.webhooks.create_for_task(
            who, spare.id, config_id="c", url=receiver.at("/bound")
        )
    assert refused.value.field == "taskId"
    # A config on a task that ended is not live: it takes no room.
    ended = await world.task_in(TaskState.cancelled)
    made = await running.webhooks.create_for_task(
        who, ended.id, config_id="c", url=receiver.at("/bound")
    )
    assert made.ended
    # Deleting one makes room.
    assert await running.webhooks.delete_for_task(who, tasks[0].id, "c0") == 1
    await running.webhooks.create_for_task(who, spare.id, config_id="c", url=receiver.at("/bound"))


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"config_id": "a b"}, "id"),
        ({"config_id": "x" * (MAX_CONFIG_ID + 1)}, "id"),
        ({"token": "line\r\nX-Injected: 1"}, "token"),
        ({"token": " padded"}, "token"),
        ({"token": "t" * 1025}, "token"),
        ({"authentication": Authentication("Bear er", "c")}, "authentication.scheme"),
        ({"authentication": Authentication("Bearer", "c\nd")}, "authentication.credentials"),
        ({"url": "ftp://example.com/"}, "url"),
    ],
)
async def test_bad_input_is_refused_with_the_field_named(
    running: Deliveries, world: World, receiver: Receiver, fields: dict[str, Any], field: str
) -> None:
    task = await world.hand_off()
    given: dict[str, Any] = {"config_id": "ok", "url": receiver.at("/bad"), **fields}
    with pytest.raises(InvalidInput) as refused:
        await running.webhooks.create_for_task(owner(world.req_owner), task.id, **given)
    assert refused.value.field == field
    page, _ = await running.webhooks.list_for_task(owner(world.req_owner), task.id, 10, None)
    assert page == []


async def test_an_address_baton_may_not_call_is_refused_when_saved(
    running: Deliveries, world: World
) -> None:
    task = await world.hand_off()
    strict = WebhookService(running.db, running.webhooks.box, Policy())
    for url in ("https://127.0.0.1/hook", "https://[::1]/hook", "http://example.com/hook"):
        with pytest.raises(InvalidInput) as refused:
            await strict.create_for_task(owner(world.req_owner), task.id, config_id="c", url=url)
        assert refused.value.field == "url"


async def test_a_config_of_a_format_the_process_does_not_write_fails_and_backs_off(
    running: Deliveries, world: World, receiver: Receiver, server_url: str
) -> None:
    """A worker without the A2A format (the A2A door not wired) sends nothing for such a
    config and counts a failure; nothing is lost: the config's cursor stays put."""
    async with own_database(server_url) as (_, db), deliveries(db, {}) as bare:
        lone = bare.world()
        task = await lone.hand_off()
        made = await bare.webhooks.create_for_task(
            owner(lone.req_owner), task.id, config_id="c", url=receiver.at("/unwritten")
        )
        await lone.move(task, MoveName.ACCEPT)

        async def failed() -> EndpointRecord | None:
            found = await bare.webhooks.for_task(owner(lone.req_owner), task.id, "c")
            return found if found.failures > 0 else None

        found = await eventually(failed)
        assert found.enabled and found.task_cursor == made.task_cursor
        kept = await store.deliveries(db, [made.id], 10, None, None)
        assert "this process writes no a2a messages" in (kept[made.id][0].last_error or "")
        assert receiver.got["/unwritten"] == []


async def test_a_config_disabled_by_its_receiver_resumes_where_it_stopped_when_made_again(
    running: Deliveries, world: World, receiver: Receiver
) -> None:
    task = await world.hand_off()
    who = owner(world.req_owner)
    receiver.status["/gone"] = 410
    made = await running.webhooks.create_for_task(
        who, task.id, config_id="c", url=receiver.at("/gone")
    )
    await world.move(task, MoveName.ACCEPT)
    (accepted,) = await task_events_after(running, task.id, made.task_cursor)

    async def disabled() -> EndpointRecord | None:
        found = await running.webhooks.for_task(who, task.id, "c")
        return None if found.enabled else found

    stopped = await eventually(disabled)
    assert stopped.disabled_reason == "the receiver answered 410 Gone" and not stopped.ended
    # A disabled config is not live: it takes no room, and gets nothing.
    async with running.db.connection() as conn:
        live, on_task = await store.task_endpoint_counts(conn, world.req_owner, task.id)
    assert (live, on_task) == (0, 1)

    again = await running.webhooks.create_for_task(
        who, task.id, config_id="c", url=receiver.at("/back")
    )
    assert again.id == made.id and again.enabled and again.failures == 0
    (message,) = await receiver.wait_for("/back", 1)
    assert orjson.loads(message.body)["event"] == accepted  # the event it stopped at
