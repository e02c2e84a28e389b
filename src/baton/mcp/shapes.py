"""Tasks, runs, their events and Baton's errors as the GraphQL API returns them, for tools'
structured content and resources' text.

The field names and values are those of the schema's `Task`, `TaskEvent`, `Run`, `RunEvent`,
`RunLease` and error types (camelCase, enums as on the wire, times in ISO 8601); a test compares
them with the same fields read over GraphQL, so the two doors cannot drift apart.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from datetime import datetime
from functools import lru_cache
from typing import Any

from baton.access.principals import Principal
from baton.errors import BatonError
from baton.protocol.params import camel
from baton.protocol.pipeline import PHASE_LABELS, STATUS_LABELS
from baton.services.runs import RunService
from baton.services.tasks import TaskService
from baton.store.lifecycle import Layout
from baton.store.records import EventRecord, RunEventRecord, RunRecord, TaskRecord
from baton.store.runs import RUNS, Lease
from baton.store.tasks import TASKS

JSONObject = dict[str, Any]


def _time(value: datetime) -> str:
    return value.isoformat()


# The seed's field names are few: each is camelCased once.
_camel = lru_cache(maxsize=1024)(camel)


def camel_keys(value: Any) -> Any:
    """A seed object (snake_case keys, nested) with the API's camelCase keys."""
    if isinstance(value, dict):
        return {_camel(k): camel_keys(v) for k, v in value.items()}
    if isinstance(value, list):
        return [camel_keys(v) for v in value]
    return value


def _result(result: dict[str, Any] | None) -> JSONObject | None:
    if result is None:
        return None
    out = camel_keys(result)
    # Optional evidence fields are null in the API's answer, never missing.
    out["evidence"] = [{"url": None, "content": None, **e} for e in out["evidence"]]
    # Stored as written (`…Z`); the API answers the time it parses from it.
    out["returnedAt"] = _time(datetime.fromisoformat(out["returnedAt"]))
    return out  # type: ignore[no-any-return]


def task(record: TaskRecord, principal: Principal) -> JSONObject:
    """The task, with the moves `principal` may make on it now."""
    return {
        "id": record.id,
        "project": record.project,
        "state": record.state.value,
        "waitingOn": record.waiting_on.value if record.waiting_on else None,
        "requester": record.requester,
        "assignee": record.assignee,
        "verification": record.verification.value,
        "version": record.version,
        "packet": camel_keys(record.packet),
        "result": _result(record.result),
        "latestCheckpoint": camel_keys(record.latest_checkpoint),
        "createdAt": _time(record.created_at),
        "updatedAt": _time(record.updated_at),
        "allowedMoves": [m.value for m in TaskService.allowed_moves(principal, record)],
    }


def event_shape(layout: Layout) -> Callable[[Any], JSONObject]:
    """An event of the lifecycle `layout` lays out, as its GraphQL event type answers it (the
    same fields, from the same declaration; the row after the event is left out)."""
    axes = [(camel(c), operator.attrgetter(c)) for c in (layout.name, layout.before, layout.after)]
    subject_key, subject = camel(layout.subject), operator.attrgetter(layout.subject)
    extras = [
        (camel(column), operator.attrgetter(column), layout.extra_reader(column))
        for column in layout.extras
    ]

    def shape(event: Any) -> JSONObject:
        out: JSONObject = {"id": str(event.id), "kind": event.kind, subject_key: subject(event)}
        for key, read in axes:
            value = read(event)
            out[key] = value.value if value is not None else None
        out["actor"] = event.actor
        for key, read, convert in extras:
            out[key] = convert(read(event)) if convert else read(event)
        out["at"] = _time(event.at)
        out["version"] = event.version
        return out

    return shape


task_event: Callable[[EventRecord], JSONObject] = event_shape(TASKS)
run_event: Callable[[RunEventRecord], JSONObject] = event_shape(RUNS)


def lease(value: Lease | None) -> JSONObject | None:
    if value is None:
        return None
    return {"id": value.id, "holder": value.holder, "expiresAt": _time(value.expires_at)}


def run(record: RunRecord, principal: Principal, current: Lease | None) -> JSONObject:
    """The run, with the events `principal` may make on it now; `current`: its lease, read
    with it (a claimed run's runner events are its holder's alone)."""
    return {
        "id": record.id,
        "owner": record.owner,
        "project": record.project,
        "taskId": record.task_id,
        "title": record.title,
        "status": record.status.value,
        "phase": record.phase.value,
        "checkpoint": record.checkpoint.value,
        "statusLabel": STATUS_LABELS[record.status],
        "phaseLabel": PHASE_LABELS[record.phase],
        "questions": record.questions,
        "answers": record.answers,
        "pullRequestUrl": record.pull_request_url,
        "failureReason": record.failure_reason,
        "createdBy": record.created_by,
        "version": record.version,
        "createdAt": _time(record.created_at),
        "updatedAt": _time(record.updated_at),
        "allowedEvents": [e.value for e in RunService.allowed_events(principal, record, current)],
        "lease": lease(current),
    }


def error(exc: BatonError) -> JSONObject:
    """The error as the API's error type gives it (`InvalidStateError { code message state move
    allowedMoves }`, …), with that type's name as `type`; an error that names no type is raised
    again."""
    if exc.type_name is None:
        raise exc
    out: JSONObject = {"type": exc.type_name, "code": exc.code, "message": exc.message}
    for name, value in exc.fields().items():
        out[camel(name)] = value
    return out
