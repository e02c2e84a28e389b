"""A2A contexts of tasks, and tasks' newest events: what the A2A door reads and keeps beside
the task service (`baton.store.task_contexts`).

Callers pass the ids of tasks the caller was shown (by `TaskService.get` or `page`): these
reads check no visibility of their own.
"""

from __future__ import annotations

from collections.abc import Sequence

from baton.errors import InvalidInput
from baton.store import task_contexts as store
from baton.store.db import Database
from baton.store.records import EventRecord
from baton.store.task_contexts import GivenContext, TaskContext

# An A2A contextId or messageId Baton keeps: a client's own id, never a document.
MAX_ID_LENGTH = 256

__all__ = ["MAX_ID_LENGTH", "GivenContext", "TaskContext", "TaskContexts", "given"]


def check_id(value: str, field: str) -> None:
    if not value.strip():
        raise InvalidInput(field, "must not be empty")
    if len(value) > MAX_ID_LENGTH:
        raise InvalidInput(field, f"must be at most {MAX_ID_LENGTH} characters")


def given(context_id: str | None, message_id: str | None) -> GivenContext:
    """The context a hand-off is made in, checked before the hand-off writes it
    (`TaskService.hand_off(context=...)`); None: the task's own id."""
    if context_id is not None:
        check_id(context_id, "message.contextId")
    if message_id is not None:
        check_id(message_id, "message.messageId")
    return GivenContext(context_id, message_id)


class TaskContexts:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def keep(self, task_id: str, context_id: str, message_id: str | None) -> TaskContext:
        """Keep the context a task was handed off in; a task that has one keeps it. (A new
        task's is kept by its hand-off's own statement: this is for a repeated one.)"""
        given(context_id, message_id)
        async with self.db.connection() as conn:
            return await store.keep(conn, task_id, context_id, message_id)

    async def of(self, task_ids: Sequence[str]) -> dict[str, TaskContext]:
        async with self.db.connection() as conn:
            return await store.of(conn, task_ids)

    async def newest_events(
        self, task_ids: Sequence[str], count: int
    ) -> dict[str, list[EventRecord]]:
        async with self.db.connection() as conn:
            return await store.newest_events(conn, task_ids, count)

    async def kept_and_newest(
        self, task_ids: Sequence[str], count: int
    ) -> tuple[dict[str, TaskContext], dict[str, list[EventRecord]]]:
        """`of` and `newest_events` in one round trip."""
        async with self.db.connection() as conn:
            return await store.kept_and_newest(conn, task_ids, count)
