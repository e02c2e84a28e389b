"""The engine's leaf serialisers answer what each type's own `serialize` answers."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from graphql import GraphQLEnumType, GraphQLScalarType

from baton.api.schema import schema
from baton.engine.leaves import serializer
from baton.protocol.handoff import TaskState

TYPES = schema._schema.type_map

CASES: list[tuple[str, Any]] = [
    ("DateTime", datetime(2026, 12, 1, 10, 0, 0, 123456, tzinfo=UTC)),
    ("DateTime", datetime(2026, 12, 1, 10, 0, 0, tzinfo=UTC)),
    ("DateTime", datetime(1, 1, 1, tzinfo=UTC)),
    ("DateTime", datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)),
    ("DateTime", datetime(2026, 12, 1, 10, 0, tzinfo=timezone(timedelta(hours=5, minutes=30)))),
    ("DateTime", datetime(2026, 12, 1, 10, 0, tzinfo=timezone(timedelta(seconds=-3661)))),
    ("DateTime", datetime(2026, 12, 1, 10, 0, 0, 5)),
    ("String", "text"),
    ("ID", "an-id"),
    ("Int", 7),
    ("Int", 2**31 - 1),
    ("Boolean", False),
    ("TaskState", TaskState.working),
]


@pytest.mark.parametrize(("name", "value"), CASES, ids=[f"{n}-{v}" for n, v in CASES])
def test_a_leaf_serialises_as_its_type_does(name: str, value: Any) -> None:
    type_ = TYPES[name]
    assert isinstance(type_, GraphQLScalarType | GraphQLEnumType)
    assert serializer(type_)(value) == type_.serialize(value)


def test_an_enum_serialiser_remembers_members_and_nothing_else() -> None:
    """Members answer from memory once seen; a plain string equal to a member's value (or any
    other value) still goes to the type's own `serialize`, every time, as before."""
    type_ = TYPES["TaskState"]
    assert isinstance(type_, GraphQLEnumType)
    serialize = serializer(type_)
    for member in (*TaskState, *TaskState):  # the second pass answers from memory
        assert serialize(member) == type_.serialize(member) == member.name
    for other in ("working", "nope", 3, None):
        try:
            expected: Any = type_.serialize(other)
        except Exception as exc:
            expected = type(exc)
        try:
            got: Any = serialize(other)
        except Exception as exc:
            got = type(exc)
        assert got == expected, other
