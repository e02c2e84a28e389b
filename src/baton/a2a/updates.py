"""An event's A2A updates as the SDK's JSON, written directly.

`mapping.updates_of` builds an event's updates as the SDK's protobuf messages, which the
streams and the push sender wrote out with `MessageToDict`: every data part and every
metadata object parsed into a `Struct`, then walked back out by descriptor. That cost about
90 µs an event, on every event a stream or a push config follows. These functions write the
same JSON from the event itself, as `MessageToDict` writes those messages: camelCase field
names, enums by name, fields left at their defaults left out, a Struct's numbers as floats
(a `Value` holds doubles), timestamps in UTC with 0, 3 or 6 fractional digits. A test holds
them to `MessageToDict(updates_of(…))` over every kind of event (`tests/a2a/test_updates.py`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Final

from a2a.types.a2a_pb2 import TaskState as A2AState

from baton.a2a import mapping
from baton.protocol.handoff import MoveName
from baton.store.records import EventRecord

# A2A's task states and roles by name, as MessageToDict writes an enum.
_STATE_NAMES: Final = {value: A2AState.Name(value) for value in A2AState.values()}
_ROLE_AGENT: Final = "ROLE_AGENT"


def updates_json(event: EventRecord, context_id: str) -> list[dict[str, Any]]:
    """`[MessageToDict(u) for u in mapping.updates_of(event, context_id)]`, without the
    messages."""
    task = event.task
    metadata = struct(mapping.update_metadata(event))
    out: list[dict[str, Any]] = []
    if event.move is MoveName.SUBMIT_RESULT:
        for artifact in _artifacts(task.result):
            update = {
                "taskId": task.id,
                "contextId": context_id,
                "artifact": artifact,
                "lastChunk": True,
                "metadata": metadata,
            }
            out.append({"artifactUpdate": update})
    status = {
        "taskId": task.id,
        "contextId": context_id,
        "status": _status(event, context_id),
        "metadata": metadata,
    }
    out.append({"statusUpdate": status})
    return out


def _status(event: EventRecord, context_id: str) -> dict[str, Any]:
    status: dict[str, Any] = {"state": _STATE_NAMES[mapping.state_of(event.task)]}
    message = _status_message(event, context_id)
    if message is not None:
        status["message"] = message
    status["timestamp"] = timestamp(event.at)
    return status


def _status_message(event: EventRecord, context_id: str) -> dict[str, Any] | None:
    """`mapping.status_message`'s message."""
    said = mapping.status_said(event)
    if not said:
        return None
    return {
        "messageId": mapping.status_message_id(event),
        "contextId": context_id,
        "taskId": event.task.id,
        "role": _ROLE_AGENT,
        "parts": _parts(said),
    }


def _artifacts(result: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """`mapping.artifacts_of`'s artifacts."""
    return [
        {"artifactId": name, "name": name, "description": description, "parts": _parts(parts)}
        for name, description, parts in mapping.result_artifacts(result)
    ]


def _parts(said: Sequence[mapping.Said]) -> list[dict[str, Any]]:
    return [_text(p) if isinstance(p, str) else _data(p) for p in said]


def _text(text: str) -> dict[str, Any]:
    return {"text": text, "mediaType": mapping.TEXT}


def _data(value: Mapping[str, Any]) -> dict[str, Any]:
    return {"data": struct(value), "mediaType": mapping.JSON}


def struct(value: Any) -> Any:
    """`value` (JSON) as a protobuf `Value` holds it and MessageToDict writes it: every number
    a float. A value JSON cannot hold is refused, as `ParseDict` refuses it."""
    if isinstance(value, str) or value is None or value is True or value is False:
        return value
    if isinstance(value, Mapping):
        return {str(key): struct(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [struct(item) for item in value]
    if isinstance(value, int | float):
        return float(value)
    raise TypeError(f"not a JSON value: {type(value).__name__}")


def timestamp(at: datetime) -> str:
    """`at` as a protobuf Timestamp's JSON: UTC, `Z`, and 0, 3 or 6 fractional digits, the
    fewest that hold it."""
    utc = at.astimezone(UTC) if at.tzinfo is not None else at
    micro = utc.microsecond
    head = utc.replace(microsecond=0, tzinfo=None).isoformat()
    if micro == 0:
        return f"{head}Z"
    if micro % 1000 == 0:
        return f"{head}.{micro // 1000:03d}Z"
    return f"{head}.{micro:06d}Z"
