"""`baton.a2a.mapping`, with no I/O: the state table, messages read as hand-offs and replies,
tasks and events rendered as A2A's types."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from a2a.helpers.proto_helpers import get_data_parts, new_data_part, new_text_part
from a2a.types.a2a_pb2 import Message, Part, Role
from a2a.types.a2a_pb2 import TaskState as A2AState
from a2a.utils.errors import ContentTypeNotSupportedError

from baton.a2a import mapping
from baton.access.principals import Principal, PrincipalKind
from baton.errors import InvalidInput
from baton.protocol.handoff import (
    HANDOFF,
    Actor,
    MoveName,
    TaskState,
    Verification,
    WaitingOn,
    possible_moves,
)
from baton.services.tasks import MoveArgs
from baton.store.records import EventRecord, TaskEventKind, TaskRecord
from tests.helpers import checkpoint, packet, result

AGENT = Principal(PrincipalKind.AGENT, "alice/planner")
OWNER = Principal(PrincipalKind.OWNER, "alice")
WHEN = datetime(2026, 12, 5, 12, 0, tzinfo=UTC)


def msg(*parts: Part, message_id: str = "m-1", **fields: Any) -> Message:
    return Message(message_id=message_id, role=Role.ROLE_USER, parts=list(parts), **fields)


def data(value: dict[str, Any]) -> Part:
    return new_data_part(value, "application/json")


def task(**fields: Any) -> TaskRecord:
    row: dict[str, Any] = {
        "id": "alice_t1",
        "project": "web",
        "state": "working",
        "waiting_on": None,
        "requester": "alice/planner",
        "assignee": "bob/coder",
        "packet": packet(),
        "result": None,
        "latest_checkpoint": None,
        "verification": "AUTO",
        "version": 5,
        "input_digest": "x",
        "created_at": WHEN,
        "updated_at": WHEN,
    }
    return TaskRecord.from_mapping({**row, **fields})


def event(record: TaskRecord, kind: TaskEventKind, move: MoveName | None, **fields: Any) -> Any:
    values: dict[str, Any] = {
        "id": 41,
        "kind": kind.value,
        "task_id": record.id,
        "move": move,
        "from_state": None,
        "to_state": record.state,
        "actor": "bob/coder",
        "reason": None,
        "version": record.version,
        "at": WHEN,
        "task": record,
    }
    return EventRecord(**{**values, **fields})


# --- the state table --------------------------------------------------------------------------


def test_every_position_of_the_lifecycle_has_one_a2a_state() -> None:
    reachable = {(p.state, p["waiting_on"]) for p in HANDOFF.reachable()}
    assert set(mapping.STATES) == reachable


def test_final_states_are_exactly_the_terminal_ones_and_failed_is_never_used() -> None:
    for (state, _), a2a in mapping.STATES.items():
        assert (a2a in mapping.TERMINAL) == HANDOFF.is_terminal(state), state
    assert A2AState.TASK_STATE_FAILED not in mapping.STATES.values()


REQUESTER_SIDE = {Actor.VERIFIER, Actor.REQUESTER, Actor.REQUESTER_OWNER}


@pytest.mark.parametrize(("position", "a2a"), list(mapping.STATES.items()))
def test_input_is_required_only_where_the_requester_side_has_the_next_move(
    position: tuple[TaskState, WaitingOn | None], a2a: A2AState
) -> None:
    state, waiting_on = position
    moves = [HANDOFF.move_for(state, m) for m in possible_moves(state, waiting_on)]
    actors = {m.actor for m in moves if m is not None and m.name is not MoveName.CANCEL}
    if a2a == A2AState.TASK_STATE_INPUT_REQUIRED:
        assert actors and actors <= REQUESTER_SIDE
    if a2a == A2AState.TASK_STATE_AUTH_REQUIRED:
        assert actors == {Actor.GATE}  # only the receiving owner moves it on


@pytest.mark.parametrize("verification", list(Verification))
def test_verifying_asks_for_a_verdict_only_under_review(verification: Verification) -> None:
    state = mapping.a2a_state(TaskState.verifying, None, verification)
    if verification is Verification.REVIEW:
        assert state == A2AState.TASK_STATE_INPUT_REQUIRED
    else:
        assert state == A2AState.TASK_STATE_WORKING


# --- a message as a hand-off ------------------------------------------------------------------


def test_a_text_message_hands_off_with_the_defaults() -> None:
    got = mapping.delegation(msg(new_text_part("Write the notes")), AGENT, "bob/coder")
    h = got.hand_off
    assert (h.project, h.requester, h.assignee) == ("a2a", "alice/planner", "bob/coder")
    assert h.packet == {
        "task": "Write the notes",
        "deliverable_type": "answer",
        "acceptance_criteria": ["Write the notes"],
        "context": "",
        "files": [],
        "depends_on": [],
    }
    assert h.verification is Verification.AUTO
    assert got.message_id == "m-1" and got.context_id is None


def test_a_data_part_gives_packet_fields_in_either_case_and_the_hand_offs_own() -> None:
    fields = {
        "deliverableType": "doc",
        "acceptance_criteria": ["covers every change"],
        "context": "the 1.2 release",
        "dependsOn": ["alice_t0"],
        "project": "web",
        "verification": "review",
        "id": "notes-1",
    }
    sent = msg(
        new_text_part("Write"),
        new_text_part("the notes"),
        data(fields),
        Part(url="https://example.com/spec.md"),
        reference_task_ids=["alice_t0", "alice_t9"],
        context_id="ctx-7",
    )
    got = mapping.delegation(sent, AGENT, "bob/coder")
    h = got.hand_off
    assert h.packet["task"] == "Write\n\nthe notes"
    assert h.packet["deliverable_type"] == "doc"
    assert h.packet["acceptance_criteria"] == ["covers every change"]
    assert h.packet["files"] == ["https://example.com/spec.md"]
    assert h.packet["depends_on"] == ["alice_t0", "alice_t9"]  # each once, in order
    assert (h.project, h.id, h.verification) == ("web", "notes-1", Verification.REVIEW)
    assert got.context_id == "ctx-7"


def test_the_skill_is_the_deliverable_type_when_the_data_part_names_none() -> None:
    got = mapping.delegation(msg(new_text_part("Draw")), AGENT, "bob/coder", skill="design")
    assert got.hand_off.packet["deliverable_type"] == "design"


def test_the_task_text_is_clipped_as_the_default_acceptance_criterion() -> None:
    got = mapping.delegation(msg(new_text_part("x" * 900)), AGENT, "bob/coder")
    assert got.hand_off.packet["acceptance_criteria"] == ["x" * 500]
    assert got.hand_off.packet["task"] == "x" * 900  # the service refuses it, as handOff does


def test_a_raw_file_is_refused_as_a_content_type_baton_does_not_keep() -> None:
    sent = msg(new_text_part("Look"), Part(raw=b"\x89PNG", media_type="image/png"))
    with pytest.raises(ContentTypeNotSupportedError) as refused:
        mapping.delegation(sent, AGENT, "bob/coder")
    assert refused.value.data == {"code": "invalid_input", "field": "message.parts[1].raw"}


def test_more_parts_than_the_bound_are_refused() -> None:
    sent = msg(*[new_text_part("x")] * (mapping.MAX_PARTS + 1))
    with pytest.raises(InvalidInput, match="at most 32 parts"):
        mapping.delegation(sent, AGENT, "bob/coder")
    mapping.delegation(msg(*[new_text_part("x")] * mapping.MAX_PARTS), AGENT, "bob/coder")


@pytest.mark.parametrize(
    ("value", "field"),
    [
        ({"colour": "blue"}, "message.parts[1].data.colour"),
        ({"move": "completeTask"}, "message.parts[1].data.move"),
        ({"verification": "SOMETIMES"}, "message.parts[1].data.verification"),
        ({"project": 7}, "message.parts[1].data.project"),
        ({"files": "a.txt"}, "message.parts[1].data.files"),
    ],
)
def test_a_data_part_with_a_field_a_hand_off_has_not_is_refused_naming_it(
    value: dict[str, Any], field: str
) -> None:
    with pytest.raises(InvalidInput) as refused:
        mapping.delegation(msg(new_text_part("x"), data(value)), AGENT, "bob/coder")
    assert refused.value.field == field


def test_a_data_part_that_is_not_an_object_is_refused() -> None:
    sent = msg(new_text_part("x"), new_data_part([1, 2], "application/json"))
    with pytest.raises(InvalidInput) as refused:
        mapping.delegation(sent, AGENT, "bob/coder")
    assert refused.value.field == "message.parts[1].data"


@pytest.mark.parametrize(
    "value",
    [
        {"task": "x", "n": 3, "half": 0.5, "big": 10**20, "yes": True, "none": None},
        {"nested": {"list": [1, "a", [], {}, [{"deep": [False, None, -2.5]}]]}, "empty": ""},
        [1, 2, {"a": "b"}],
        "text",
        7,
        None,
    ],
)
def test_a_data_part_reads_as_the_sdks_get_data_parts_reads_it(value: Any) -> None:
    part = new_data_part(value, "application/json")
    (expected,) = get_data_parts([part])
    got = mapping.plain(part.data)
    assert got == expected
    assert repr(got) == repr(expected)  # the same types too: every number a float


def test_a_data_part_with_a_number_json_cannot_hold_is_refused() -> None:
    part = new_data_part({"n": 1}, "application/json")
    part.data.struct_value.fields["n"].number_value = float("inf")
    with pytest.raises(InvalidInput) as refused:
        mapping.delegation(msg(new_text_part("x"), part), AGENT, "bob/coder")
    assert refused.value.field == "message.parts"


def test_an_unset_data_value_reads_as_null() -> None:
    assert mapping.plain(Part(media_type="application/json").data) is None


def test_an_owner_names_the_requester_and_an_agent_is_it() -> None:
    with pytest.raises(InvalidInput) as refused:
        mapping.delegation(msg(new_text_part("x")), OWNER, "bob/coder")
    assert refused.value.field == "requester"
    named = mapping.delegation(
        msg(new_text_part("x"), data({"requester": "alice/planner"})), OWNER, "bob/coder"
    )
    assert named.hand_off.requester == "alice/planner"


def test_at_batons_own_url_the_data_part_names_the_assignee() -> None:
    with pytest.raises(InvalidInput) as refused:
        mapping.delegation(msg(new_text_part("x")), AGENT, None)
    assert refused.value.field == "assignee"
    got = mapping.delegation(msg(new_text_part("x"), data({"assignee": "bob/coder"})), AGENT, None)
    assert got.hand_off.assignee == "bob/coder"
    with pytest.raises(InvalidInput):  # an agent's URL hands off to that agent only
        mapping.delegation(msg(new_text_part("x"), data({"assignee": "eve/x"})), AGENT, "bob/coder")


def test_the_id_made_from_a_message_id_is_the_same_for_the_same_message_to_the_same_agent() -> None:
    first = mapping.delegation(msg(new_text_part("x"), message_id="9" * 200), AGENT, "bob/coder")
    again = mapping.delegation(msg(new_text_part("x"), message_id="9" * 200), AGENT, "bob/coder")
    other = mapping.delegation(msg(new_text_part("x"), message_id="9" * 200), AGENT, "bob/other")
    assert first.hand_off.id == again.hand_off.id != other.hand_off.id
    assert first.hand_off.id is not None
    assert len(first.hand_off.id) == mapping.DERIVED_ID_LENGTH


# --- a message as a reply ---------------------------------------------------------------------


def test_a_reply_names_its_move_by_mutation_and_its_text_is_the_reason() -> None:
    got = mapping.reply(msg(new_text_part("needs tests"), data({"move": "sendBackTask"})))
    assert got.move is MoveName.SEND_BACK
    assert got.args == MoveArgs(reason="needs tests")
    plain = mapping.reply(msg(new_text_part("fine")))
    assert plain.move is None and plain.args.reason == "fine"


def test_a_reply_naming_no_move_of_the_protocol_is_refused() -> None:
    with pytest.raises(InvalidInput, match="must be one of"):
        mapping.reply(msg(data({"move": "dropTable"})))
    with pytest.raises(InvalidInput):
        mapping.reply(msg(data({"project": "web"})))


# --- tasks and events out ---------------------------------------------------------------------


def test_a_checkpoint_is_a_status_update_with_its_progress_and_all_of_it() -> None:
    saved = task(latest_checkpoint=checkpoint(progress="half way", next_steps=["the rest"]))
    (update,) = mapping.updates_of(event(saved, TaskEventKind.checkpoint_saved, None), "ctx")
    status = update.status_update
    assert status.task_id == "alice_t1" and status.context_id == "ctx"
    assert status.status.state == A2AState.TASK_STATE_WORKING
    text, whole = status.status.message.parts
    assert text.text == "half way"
    assert get_data_parts([whole])[0]["nextSteps"] == ["the rest"]
    assert status.metadata["generation"] == 5


def test_a_returned_result_is_its_artifacts_then_the_status() -> None:
    returned = task(state="completed", result=result(summary="All done"))
    updates = mapping.updates_of(event(returned, TaskEventKind.moved, MoveName.SUBMIT_RESULT), "c")
    assert [u.WhichOneof("payload") for u in updates] == [
        "artifact_update",
        "artifact_update",
        "status_update",
    ]
    artifact = updates[0].artifact_update.artifact
    assert artifact.artifact_id == "result" and artifact.parts[0].text == "All done"
    rest = get_data_parts([artifact.parts[1]])[0]
    assert rest == {"summary": "All done", "provenance": "agent_generated"}
    evidence = updates[1].artifact_update.artifact
    assert evidence.artifact_id == "evidence"
    (item,) = get_data_parts([evidence.parts[0]])[0]["evidence"]
    assert item == {"kind": "test_output", "summary": "all green"}


def test_a_held_task_says_whose_approval_it_waits_for() -> None:
    held = task(state="waiting", waiting_on="owner_approval")
    (update,) = mapping.updates_of(event(held, TaskEventKind.moved, MoveName.HOLD), "c")
    status = update.status_update.status
    assert status.state == A2AState.TASK_STATE_AUTH_REQUIRED
    assert "owner" in status.message.parts[0].text


def test_a_review_says_which_moves_are_the_requesters() -> None:
    review = task(state="verifying", verification="REVIEW", result=result())
    status = mapping.status_of(event(review, TaskEventKind.moved, MoveName.SUBMIT_RESULT), "c")
    assert status.state == A2AState.TASK_STATE_INPUT_REQUIRED
    said = status.message.parts[0].text
    assert all(m in said for m in ("completeTask", "sendBackTask", "requestSignOff"))


def test_a_reason_is_said_in_the_status_message() -> None:
    denied = task(state="rejected")
    status = mapping.status_of(
        event(denied, TaskEventKind.moved, MoveName.DENY, reason="not this quarter"), "c"
    )
    assert status.state == A2AState.TASK_STATE_REJECTED
    assert "not this quarter" in status.message.parts[0].text


def test_a_task_keeps_the_newest_history_with_its_hand_off_message_first() -> None:
    record = task(latest_checkpoint=checkpoint(progress="p"))
    events = [
        event(record, TaskEventKind.checkpoint_saved, None, id=i, version=i) for i in (3, 4, 5)
    ]
    whole = mapping.task_of(record, "ctx", events, message_id="m-1", history=10)
    assert [m.message_id for m in whole.history] == [
        "m-1",
        "alice_t1-3",
        "alice_t1-4",
        "alice_t1-5",
    ]
    assert whole.history[0].role == Role.ROLE_USER and whole.history[0].parts[0].text == (
        "Write the release notes"
    )
    newest = mapping.task_of(record, "ctx", events, history=2)
    assert [m.message_id for m in newest.history] == ["alice_t1-4", "alice_t1-5"]
    assert not mapping.task_of(record, "ctx", events).history
    assert whole.metadata["baton"]["state"] == "working"
    assert whole.metadata["baton"]["version"] == 5
