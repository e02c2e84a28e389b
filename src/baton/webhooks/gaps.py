"""An endpoint whose outbox fell behind what the logs keep: it is told, then goes on.

An endpoint's cursor in a log is where its outbox stands. Retention removes finished work with
its events (`baton.services.retention`); an endpoint that was disabled, or kept failing, for
longer than the retention period may have a cursor below the log's floor, with removed events
after it that it never got. Sending on from the cursor would skip them silently; refusing for
ever would stop the endpoint for good. So the endpoint gets one message of type
`cursorExpired` first, at the head of that log's queue:

    {"type": "cursorExpired", "timestamp": …,
     "data": {"cursorExpired": {"log": "task", "cursor": "…", "oldestCursor": "…"}}}

`oldestCursor` is the log's floor. Once the receiver acknowledges it (2xx), the cursor jumps to
the floor and the events after it follow; until then it is retried like any message (backoff,
disabled after the attempts allowed or by a 410), and the cursor stays. Its `webhook-id` is the
same at every attempt (`msg_<endpoint>_<log>_expired_<oldestCursor>`), and the endpoint's
deliveries show it as an event delivery whose `eventId` is the oldest cursor. A receiver that
gets it has missed events: it reads again what it mirrors (`tasks`, `runs`), as after a long
outage. Events between the cursor and the floor that are still kept (of open work) are covered
by that re-read, not sent: the same rule as a stream's refusal.

A task-scoped endpoint (an A2A push notification config) takes one task's events, which are
removed only with the task, and the endpoint with them: it is never behind what is kept.
"""

from __future__ import annotations

from baton.store.db import Connection
from baton.store.eventlog import floor
from baton.store.webhooks import LOG_TABLES, EndpointRecord
from baton.webhooks import render

EXPIRED = "cursorExpired"


async def expired(conn: Connection, endpoint: EndpointRecord, log: str, cursor: int) -> int | None:
    """The oldest cursor `log` keeps, if `endpoint`'s `cursor` in it is below that; else None.
    Read after the events to send were read: a removal before that read is seen here."""
    if endpoint.scoped:
        return None
    oldest = await floor(conn, LOG_TABLES[log])
    return oldest if cursor < oldest else None


def notice(endpoint_id: str, log: str, cursor: int, oldest: int) -> tuple[str, bytes]:
    """The message's id and body."""
    data = {EXPIRED: {"log": log, "cursor": str(cursor), "oldestCursor": str(oldest)}}
    return f"msg_{endpoint_id}_{log}_expired_{oldest}", render.body(EXPIRED, data)
