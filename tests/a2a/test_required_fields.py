"""The handler's check of the fields A2A requires answers what the SDK's
`validate_proto_required_fields` answers, without walking the whole request; the fields it checks
are the ones the SDK's descriptors mark REQUIRED (an SDK that requires more fails here)."""

from __future__ import annotations

from typing import Any

import pytest
from a2a.helpers.proto_helpers import new_data_part
from a2a.types.a2a_pb2 import (
    AuthenticationInfo,
    CancelTaskRequest,
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    SubscribeToTaskRequest,
    TaskPushNotificationConfig,
)
from a2a.utils.errors import InvalidParamsError
from a2a.utils.proto_utils import validate_proto_required_fields
from google.api.field_behavior_pb2 import (  # type: ignore[import-untyped]  # no stubs
    FieldBehavior,
    field_behavior,
)

from baton.a2a import handler
from baton.a2a.handler import REQUIRED

REQUESTS = (SendMessageRequest, GetTaskRequest, CancelTaskRequest, SubscribeToTaskRequest)


def required_paths(descriptor: Any, prefix: str = "") -> list[str]:
    """The REQUIRED fields of a message type and of every message type in it, as the SDK names
    them (protobuf's own types, Struct and Value, require nothing and nest without end)."""
    found = []
    for field in descriptor.fields:
        path = f"{prefix}{field.name}"
        if FieldBehavior.REQUIRED in field.GetOptions().Extensions[field_behavior]:
            found.append(path)
        inner = field.message_type
        if inner is not None and not inner.full_name.startswith("google.protobuf."):
            found += required_paths(inner, f"{path}.")
    return found


@pytest.mark.parametrize("kind", REQUESTS)
def test_the_fields_checked_are_the_ones_the_sdk_marks_required(kind: Any) -> None:
    name = kind.DESCRIPTOR.name
    assert list(REQUIRED[name]) == required_paths(kind.DESCRIPTOR)


def sdk_errors(params: Any) -> list[dict[str, str]]:
    try:
        validate_proto_required_fields(params)
    except InvalidParamsError as exc:
        errors: list[dict[str, str]] = (exc.data or {})["errors"]
        return errors
    return []


def message(**fields: Any) -> Message:
    given: dict[str, Any] = {
        "message_id": "m-1",
        "role": Role.ROLE_USER,
        "parts": [Part(text="x"), new_data_part({"deep": [{"a": None}]})],
    }
    return Message(**{**given, **fields})


def push(**fields: Any) -> SendMessageConfiguration:
    config = TaskPushNotificationConfig(**fields)
    return SendMessageConfiguration(task_push_notification_config=config)


CASES = [
    SendMessageRequest(message=message()),
    SendMessageRequest(message=message(), metadata={"skill": "doc"}),
    SendMessageRequest(),
    SendMessageRequest(configuration=push()),
    SendMessageRequest(message=message(message_id="")),
    SendMessageRequest(message=message(role=Role.ROLE_UNSPECIFIED)),
    SendMessageRequest(message=message(parts=[])),
    SendMessageRequest(message=Message()),
    SendMessageRequest(message=message(), configuration=SendMessageConfiguration()),
    SendMessageRequest(message=message(), configuration=push(url="https://x.example/hook")),
    SendMessageRequest(message=message(), configuration=push()),
    SendMessageRequest(
        message=message(), configuration=push(authentication=AuthenticationInfo(credentials="c"))
    ),
    SendMessageRequest(
        message=message(parts=[]),
        configuration=push(authentication=AuthenticationInfo(scheme="Bearer")),
    ),
    GetTaskRequest(id="t"),
    GetTaskRequest(),
    CancelTaskRequest(id="t"),
    CancelTaskRequest(),
    SubscribeToTaskRequest(id="t"),
    SubscribeToTaskRequest(),
]


@pytest.mark.parametrize("params", CASES)
def test_the_check_answers_what_the_sdks_answers(params: Any) -> None:
    expected = sdk_errors(params)
    if not expected:
        handler._required(params)
        return
    with pytest.raises(InvalidParamsError) as refused:
        handler._required(params)
    assert refused.value.message == "Validation failed"
    assert refused.value.data == {"code": "invalid_input", "errors": expected}


def test_the_cases_cover_every_required_field() -> None:
    """Each field `REQUIRED` lists is missing in some case above (and each check can fail)."""
    missing = {e["field"] for params in CASES for e in sdk_errors(params)}
    assert missing == {path for paths in REQUIRED.values() for path in paths}
