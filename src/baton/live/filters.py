"""Which events a subscriber gets: its filter and what its principal may read, per log.

The same conditions run twice: as SQL for replay from the event log, and in Python for live
fan-out. A test checks that both paths deliver the same events.
"""

from __future__ import annotations

from dataclasses import dataclass

from baton.access.principals import Principal
from baton.protocol.handoff import TaskState
from baton.protocol.pipeline import RunEvent, RunStatus
from baton.store import runs
from baton.store.records import EventRecord, RunEventRecord
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


@dataclass(frozen=True)
class RunEventFilter:
    run_ids: frozenset[str] | None = None
    projects: frozenset[str] | None = None
    task_ids: frozenset[str] | None = None
    events: frozenset[RunEvent] | None = None
    statuses: frozenset[RunStatus] | None = None  # the event's toStatus

    def matches(self, event: RunEventRecord, principal: Principal) -> bool:
        run = event.run
        return (
            principal.may_see_run(run.owner)
            and (self.run_ids is None or event.run_id in self.run_ids)
            and (self.projects is None or run.project in self.projects)
            and (self.task_ids is None or run.task_id in self.task_ids)
            and (self.events is None or event.event in self.events)
            and (self.statuses is None or event.to_status in self.statuses)
        )

    def where(self, principal: Principal, p: Params) -> str:
        """The same conditions in SQL, over `run_events e` joined to `runs r`."""
        clauses = [f"({runs.visible_sql(principal, p)})"]
        if self.run_ids is not None:
            clauses.append(f"e.run_id = ANY({p(sorted(self.run_ids))}::text[])")
        if self.projects is not None:
            clauses.append(f"r.project = ANY({p(sorted(self.projects))}::text[])")
        if self.task_ids is not None:
            clauses.append(f"r.task_id = ANY({p(sorted(self.task_ids))}::text[])")
        if self.events is not None:
            clauses.append(f"e.event = ANY({p(sorted(e.value for e in self.events))}::text[])")
        if self.statuses is not None:
            statuses = sorted(s.value for s in self.statuses)
            clauses.append(f"e.to_status = ANY({p(statuses)}::text[])")
        return " AND ".join(clauses)
