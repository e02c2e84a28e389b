"""Building SQL with numbered parameters ($1, $2, …), as asyncpg takes them."""

from __future__ import annotations

from typing import Any


class Params:
    """Collects parameter values; calling it with a value returns that value's placeholder."""

    def __init__(self, start: int = 0) -> None:
        self.start = start
        self.values: list[Any] = []

    def __call__(self, value: Any) -> str:
        self.values.append(value)
        return f"${self.start + len(self.values)}"
