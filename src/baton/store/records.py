"""Plain records read from the store: what the service and the API work with.

A lifecycle's event record is built by `event_builder` from its row's builder and its table:
its fields are, in order, the event's id and kind, then the log's columns as the lifecycle's
`Layout` names them (the subject's id, the move's name, the primary axis before and after, the
log's own extras), the actor among them, then the version and time, and the row right after the
event under the lifecycle's noun. `baton.store.lifecycle.check_event_record` holds a record to
its layout.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from datetime import datetime
from enum import Enum, StrEnum
from typing import Any, TypeVar, cast

import orjson

from baton.protocol.handoff import HANDOFF, MoveName, TaskState, Verification, WaitingOn
from baton.protocol.machine import Machine
from baton.protocol.pipeline import PIPELINE, RunCheckpoint, RunEvent, RunPhase, RunStatus

E = TypeVar("E", bound=Enum)
R = TypeVar("R")
Row = Mapping[Any, Any]

_new = object.__new__


def _made(cls: type[R], fields: dict[str, Any]) -> R:
    """An instance of the frozen dataclass `cls` holding `fields` (every one of its fields).

    A frozen dataclass's `__init__` sets each field through `object.__setattr__`: 1.9 µs for a
    task's fourteen, where filling the instance's dict at once takes 0.4 µs; a listing builds
    hundreds of records per request (`tests/store/test_records.py` holds the two equal)."""
    made = _new(cls)
    made.__dict__.update(fields)
    return made


def _by_value(enum: type[E]) -> Callable[[Any], E]:
    """`enum(value)` as a dict lookup: a row's values are known ones (the database's CHECK
    constraints hold them), and this runs for every column of every row read."""
    return {member.value: member for member in enum}.__getitem__


_TASK_STATE = _by_value(TaskState)
_WAITING_ON = _by_value(WaitingOn)
_VERIFICATION = _by_value(Verification)
_RUN_STATUS = _by_value(RunStatus)
_RUN_PHASE = _by_value(RunPhase)
_RUN_CHECKPOINT = _by_value(RunCheckpoint)


def event_builder(
    cls: Callable[..., R],
    subject: Callable[[Row], Any],
    machine: Machine[Any, Any, Any],
    extras: tuple[str, ...],
) -> Callable[[Row], R]:
    """How a lifecycle's event record is read: from a row of the event's own columns
    (`event_*`, see `baton.store.lifecycle.Layout.returned`) beside its subject's at that event,
    which `subject` reads. `extras` are the log's own columns, as the layout lists them."""
    name_of = _by_value(type(machine.names()[0]))
    state_of = _by_value(type(machine.initial))
    primary = operator.attrgetter(machine.primary)
    extra_keys = tuple(f"event_{extra}" for extra in extras)

    def build(row: Row) -> R:
        s = subject(row)
        name, before = row["event_name"], row["event_from"]
        return cls(
            row["event_id"],
            row["event_kind"],
            s.id,
            name_of(name) if name else None,
            state_of(before) if before else None,
            primary(s),
            row["event_actor"],
            *[row[key] for key in extra_keys],
            s.version,
            s.updated_at,
            s,
        )

    return build


def bare_event_builder(
    cls: type[R], machine: Machine[Any, Any, Any], extras: tuple[str, ...]
) -> Callable[[Row], R]:
    """How a lifecycle's event record is read without its subject, for a reader that answers
    only the event's own fields: from the event's columns (`event_*`) beside its subject's
    `id`, primary axis, `version` and `updated_at` at that event. The record's last field, the
    subject, is left out: reading it raises `Unread` (see `Absent`)."""
    keys = tuple(f.name for f in fields(cls))[:-1]  # type: ignore[arg-type]
    name_of = _by_value(type(machine.names()[0]))
    state_of = _by_value(type(machine.initial))
    # The row's values in the record's field order, in one call.
    read = operator.itemgetter(
        "event_id",
        "event_kind",
        "id",
        "event_name",
        "event_from",
        machine.primary,
        "event_actor",
        *(f"event_{extra}" for extra in extras),
        "version",
        "updated_at",
    )

    def build(row: Row) -> R:
        values = list(read(row))
        name, before = values[3], values[4]
        values[3] = name_of(name) if name else None
        values[4] = state_of(before) if before else None
        values[5] = state_of(values[5])
        return _made(cls, dict(zip(keys, values)))  # noqa: B905 (as many: `read` gives them)

    return build


