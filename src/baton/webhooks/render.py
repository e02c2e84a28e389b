"""A webhook message's body: the event as the subscription delivers it.

The worker runs a fixed `taskEvents` / `runEvents` subscription document on the engine, for
the endpoint owner's principal, with the endpoint's filter as the subscription's `filter` and
its cursor as `after`: the replay it gets is what a client subscribing with the same token,
filter and cursor would get, field for field, and what the owner may not see never reaches
the renderer. The body is a Standard Webhooks payload whose `data` is that subscription
result's `data`: `{"type": "taskEvents", "timestamp": …, "data": {"taskEvents": {…}}}`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import orjson

from baton.access.principals import Principal
from baton.engine.runner import Engine, Outcome, Request
from baton.live.filters import EventFilter, RunEventFilter
from baton.live.logs import RUN_LOG, TASK_LOG
from baton.services.context import Context
from baton.store.db import Connection
from baton.store.sql import Params

LOGS = ("task", "run")
FIELDS = {"task": "taskEvents", "run": "runEvents"}

TASK_EVENTS = """
subscription BatonWebhookTaskEvents($filter: TaskEventFilter, $after: ID) {
  taskEvents(filter: $filter, after: $after) {
    id kind taskId move fromState toState actor reason at version
    task {
      id project state waitingOn requester assignee version verification createdAt updatedAt
      protocolObject
    }
  }
}
"""
RUN_EVENTS = """
subscription BatonWebhookRunEvents($filter: RunEventFilter, $after: ID) {
  runEvents(filter: $filter, after: $after) {
    id kind runId event fromStatus toStatus actor details at version
    run {
      id owner project taskId title status phase checkpoint statusLabel phaseLabel questions
      answers pullRequestUrl failureReason createdBy version createdAt updatedAt
    }
  }
}
"""
DOCUMENTS = {"task": TASK_EVENTS, "run": RUN_EVENTS}


class RenderFailed(Exception):
    """The engine did not give the expected events (refused, errors, or another event)."""


async def matching_ids(
    conn: Connection,
    log: str,
    principal: Principal,
    variables: Mapping[str, Any],
    after: int,
    through: int,
    limit: int,
) -> list[int]:
    """Ids of the events in (`after`, `through`] that the subscription would deliver, in
    order: the same SQL condition its replay uses (`where`), visibility included."""
    p = Params(start=2)  # $1 and $2 are the cursor and the limit
    if log == "task":
        condition = EventFilter.from_stored(variables).where(principal, p)
        events = await TASK_LOG.after(
            conn, after, limit, f"{condition} AND e.id <= {p(through)}", p.values
        )
        return [e.id for e in events]
    condition = RunEventFilter.from_stored(variables).where(principal, p)
    runs = await RUN_LOG.after(
        conn, after, limit, f"{condition} AND e.id <= {p(through)}", p.values
    )
    return [e.id for e in runs]


async def render(
    engine: Engine,
    context: Context,
    log: str,
    variables: Mapping[str, Any],
    after: int,
    ids: list[int],
    seconds: float,
) -> list[dict[str, Any]]:
    """The subscription's `data` for each of `ids`, the matching events right after `after`."""
    request = Request(DOCUMENTS[log], {"filter": dict(variables), "after": str(after)})
    stream = await engine.subscribe(request, context)
    if isinstance(stream, Outcome):
        raise RenderFailed(_errors(stream))
    found: list[dict[str, Any]] = []
    try:
        async with asyncio.timeout(seconds):
            for expected in ids:
                outcome = await anext(stream)
                if outcome.errors or not isinstance(outcome.data, dict):
                    raise RenderFailed(_errors(outcome))
                got = int(outcome.data[FIELDS[log]]["id"])
                if got != expected:
                    raise RenderFailed(f"expected event {expected}, the subscription gave {got}")
                found.append(outcome.data)
    except TimeoutError:
        raise RenderFailed(f"the subscription gave no event within {seconds:g} s") from None
    except StopAsyncIteration:
        raise RenderFailed("the subscription ended early") from None
    finally:
        await stream.aclose()
    return found


def _errors(outcome: Outcome) -> str:
    return "; ".join(str(e.get("message")) for e in outcome.errors)[:500] or "no data"


def body(kind: str, data: Mapping[str, Any], at: datetime | None = None) -> bytes:
    """A Standard Webhooks payload: `type`, `timestamp` (the event's time) and `data`."""
    when = at or datetime.now(UTC)
    return orjson.dumps({"type": kind, "timestamp": when.isoformat(), "data": data})


def event_time(log: str, data: Mapping[str, Any]) -> datetime | None:
    at = data[FIELDS[log]].get("at")
    if isinstance(at, datetime):
        return at
    return datetime.fromisoformat(at) if isinstance(at, str) else None
