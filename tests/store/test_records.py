"""Records built from rows: the fast construction (`baton.store.records._made`) makes what the
dataclass's own `__init__` makes, every field set."""

from __future__ import annotations

from dataclasses import asdict, fields
from datetime import UTC, datetime
from typing import Any

from baton.protocol.handoff import MoveName, TaskState, Verification, WaitingOn
from baton.store.records import EventRecord, TaskRecord

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)

ROW: dict[str, Any] = {
    "id": "t1",
    "project": "web",
    "state": "waiting",
    "waiting_on": "agent",
    "requester": "alice/a",
    "assignee": "bob/b",
    "packet": {"task": "x", "depends_on": []},
    "result": None,
    "latest_checkpoint": {"progress": "half"},
    "verification": "AUTO",
    "version": 3,
    "input_digest": "d",
    "created_at": NOW,
    "updated_at": NOW,
    "event_id": 7,
    "event_kind": "moved",
    "event_name": "HOLD",
    "event_from": "requested",
    "event_actor": "system",
    "event_reason": None,
}


def test_a_task_record_from_a_row_equals_the_constructed_one() -> None:
    made = TaskRecord.from_mapping(ROW)
    expected = TaskRecord(
        id="t1",
        project="web",
        state=TaskState("waiting"),
        waiting_on=WaitingOn("agent"),
        requester="alice/a",
        assignee="bob/b",
        packet={"task": "x", "depends_on": []},
        result=None,
        latest_checkpoint={"progress": "half"},
        verification=Verification("AUTO"),
        version=3,
        input_digest="d",
        created_at=NOW,
        updated_at=NOW,
    )
    assert made == expected and asdict(made) == asdict(expected)
    assert set(vars(made)) == {f.name for f in fields(TaskRecord)}


def test_an_event_record_from_a_row_sets_every_field() -> None:
    made = EventRecord.from_row(ROW)
    assert set(vars(made)) == {f.name for f in fields(EventRecord)}
    assert (made.id, made.move, made.from_state, made.to_state) == (
        7,
        MoveName("HOLD"),
        TaskState("requested"),
        TaskState("waiting"),
    )
    assert made.task == TaskRecord.from_mapping(ROW) and made.at == NOW


def test_a_record_stays_frozen() -> None:
    made = TaskRecord.from_mapping(ROW)
    try:
        made.version = 4  # type: ignore[misc]
    except AttributeError:
        return
    raise AssertionError("a record from a row could be changed")
