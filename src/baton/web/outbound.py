"""Bytes waiting to be written to clients: one ledger per process, bounded per token and in all.

Whatever a client has not taken yet is held by this process: an answer or an event on its way
to the connection (`Account.held`), and what the connection's transport keeps until the kernel
accepts it (`Account.buffered`, the transport's `get_write_buffer_size()`). Each connection has
one `Account`, counted against the token of the request it serves (an unauthenticated one only
against the process). Bytes count from the moment they are ready to go until the client takes
them or the connection ends; the transports of `baton.web.http_connection` and
`baton.web.ws_connection` pause their writers as soon as anything is left unsent and resume them
when nothing is, so that moment is known and the ledger never waits on the peer.

Past a budget the newest request or answer is refused, or the connection holding the most is
cut:
- before a request runs, its token must have room for the largest answer the engine may write
  (`reserve`, its response budget) unless it holds nothing: a refused request runs nothing
  (`Ledger.room`, 429);
- an answer without effects (a query's, a file's) that would take its token past `per_token`
  is refused (429); one that would take the process past `limit` makes room by cutting the
  connections holding more than it needs, most first, and is refused (503) if that is not
  enough. An answer larger than a budget is always refused: keep both above the response
  budget. An answer whose request may have changed something (a mutation's, MCP's) is never
  refused once it ran (`carry`): it counts like an event;
- an event or frame for a stream or socket that takes its token past `per_token`, or the process
  past `limit`, cuts the token's (or the process's) connection holding the most, which is most
  often the one that stopped reading. Cut means reset at once (`Account.abort`): its client has
  not read what came before, so a close frame or `complete` could not reach it either.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import struct
from dataclasses import dataclass
from socket import SO_LINGER, SOL_SOCKET
from typing import Any, Protocol

from starlette.types import Scope

from baton.engine.limits import DEFAULT_LIMITS
from baton.metrics import QUEUED_BYTES_LIMITED, count

log = logging.getLogger("baton.outbound")

SCOPE_KEY = "baton.outbound"  # the connection's `Account`, in the ASGI scope of an HTTP request
RETRY_AFTER_SECONDS = 5
RESERVE = DEFAULT_LIMITS.max_response_bytes  # the most one answer may hold


class Transport(Protocol):
    """What an account uses of a connection (asyncio's and uvloop's transports)."""

    def get_write_buffer_size(self) -> int: ...

    def get_extra_info(self, name: str, default: Any = None) -> Any: ...

    def abort(self) -> None: ...


@dataclass(frozen=True)
class Refusal:
    """An answer that does not fit: its status, Baton's error code and a message."""

    status: int
    code: str
    message: str
    budget: str  # "token" or "process"


