"""What one request may still load: a second line of defence behind the engine's cost check.

The engine opens a budget for each request it runs; the store spends it as rows arrive. Outside
a request (the hub, the sweeper, the CLI) no budget is open and nothing is counted.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator

from baton.errors import TooMuchWork

_ROWS: contextvars.ContextVar[list[int] | None] = contextvars.ContextVar(
    "baton_row_budget", default=None
)


@contextlib.contextmanager
def row_budget(rows: int) -> Iterator[None]:
    token = _ROWS.set([rows])
    try:
        yield
    finally:
        _ROWS.reset(token)


def spend(rows: int) -> None:
    budget = _ROWS.get()
    if budget is not None:
        budget[0] -= rows
        if budget[0] < 0:
            raise TooMuchWork("this request loaded more rows than one request may")
