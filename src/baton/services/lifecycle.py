"""What every lifecycle's service does around a guarded change.

A change is one statement that writes only when every guard holds. When it writes nothing, the
service reads the row and explains, with the table's own rules, why (`explain` raises the typed
error); when those rules say the change is allowed after all, another change won a race in
between, and it is tried again.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

from baton.errors import VersionConflict

# How often a change is tried when other changes keep committing between read and write.
RACE_RETRIES = 3

Publish = Callable[[int], Awaitable[None]]
E = TypeVar("E")


async def until_applied(
    apply: Callable[[], Awaitable[list[E]]],
    explain: Callable[[], Awaitable[None]],
    kept_changing: Callable[[], Awaitable[VersionConflict]],
) -> list[E]:
    """The events `apply` appended; or the error `explain` raises; or, after every try lost a
    race, the version conflict `kept_changing` describes."""
    for _ in range(RACE_RETRIES):
        events = await apply()
        if events:
            return events
        await explain()
    raise await kept_changing()
