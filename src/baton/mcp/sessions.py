"""What each token holds open on the MCP door, so it can be bounded and closed.

A token's sessions are its handshake sessions (`Mcp-Session-Id`, protocol versions up to
2025-11-25) and its open `subscriptions/listen` streams (2026-07-28, which has no sessions):
each is long-lived server state, and each counts as one against
`BATON_MCP_MAX_SESSIONS_PER_TOKEN`. When a token stops working, the door ends all of them
(`baton.mcp.http`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from baton.errors import BatonError


class TooManySessions(BatonError):
    code = "too_many_sessions"

    def __init__(self, limit: int) -> None:
        super().__init__(
            f"this token already holds {limit} MCP sessions or listen streams "
            "(BATON_MCP_MAX_SESSIONS_PER_TOKEN); close one first"
        )
        self.limit = limit


# Ends one session or stream: a handshake session is terminated as a client's DELETE would.
Close = Callable[[], Awaitable[None]]


@dataclass(eq=False)
class Held:
    """One session or listen stream of a token."""

    token: str
    close: Close
    session_id: str | None = None


@dataclass
class Sessions:
    per_token: int
    held: dict[str, set[Held]] = field(default_factory=dict)

    def count(self, token: str) -> int:
        return len(self.held.get(token, ()))

    def check_room(self, token: str) -> None:
        if self.count(token) >= self.per_token:
            raise TooManySessions(self.per_token)

    def open(self, token: str, close: Close, session_id: str | None = None) -> Held:
        """Count one more for `token`; `TooManySessions` past the bound."""
        self.check_room(token)
        held = Held(token, close, session_id)
        self.held.setdefault(token, set()).add(held)
        return held

    def release(self, held: Held) -> None:
        mine = self.held.get(held.token)
        if mine is not None:
            mine.discard(held)
            if not mine:
                del self.held[held.token]

    def tokens(self) -> list[str]:
        return list(self.held)

    def of(self, token: str) -> list[Held]:
        return list(self.held.get(token, ()))