class Account:
    """One connection's bytes waiting for its client."""

    __slots__ = ("buffered", "cut", "held", "ledger", "pinned", "token", "transport")

    def __init__(self, transport: Transport | None = None) -> None:
        self.transport = transport
        self.ledger: Ledger | None = None
        self.token: str | None = None  # whose bytes these are; None: the process's only
        self.buffered = 0  # kept by the transport, as last measured
        self.pinned = 0  # the largest write not wholly sent (see `measure`)
        self.held = 0  # on their way to the transport
        self.cut = False  # cut to keep a budget: nothing more is counted or written

    @property
    def total(self) -> int:
        return self.buffered + self.held

    def hold(self, n: int) -> bool:
        """`n` more bytes are on their way (fewer when negative). False when the connection
        is cut, now or before, to keep its token or the process within budget: write nothing
        more."""
        if self.cut:
            return False
        self.held += n
        if self.ledger is not None:
            self.ledger.changed(self, n)
        return not self.cut

    def sent(self, n: int) -> None:
        """`n` held bytes were handed to the transport in one write: they count as what it
        keeps now."""
        if self.cut:
            return
        self.held -= n
        if self.ledger is not None:
            self.ledger.changed(self, -n)
        self.measure(n)

    def measure(self, written: int = 0) -> None:
        """Count what the transport keeps now: after a write of `written` bytes, or when it
        drained. uvloop keeps a write it could not send whole as a view of it, so the whole
        write stays in memory until its last byte is sent: it counts whole (the writers wait
        for the transport to drain before writing again, so there is one at a time)."""
        transport = self.transport
        size = transport.get_write_buffer_size() if transport is not None else 0
        if size:
            if written > self.pinned:
                self.pinned = written
            if self.pinned > size:
                size = self.pinned
        else:
            self.pinned = 0
        if size != self.buffered and not self.cut:
            delta = size - self.buffered
            self.buffered = size
            if self.ledger is not None:
                self.ledger.changed(self, delta)

    def close(self) -> None:
        """The connection is gone: nothing of it is held any more."""
        held = self.total
        self.buffered = self.held = 0
        self.cut = True
        if self.ledger is not None and held:
            self.ledger.changed(self, -held)

    def abort(self) -> None:
        """Reset the connection now, discarding what its client has not taken (a plain close
        would wait until it does)."""
        transport = self.transport
        if transport is None:
            return
        sock = transport.get_extra_info("socket")
        with contextlib.suppress(OSError, AttributeError):
            if sock is not None and sock.fileno() >= 0:
                sock.setsockopt(SOL_SOCKET, SO_LINGER, struct.pack("ii", 1, 0))
        with contextlib.suppress(Exception):
            transport.abort()


class Accounted:
    """What an asyncio connection (a uvicorn protocol) does to keep its `Account` current; put
    it before the protocol class in the bases. The transport pauses the writer as soon as
    anything is left unsent, so `resume_writing` means nothing is; a lost connection holds
    nothing."""

    account: Account

    def watch(self, transport: asyncio.Transport) -> None:
        """Account for what `transport` keeps (call from `connection_made`)."""
        transport.set_write_buffer_limits(high=0, low=0)
        self.account.transport = transport

    def resume_writing(self) -> None:
        super().resume_writing()  # type: ignore[misc]  # the protocol class after this mixin
        self.account.measure()

    def connection_lost(self, exc: Exception | None) -> None:
        super().connection_lost(exc)  # type: ignore[misc]  # the protocol class after this mixin
        self.account.close()


class _Share:
    """One token's part of the ledger."""

    __slots__ = ("accounts", "bytes")

    def __init__(self) -> None:
        self.bytes = 0
        self.accounts: set[Account] = set()  # those holding any of it


