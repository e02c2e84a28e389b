"""Plain records read from the store: what the service and the API work with."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from baton.protocol.handoff import MoveName, TaskState, Verification, WaitingOn


def _when(value: Any) -> datetime:
    return value if isinstance(value, datetime) else datetime.fromisoformat(value)


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
        """From a `tasks` row or its JSON snapshot in an event."""
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
            created_at=_when(row["created_at"]),
            updated_at=_when(row["updated_at"]),
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
    task: TaskRecord

    @classmethod
    def from_mapping(cls, row: Mapping[Any, Any]) -> EventRecord:
        return cls(
            id=row["id"],
            kind=row["kind"],
            task_id=row["task_id"],
            move=MoveName(row["move"]) if row["move"] else None,
            from_state=TaskState(row["from_state"]) if row["from_state"] else None,
            to_state=TaskState(row["to_state"]) if row["to_state"] else None,
            actor=row["actor"],
            reason=row["reason"],
            version=row["version"],
            at=_when(row["at"]),
            task=TaskRecord.from_mapping(row["task"]),
        )
