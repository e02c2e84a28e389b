"""What the A2A door keeps and reads beside tasks: the A2A context each task was handed off
in (`a2a_task_contexts`, migration 0014), and the newest events of tasks (their A2A history).

Neither checks who asks: callers pass the ids of tasks the caller was shown.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from baton.store.db import Connection
from baton.store.records import EventRecord
from baton.store.sql import Params, text_array


@dataclass(frozen=True)
class TaskContext:
    context_id: str
    message_id: str | None  # the A2A message that handed the task off, when kept


@dataclass(frozen=True)
class GivenContext:
    """The context a hand-off is made in, kept by the hand-off's own statement (`keeping`):
    `context_id` None is the task's own id."""

    context_id: str | None
    message_id: str | None


def keeping(hand_off: str, task_id: str, context_id: str, message_id: str) -> str:
    """The statement `hand_off` (its rows the new task's events, none when the id exists)
    that also keeps the task's context, given as the parameters named: one round trip. The row
    is written only with a new task, which has none yet (a repeated hand-off uses `keep`)."""
    return f"""
WITH made AS MATERIALIZED ({hand_off}),
kept AS (
    INSERT INTO a2a_task_contexts (task_id, context_id, message_id)
    SELECT {task_id}::text, COALESCE({context_id}::text, {task_id}::text), {message_id}::text
    WHERE EXISTS (SELECT FROM made)
)
SELECT * FROM made ORDER BY event_id"""


async def keep(
    conn: Connection, task_id: str, context_id: str, message_id: str | None
) -> TaskContext:
    """The task's context: the one given, or the one kept before (a repeated hand-off, whose
    first context stays)."""
    row = await conn.fetchrow(
        """
        WITH new AS (
            INSERT INTO a2a_task_contexts (task_id, context_id, message_id)
            VALUES ($1, $2, $3) ON CONFLICT (task_id) DO NOTHING
            RETURNING context_id, message_id
        )
        SELECT context_id, message_id FROM new
        UNION ALL
        SELECT context_id, message_id FROM a2a_task_contexts WHERE task_id = $1
        LIMIT 1
        """,
        task_id,
        context_id,
        message_id,
    )
    assert row is not None, "inserted, or there before"
    return TaskContext(row["context_id"], row["message_id"])


async def of(conn: Connection, task_ids: Sequence[str]) -> dict[str, TaskContext]:
    """The kept contexts of these tasks (a task without one is not in the answer)."""
    if not task_ids:
        return {}
    p = Params()
    rows = await conn.fetch(
        "SELECT task_id, context_id, message_id FROM a2a_task_contexts "
        f"WHERE task_id = ANY({p.texts(task_ids)})",
        *p.values,
    )
    return {r["task_id"]: TaskContext(r["context_id"], r["message_id"]) for r in rows}


# The task at each event as `baton.store.tasks.EVENTS_WITH_TASKS` reads it, but for its packet
# (no history entry needs it, and it is the task's largest column): the records' `packet` is
# None. Of each wanted task's newest $2 events (`e`).
_EVENTS_AT = """
SELECT e.id AS event_id, e.kind AS event_kind, e.move AS event_name,
    e.from_state AS event_from, e.actor AS event_actor, e.reason AS event_reason,
    t.id, t.project, e.to_state AS state, e.waiting_on, t.requester, t.assignee,
    NULL::jsonb AS packet, e.result, e.latest_checkpoint, t.verification, e.version,
    t.input_digest, t.created_at, e.at AS updated_at
FROM (SELECT * FROM task_events WHERE task_id = wanted.id ORDER BY id DESC LIMIT $2) AS e
JOIN tasks t ON t.id = e.task_id
"""

_NEWEST = f"""
SELECT n.* FROM unnest($1::text::text[]) AS wanted(id)
CROSS JOIN LATERAL ({_EVENTS_AT}) AS n
ORDER BY wanted.id, n.event_id
"""

# The same beside each task's kept context (a task with neither is one row of nulls).
_KEPT_AND_NEWEST = f"""
SELECT wanted.id AS wanted_id, c.context_id AS kept_context_id,
    c.message_id AS kept_message_id, n.*
FROM unnest($1::text::text[]) AS wanted(id)
LEFT JOIN a2a_task_contexts c ON c.task_id = wanted.id
LEFT JOIN LATERAL ({_EVENTS_AT}) AS n ON TRUE
ORDER BY wanted.id, n.event_id
"""


async def kept_and_newest(
    conn: Connection, task_ids: Sequence[str], count: int
) -> tuple[dict[str, TaskContext], dict[str, list[EventRecord]]]:
    """`of` and `newest_events` (`count` at least 1) in one query."""
    kept: dict[str, TaskContext] = {}
    found: dict[str, list[EventRecord]] = {task_id: [] for task_id in task_ids}
    if not task_ids:
        return kept, found
    for row in await conn.fetch(_KEPT_AND_NEWEST, text_array(list(found)), max(1, count)):
        task_id = row["wanted_id"]
        if row["kept_context_id"] is not None and task_id not in kept:
            kept[task_id] = TaskContext(row["kept_context_id"], row["kept_message_id"])
        if row["event_id"] is not None:
            found[task_id].append(EventRecord.from_row(row))
    return kept, found


async def newest_events(
    conn: Connection, task_ids: Sequence[str], count: int
) -> dict[str, list[EventRecord]]:
    """Each task's newest `count` events, oldest first, in one query (the task at each event
    without its packet)."""
    found: dict[str, list[EventRecord]] = {task_id: [] for task_id in task_ids}
    if not task_ids or count <= 0:
        return found
    for row in await conn.fetch(_NEWEST, text_array(list(found)), count):
        event = EventRecord.from_row(row)
        found[event.task_id].append(event)
    return found
