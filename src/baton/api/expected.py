"""Expected failures of a mutation become its union's error member, counted for /metrics."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any, TypeVar

from baton.api.errors import to_error
from baton.errors import BatonError
from baton.metrics import MOVES, count

T = TypeVar("T")


async def expected(mutation: str, call: Awaitable[T]) -> T | Any:
    """Run a service call; an expected failure becomes its error type. Counts the outcome."""
    try:
        outcome = await call
    except BatonError as exc:
        count(MOVES, mutation, exc.code)
        return to_error(exc)
    count(MOVES, mutation, "ok")
    return outcome
