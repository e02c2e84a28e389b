"""Ending long-lived connections whose token stopped working: one re-check per period for all.

Connections register under their bearer token. While any are registered, one task per process
asks the database every `period` seconds which of their tokens still work
(`TokenCache.recheck`: one query however many connections and tokens) and calls `revoke()` on
each connection of a token that does not. `revoke()` only signals and returns: every connection
ends itself within its own bound, so a peer that stopped reading can never hold the sweep up,
and a sweep over many connections costs no more than their signals. The query has the period
as its deadline: a database that does not answer delays that check, never the next ones.

Server-Sent Event streams use it (`baton.web.graphql_sse`); `baton.web.graphql_ws` has a sweep
of its own that could become this one.
"""

from __future__ import annotations

import asyncio
import logging
from contextvars import Context
from typing import Protocol

from baton.access.grants import TokenCache
from baton.errors import Unavailable

log = logging.getLogger("baton.revocation")


class Revocable(Protocol):
    def revoke(self) -> None:
        """The token stopped working: end soon, without waiting here for the peer."""


class TokenWatch:
    def __init__(self, tokens: TokenCache, period: float, what: str) -> None:
        self.tokens = tokens
        self.period = period
        self.what = what  # for the log: "SSE stream"
        self._by_token: dict[str, set[Revocable]] = {}
        self._sweeper: asyncio.Task[None] | None = None

    def add(self, token: str, connection: Revocable) -> None:
        self._by_token.setdefault(token, set()).add(connection)
        if self._sweeper is None or self._sweeper.done():
            # In a context of its own: not a part of the request that happened to start it
            # (its log lines, its trace).
            self._sweeper = asyncio.create_task(
                self._sweep(), name=f"baton-{self.what}-tokens", context=Context()
            )

    def discard(self, token: str, connection: Revocable) -> None:
        connections = self._by_token.get(token)
        if connections is not None:
            connections.discard(connection)
            if not connections:
                del self._by_token[token]

    def count(self, token: str) -> int:
        return len(self._by_token.get(token, ()))

    async def _sweep(self) -> None:
        """Every `period` seconds while connections are open; ends when none are."""
        while self._by_token:
            await asyncio.sleep(self.period)
            tokens = list(self._by_token)
            if not tokens:
                return
            try:
                async with asyncio.timeout(self.period):
                    working = await self.tokens.recheck(tokens)
            except (Unavailable, TimeoutError) as exc:
                log.warning(
                    "cannot re-check %s tokens now (%s); next try in %gs",
                    self.what,
                    str(exc) or "no answer in time",
                    self.period,
                )
                continue
            except Exception:
                log.exception("re-checking %s tokens failed", self.what)
                continue
            for token in tokens:
                if token not in working:
                    for connection in self._by_token.pop(token, ()):
                        connection.revoke()
