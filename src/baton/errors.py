"""Domain errors. Each carries data; the API maps each to one GraphQL error type, once."""

from __future__ import annotations


class BatonError(Exception):
    code = "error"
    # True when the error is about the request as a whole (the database away, a budget spent),
    # not the value a resolver was asked for: the engine does not retry such a failure of a
    # batched field parent by parent.
    request_wide = False

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class NotFound(BatonError):
    code = "not_found"

    def __init__(self, kind: str, id: str) -> None:
        super().__init__(f"no {kind} with id {id!r}")
        self.kind = kind
        self.id = id


class NothingToClaim(NotFound):
    """No claimable run is left in the queue asked for."""

    def __init__(self, owner: str, project: str | None) -> None:
        super().__init__("claimable run", "")
        where = f" in project {project}" if project is not None else ""
        self.message = f"no claimable run of owner {owner}{where}"
        self.args = (self.message,)


class Forbidden(BatonError):
    code = "forbidden"


class InvalidInput(BatonError):
    code = "invalid_input"

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


class InvalidMove(BatonError):
    """The protocol table (or a rule beside it) does not allow `move` from `state`."""

    code = "invalid_state"

    def __init__(self, state: str, move: str, message: str) -> None:
        super().__init__(message)
        self.state = state
        self.move = move
        self.allowed_moves: tuple[str, ...] = ()


class InvalidRunMove(InvalidMove):
    """The pipeline table does not allow `move` at the run's position."""

    def __init__(self, status: str, phase: str, checkpoint: str, move: str, message: str) -> None:
        super().__init__(status, move, message)
        self.phase = phase
        self.checkpoint = checkpoint


class LeaseLost(BatonError):
    """The caller does not hold the live lease of the claimed run it tried to drive: the lease
    ran out, another claim holds the run now, or the lease id given is not the current one."""

    code = "lease_lost"

    def __init__(self, run_id: str, message: str) -> None:
        super().__init__(message)
        self.id = run_id


class VersionConflict(BatonError):
    code = "version_conflict"

    def __init__(self, expected: int, actual: int, subject: str = "task") -> None:
        super().__init__(f"expected version {expected}, the {subject} is at version {actual}")
        self.expected = expected
        self.actual = actual


class DuplicateTask(BatonError):
    code = "duplicate"

    def __init__(self, id: str) -> None:
        super().__init__(f"a task with id {id!r} exists with different input")
        self.id = id


class Unavailable(BatonError):
    """The database cannot answer now (down, or every connection busy): try again later."""

    code = "unavailable"
    request_wide = True


class TooMuchWork(BatonError):
    """A request that got past the cost check still did more work than one request may."""

    code = "too_expensive"
    request_wide = True
