"""An event's A2A updates written directly (`baton.a2a.updates`) are the JSON the SDK's own
mapping writes for the same event (`MessageToDict` of `mapping.updates_of`'s messages): every
kind of event and move, every state, checkpoints and results of any JSON, any time."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import orjson
import pytest
from google.protobuf.json_format import MessageToDict  # type: ignore[import-untyped]
from hypothesis import given, settings
from hypothesis import strategies as st

from baton.a2a import mapping
from baton.a2a.frames import Frame
from baton.a2a.updates import timestamp, updates_json
from baton.protocol.handoff import MoveName, TaskState, Verification, WaitingOn
from baton.store.records import EventRecord, TaskEventKind
from tests.a2a.test_mapping import event, task
from tests.helpers import checkpoint, result


def _the_sdks(record: EventRecord, context_id: str = "ctx") -> list[dict[str, Any]]:
    return [MessageToDict(update) for update in mapping.updates_of(record, context_id)]


def _same(record: EventRecord, context_id: str = "ctx") -> None:
    ours = updates_json(record, context_id)
    assert ours == _the_sdks(record, context_id)
    # The same JSON text too, keys sorted (in Python 5 == 5.0; a client's types tell them apart).
    sort = orjson.OPT_SORT_KEYS
    assert [orjson.dumps(u, option=sort) for u in ours] == [
        orjson.dumps(u, option=sort) for u in _the_sdks(record, context_id)
    ]
    for update in ours:  # and the SDK reads each back as the message it wrote
        assert Frame("1", update).payload is not None


POSITIONS = [(state, waiting, v) for state, waiting in mapping.STATES for v in Verification]


@pytest.mark.parametrize(("state", "waiting_on", "verification"), POSITIONS)
@pytest.mark.parametrize("move", [None, *MoveName])
def test_every_move_into_every_position_is_written_as_the_sdk_writes_it(
    state: TaskState, waiting_on: WaitingOn | None, verification: Verification, move: MoveName
) -> None:
    fields: dict[str, Any] = {"state": state.value, "verification": verification.value}
    if waiting_on is not None:
        fields["waiting_on"] = waiting_on.value
    if move is MoveName.SUBMIT_RESULT:
        fields["result"] = result()
    record = task(**fields)
    _same(event(record, TaskEventKind.moved, move, reason="because" if move else None))


def test_a_checkpoint_and_a_returned_result_are_written_as_the_sdk_writes_them() -> None:
    saved = task(latest_checkpoint=checkpoint())
    _same(event(saved, TaskEventKind.checkpoint_saved, None))
    returned = task(state="verifying", result=result())
    _same(event(returned, TaskEventKind.moved, MoveName.SUBMIT_RESULT))
    bare = task(state="verifying", verification="REVIEW", result={"summary": "s"})
    _same(event(bare, TaskEventKind.moved, MoveName.SUBMIT_RESULT), "another context")


JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**60), max_value=2**60)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=12,
)


@settings(max_examples=150, deadline=None)
@given(
    extra=st.dictionaries(st.text(min_size=1, max_size=8), JSON, max_size=4),
    progress=st.text(max_size=20),
    micro=st.integers(min_value=0, max_value=999_999),
)
def test_any_checkpoint_at_any_time_is_written_as_the_sdk_writes_it(
    extra: dict[str, Any], progress: str, micro: int
) -> None:
    saved = task(latest_checkpoint={**checkpoint(), **extra, "progress": progress})
    at = datetime(2026, 12, 5, 4, 40, 1, micro, tzinfo=UTC)
    _same(event(saved, TaskEventKind.checkpoint_saved, None, at=at))


@settings(max_examples=60, deadline=None)
@given(evidence=st.lists(st.dictionaries(st.text(max_size=6), JSON, max_size=3), max_size=3))
def test_any_result_is_written_as_the_sdk_writes_it(evidence: list[dict[str, Any]]) -> None:
    returned = task(state="verifying", result={**result(), "evidence": evidence, "n": 3})
    _same(event(returned, TaskEventKind.moved, MoveName.SUBMIT_RESULT))


@pytest.mark.parametrize(
    "at",
    [
        datetime(2026, 12, 5, 4, 40, 1, tzinfo=UTC),
        datetime(2026, 12, 5, 4, 40, 1, 120000, tzinfo=UTC),
        datetime(2026, 12, 5, 4, 40, 1, 123000, tzinfo=UTC),
        datetime(2026, 12, 5, 4, 40, 1, 123400, tzinfo=UTC),
        datetime(2026, 12, 5, 4, 40, 1, 1, tzinfo=UTC),
        datetime(1970, 1, 1, tzinfo=UTC),
        datetime(2026, 12, 5, 10, 10, 1, 5000, tzinfo=timezone(timedelta(hours=5, minutes=30))),
    ],
)
def test_times_are_written_as_a_protobuf_timestamp_writes_them(at: datetime) -> None:
    saved = task(latest_checkpoint=checkpoint())
    (sdk,) = _the_sdks(event(saved, TaskEventKind.checkpoint_saved, None, at=at))
    assert timestamp(at) == sdk["statusUpdate"]["status"]["timestamp"]
