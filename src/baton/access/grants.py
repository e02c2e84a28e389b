"""Bearer tokens: reading them, and resolving them to what they grant with a short cache.

Every door takes its caller from here, so a token works, and stops working, the same on each.
The bound on revocation: what a token grants is cached for `check_seconds` (default 5,
`BATON_TOKEN_CHECK_SECONDS`), so a revoked token is refused at most that long after the
revocation commits; an expired one is refused at once (the expiry time is cached with the
grant). Long-lived connections (WebSockets, SSE streams, MCP sessions) are re-checked on the
same period by their door (`TokenCache.recheck`: one query for all of a door's connections)
and end when their token stops working. Five seconds costs one indexed look-up per token per
process every five seconds, and keeps a stolen token's useful life after revocation short.
When a token's entry runs out while many requests carry it, one look-up answers them all (it
was one look-up, and a pool connection, per waiting request).
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Collection
from datetime import UTC, datetime

from baton.access.principals import Principal
from baton.access.tokens import Grant
from baton.telemetry.requests import note_principal

TOKEN_CHECK_SECONDS = 5.0
TOKEN_CACHE_SIZE = 10_000

Resolve = Callable[[str], Awaitable[Grant | None]]
Working = Callable[[Collection[str]], Awaitable[set[str]]]


def bearer(value: str | None) -> str | None:
    if not value:
        return None
    scheme, _, token = value.strip().partition(" ")
    if scheme.lower() != "bearer":
        return None
    return token.strip() or None


class TokenCache:
    """Grants by token, cached for `check_seconds`: a token check on every request is one
    indexed query otherwise. Unknown tokens are not cached."""

    def __init__(
        self, resolve: Resolve, working: Working, check_seconds: float = TOKEN_CHECK_SECONDS
    ) -> None:
        self._resolve = resolve
        self._working = working
        self.check_seconds = check_seconds
        self._entries: OrderedDict[str, tuple[float, Grant]] = OrderedDict()
        # Look-ups under way, by token: requests that miss together share one. As many as
        # there are requests in flight, at most.
        self._pending: dict[str, asyncio.Task[Grant | None]] = {}

    async def grant(self, token: str | None) -> Grant | None:
        """What `token` grants now (None: it does not work). May raise `Unavailable`."""
        if token is None:
            return None
        hit = self._entries.get(token)
        if hit is not None and hit[0] > time.monotonic():
            grant: Grant | None = hit[1]
        else:
            lookup = self._pending.get(token)
            if lookup is None:
                lookup = asyncio.ensure_future(self._look_up(token))
                self._pending[token] = lookup
                lookup.add_done_callback(lambda _: self._pending.pop(token, None))
            # Shielded: a caller that goes away does not cancel the others' answer.
            grant = await asyncio.shield(lookup)
        if grant is not None and grant.expired(datetime.now(UTC)):
            self._entries.pop(token, None)
            return None
        if grant is not None:
            note_principal(grant.principal.handle)  # for the request's log lines and span
        return grant

    async def _look_up(self, token: str) -> Grant | None:
        grant = await self._resolve(token)
        if grant is None:
            self._entries.pop(token, None)
        else:
            self._remember(token, grant, time.monotonic())
        return grant

    def known(self, token: str | None) -> bool:
        """Whether `token` worked when it was last looked up: a look at the cache, no query
        (an expired or revoked token leaves it when it is next looked up or re-checked)."""
        return token is not None and token in self._entries

    async def principal(self, token: str | None) -> Principal | None:
        grant = await self.grant(token)
        return grant.principal if grant is not None else None

    async def recheck(self, tokens: Collection[str]) -> set[str]:
        """Which of `tokens` still work, asked of the database in one query; the cache
        forgets the others and keeps the rest for another period."""
        ok = await self._working(tokens)
        now = time.monotonic()
        for token in tokens:
            hit = self._entries.get(token)
            if token not in ok:
                self._entries.pop(token, None)
            elif hit is not None:
                self._entries[token] = (now + self.check_seconds, hit[1])
        return ok

    def _remember(self, token: str, grant: Grant, now: float) -> None:
        self._entries[token] = (now + self.check_seconds, grant)
        self._entries.move_to_end(token)
        while len(self._entries) > TOKEN_CACHE_SIZE:
            self._entries.popitem(last=False)
