"""Serialising leaf values: the common cases without a call into graphql-core per value.

Each fast path returns exactly what the type's own `serialize` returns for that value; anything
else falls through to it, so errors and odd values behave as graphql-core's do.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from enum import Enum
from typing import Any

import orjson
from graphql import GraphQLEnumType, GraphQLScalarType

Serialize = Callable[[Any], Any]

# GraphQL's Int: a signed 32-bit integer.
INT_MIN, INT_MAX = -(2**31), 2**31 - 1


def serializer(
    type_: GraphQLScalarType | GraphQLEnumType, by_member: dict[int, str] | None = None
) -> Serialize:
    """`type_`'s serialiser. For an enum, `by_member` is where it keeps the names of the
    members it has seen, by `id()` (see below), for a caller that looks them up itself."""
    slow = type_.serialize
    if isinstance(type_, GraphQLEnumType):
        names: dict[Any, str] = {}
        for name, value in type_.values.items():
            names[value.value] = name
        # Members seen, by identity: `id()` and one dict look-up, where `isinstance` and the
        # `value` property cost three times that for every value of every row. Only members
        # go in, and a member lives as long as its class, so an id here is never reused.
        if by_member is None:
            by_member = {}

        def enum(value: Any) -> Any:
            found = by_member.get(id(value))
            if found is not None:
                return found
            if isinstance(value, Enum):
                found = names.get(value.value)
                if found is not None:
                    by_member[id(value)] = found
                    return found
            return slow(value)

        return enum
    name = type_.name
    if name in ("String", "ID"):
        return lambda value: value if type(value) is str else slow(value)
    if name == "Boolean":
        return lambda value: value if type(value) is bool else slow(value)
    if name == "Int":
        return lambda value: (
            value if type(value) is int and INT_MIN <= value <= INT_MAX else slow(value)
        )
    if name == "DateTime":
        return _date_time(slow)
    return slow


def _date_time(slow: Serialize) -> Serialize:
    """`isoformat()`, as the scalar answers; for UTC times (all the store returns) orjson
    writes the same text in a third of the time."""

    def serialize(value: Any) -> Any:
        if type(value) is datetime:
            if value.tzinfo is UTC:
                return orjson.dumps(value)[1:-1].decode()
            return value.isoformat()
        return slow(value)

    return serialize


def weighed(type_: GraphQLScalarType | GraphQLEnumType) -> bool:
    """Whether values of `type_` are weighed for the response's byte budget: text and JSON,
    whose size a client controls; the size of the rest the cost check's count of values
    bounds."""
    return isinstance(type_, GraphQLScalarType) and type_.name in ("String", "ID", "JSON")


def weight(values: list[Any]) -> int:
    """The bytes `values` (serialised leaves) take in the response, as JSON: each value's
    encoding and one separator, so that values weighed together or apart weigh the same. One
    encoding for all of them. A value orjson cannot encode (it fails later, as a field error)
    or a failed position counts nothing."""
    try:
        return len(orjson.dumps(values)) - 1  # `[a,b]` less a bracket: each value and one more
    except TypeError:
        return sum(weight([v]) for v in values if type(v) in (str, int, float, bool, dict, list))
