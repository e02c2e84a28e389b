"""The bounds every request is held to before and while it runs."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Limits:
    max_depth: int = 12
    max_aliases: int = 20
    max_tokens: int = 5000


DEFAULT_LIMITS = Limits()
