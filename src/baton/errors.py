"""Domain errors. Each carries data, and says which error type every door answers it as.

An expected failure names its type (`type_name`: GraphQL's error type, the MCP tools' `type`)
and gives that type's own fields besides `code` and `message` as plain values (`fields()`,
snake_case, enums as their values): the GraphQL door builds its error types from them, the MCP
door answers them as they are, so the two cannot differ.
"""

from __future__ import annotations

from typing import ClassVar


class BatonError(Exception):
    code = "error"
    # None: not an expected failure of a call (the database away, a budget spent), which no
    # door answers as a typed error.
    type_name: ClassVar[str | None] = None
    # True when the error is about the request as a whole (the database away, a budget spent),
    # not the value a resolver was asked for: the engine does not retry such a failure of a
    # batched field parent by parent.
    request_wide = False

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def fields(self) -> dict[str, object]:
        """The error type's own fields besides `code` and `message`, as plain values."""
        return {}


class NotFound(BatonError):
    code = "not_found"
    type_name = "NotFoundError"

    def __init__(self, kind: str, id: str) -> None:
        super().__init__(f"no {kind} with id {id!r}")
        self.kind = kind
        self.id = id

    def fields(self) -> dict[str, object]:
        return {"id": self.id}


class NothingToClaim(NotFound):
    """No claimable run is left in the queue asked for."""

    def __init__(self, owner: str, project: str | None) -> None:
        super().__init__("claimable run", "")
        where = f" in project {project}" if project is not None else ""
        self.message = f"no claimable run of owner {owner}{where}"
        self.args = (self.message,)


class Forbidden(BatonError):
    code = "forbidden"
    type_name = "ForbiddenError"


class InvalidInput(BatonError):
    code = "invalid_input"
    type_name = "InvalidInputError"

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field

    def fields(self) -> dict[str, object]:
        return {"field": self.field}


class InvalidMove(BatonError):
    """The protocol table (or a rule beside it) does not allow `move` from `state`."""

    code = "invalid_state"
    type_name = "InvalidStateError"

    def __init__(self, state: str, move: str, message: str) -> None:
        super().__init__(message)
        self.state = state
        self.move = move
        self.allowed_moves: tuple[str, ...] = ()

    def fields(self) -> dict[str, object]:
        return {"state": self.state, "move": self.move, "allowed_moves": list(self.allowed_moves)}


class InvalidRunMove(InvalidMove):
    """The pipeline table does not allow `move` at the run's position."""

    type_name = "InvalidRunStateError"

    def __init__(self, status: str, phase: str, checkpoint: str, move: str, message: str) -> None:
        super().__init__(status, move, message)
        self.phase = phase
        self.checkpoint = checkpoint

    def fields(self) -> dict[str, object]:
        return {
            "status": self.state,
            "phase": self.phase,
            "checkpoint": self.checkpoint,
            "event": self.move,
            "allowed_events": list(self.allowed_moves),
        }


class LeaseLost(BatonError):
    """The caller does not hold the live lease of the claimed run it tried to drive: the lease
    ran out, another claim holds the run now, or the lease id given is not the current one."""

    code = "lease_lost"
    type_name = "LeaseLostError"

    def __init__(self, run_id: str, message: str) -> None:
        super().__init__(message)
        self.id = run_id

    def fields(self) -> dict[str, object]:
        return {"id": self.id}


class VersionConflict(BatonError):
    code = "version_conflict"
    type_name = "VersionConflictError"

    def __init__(self, expected: int, actual: int, subject: str = "task") -> None:
        super().__init__(f"expected version {expected}, the {subject} is at version {actual}")
        self.expected = expected
        self.actual = actual

    def fields(self) -> dict[str, object]:
        return {"expected_version": self.expected, "actual_version": self.actual}


class DuplicateTask(BatonError):
    code = "duplicate"
    type_name = "DuplicateTaskError"

    def __init__(self, id: str) -> None:
        super().__init__(f"a task with id {id!r} exists with different input")
        self.id = id

    def fields(self) -> dict[str, object]:
        return {"id": self.id}


class Unavailable(BatonError):
    """The database cannot answer now (down, or every connection busy): try again later."""

    code = "unavailable"
    request_wide = True


class TooMuchWork(BatonError):
    """A request that got past the cost check still did more work than one request may."""

    code = "too_expensive"
    request_wide = True


class CursorExpired(BatonError):
    """A stream was asked to start (or resume) after an event older than what its log keeps:
    finished work was removed after that cursor (`BATON_RETENTION`), so a replay from it would
    skip those events without saying so. `oldest` is the oldest cursor still valid.

    A stream's error, never a mutation's: no result union holds it (`type_name` is None). The
    GraphQL door answers it as an error with `extensions` {code, log, oldestCursor} (graphql-core
    takes an error's `extensions` from the exception it wraps)."""

    code = "cursor_expired"

    def __init__(self, log: str, cursor: int, oldest: int) -> None:
        super().__init__(
            f"events of the {log} log up to {oldest} were removed with finished work "
            f"(retention): a stream after {cursor} would skip them; read what you show again "
            f"and start after a current cursor (streamCursors), or after {oldest} at the oldest"
        )
        self.log = log
        self.cursor = cursor
        self.oldest = oldest
        self.extensions = {"log": log, "oldestCursor": str(oldest)}

    def fields(self) -> dict[str, object]:
        return {"log": self.log, "cursor": str(self.cursor), "oldest_cursor": str(self.oldest)}
