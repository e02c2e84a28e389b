"""Which events a subscriber gets: its filter and what its principal may read, per log.

The same conditions run twice: as SQL for replay from the event log, and in Python for live
fan-out. A test checks that both paths deliver the same events.

Both come from one declaration per log (`FilterSchema`): each condition names a column of the
log or of its subject's row, and an event record carries the same names (`EventRecord.task_id`
for `task_events.task_id`, `EventRecord.task.project` for `tasks.project`), so the SQL and the
Python test are made from that name alone. A lifecycle's filter is a frozen dataclass of its
conditions' values that derives from `LogFilter` and names its schema.

Every door makes its filters here, so each is held to the same bounds: `LogFilter.of` from the
conditions' values (a GraphQL filter input's), `LogFilter.from_stored` from a filter as a
webhook endpoint keeps it (the input's names, JSON values).
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from enum import Enum
from typing import Any, ClassVar, Generic, Self, TypeVar, cast
from weakref import WeakValueDictionary

from baton.access.principals import Principal
from baton.errors import InvalidInput
from baton.protocol.handoff import TaskState
from baton.protocol.params import camel
from baton.protocol.pipeline import RunEvent, RunStatus
from baton.store import runs
from baton.store.records import EventRecord, RunEventRecord, TaskEventKind
from baton.store.runs import RUNS
from baton.store.sql import Params
from baton.store.tasks import TASKS, visible_sql

E = TypeVar("E")

MAX_FILTER_VALUES = 100  # in one list of a filter (a listing's filter is held to it too)


@dataclass(frozen=True)
class Condition:
    """One condition a filter may set: on a column of the log (`e.<log>`) or of the subject's
    row (`<alias>.<row>`). `many`: the filter holds a set of values (any of them matches);
    otherwise one value."""

    name: str  # the filter's field
    log: str | None = None
    row: str | None = None
    many: bool = True
    values: type[Enum] | None = None  # the enum whose members it holds, if any

    @property
    def key(self) -> str:
        """Its name in a filter input and in a stored filter: `taskIds`."""
        return camel(self.name)


@dataclass(frozen=True)
class FilterSchema:
    """What a log's filters may test, and who may read which events."""

    noun: str  # the event record's attribute holding the subject's row: task, run
    alias: str  # the subject's table in the log's select: t, r
    visible_sql: Callable[[Principal, Params], str]  # over `alias`
    may_see: Callable[[Principal, Any], bool]  # the same, on the subject's row
    conditions: tuple[Condition, ...]


@dataclass(frozen=True)
class _Test:
    """A condition of one filter, as its column and its Python reading."""

    sql: str
    read: Callable[[Any], Any]
    wanted: Any  # a frozenset (many) or one value
    many: bool


def _sql_value(value: Any) -> Any:
    return value.value if isinstance(value, Enum) else value


class LogFilter(Generic[E]):
    """A filter's behaviour, from its class's `schema` and the values it was given (its
    dataclass fields, named as the schema's conditions; None leaves a condition out)."""

    schema: ClassVar[FilterSchema]

    @classmethod
    def of(cls, given: Mapping[str, Any]) -> Self:
        """The filter with the conditions' values in `given`, by name (None or missing leaves
        one out): each list, of at most `MAX_FILTER_VALUES` values, as a set. Equal filters
        are one object while any is in use: thousands of subscriptions often follow the same
        events, and each filter holds its sets and its tests (about 600 bytes,
        bench.idle_memory)."""
        values: dict[str, Any] = {}
        for condition in cls.schema.conditions:
            value = given.get(condition.name)
            if value is not None and condition.many:
                _bounded(condition, value)
                value = frozenset(value)
            values[condition.name] = value
        key = (cls, *values.values())  # not the filter: a key is held for as long as it lives
        found = _IN_USE.get(key)
        if found is None:
            _IN_USE[key] = found = cls(**values)
        return cast(Self, found)

    @classmethod
    def from_stored(cls, stored: Mapping[str, Any]) -> Self:
        """The filter a stored one stands for: the filter input's names (`taskIds`), lists of
        strings and single strings, enum members by value. `InvalidInput` for a name that is
        not a condition, a value of another form, or past the bounds of `of`."""
        conditions = {condition.key: condition for condition in cls.schema.conditions}
        given: dict[str, Any] = {}
        for key, value in stored.items():
            condition = conditions.get(key)
            if condition is None:
                raise InvalidInput(f"filter.{key}", "is not a condition of this filter")
            if value is not None:
                given[condition.name] = _read(condition, value)
        return cls.of(given)

    def _tests(self) -> tuple[_Test, ...]:
        # Worked out once per filter: live fan-out tests every event against it.
        tests: tuple[_Test, ...] | None = self.__dict__.get("_tests_")
        if tests is None:
            tests = tuple(self._build())
            object.__setattr__(self, "_tests_", tests)
        return tests

    def _build(self) -> list[_Test]:
        schema = self.schema
        out = []
        for condition in schema.conditions:
            wanted = getattr(self, condition.name)
            if wanted is None:
                continue
            if condition.log is not None:
                sql, path = f"e.{condition.log}", condition.log
            else:
                sql, path = f"{schema.alias}.{condition.row}", f"{schema.noun}.{condition.row}"
            out.append(_Test(sql, operator.attrgetter(path), wanted, condition.many))
        return out

    def matches(self, event: E, principal: Principal) -> bool:
        if not self.schema.may_see(principal, getattr(event, self.schema.noun)):
            return False
        for test in self._tests():
            value = test.read(event)
            if not (value in test.wanted if test.many else value == test.wanted):
                return False
        return True

    def where(self, principal: Principal, p: Params) -> str:
        """The same conditions in SQL, over the log `e` joined to its subject's table."""
        clauses = [f"({self.schema.visible_sql(principal, p)})"]
        for test in self._tests():
            if test.many:
                values = sorted(_sql_value(v) for v in test.wanted)
                clauses.append(f"{test.sql} = ANY({p(values)}::text[])")
            else:
                clauses.append(f"{test.sql} = {p(_sql_value(test.wanted))}")
        return " AND ".join(clauses)