class Absent:
    """A record's field that its read may leave out (`bare_event_builder`): an instance that
    holds it answers from its dict (this descriptor defines no `__set__`); one that does not
    raises `Unread`."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __get__(self, record: Any, owner: type | None = None) -> Any:
        if record is None:
            raise AttributeError(self.name)  # on the class, as a field without a default
        raise Unread(f"{type(record).__name__} {record.id}: {self.name} was not read")


# A task's JSON columns, as a listing reads them: text, decoded when first read (see
# `TaskRecord.from_text_row`), by their place in the record's `_json`.
LAZY_JSON = ("packet", "result", "latest_checkpoint")


class _DependsOn:
    """A task's `packet.dependsOn`: from its packet, unless the read took the row's own
    `depends_on` column (`TaskRecord.keep_depends_on`), which is then in the instance's dict
    and answers first (this descriptor defines no `__set__`)."""

    def __get__(self, record: Any, owner: type | None = None) -> Any:
        if record is None:
            raise AttributeError("depends_on")
        return record.packet["depends_on"]


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

    # The packet's `dependsOn` (not a field: no annotation; see `_DependsOn`).
    depends_on = _DependsOn()

    @classmethod
    def from_mapping(cls, row: Mapping[Any, Any]) -> TaskRecord:
        """From a `tasks` row (or the same columns of the task at an event)."""
        fields = _task_scalars(row)
        fields["packet"] = row["packet"]
        fields["result"] = row["result"]
        fields["latest_checkpoint"] = row["latest_checkpoint"]
        return _made(cls, fields)

    @classmethod
    def from_text_row(cls, row: Mapping[Any, Any]) -> TaskRecord:
        """From a row whose JSON columns came as text (`packet_text`, `result_text`,
        `latest_checkpoint_text`): each is decoded the first time it is read. A page of
        tasks or of their events mostly answers other fields, and decoding every packet was
        a tenth of a listing's CPU."""
        fields = _task_scalars(row)
        fields["_json"] = (row["packet_text"], row["result_text"], row["latest_checkpoint_text"])
        return _made(cls, fields)

    @classmethod
    def from_scalar_row(cls, row: Mapping[Any, Any]) -> TaskRecord:
        """From a row without the JSON columns, for a reader that answers none of them (see
        `baton.store.tasks.TaskReads`): reading one is a fault, raised as `Unread`."""
        fields = _task_scalars(row)
        fields["_json"] = _NO_JSON
        return _made(cls, fields)

    @staticmethod
    def reader_of(
        columns: frozenset[str],
        *,
        packet: bool = False,
        packet_strings: frozenset[str] | None = None,
    ) -> Callable[[Row], TaskRecord]:
        """How a record is made from a row of some scalar columns only (`columns` and `id`)
        and, with `packet`, its packet as text (`packet_text`, perhaps only some of its
        keys), or with `packet_strings` those keys of it, each a string in its own column
        (`packet_<key>`), for a reader that answers nothing else: reading another field
        raises `Unread`."""
        return _partial_reader(columns | {"id"}, packet, packet_strings)

    def keep_depends_on(self, depends_on: list[str]) -> None:
        """Answer `depends_on` with the row's own column (read beside the record) rather than
        from the packet, which may then stay undecoded or unread."""
        self.__dict__["depends_on"] = depends_on


