"""The bounds every request's input is held to, whichever door brings it.

One check serves every door, so no door can be looser than another: the GraphQL engine runs
`check` on a request's variables before it coerces them, the MCP door on a tool's arguments
before their JSON Schema. It refuses, naming where:

- more than `MAX_VALUES` values in one request (each scalar, list and object counts one). The
  walk adds up a list's or an object's items before it looks into them and stops as soon as
  the count passes the bound, so refusing half a million list items costs what refusing 2,001
  does;
- input nested more than `baton.storable.MAX_DEPTH` deep, a string holding NUL or a lone
  surrogate (`baton.storable`): PostgreSQL cannot store them.

Whole numbers are GraphQL's `Int`: 32-bit signed, `MIN_INT` to `MAX_INT` (graphql-core's own
constants). GraphQL's type system holds its arguments to them; the MCP tools' JSON Schemas
declare them from here and the door checks them with the schema.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final

from graphql import GRAPHQL_MAX_INT, GRAPHQL_MIN_INT

from baton.errors import InvalidInput
from baton.storable import MAX_DEPTH, TOO_DEEP, unstorable_at

# No request of the schema needs more than about a thousand values; graphql-core takes some
# 20 µs to coerce one.
MAX_VALUES: Final = 2_000
MIN_INT: Final = GRAPHQL_MIN_INT
MAX_INT: Final = GRAPHQL_MAX_INT

__all__ = ["MAX_DEPTH", "MAX_INT", "MAX_VALUES", "MIN_INT", "Checked", "Problem", "check"]


@dataclass(frozen=True)
class Problem:
    """What is wrong with an input, and where (`variables.in.packet`, `packet.files[3]`)."""

    field: str
    reason: str

    @property
    def message(self) -> str:
        return f"{self.reason} (at {self.field})" if self.field else self.reason

    def error(self) -> InvalidInput:
        return InvalidInput(self.field or "input", self.reason)


@dataclass(frozen=True)
class Checked:
    # How many values the input holds; when refused, as many as were counted by then.
    values: int
    problem: Problem | None


def check(value: object, field: str = "", max_values: int = MAX_VALUES) -> Checked:
    """`value` (decoded JSON, named `field`) held to every bound above; the first it breaks."""
    values, problem = _count(value, field, max_values)
    if problem is None:
        found = unstorable_at(value, field)
        problem = Problem(*found) if found is not None else None
    return Checked(values, problem)


def _count(value: object, field: str, limit: int) -> tuple[int, Problem | None]:
    """How many values `value` holds and, when more than `limit` (naming the largest list or
    object opened by then) or nested too deeply, where.

    Without recursion; an item is looked at only once the count of its siblings is within the
    bound, so at most `limit` of them are, and no path is longer than `MAX_DEPTH` keys."""
    count = 1
    largest, largest_at = -1, -1
    # Containers still to open: (value, its index in `trail`, its depth); `trail` holds each
    # opened container's (parent index, key), from which a path is spelled only when named.
    stack: list[tuple[dict[Any, Any] | list[Any], int, int]] = []
    if isinstance(value, dict | list):
        stack.append((value, -1, 0))
    trail: list[tuple[int, str | int]] = []
    while stack:
        node, at, depth = stack.pop()
        if depth > MAX_DEPTH:
            return count, Problem(_path(field, trail, at), TOO_DEEP)
        count += len(node)
        if len(node) > largest:
            largest, largest_at = len(node), at
        if count > limit:
            reason = f"more than {limit} values in one request"
            return count, Problem(_path(field, trail, largest_at), reason)
        pairs: Iterable[tuple[str | int, object]] = (
            node.items() if isinstance(node, dict) else enumerate(node)
        )
        for key, item in pairs:
            if isinstance(item, dict | list):
                trail.append((at, key))
                stack.append((item, len(trail) - 1, depth + 1))
    return count, None


def _path(field: str, trail: list[tuple[int, str | int]], at: int) -> str:
    keys: list[str | int] = []
    while at >= 0:
        at, key = trail[at]
        keys.append(key)
    out = field
    for key in reversed(keys):
        out += f"[{key}]" if isinstance(key, int) else (f".{key}" if out else key)
    return out
