"""Which events a subscriber gets: its filter and what its principal may read.

The same conditions run twice: as SQL for replay from the event log, and in Python for live
fan-out. A test checks that both paths deliver the same events.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import ColumnElement, and_

from baton.access.principals import Principal
from baton.protocol.handoff import TaskState
from baton.store.records import EventRecord
from baton.store.tasks import EVENTS, TASKS, visible_to


@dataclass(frozen=True)
class EventFilter:
    task_ids: frozenset[str] | None = None
    projects: frozenset[str] | None = None
    kinds: frozenset[str] | None = None
    states: frozenset[TaskState] | None = None  # the event's toState
    requester: str | None = None
    assignee: str | None = None

    def matches(self, event: EventRecord, principal: Principal) -> bool:
        task = event.task
        return (
            principal.sees(requester=task.requester, assignee=task.assignee)
            and (self.task_ids is None or event.task_id in self.task_ids)
            and (self.projects is None or task.project in self.projects)
            and (self.kinds is None or event.kind in self.kinds)
            and (self.states is None or event.to_state in self.states)
            and (self.requester is None or task.requester == self.requester)
            and (self.assignee is None or task.assignee == self.assignee)
        )

    def where(self, principal: Principal) -> ColumnElement[bool]:
        """The same conditions over `task_events` joined to `tasks`."""
        clauses: list[ColumnElement[bool]] = [visible_to(principal)]
        if self.task_ids is not None:
            clauses.append(EVENTS.c.task_id.in_(sorted(self.task_ids)))
        if self.projects is not None:
            clauses.append(TASKS.c.project.in_(sorted(self.projects)))
        if self.kinds is not None:
            clauses.append(EVENTS.c.kind.in_(sorted(self.kinds)))
        if self.states is not None:
            clauses.append(EVENTS.c.to_state.in_(sorted(s.value for s in self.states)))
        if self.requester is not None:
            clauses.append(TASKS.c.requester == self.requester)
        if self.assignee is not None:
            clauses.append(TASKS.c.assignee == self.assignee)
        return and_(*clauses)
