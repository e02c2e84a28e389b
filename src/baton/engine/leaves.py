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
Weigh = Callable[[Any], int]

_INT_MIN, _INT_MAX = -(2**31), 2**31 - 1


def serializer(type_: GraphQLScalarType | GraphQLEnumType) -> Serialize:
    slow = type_.serialize
    if isinstance(type_, GraphQLEnumType):
        names: dict[Any, str] = {}
        for name, value in type_.values.items():
            names[value.value] = name

        def enum(value: Any) -> Any:
            if isinstance(value, Enum):
                found = names.get(value.value)
                if found is not None:
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
            value if type(value) is int and _INT_MIN <= value <= _INT_MAX else slow(value)
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


def _json_size(value: Any) -> int:
    if type(value) is str:  # its UTF-8 bytes, before JSON escapes
        return (len(value) if value.isascii() else len(value.encode(errors="replace"))) + 2
    try:
        return len(orjson.dumps(value))
    except TypeError:  # not JSON: the encoder refuses it later, with its own error
        return 0


def weigher(type_: GraphQLScalarType | GraphQLEnumType) -> Weigh | None:
    """The size in the response of a serialised value of `type_`, for text and JSON (the
    values whose size a client controls); None for the rest, whose size the cost check's count
    of values bounds."""
    if isinstance(type_, GraphQLEnumType):
        return None
    if type_.name in ("String", "ID"):
        return _json_size
    if type_.name == "JSON":
        return _json_size
    return None
