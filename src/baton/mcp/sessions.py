"""What each token holds open on the MCP door, so it can be bounded and closed.

A token's sessions are its handshake sessions (`Mcp-Session-Id`, protocol versions up to
2025-11-25) and its open `subscriptions/listen` streams (2026-07-28, which has no sessions):
each is long-lived server state, and each counts as one against its token
(`BATON_MCP_MAX_SESSIONS_PER_TOKEN`, past it 429) and against the process
(`BATON_MCP_MAX_SESSIONS`, past it 503).

A place is taken (`admit`) in one synchronous step before the session or stream exists, so
requests racing for the last place cannot all pass the check; it is given back (`release`,
idempotent) when what it holds ends, however it ends, or when the request that asked for it
ends without producing anything. When a token stops working, the door ends all it holds
(`baton.mcp.http`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from baton.errors import BatonError


class TooManySessions(BatonError):
    code = "too_many_sessions"
    status = 429

    def __init__(self, limit: int) -> None:
        super().__init__(
            f"this token already holds {limit} MCP sessions or listen streams "
            "(BATON_MCP_MAX_SESSIONS_PER_TOKEN); close one first"
        )
        self.limit = limit


class ProcessFull(BatonError):
    code = "unavailable"
    status = 503

    def __init__(self, limit: int) -> None:
        super().__init__(
            f"this server holds {limit} MCP sessions and listen streams "
            "(BATON_MCP_MAX_SESSIONS); try again later"
        )
        self.limit = limit


# In a request's ASGI scope: the place a session-opening request holds, and the HTTP status a
# handler refused a place with (the SDK would answer a handler's error 400).
ADMISSION_KEY = "baton.mcp.admission"
STATUS_KEY = "baton.mcp.status"

# Ends one session or stream: a handshake session is terminated as a client's DELETE would.
Close = Callable[[], Awaitable[None]]


async def _nothing() -> None:
    return None


@dataclass(eq=False)
class Held:
    """One place of a token: a session (once `session_id` is known) or a listen stream, or a
    request that may become one."""

    token: str
    close: Close = _nothing
    session_id: str | None = None
    # The request that opened it failed, or its token stopped working while it was opening:
    # whatever it opened is to be ended at once.
    doomed: bool = False


@dataclass
class Sessions:
    per_token: int
    per_process: int
    held: dict[str, set[Held]] = field(default_factory=dict)
    total: int = 0

    def count(self, token: str) -> int:
        return len(self.held.get(token, ()))

    def admit(self, token: str) -> Held:
        """Take one place for `token`, or refuse: `ProcessFull` when the process is at its
        bound, `TooManySessions` when the token is. No await: the check and the count are one
        step."""
        mine = self.held.get(token)
        if mine is not None and len(mine) >= self.per_token:
            raise TooManySessions(self.per_token)
        if self.total >= self.per_process:
            raise ProcessFull(self.per_process)
        held = Held(token)
        if mine is None:
            mine = self.held[token] = set()
        mine.add(held)
        self.total += 1
        return held

    def release(self, held: Held) -> None:
        """Give the place back (again is nothing)."""
        mine = self.held.get(held.token)
        if mine is None or held not in mine:
            return
        mine.discard(held)
        self.total -= 1
        if not mine:
            del self.held[held.token]

    def tokens(self) -> list[str]:
        return list(self.held)

    def of(self, token: str) -> list[Held]:
        return list(self.held.get(token, ()))