def _task_scalars(row: Mapping[Any, Any]) -> dict[str, Any]:
    """A task record's fields other than its JSON ones, from a row."""
    waiting_on = row["waiting_on"]
    return dict(
        id=row["id"],
        project=row["project"],
        state=_TASK_STATE(row["state"]),
        waiting_on=_WAITING_ON(waiting_on) if waiting_on else None,
        requester=row["requester"],
        assignee=row["assignee"],
        verification=_VERIFICATION(row["verification"]),
        version=row["version"],
        input_digest=row["input_digest"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
    )


class Unread(LookupError):
    """A record's field that its read left out (`TaskRecord.from_scalar_row`,
    `TaskRecord.reader_of`, `bare_event_builder`)."""


# How each scalar column becomes a record's field, when it is not as it comes.
_CONVERTED: dict[str, Callable[[Any], Any]] = {
    "state": _TASK_STATE,
    "waiting_on": lambda value: _WAITING_ON(value) if value else None,
    "verification": _VERIFICATION,
}


@functools.cache
def _partial_reader(
    columns: frozenset[str], packet: bool, strings: frozenset[str] | None = None
) -> Callable[[Row], TaskRecord]:
    # One function per set of columns, its fields written out: a comprehension over the
    # columns and a loop over the converted ones cost twice as much for every row of a page.
    names: dict[str, Any] = {"new": _new, "TaskRecord": TaskRecord, "UNREAD": UNREAD}
    parts = []
    for column in sorted(columns):
        if not column.isidentifier():
            raise ValueError(f"not a column: {column!r}")
        value = f"row[{column!r}]"
        if column in _CONVERTED:
            names[f"convert_{column}"] = _CONVERTED[column]
            value = f"convert_{column}({value})"
        parts.append(f"{column!r}: {value}")
    names["NO_JSON"] = _NO_JSON
    if strings is not None:  # the packet itself, in the record's dict: never decoded
        keys = sorted(strings)
        if not all(key.isidentifier() for key in keys):
            raise ValueError(f"not packet keys: {keys!r}")
        packet_dict = ", ".join(f"{key!r}: row['packet_{key}']" for key in keys)
        parts.append(f"'packet': {{{packet_dict}}}")
        parts.append("'_json': NO_JSON")
    elif packet:
        parts.append("'_json': (row['packet_text'], UNREAD, UNREAD)")
    else:
        parts.append("'_json': NO_JSON")
    source = (
        "def read(row):\n"
        "    made = new(TaskRecord)\n"
        f"    made.__dict__.update({{{', '.join(parts)}}})\n"
        "    return made\n"
    )
    exec(source, names)  # its source is made above from known column names alone
    return cast(Callable[[Row], TaskRecord], names["read"])


# In a record's `_json`: a JSON column its read left out (see `_Decoded`).
UNREAD = object()
_NO_JSON = (UNREAD, UNREAD, UNREAD)


class _Decoded:
    """A JSON field of a record `from_text_row`: decoded the first time it is read and kept in
    the instance, whose dict then answers every later read without this. (A record made
    `from_mapping` has the field in its dict from the start.)"""

    __slots__ = ("index", "name")

    def __init__(self, name: str, index: int) -> None:
        self.name = name
        self.index = index

    def __get__(self, record: Any, owner: type | None = None) -> Any:
        if record is None:
            raise AttributeError(self.name)  # on the class, as a field without a default
        text = record.__dict__["_json"][self.index]
        if text is UNREAD:
            raise Unread(f"task {record.id}: {self.name} was not read")
        value = None if text is None else orjson.loads(text)
        record.__dict__[self.name] = value
        return value


# Set after the dataclass is made, so that it takes them for no default.
for _index, _name in enumerate(LAZY_JSON):
    setattr(TaskRecord, _name, _Decoded(_name, _index))
for _field in fields(TaskRecord):
    if _field.name not in LAZY_JSON:
        setattr(TaskRecord, _field.name, Absent(_field.name))


class TaskEventKind(StrEnum):
    """What a task event records."""

    created = "created"
    moved = "moved"
    checkpoint_saved = "checkpoint_saved"


@dataclass(frozen=True)
class EventRecord:
    id: int
    kind: str  # a TaskEventKind's value
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
    def from_row(cls, row: Row, *, text: bool = False, json: bool = True) -> EventRecord:
        """From a row of the event's own columns beside the task's (see `baton.store.tasks`);
        with `text`, the task's JSON came as text (see `TaskRecord.from_text_row`), or, with
        `json` false too, not at all (`TaskRecord.from_scalar_row`)."""
        if not text:
            return _TASK_EVENT(row)
        return _TASK_EVENT_TEXT(row) if json else _TASK_EVENT_SCALARS(row)

    @classmethod
    def from_bare_row(cls, row: Row) -> EventRecord:
        """From a row of the event's own columns and the task's id, state, version and time
        at it: the record's `task` was not read (see `bare_event_builder`)."""
        return _TASK_EVENT_BARE(row)


_TASK_EVENT = event_builder(EventRecord, TaskRecord.from_mapping, HANDOFF, ("reason",))
_TASK_EVENT_TEXT = event_builder(EventRecord, TaskRecord.from_text_row, HANDOFF, ("reason",))
_TASK_EVENT_SCALARS = event_builder(EventRecord, TaskRecord.from_scalar_row, HANDOFF, ("reason",))
_TASK_EVENT_BARE = bare_event_builder(EventRecord, HANDOFF, ("reason",))
EventRecord.task = Absent("task")  # type: ignore[assignment]  # after the dataclass, no default


@dataclass(frozen=True)
class RunRecord:
    id: str
    owner: str
    project: str
    task_id: str | None
    title: str
    status: RunStatus
    phase: RunPhase
    checkpoint: RunCheckpoint
    questions: list[str] | None
    answers: list[str] | None
    pull_request_url: str | None
    failure_reason: str | None
    created_by: str
    version: int
    created_at: datetime
    updated_at: datetime

    @classmethod
    def from_mapping(cls, row: Mapping[Any, Any]) -> RunRecord:
        """From a `runs` row (or the same columns of the run at an event)."""
        return cls(
            id=row["id"],
            owner=row["owner"],
            project=row["project"],
            task_id=row["task_id"],
            title=row["title"],
            status=_RUN_STATUS(row["status"]),
            phase=_RUN_PHASE(row["phase"]),
            checkpoint=_RUN_CHECKPOINT(row["checkpoint"]),
            questions=row["questions"],
            answers=row["answers"],
            pull_request_url=row["pull_request_url"],
            failure_reason=row["failure_reason"],
            created_by=row["created_by"],
            version=row["version"],
            created_at=row["created_at"],
            updated_at=row["updated_at"],
        )


class RunEventKind(StrEnum):
    """What a run event records."""

    created = "created"
    moved = "moved"


@dataclass(frozen=True)
class RunEventRecord:
    id: int
    kind: str  # a RunEventKind's value
    run_id: str
    event: RunEvent | None
    from_status: RunStatus | None
    to_status: RunStatus
    actor: str
    details: dict[str, Any] | None
    version: int
    at: datetime
    run: RunRecord  # the run as it was right after this event

    @classmethod
    def from_row(cls, row: Row) -> RunEventRecord:
        """From a row of the event's own columns beside the run's at that event."""
        return _RUN_EVENT_RECORD(row)


_RUN_EVENT_RECORD = event_builder(RunEventRecord, RunRecord.from_mapping, PIPELINE, ("details",))
