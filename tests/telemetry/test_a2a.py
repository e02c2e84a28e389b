"""The A2A door in an operator's logs and traces, from the real `baton serve` of `observed`
(JSON logs with an access line per request, spans to a real OTLP receiver): each request's
line names its A2A method, the same over both bindings, and its principal; its trace holds
what the method did."""

from __future__ import annotations

import asyncio
import functools
import json
import secrets
from collections import Counter
from typing import Any

import pytest
from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    ListTasksRequest,
    SendMessageRequest,
    SubscribeToTaskRequest,
)

from baton.access.principals import Principal, PrincipalKind
from tests.a2a.conftest import BINDINGS, a2a_client, get, message, send, state
from tests.telemetry.conftest import Observed
from tests.telemetry.otlp import SERVER, Span, ancestors

# What the test calls, by A2A method: the line of each request names its method.
CALLED = Counter(
    {
        "SendMessage": 1,
        "SendStreamingMessage": 1,
        "GetTask": 1,
        "ListTasks": 1,
        "SubscribeToTask": 1,
        "CancelTask": 2,
    }
)


def access_lines(observed: Observed, principal: str) -> list[dict[str, Any]]:
    lines = [json.loads(line) for line in observed.log.read_text().splitlines()]
    return [
        line
        for line in lines
        if line["logger"] == "baton.access" and line.get("principal") == principal
    ]


@pytest.mark.parametrize("binding", BINDINGS)
async def test_each_a2a_call_has_one_line_naming_its_method_and_principal_and_a_trace(
    observed: Observed, binding: str
) -> None:
    owner = f"aa{secrets.token_hex(4)}"
    requester = f"{owner}/planner"
    token = await observed.token(Principal(PrincipalKind.AGENT, requester))
    base = f"{observed.url}/a2a/agents/{owner}/coder"
    async with (
        a2a_client(base, token, binding) as client,
        a2a_client(base, token, binding, streaming=True) as streaming,
    ):
        task = await send(client, message(data={"project": "web"}))
        assert (await get(client, task.id)).id == task.id
        await client.list_tasks(ListTasksRequest())
        followed = streaming.subscribe(SubscribeToTaskRequest(id=task.id))
        assert (await anext(followed)).task.id == task.id
        sent = streaming.send_message(SendMessageRequest(message=message(data={"project": "web"})))
        streamed = (await anext(sent)).task
        for handed_off in (task, streamed):
            cancelled = await client.cancel_task(CancelTaskRequest(id=handed_off.id))
            assert state(cancelled) == "TASK_STATE_CANCELED"
        # Both streams end at the final state.
        assert [u async for u in followed] and [u async for u in sent]

    # A stream's line is written as the server ends it: maybe after the client has moved on.
    for _ in range(100):
        lines = access_lines(observed, requester)
        if len(lines) >= CALLED.total():
            break
        await asyncio.sleep(0.1)
    assert Counter(line.get("operation") for line in lines) == CALLED, lines
    assert all(line["path"].startswith(f"/a2a/agents/{owner}/coder") for line in lines)

    # Each request is one trace, its A2A method on the server span, what it did under it.
    for task_id, move, method in [
        (task.id, "HAND_OFF", "SendMessage"),
        (streamed.id, "HAND_OFF", "SendStreamingMessage"),
        (task.id, "CANCEL", "CancelTask"),
    ]:
        root = await observed.spans.wait(functools.partial(root_of, task_id=task_id, move=move))
        assert root.kind == SERVER and root.attributes["enduser.id"] == requester
        assert root.attributes["baton.a2a.method"] == method

    def subscribed(spans: list[Span]) -> Span | None:
        for span in spans:
            attributes = span.attributes
            if (
                attributes.get("baton.a2a.method") == "SubscribeToTask"
                and attributes.get("enduser.id") == requester
            ):
                return span
        return None

    # The stream's reads, made in tasks of their own, are in its request's trace.
    stream = await observed.spans.wait(subscribed)
    assert any(
        s.attributes.get("db.system") == "postgresql" for s in observed.spans.trace(stream.trace_id)
    )


def root_of(spans: list[Span], task_id: str, move: str) -> Span | None:
    """The server span at the root of the trace holding `move` on task `task_id`."""
    for span in spans:
        if span.attributes.get("baton.task.id") == task_id and (
            span.attributes.get("baton.move") == move
        ):
            chain = ancestors(span, spans)
            if chain and chain[-1].parent_id == "":
                return chain[-1]
    return None
