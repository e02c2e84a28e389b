"""Plain records read from the store: what the service and the API work with."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from baton.protocol.handoff import MoveName, TaskState, Verification, WaitingOn


@dataclass(frozen=True)
class TaskRecord:
    id: str
    project: str
    state: TaskState
    waiting_on: WaitingOn | None
    requester: str
    assignee: str
    packet: dict[str, Any]
    result: dict[str, Any] | None
    latest_checkpoint: dict[str, Any] | None
    verification: Verification
    version: int
    input_digest: str
    created_at: datetime
    updated_at: datetime

    @classmethod
    def from_mapping(cls, row: Mapping[Any, Any]) -> TaskRecord:
        """From a `tasks` row (or the same columns of the task at an event)."""
        waiting_on = row["waiting_on"]
        return cls(
            id=row["id"],
            project=row["project"],
            state=TaskState(row["state"]),
            waiting_on=WaitingOn(waiting_on) if waiting_on else None,
            requester=row["requester"],
            assignee=row["assignee"],
            packet=row["packet"],
            result=row["result"],
            latest_checkpoint=row["latest_checkpoint"],
            verification=Verification(row["verification"]),
            version=row["version"],
            input_digest=row["input_digest"],
            created_at=row["created_at"],
            updated_at=row["updated_at"],
        )


@dataclass(frozen=True)
class EventRecord:
    id: int
    kind: str  # created | moved | checkpoint_saved
    task_id: str
    move: MoveName | None
    from_state: TaskState | None
    to_state: TaskState | None
    actor: str
    reason: str | None
    version: int
    at: datetime
    task: TaskRecord  # the task as it was right after this event

    @classmethod
    def from_row(cls, row: Mapping[Any, Any]) -> EventRecord:
        """From a row of the event's own columns (`event_*`) beside the task's at that event
        (see `baton.store.tasks`)."""
        task = TaskRecord.from_mapping(row)
        move, from_state = row["event_name"], row["event_from"]
        return cls(
            id=row["event_id"],
            kind=row["event_kind"],
            task_id=task.id,
            move=MoveName(move) if move else None,
            from_state=TaskState(from_state) if from_state else None,
            to_state=task.state,
            actor=row["event_actor"],
            reason=row["event_reason"],
            version=task.version,
            at=task.updated_at,
            task=task,
        )