class Ledger:
    """The bytes every connection of the process holds for its client, per token and in all."""

    def __init__(self, per_token: int, limit: int, reserve: int = RESERVE) -> None:
        self.per_token = per_token
        self.limit = limit
        self.reserve = reserve
        self.total = 0
        self.holding: set[Account] = set()  # accounts with bytes
        self.shares: dict[str, _Share] = {}

    def attach(self, account: Account) -> None:
        """Count `account` in this ledger from now on, with what it holds already (what its
        connection wrote before a door saw it: uvicorn's own answers)."""
        if account.ledger is None and not account.cut:
            account.ledger = self
            if account.total:
                self.changed(account, account.total)

    def assign(self, account: Account, token: str | None) -> None:
        """Count `account` against `token` from now on. Bytes already held stay with the
        token they were counted for: a connection takes another request's token only when
        it holds nothing, so no request moves its bytes away from its token."""
        if account.total == 0:
            account.token = token

    def room(self, token: str | None) -> Refusal | None:
        """Before a request of `token` runs: why not, when the token holds bytes and lacks
        room for the largest answer the engine may write. A request refused here runs nothing,
        so none is refused after it changed something for want of room its token had spent."""
        share = self.shares.get(token) if token is not None else None
        if share is not None and share.bytes + self.reserve > self.per_token:
            return self._token_refusal(share.bytes)
        return None

    def admit(self, account: Account, size: int) -> Refusal | None:
        """Whether an answer of `size` bytes may go out on `account`, or why not. May cut
        other connections to make room in the process (see the module). The caller counts the
        answer (`Account.hold`, or `measure` once written) as it goes out."""
        if account.cut:
            return None  # the connection is being reset: nothing will be written
        token = account.token
        share = self.shares.get(token) if token is not None else None
        held = share.bytes if share is not None else 0
        if token is not None and held + size > self.per_token:
            return self._token_refusal(held)
        while self.total + size > self.limit:
            victim = max(self.holding, key=_total, default=None)
            if victim is None or victim.total <= size or victim is account:
                return Refusal(
                    503,
                    "unavailable",
                    "this server holds as many unread answers as it may; try again later",
                    "process",
                )
            self._cut(victim, "process")
        return None

    def _token_refusal(self, held: int) -> Refusal:
        return Refusal(
            429,
            "too_much_unread",
            f"answers to this token wait unread ({held} bytes, with room for at most "
            f"{self.per_token}); read them, or close those connections, first",
            "token",
        )

    def changed(self, account: Account, delta: int) -> None:
        """`account` holds `delta` bytes more (or fewer); past a budget, a cut (see the
        module)."""
        if not delta:
            return
        self.total += delta
        holds = account.total > 0
        if holds:
            self.holding.add(account)
        else:
            self.holding.discard(account)
        token = account.token
        share = None
        if token is not None:
            share = self.shares.get(token)
            if share is None:
                share = self.shares[token] = _Share()
            share.bytes += delta
            if holds:
                share.accounts.add(account)
            else:
                share.accounts.discard(account)
                if not share.accounts:
                    del self.shares[token]
        if delta > 0:
            self._relieve(account, share)

    def _relieve(self, account: Account, share: _Share | None) -> None:
        """Cut the connections holding the most until the token and the process are within
        their budgets (at worst, `account` itself)."""
        while share is not None and share.bytes > self.per_token and share.accounts:
            self._cut(max(share.accounts, key=_total), "token")
        while self.total > self.limit and self.holding:
            self._cut(max(self.holding, key=_total), "process")

    def _cut(self, victim: Account, budget: str) -> None:
        held = victim.total
        victim.close()  # its bytes leave the ledger now; the reset frees them within the turn
        victim.abort()
        count(QUEUED_BYTES_LIMITED, "cut", budget)
        log.warning(
            "reset a connection holding %d bytes its client has not taken, to keep the %s "
            "within its budget of unsent bytes (%d)",
            held,
            budget,
            self.per_token if budget == "token" else self.limit,
        )


def admit_answer(ledger: Ledger, account: Account, token: str | None, size: int) -> Refusal | int:
    """Admit an answer of `size` bytes for `token` on `account`: why not, or how many of its
    bytes are held (0: nothing waits on the connection, so it is written at once and the
    connection counts what its client does not take). Held bytes are the caller's to release
    with `Account.sent` once the answer is written."""
    if account.ledger is None:
        ledger.attach(account)
    if not (account.buffered or account.held):
        account.token = token  # as `Ledger.assign`, inline: once per answer
    refusal = ledger.admit(account, size)
    if refusal is not None:
        return refusal
    return carry(account, size)


def carry(account: Account, size: int) -> int:
    """An answer of `size` bytes goes out on `account` whatever the budgets (its request may
    have changed something): how many of its bytes are held until it is written, to release
    with `Account.sent`. Past a budget it cuts the connection holding the most, as an event
    does."""
    # Something waits on the connection: the answer waits behind it, in this process.
    return size if account.buffered and account.hold(size) else 0


def _total(account: Account) -> int:
    return account.total


def account_of(scope: Scope) -> Account | None:
    """The account of the connection serving `scope`, if the server keeps one."""
    account = scope.get(SCOPE_KEY)
    return account if isinstance(account, Account) else None
