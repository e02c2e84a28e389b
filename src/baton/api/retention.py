"""What the server keeps of finished work, and the oldest cursors its streams still take."""

from __future__ import annotations

import strawberry
from strawberry.types import Info

from baton.services.context import Context
from baton.services.retention import Retention


def _retention(info: Info[Context, None]) -> Retention:
    found = info.context.retention
    return found if found is not None else Retention(info.context.service.db, None)


@strawberry.type(
    name="Retention",
    description="What this server keeps of finished work (`BATON_RETENTION`). A task that is "
    "completed, rejected or cancelled, or a run that is completed, is removed this long after "
    "it finished, with its events, checkpoints and webhook deliveries; open work is never "
    "removed, however old, nor a finished task that a run names or an open task depends on. A "
    "stream (`taskEvents`, `runEvents`) asked to start after an event older than what is kept "
    "ends at once with the error `cursor_expired`, whose `extensions.oldestCursor` is the "
    "oldest `after` still taken: read what you show again, then follow from `streamCursors`. "
    "A task's or run's own `events(after:)` never expires: its events go only with it.",
)
class RetentionInfo:
    @strawberry.field(
        name="keepSeconds",
        description="How long finished work is kept, in seconds; null: for ever (the default).",
    )
    def keep_seconds(self, info: Info[Context, None]) -> int | None:
        keep = _retention(info).keep_seconds
        return None if keep is None else int(keep)

    @strawberry.field(
        name="oldestTaskEvents",
        description="The oldest `taskEvents(after:)` taken: every event removed has an id at "
        'most this ("0": none was).',
    )
    async def oldest_task_events(self, info: Info[Context, None]) -> strawberry.ID:
        return strawberry.ID(str(await _retention(info).oldest_kept_cursor("task")))

    @strawberry.field(
        name="oldestRunEvents",
        description="The oldest `runEvents(after:)` taken, likewise.",
    )
    async def oldest_run_events(self, info: Info[Context, None]) -> strawberry.ID:
        return strawberry.ID(str(await _retention(info).oldest_kept_cursor("run")))
