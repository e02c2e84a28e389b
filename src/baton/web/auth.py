"""Bearer tokens: reading them, and resolving them to principals with a short cache."""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable

from baton.access.principals import Principal

TOKEN_CACHE_SECONDS = 30.0
TOKEN_CACHE_SIZE = 10_000

Resolve = Callable[[str], Awaitable[Principal | None]]


def bearer(value: str | None) -> str | None:
    if not value:
        return None
    scheme, _, token = value.strip().partition(" ")
    if scheme.lower() != "bearer":
        return None
    return token.strip() or None


class TokenCache:
    """Principal look-ups by token, cached briefly: a token check on every request is one
    indexed query otherwise. Unknown tokens are not cached."""

    def __init__(self, resolve: Resolve) -> None:
        self._resolve = resolve
        self._entries: OrderedDict[str, tuple[float, Principal]] = OrderedDict()

    async def principal(self, token: str | None) -> Principal | None:
        if token is None:
            return None
        now = time.monotonic()
        hit = self._entries.get(token)
        if hit is not None and hit[0] > now:
            return hit[1]
        principal = await self._resolve(token)
        if principal is not None:
            self._entries[token] = (now + TOKEN_CACHE_SECONDS, principal)
            self._entries.move_to_end(token)
            while len(self._entries) > TOKEN_CACHE_SIZE:
                self._entries.popitem(last=False)
        return principal