# Filters in use, by class and values (`LogFilter.of`): equal ones are the same object.
_IN_USE: WeakValueDictionary[tuple[Any, ...], LogFilter[Any]] = WeakValueDictionary()


def _bounded(condition: Condition, value: Any) -> None:
    if len(value) > MAX_FILTER_VALUES:
        raise InvalidInput(f"filter.{condition.name}", f"at most {MAX_FILTER_VALUES} values")


def _read(condition: Condition, value: Any) -> Any:
    """A stored condition's value as the filter holds it (its enum's members)."""
    where = f"filter.{condition.key}"
    items = value if condition.many else [value]
    if not isinstance(items, list) or not all(isinstance(item, str) for item in items):
        raise InvalidInput(
            where, "must be a list of strings" if condition.many else "must be a string"
        )
    if condition.many:
        _bounded(condition, items)
    if condition.values is not None:
        members = {member.value: member for member in condition.values}
        unknown = next((item for item in items if item not in members), None)
        if unknown is not None:
            raise InvalidInput(where, f"{unknown!r} is not a {condition.values.__name__}")
        items = [members[item] for item in items]
    return items if condition.many else items[0]


def check_filter(cls: type[LogFilter[Any]]) -> None:
    """A filter's fields are exactly its schema's conditions, in order."""
    names = [f.name for f in fields(cls)]  # type: ignore[arg-type]  # a dataclass, checked here
    declared = [c.name for c in cls.schema.conditions]
    if names != declared:
        raise TypeError(f"{cls.__name__} has fields {names}, its schema {declared}")


TASK_EVENTS = FilterSchema(
    noun="task",
    alias="t",
    visible_sql=visible_sql,
    may_see=lambda principal, task: principal.sees(
        requester=task.requester, assignee=task.assignee
    ),
    conditions=(
        Condition("task_ids", log=TASKS.subject),
        Condition("projects", row="project"),
        Condition("kinds", log="kind", values=TaskEventKind),
        Condition("states", log=TASKS.after, values=TaskState),  # the event's toState
        Condition("requester", row="requester", many=False),
        Condition("assignee", row="assignee", many=False),
    ),
)


@dataclass(frozen=True)
class EventFilter(LogFilter[EventRecord]):
    schema: ClassVar[FilterSchema] = TASK_EVENTS

    task_ids: frozenset[str] | None = None
    projects: frozenset[str] | None = None
    kinds: frozenset[str] | None = None
    states: frozenset[TaskState] | None = None
    requester: str | None = None
    assignee: str | None = None


RUN_EVENTS = FilterSchema(
    noun="run",
    alias="r",
    visible_sql=runs.visible_sql,
    may_see=lambda principal, run: principal.may_see_run(run.owner),
    conditions=(
        Condition("run_ids", log=RUNS.subject),
        Condition("projects", row="project"),
        Condition("task_ids", row="task_id"),
        Condition("events", log=RUNS.name, values=RunEvent),
        Condition("statuses", log=RUNS.after, values=RunStatus),  # the event's toStatus
    ),
)


@dataclass(frozen=True)
class RunEventFilter(LogFilter[RunEventRecord]):
    schema: ClassVar[FilterSchema] = RUN_EVENTS

    run_ids: frozenset[str] | None = None
    projects: frozenset[str] | None = None
    task_ids: frozenset[str] | None = None
    events: frozenset[RunEvent] | None = None
    statuses: frozenset[RunStatus] | None = None


check_filter(EventFilter)
check_filter(RunEventFilter)
