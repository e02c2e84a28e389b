"""What one request may still load: a second line of defence behind the engine's cost check.

The engine opens a budget for each request it runs (rows, and bytes of JSON); the store spends
it as rows arrive: rows when a statement returns, JSON as each value is decoded (see
`baton.store.db.MeteredConnection`), so the statements a request runs at once share it. Outside
a request (the hub, the sweeper, the CLI) no budget is open and nothing is counted.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator

from baton.errors import TooMuchWork

# [rows left, bytes of JSON left]
_BUDGET: contextvars.ContextVar[list[int] | None] = contextvars.ContextVar(
    "baton_request_budget", default=None
)


@contextlib.contextmanager
def request_budget(rows: int, json_bytes: int) -> Iterator[None]:
    token = _BUDGET.set([rows, json_bytes])
    try:
        yield
    finally:
        _BUDGET.reset(token)


def current_budget() -> list[int] | None:
    """The open request's budget, [rows left, bytes of JSON left] (None outside a request)."""
    return _BUDGET.get()


def spend(rows: int, json_bytes: int = 0) -> None:
    """Spend from the open budget; `TooMuchWork` once either part of it is spent."""
    budget = _BUDGET.get()
    if budget is not None:
        budget[0] -= rows
        budget[1] -= json_bytes
        if budget[0] < 0:
            raise TooMuchWork("this request loaded more rows than one request may")
        if budget[1] < 0:
            raise TooMuchWork(
                "this request loaded more data than one request may; ask for fewer items or "
                "leave out large fields (packets, results, checkpoints, protocolObject)"
            )
