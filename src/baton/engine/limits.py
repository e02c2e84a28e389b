"""The bounds every request is held to before and while it runs."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Limits:
    max_depth: int = 12
    max_aliases: int = 20
    max_tokens: int = 5000
    # The most values an operation's response can hold, worst case (see `baton.engine.cost`).
    max_cost: int = 50_000
    # At run time, as a second line of defence: rows one request may load, and its duration.
    max_rows: int = 100_000
    max_seconds: float = 30.0


DEFAULT_LIMITS = Limits()
