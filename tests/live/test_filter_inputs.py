"""One check makes every door's event filters: a GraphQL filter input's, and a webhook
endpoint's filter as stored, are the same filter held to the same bounds. No server."""

from __future__ import annotations

import weakref
from typing import Any

import pytest
import strawberry

from baton.api.subscriptions import RunEventFilter as RunEventInput
from baton.api.subscriptions import TaskEventFilter as TaskEventInput
from baton.errors import InvalidInput
from baton.live.filters import MAX_FILTER_VALUES, EventFilter, RunEventFilter
from baton.protocol.handoff import TaskState
from baton.protocol.pipeline import RunEvent, RunStatus
from baton.store.records import TaskEventKind


def test_a_filter_input_and_the_same_filter_stored_are_one_filter() -> None:
    given = TaskEventInput(
        task_ids=[strawberry.ID("t1"), strawberry.ID("t2")],
        kinds=[TaskEventKind.moved],
        states=[TaskState.routed, TaskState.working],
        requester="acme/planner",
    )
    stored = {
        "taskIds": ["t2", "t1"],
        "kinds": ["moved"],
        "states": ["routed", "working"],
        "requester": "acme/planner",
    }
    assert EventFilter.from_stored(stored) == given.to_filter()
    runs = RunEventInput(
        projects=["p"], events=[RunEvent.CLAIM], statuses=[RunStatus.backlog]
    ).to_filter()
    stored_runs = {"projects": ["p"], "events": ["CLAIM"], "statuses": ["backlog"]}
    assert RunEventFilter.from_stored(stored_runs) == runs
    assert RunEventFilter.from_stored({}) == RunEventFilter()


def test_a_stored_filter_holds_enum_members_as_the_input_does() -> None:
    found = EventFilter.from_stored({"kinds": ["checkpoint_saved"], "states": ["verifying"]})
    assert found.kinds == frozenset({TaskEventKind.checkpoint_saved})
    assert found.states == frozenset({TaskState.verifying})


@pytest.mark.parametrize("many", [MAX_FILTER_VALUES + 1, 10 * MAX_FILTER_VALUES])
def test_both_forms_are_held_to_the_same_bound_with_the_same_error(many: int) -> None:
    projects = [f"p{i}" for i in range(many)]
    with pytest.raises(InvalidInput) as from_input:
        TaskEventInput(projects=projects).to_filter()
    with pytest.raises(InvalidInput) as from_stored:
        EventFilter.from_stored({"projects": projects})
    assert from_input.value.field == from_stored.value.field == "filter.projects"
    assert from_input.value.message == from_stored.value.message
    at_the_bound = EventFilter.from_stored({"projects": projects[:MAX_FILTER_VALUES]})
    assert len(at_the_bound.projects or ()) == MAX_FILTER_VALUES


@pytest.mark.parametrize(
    ("stored", "field", "reason"),
    [
        ({"colour": ["red"]}, "filter.colour", "not a condition"),
        ({"kinds": ["exploded"]}, "filter.kinds", "not a TaskEventKind"),
        ({"states": ["routed", "nowhere"]}, "filter.states", "not a TaskState"),
        ({"projects": "p"}, "filter.projects", "a list of strings"),
        ({"taskIds": [1, 2]}, "filter.taskIds", "a list of strings"),
        ({"requester": ["acme/planner"]}, "filter.requester", "a string"),
    ],
)
def test_a_stored_filter_of_another_shape_is_refused_naming_where(
    stored: dict[str, Any], field: str, reason: str
) -> None:
    with pytest.raises(InvalidInput, match=reason) as refused:
        EventFilter.from_stored(stored)
    assert refused.value.field == field


def test_a_run_filter_refuses_a_task_filter_s_condition() -> None:
    with pytest.raises(InvalidInput) as refused:
        RunEventFilter.from_stored({"kinds": ["moved"]})
    assert refused.value.field == "filter.kinds"


def test_equal_filters_are_one_object_while_any_is_in_use() -> None:
    """Thousands of subscriptions of one filter hold one filter (its sets and its tests)."""
    first = TaskEventInput(projects=["p"], kinds=[TaskEventKind.moved]).to_filter()
    second = EventFilter.from_stored({"kinds": ["moved"], "projects": ["p"]})
    assert first is second
    assert first is not EventFilter.of({"projects": ["q"]})
    assert EventFilter.of({}) is EventFilter.of({})
    assert RunEventFilter.of({}) is not EventFilter.of({})  # equal fields, another log
    gone = weakref.ref(EventFilter.of({"projects": ["gone"]}))
    assert gone() is None  # one nothing uses is not kept
