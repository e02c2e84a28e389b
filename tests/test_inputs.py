"""`baton.inputs.check`: the bounds every door's input is held to, found in bounded work."""

from __future__ import annotations

from typing import Any

import pytest
from graphql import GraphQLError, GraphQLInt

from baton import inputs
from baton.inputs import MAX_DEPTH, MAX_INT, MAX_VALUES, MIN_INT, Problem


class Untouchable(list[Any]):
    """A list whose items may not be looked at: the walk must refuse it by its length."""

    def __iter__(self) -> Any:
        raise AssertionError("the walk looked at the items of a list past the bound")


def chain(depth: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(depth):
        value = [value]
    return value


def test_every_scalar_list_and_object_counts_one_value() -> None:
    value = {"a": [1, "x", {"b": None}], "c": []}
    assert inputs.check(value).values == 7
    assert inputs.check(value, max_values=7).problem is None
    assert inputs.check(value, max_values=6).problem == Problem(
        "a", "more than 6 values in one request"
    )


def test_a_list_past_the_bound_is_refused_by_its_length_alone() -> None:
    files = Untouchable([0] * 524_000)
    checked = inputs.check({"packet": {"task": "x", "files": files}})
    assert checked.problem == Problem(
        "packet.files", f"more than {MAX_VALUES} values in one request"
    )
    assert checked.problem.error().field == "packet.files"
    assert checked.problem.error().code == "invalid_input"


def test_the_bound_is_on_the_whole_input_and_names_its_largest_list() -> None:
    # Neither list passes the bound alone, and `big` is opened first: the count passes the
    # bound at `small`, but the largest list opened by then is named.
    value = {"small": {"ids": ["y"] * 600}, "big": ["x"] * 1_500}
    assert inputs.check(value, "variables").problem == Problem(
        "variables.big", f"more than {MAX_VALUES} values in one request"
    )
    assert inputs.check({**value, "big": ["x"] * 500}, "variables").problem is None
    assert (
        inputs.check({"ids": ["x"] * (MAX_VALUES - 2)}).problem is None
    )  # with the object and the list: 2,000


def test_nesting_past_the_depth_is_refused_before_its_values_are_counted() -> None:
    assert inputs.check(chain(MAX_DEPTH), "v").problem is None
    problem = inputs.check({"d": chain(100_000)}).problem
    assert problem is not None and problem.reason == "input nested too deeply"
    assert problem.field == "d" + "[0]" * MAX_DEPTH  # at depth MAX_DEPTH + 1, no deeper


@pytest.mark.parametrize(
    ("value", "field", "reason"),
    [
        ({"id": "a\x00b"}, "id", "strings may not contain the NUL character"),
        (
            {"p": {"files": ["ok", "\ud800"]}},
            "p.files[1]",
            "strings must be valid Unicode, with no lone surrogates",
        ),
        ({"k\x00": 1}, "k\x00", "strings may not contain the NUL character"),
    ],
)
def test_strings_postgresql_cannot_store_are_named_where_they_are(
    value: dict[str, Any], field: str, reason: str
) -> None:
    problem = inputs.check(value).problem
    assert problem == Problem(field, reason)
    assert problem.error().message == f"{field}: {reason}"
    assert inputs.check(value, "variables").problem == Problem(f"variables.{field}", reason)


def test_whole_numbers_are_graphqls_int() -> None:
    assert GraphQLInt.parse_value(MAX_INT) == MAX_INT
    assert GraphQLInt.parse_value(MIN_INT) == MIN_INT
    for outside in (MAX_INT + 1, MIN_INT - 1):
        with pytest.raises(GraphQLError):
            GraphQLInt.parse_value(outside)
