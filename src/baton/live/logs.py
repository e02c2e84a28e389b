"""The event logs subscribers can follow: tasks' and runs'."""

from __future__ import annotations

from baton.live.hub import EventLog
from baton.store.records import EventRecord, RunEventRecord
from baton.store.runs import EVENTS_WITH_RUNS
from baton.store.tasks import EVENTS_WITH_TASKS

TASK_LOG: EventLog[EventRecord] = EventLog(
    channel="baton_task_events",
    table="task_events",
    subject="task_id",
    select=EVENTS_WITH_TASKS,
    parse=EventRecord.from_row,
)
RUN_LOG: EventLog[RunEventRecord] = EventLog(
    channel="baton_run_events",
    table="run_events",
    subject="run_id",
    select=EVENTS_WITH_RUNS,
    parse=RunEventRecord.from_row,
)
