"""Which events a subscriber gets: its filter and what its principal may read.

The same conditions run twice: as SQL for replay from the event log, and in Python for live
fan-out. A test checks that both paths deliver the same events.
"""

from __future__ import annotations

from dataclasses import dataclass

from baton.access.principals import Principal
from baton.protocol.handoff import TaskState
from baton.store.records import EventRecord
from baton.store.sql import Params
from baton.store.tasks import visible_sql


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

    def where(self, principal: Principal, p: Params) -> str:
        """The same conditions in SQL, over `task_events e` joined to `tasks t`."""
        clauses = [f"({visible_sql(principal, p)})"]
        if self.task_ids is not None:
            clauses.append(f"e.task_id = ANY({p(sorted(self.task_ids))}::text[])")
        if self.projects is not None:
            clauses.append(f"t.project = ANY({p(sorted(self.projects))}::text[])")
        if self.kinds is not None:
            clauses.append(f"e.kind = ANY({p(sorted(self.kinds))}::text[])")
        if self.states is not None:
            states = sorted(s.value for s in self.states)
            clauses.append(f"e.to_state = ANY({p(states)}::text[])")
        if self.requester is not None:
            clauses.append(f"t.requester = {p(self.requester)}")
        if self.assignee is not None:
            clauses.append(f"t.assignee = {p(self.assignee)}")
        return " AND ".join(clauses)
