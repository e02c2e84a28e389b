"""Baton's refusals as A2A's errors, once for every operation and both bindings.

Each A2A error carries Baton's error code and the error type's own fields in its data (the
`ErrorInfo` metadata of both bindings: strings, lists joined with commas), so a client that
knows Baton can tell apart what A2A's few error types lump together:

| Baton code | A2A error (JSON-RPC code, HTTP+JSON status) |
| --- | --- |
| `not_found` (missing and hidden tasks alike) | TaskNotFoundError (-32001, 404) |
| `invalid_input`, `duplicate` (a reused message id) | InvalidParamsError (-32602, 400) |
| `cursor_expired` (a stream below what is kept) | InvalidParamsError (-32602, 400) |
| `invalid_state` (not open now), `version_conflict` | UnsupportedOperationError (-32004, 400) |
| `forbidden` (the task is seen, the move another's) | InvalidRequestError (-32600, 400) |
| `unavailable` (the database cannot answer now) | InternalError (-32603); HTTP 503, Retry-After |
| anything else | InternalError (-32603, 500), no detail |

HTTP+JSON statuses and JSON-RPC codes are those of A2A's table (v1.0.1, §5.4), which the SDK
applies: TaskNotCancelableError and ContentTypeNotSupportedError are 400 there (1.0.0's table
had 409 and 415; 1.0.1 gave each error the status of its gRPC code). Some requests never get
this far: the door answers one without a working token 401, a body declared as anything but
JSON 415 (`baton.a2a.http`).
"""

from __future__ import annotations

import logging
from typing import Any

from a2a.utils.errors import (
    A2AError,
    InternalError,
    InvalidParamsError,
    InvalidRequestError,
    TaskNotFoundError,
    UnsupportedOperationError,
)

from baton.errors import BatonError

log = logging.getLogger("baton.a2a")

_BY_CODE: dict[str, type[A2AError]] = {
    "not_found": TaskNotFoundError,
    "invalid_input": InvalidParamsError,
    "duplicate": InvalidParamsError,
    "cursor_expired": InvalidParamsError,
    "invalid_state": UnsupportedOperationError,
    "version_conflict": UnsupportedOperationError,
    "forbidden": InvalidRequestError,
}


def _plain(value: object) -> str:
    if isinstance(value, list | tuple):
        return ",".join(_plain(v) for v in value)
    return "" if value is None else str(value)


def data_of(error: BatonError) -> dict[str, str]:
    """Baton's code and the error type's fields, camelCase, as strings."""
    data = {"code": error.code}
    for name, value in error.fields().items():
        head, *rest = name.split("_")
        data[head + "".join(p.title() for p in rest)] = _plain(value)
    return data


UNAVAILABLE = "unavailable"  # the database cannot answer now: 503 with Retry-After


def to_a2a(error: BatonError) -> A2AError:
    if error.code == UNAVAILABLE:
        return InternalError(error.message, data=data_of(error))
    kind = _BY_CODE.get(error.code)
    if kind is None:
        log.warning("an A2A request failed: %s (%s)", error.message, error.code)
        return InternalError("internal error", data={"code": error.code})
    return kind(error.message, data=data_of(error))


def unexpected(exc: BaseException) -> A2AError:
    """A failure that is no refusal: logged whole, answered with no detail."""
    log.error("an A2A request failed unexpectedly", exc_info=exc)
    return InternalError("internal error", data={"code": "internal"})


def refusal(kind: type[A2AError], message: str, code: str, **fields: Any) -> A2AError:
    """An A2A error the door itself decides on, with Baton's code."""
    return kind(message, data={"code": code, **{k: _plain(v) for k, v in fields.items()}})
