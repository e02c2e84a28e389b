"""The event logs subscribers can follow: tasks' and runs'."""

from __future__ import annotations

from baton.live.hub import EventLog
from baton.store.records import EventRecord, RunEventRecord
from baton.store.runs import EVENTS_WITH_RUNS, RUNS
from baton.store.tasks import EVENTS_WITH_TASKS, TASKS

TASK_LOG: EventLog[EventRecord] = EventLog(
    channel="baton_task_events",
    table=TASKS.events,
    subject=TASKS.subject,
    select=EVENTS_WITH_TASKS,
    parse=EventRecord.from_row,
)
RUN_LOG: EventLog[RunEventRecord] = EventLog(
    channel="baton_run_events",
    table=RUNS.events,
    subject=RUNS.subject,
    select=EVENTS_WITH_RUNS,
    parse=RunEventRecord.from_row,
)
