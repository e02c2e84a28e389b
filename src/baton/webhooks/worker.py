"""The delivery worker: one per process, sending each endpoint's events at least once.

The outbox is the event logs themselves: an endpoint's cursor in each log says what it has
acknowledged. The worker claims endpoints with work due (a lease on the endpoint's row, taken
with `FOR UPDATE SKIP LOCKED`, so one process at a time works on an endpoint), renders what
lies after the cursors, sends it one message at a time in id order, and writes a batch's
results and the new cursors in one transaction, only while its lease holds; the turn's last
write hands the lease back in the same transaction. A turn that sent up to the horizon looks
again only if an event was committed since it read (`_follow`): a later one wakes the worker,
which claims the endpoint again once the turn is over. (Keeping the lease across wake-ups, a
turn that lingers for its endpoint's next event, was measured and left out: turns already run
on while events keep coming, so claims were 1-3 in 100 messages.) Turns that read the new
events of the same owner, log, filter and cursor at the same time read them in one round trip
(`_read_shared`), and turns that write their batches at the same time write them in one
statement (`_record`; each endpoint's written, or not, on its own terms). A process killed
anywhere in between has written nothing for that batch; its lease runs out and the next claim
sends from the old cursor again: the receiver may see the batch's messages twice (same
`webhook-id`), never miss one.

Order: an endpoint's task events arrive in task-event id order (the log's order), and its run
events in run-event id order; the two logs are two sequences, sent task events first within
each turn, with no order promised between a task event and a run event. A message is not sent
before the one ahead of it in its log is acknowledged: a failing head holds its endpoint back
(retried on `baton.webhooks.schedule`), never another endpoint.

An endpoint scoped to one task (an A2A push notification config, `baton.services.
task_webhooks`) is due only when its task has an event past its cursor, and ends (disabled
for good, `TASK_ENDED`) once its task's final event is acknowledged. Its messages are written
by the `formats.Format` of its payload format, one or more requests per event, with its token
and authentication as headers (`formats`).

An owner's endpoint whose cursor fell below what a log keeps (retention removed events after
it) gets a `cursorExpired` message at the head of that log's queue, then goes on from the oldest
cursor kept (`gaps`).

Pings and redeliveries go first in a turn, in the order asked, then events. A failed attempt
at any of them counts against the endpoint alike (it backs off on `schedule`, and is disabled
after `max_attempts` in a row or at once on a 410) and ends the turn, so a turn makes at most
one attempt that fails.

Changes: before each message the turn makes sure that the endpoint is as it was when the turn
read it (`updated_at`) and that its lease still holds; an owner's change (a new URL, a filter,
`enabled: false`, a new secret, the endpoint deleted) ends the turn, and the next turn works
from the endpoint as changed. An attempt already on its way when the change is made is not
counted against the endpoint (`store.record_all`). The claim that began the turn read the
endpoint under its lease, and a change made through this process wakes the worker (`wake`): a
message within `RECHECK_SECONDS` of the claim or of the last check, with no change made here
since, goes without asking the database again (a round trip was a tenth of a message's CPU), and
turns that ask at the same time ask in one round trip (`_check`). So a change made through
another process holds from the first message `RECHECK_SECONDS` after it at the latest, and such
a change to an endpoint a turn holds answers only after `TURN_TRUSTS_SECONDS`, the same time
(`baton.services.task_webhooks`): once it has answered, nothing more goes out as the endpoint
was.

Bounded: at most `concurrency` endpoints per process at once, shared between owners
(`fairness`: one owner's hanging receivers hold at most a part of them while others wait),
a hanging receiver holding one slot for at most the attempt timeout; at most `BATCH` events and
`MAX_PENDING_MANUAL` pings and redeliveries per turn, and a turn stops before its lease could
run out. Wake-ups come from the event hubs (an event committed on any process) and from the
API (a ping, a redelivery, an endpoint changed); otherwise it looks again every
`poll_seconds` and when the soonest retry is due.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import socket
import time
from collections import Counter as Tally
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
from prometheus_client import Counter

from baton.access.principals import ADMIN, Principal, PrincipalKind
from baton.engine.runner import Engine
from baton.live.filters import EventFilter, RunEventFilter
from baton.live.hub import EventHub
from baton.live.logs import RUN_LOG, TASK_LOG
from baton.metrics import REGISTRY
from baton.protocol.handoff import HANDOFF
from baton.services.context import Context
from baton.services.task_webhooks import TURN_TRUSTS_SECONDS, opened
from baton.services.webhook_addresses import Policy, Refused
from baton.services.webhook_secrets import SecretBox, SecretUnavailable
from baton.store import webhooks as store
from baton.store.db import Database
from baton.store.records import EventRecord, RunEventRecord
from baton.store.sql import Params
from baton.store.webhooks import (
    MAX_PENDING_MANUAL,
    Attempted,
    DeliveryKind,
    DeliveryRecord,
    EndpointRecord,
    PayloadFormat,
    Recorded,
)
from baton.telemetry import requests
from baton.webhooks import attempt, fairness, formats, gaps, http1, render, schedule, signing

log = logging.getLogger("baton.webhooks")

BATCH = 100  # events per turn of one endpoint
MARGIN_SECONDS = 3.0  # an attempt starts only with this much lease left after its timeout
STOP_SECONDS = 5.0  # the most `stop()` waits for attempts in flight
# How long a turn trusts its last look at its endpoint: what a change to a held one waits out.
RECHECK_SECONDS = TURN_TRUSTS_SECONDS
PRUNE_SECONDS = 60.0
KEPT_RENDERS = 4096  # events' bodies kept for the next endpoint of the same owner and filter
KEPT_WAYS = 1024  # URLs whose look-up is kept for the next message (`attempt.Way`)

ATTEMPTS = Counter(
    "baton_webhook_attempts",
    "Webhook delivery attempts made by this process, by outcome (delivered or failed).",
    ["outcome"],
    registry=REGISTRY,
)
DELIVERED, FAILED = ATTEMPTS.labels(outcome="delivered"), ATTEMPTS.labels(outcome="failed")


@dataclass(frozen=True)
class WorkerSettings:
    policy: Policy
    timeout: float = 10.0
    retry_first: float = 5.0
    max_attempts: int = 11
    concurrency: int = 16
    poll_seconds: float = 1.0

    @property
    def lease_seconds(self) -> float:
        """Long enough for one attempt and its bookkeeping, short enough that an endpoint a
        dead process held is picked up again soon."""
        return 2 * self.timeout + 10


def message_id(endpoint_id: str, log: str, event_id: int) -> str:
    """The `webhook-id` of an event's message to an endpoint: the same for every attempt and
    every redelivery, so a receiver can drop what it has seen."""
    return f"msg_{endpoint_id}_{log}_{event_id}"


class DeliveryWorker:
    def __init__(
        self,
        db: Database,
        engine: Engine,
        context: Callable[[Principal], Context],
        hubs: tuple[EventHub[EventRecord], EventHub[RunEventRecord]],
        box: SecretBox,
        settings: WorkerSettings,
        payload_formats: Mapping[PayloadFormat, formats.Format] | None = None,
    ) -> None:
        self.db = db
        self.engine = engine
        self.context = context
        self.hubs = hubs
        self.box = box
        self.settings = settings
        # How endpoints of each format other than the standard one are written (from the
        # doors that speak them; an endpoint of a format missing here fails to render).
        self.formats = dict(payload_formats or {})
        # Identifies this process's leases; new on every start, so a restarted process never
        # mistakes a dead predecessor's lease for its own.
        self.holder = f"{socket.gethostname()}:{os.getpid()}:{os.urandom(4).hex()}"
        self._wake = asyncio.Event()
        self._changes = 0  # endpoints changed through this process (`wake`)
        self._commits = 0  # events committed, as the hubs told (`_follow`)
        self._released: set[str] = set()  # running turns whose last write handed back the lease
        # The reads of new events in flight, shared by the turns at the same place in the same
        # log with the same owner and filter (`_read_shared`).
        self._reads: dict[tuple[str, str, bytes, int], asyncio.Task[tuple[int, store.Batch]]] = {}
        # When each running turn last saw its endpoint unchanged, and `_changes` then.
        self._seen: dict[str, tuple[float, int]] = {}
        self._sendings: dict[str, _Sending] = {}  # each turn's, by endpoint (`_sending_of`)
        self._ways: OrderedDict[tuple[str, Policy], attempt.Way] = OrderedDict()
        # The checks that the endpoint is unchanged asked for and not yet sent, and the task
        # that sends them (`_check`).
        self._to_check: dict[str, tuple[datetime, asyncio.Future[bool]]] = {}
        self._checker: asyncio.Task[None] | None = None
        # The batches to write, and the task that writes them (`_record`).
        self._to_write: list[tuple[store.Written, asyncio.Future[Recorded]]] = []
        self._writer: asyncio.Task[None] | None = None
        self._endpoints_exist = asyncio.Event()
        self._active: dict[str, asyncio.Task[None]] = {}
        self._owners: dict[str, str] = {}  # the owner of each endpoint in `_active`
        self._tasks: list[asyncio.Task[None]] = []
        self._http: http1.Client | None = None
        # What an event renders to depends only on the owner, the log, the filter and the event
        # (its subject as it was right after it): endpoints that share them render it, and
        # write its body, once.
        self._renders: OrderedDict[tuple[str, str, bytes, int], bytes] = OrderedDict()
        # The renders on their way, by where they start (owner, log, filter, the event they
        # render after), with the events they render: endpoints claimed together reach the
        # same new events together, one render for all of them (`_rendered`).
        self._rendering: dict[
            tuple[str, str, bytes, int],
            tuple[list[int], asyncio.Task[list[bytes]]],
        ] = {}

    # --- lifecycle ----------------------------------------------------------------------------

    async def start(self) -> None:
        s = self.settings
        self._http = attempt.client(s.concurrency)
        task_hub, run_hub = self.hubs
        self._tasks = [
            asyncio.create_task(self._loop(), name="baton-webhooks"),
            asyncio.create_task(
                self._follow(lambda: task_hub.stream(ADMIN, EventFilter())),
                name="baton-webhooks-tasks",
            ),
            asyncio.create_task(
                self._follow(lambda: run_hub.stream(ADMIN, RunEventFilter())),
                name="baton-webhooks-runs",
            ),
            asyncio.create_task(self._prune(), name="baton-webhooks-prune"),
        ]

    async def stop(self) -> None:
        """Stop within `STOP_SECONDS`: attempts in flight are cancelled (their endpoints'
        leases run out and the messages go again later), no peer is waited on."""
        tasks: list[asyncio.Task[Any]] = [*self._tasks, *self._active.values()]
        tasks += [*self._reads.values(), *(task for _, task in self._rendering.values())]
        tasks += [t for t in (self._checker, self._writer) if t is not None]
        for task in tasks:
            task.cancel()
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=STOP_SECONDS)
            for task in pending:
                log.warning("webhooks: %s did not stop in time", task.get_name())
        # Hand this process's endpoints back now rather than when their leases run out: what
        # a cancelled attempt sent goes again sooner (at least once either way).
        with contextlib.suppress(Exception):
            await asyncio.wait_for(store.release_all(self.db, self.holder), STOP_SECONDS)
        if self._http is not None:
            self._http.close()  # kept connections dropped, no peer waited on

    def wake(self) -> None:
        """Look for due work now (an endpoint changed, a ping or redelivery was asked for)."""
        self._changes += 1  # running turns look at their endpoints again before a message
        self._wake.set()

    # --- the loop -----------------------------------------------------------------------------

    async def _follow(self, stream: Callable[[], AsyncIterator[Any]]) -> None:
        """Wake the loop on every event committed (on any process) while any endpoint exists:
        the hub already reads the log once for this process, so this costs no query of its
        own. With no endpoint it follows nothing, so a server without webhooks does no work
        per commit for them. A stream that fails (the database away) is opened again."""
        while True:
            await self._endpoints_exist.wait()
            try:
                async for _ in stream():
                    self._commits += 1
                    self._wake.set()
                    if not self._endpoints_exist.is_set():
                        break
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("webhooks: following the event log failed (%s)", exc)
                await asyncio.sleep(self.settings.poll_seconds)  # then open it again

    async def _loop(self) -> None:
        delay = 0.1
        idle = True  # the last wait ended without a wake-up
        while True:
            wait = self.settings.poll_seconds
            try:
                # Whether any endpoint exists: looked at only when nothing woke the loop (on
                # poll), or before any is known (an endpoint made on another process shows
                # within `poll_seconds`); one query per poll, none per commit.
                if idle or not self._endpoints_exist.is_set():
                    if await store.any_endpoint(self.db):
                        self._endpoints_exist.set()
                    else:
                        self._endpoints_exist.clear()
                if self._endpoints_exist.is_set():
                    due = await self._fill()
                    if due is not None:
                        until = (due - datetime.now(UTC)).total_seconds()
                        wait = max(0.01, min(wait, until))
                delay = 0.1
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the database being away must not stop deliveries
                log.warning("webhooks: claiming failed (%s); retrying in %.1fs", exc, delay)
                wait, delay = delay, min(delay * 2, 5.0)
            try:
                await asyncio.wait_for(self._wake.wait(), wait)
                idle = False
            except TimeoutError:
                idle = True
            self._wake.clear()

    async def _fill(self) -> datetime | None:
        """Claim endpoints with work due for the free slots; when the soonest backed-off one
        is due again (read with the candidates: one round trip)."""
        s = self.settings
        free = s.concurrency - len(self._active)
        if free <= 0:
            return await store.next_due(self.db)
        # Each owner's candidates interleaved, enough to see every owner that could get one
        # of the free slots.
        candidates, soonest = await store.due_and_next(
            self.db,
            list(self._active),
            s.concurrency,
            2 * s.concurrency,
            allow_private=s.policy.allow_private,
            allow_http=s.policy.allow_http,
        )
        picked = fairness.pick(candidates, Tally(self._owners.values()), free, s.concurrency)
        if not picked:
            return soonest
        seen = (time.monotonic(), self._changes)  # the claim reads each endpoint as it is
        claimed = await store.lease(self.db, self.holder, s.lease_seconds, picked)
        for endpoint, manual in claimed:
            self._seen[endpoint.id] = seen
            # A little short of the lease as the database counts it: clocks and round trips.
            deadline = time.monotonic() + s.lease_seconds - 1.0
            # A turn is a request of its own: its log lines' id, its own trace.
            turn = requests.background(
                "webhook delivery",
                self._turn(endpoint, manual, deadline),
                {"baton.webhook.endpoint": endpoint.id},
                endpoint.owner,
            )
            task = asyncio.create_task(turn, name=f"wh-{endpoint.id}")
            self._active[endpoint.id] = task
            self._owners[endpoint.id] = endpoint.owner
            task.add_done_callback(functools.partial(self._done, endpoint.id))
        return soonest

    def _done(self, endpoint_id: str, _: object) -> None:
        self._active.pop(endpoint_id, None)
        self._seen.pop(endpoint_id, None)
        self._sendings.pop(endpoint_id, None)
        self._owners.pop(endpoint_id, None)
        self._wake.set()  # a slot is free, and the endpoint may have more to send

    async def _prune(self) -> None:
        while True:
            await asyncio.sleep(PRUNE_SECONDS)
            try:
                await store.prune(self.db)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("webhooks: pruning deliveries failed (%s)", exc)

    # --- one endpoint's turn ------------------------------------------------------------------

    def _time_for_one(self, deadline: float) -> bool:
        return time.monotonic() + self.settings.timeout + MARGIN_SECONDS < deadline

    async def _turn(self, endpoint: EndpointRecord, manual: bool, deadline: float) -> None:
        try:
            now = datetime.now(UTC)
            if endpoint.next_attempt_at is not None and endpoint.next_attempt_at > now:
                return  # it backs off (its state moved on since it was found due)
            context = self.context(Principal(PrincipalKind.OWNER, endpoint.owner))
            state = store.Outcome(
                endpoint.task_cursor, endpoint.run_cursor, endpoint.failures, None
            )
            if manual:
                after = await self._manual(endpoint, context, deadline, state)
                if after is None:
                    return
                state = after
            if endpoint.enabled:
                await self._events(endpoint, context, deadline, state)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("webhooks: endpoint %s", endpoint.id)
        finally:
            if endpoint.id in self._released:
                self._released.discard(endpoint.id)
            else:
                with contextlib.suppress(Exception):
                    await asyncio.shield(store.release(self.db, endpoint.id, self.holder))

    def _secrets(self, endpoint: EndpointRecord) -> list[str]:
        """The secrets that sign now: the current one, and the previous one during its
        rotation's grace period."""
        found = [self.box.open(endpoint.secret, endpoint.id)]
        until = endpoint.previous_secret_until
        if endpoint.previous_secret and until is not None and until > datetime.now(UTC):
            found.append(self.box.open(endpoint.previous_secret, endpoint.id))
        return found

    def _policy(self, endpoint: EndpointRecord) -> Policy:
        """What this endpoint's URL may resolve to: as when it was saved, and never more than
        this process allows (an endpoint saved as needing private addresses is not claimed by
        a process that does not allow them)."""
        own = self.settings.policy
        return replace(own, allow_private=own.allow_private and endpoint.allow_private is not False)

    async def _send(
        self, endpoint: EndpointRecord, message_id: str, body: bytes
    ) -> tuple[attempt.Answer | None, datetime]:
        """One attempt at a message: its answer, and when it began. None when the endpoint
        changed (or its lease was lost) since the turn read it: nothing was sent."""
        assert self._http is not None
        started = datetime.now(UTC)
        try:
            sending = self._sending_of(endpoint)
        except (Refused, SecretUnavailable) as exc:
            if not await self._unchanged(endpoint):
                return None, started
            answer: attempt.Answer | None = attempt.Answer(False, None, None, str(exc), 0)
        else:
            signed = signing.headers(sending.secrets, message_id, int(time.time()), body)
            answer = await attempt.send(
                self._http,
                sending.way,
                signed,
                body,
                self.settings.timeout,
                functools.partial(self._unchanged, endpoint),
                sending.own,
            )
        if answer is not None:
            (DELIVERED if answer.delivered else FAILED).inc()
        return answer, started

    def _sending_of(self, endpoint: EndpointRecord) -> _Sending:
        """How the turn's messages to `endpoint` go: its URL (`attempt.Way`), its secrets and
        its own headers, made at the turn's first message (the record is the turn's: a
        change to the endpoint ends the turn) and kept until the turn is over (`_done`)."""
        kept = self._sendings.get(endpoint.id)
        if kept is not None and kept.endpoint is endpoint:
            return kept
        made = _Sending(
            endpoint,
            self._way(endpoint.url, self._policy(endpoint)),
            self._secrets(endpoint),
            self._own_headers(endpoint),
        )
        self._sendings[endpoint.id] = made
        return made

    def _way(self, url: str, policy: Policy) -> attempt.Way:
        """The URL's `attempt.Way`, kept across turns: a turn often sends one message, and
        the look-up it holds serves the next turns for `attempt.ROUTE_SECONDS`."""
        key = (url, policy)
        way = self._ways.get(key)
        if way is None:
            way = self._ways[key] = attempt.Way(url, policy)
            while len(self._ways) > KEPT_WAYS:
                self._ways.popitem(last=False)
        else:
            self._ways.move_to_end(key)
        return way

    def _own_headers(self, endpoint: EndpointRecord) -> attempt.Headers:
        """A task-scoped endpoint's token and authentication, as headers (`formats`)."""
        if not endpoint.scoped:
            return ()
        token, credentials = opened(self.box, endpoint)
        format = self.formats.get(endpoint.payload_format)
        return tuple(formats.headers(format, token, endpoint.auth_scheme, credentials).items())

    async def _send_all(
        self, endpoint: EndpointRecord, message_id: str, bodies: list[bytes], deadline: float
    ) -> _Sent | None:
        """An event's bodies, one request each, in order, until one is not acknowledged (None
        when the endpoint changed and nothing more was sent). After the first, a body goes
        only with time left in the turn; when time runs short the event is not acknowledged
        and the next turn sends it whole again, its first bodies with the same ids (it counts
        as a failure only if it was its batch's first: then the receiver's slowness alone used
        the time, and backing off is right)."""
        started = datetime.now(UTC)
        answer: attempt.Answer | None = None
        spent = 0
        for n, body in enumerate(bodies):
            if n > 0 and not self._time_for_one(deadline):
                error = f"the turn ran short of time after {n} of {len(bodies)} messages"
                return _Sent(attempt.Answer(False, None, None, error, spent), started, short=True)
            answer, at = await self._send(
                endpoint, message_id if n == 0 else f"{message_id}_{n}", body
            )
            if n == 0:
                started = at
            if answer is None:
                return None
            spent += answer.duration_ms
            if not answer.delivered:
                break
        if answer is not None and answer.duration_ms != spent:
            answer = replace(answer, duration_ms=spent)
        return _Sent(answer, started)

    async def _record(
        self,
        endpoint: EndpointRecord,
        done: list[Attempted],
        state: store.Outcome,
        *,
        last: bool = False,
    ) -> Recorded:
        """Write a batch; the turn's `last` write hands the lease back too (the turn then
        touches the endpoint no more). The batches of turns that write at the same time go
        in one statement (`_run_writes`)."""
        written = store.Written(endpoint.id, done, state, endpoint.updated_at, release=last)
        found: asyncio.Future[Recorded] = asyncio.get_running_loop().create_future()
        self._to_write.append((written, found))
        if self._writer is None or self._writer.done():
            self._writer = asyncio.create_task(self._run_writes(), name="baton-webhooks-write")
        recorded = await found
        if last and recorded is not Recorded.LOST:
            self._released.add(endpoint.id)
        if recorded is Recorded.COUNTED and state.disabled_reason:
            log.warning("webhooks: endpoint %s disabled: %s", endpoint.id, state.disabled_reason)
        return recorded

    async def _run_writes(self) -> None:
        """Write the batches asked for, a statement at a time: those asked while one is on
        its way go in the next. A turn writes once per batch, so an endpoint is in a
        statement at most once. A statement that fails is tried again a batch at a time, so
        that no endpoint's batch (another owner's) fails for one that cannot be written."""
        while self._to_write:
            await asyncio.sleep(0)  # the turns whose answers came together write too
            asked, self._to_write = self._to_write, []
            try:
                recorded = await store.record_all(self.db, self.holder, [w for w, _ in asked])
            except Exception as exc:
                if len(asked) == 1:
                    _settle(asked[0][1], exc)
                    continue
                for written, found in asked:
                    try:
                        alone = await store.record_all(self.db, self.holder, [written])
                    except Exception as each:
                        _settle(found, each)
                    else:
                        _settle(found, alone[written.endpoint_id])
                continue
            for written, found in asked:
                _settle(found, recorded[written.endpoint_id])

    async def _unchanged(self, endpoint: EndpointRecord) -> bool:
        """Whether the endpoint is as the turn read it and its lease held: known without a
        query for `RECHECK_SECONDS` after the claim or the last check, unless an endpoint was
        changed through this process since (see the module's text)."""
        now = time.monotonic()
        seen = self._seen.get(endpoint.id)
        if seen is not None and seen[1] == self._changes and now - seen[0] < RECHECK_SECONDS:
            return True
        changes = self._changes
        if not await self._check(endpoint):
            return False
        self._seen[endpoint.id] = (now, changes)
        return True

    async def _check(self, endpoint: EndpointRecord) -> bool:
        """Ask the database whether the endpoint is unchanged and its lease held, in one round
        trip with every other turn asking at the same time (`_run_checks`)."""
        found: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._to_check[endpoint.id] = (endpoint.updated_at, found)
        if self._checker is None or self._checker.done():
            self._checker = asyncio.create_task(self._run_checks(), name="baton-webhooks-check")
        return await found

    async def _run_checks(self) -> None:
        """Answer the checks asked for, a batch at a time: those asked while one is on its way
        go in the next (each is asked of the database after it was asked for)."""
        while self._to_check:
            await asyncio.sleep(0)  # the turns that a commit woke together ask too
            asked, self._to_check = self._to_check, {}
            try:
                held = await store.unchanged(
                    self.db, self.holder, [(id, at) for id, (at, _) in asked.items()]
                )
            except Exception as exc:
                for _, found in asked.values():
                    if not found.done():
                        found.set_exception(exc)
                continue
            for id, (_, found) in asked.items():
                if not found.done():
                    found.set_result(id in held)

    def _after(
        self,
        endpoint: EndpointRecord,
        state: store.Outcome,
        acknowledged: bool,
        failure: attempt.Answer | None,
    ) -> store.Outcome:
        """The endpoint's state after attempts: back to no failures if one was acknowledged
        and none failed; else one more failure in a row (counted from the last acknowledged),
        and disabled (a 410, or `max_attempts` reached) or, if it is not, or is disabled
        already (a ping to it failed), the next try on the schedule."""
        if failure is None:
            if acknowledged:
                return replace(state, failures=0, next_attempt_at=None)
            return state
        failures = (0 if acknowledged else state.failures) + 1
        reason: str | None = None
        next_at: datetime | None = None
        if endpoint.enabled and failure.gone:
            reason = "the receiver answered 410 Gone"
        elif endpoint.enabled and failures >= self.settings.max_attempts:
            reason = f"{failures} attempts in a row failed (last: {failure.error})"
        else:
            wait = schedule.delay(failures, self.settings.retry_first)
            next_at = datetime.now(UTC) + timedelta(seconds=wait)
        return replace(state, failures=failures, next_attempt_at=next_at, disabled_reason=reason)

    async def _manual(
        self,
        endpoint: EndpointRecord,
        context: Context,
        deadline: float,
        state: store.Outcome,
    ) -> store.Outcome | None:
        """Send the pings and redeliveries waiting, in order, until one fails: the endpoint's
        state after them, or None when the turn ends here (a failure, a change, a lost
        lease)."""
        pending = await store.pending_manual(self.db, endpoint.id, MAX_PENDING_MANUAL)
        done: list[Attempted] = []
        failure: attempt.Answer | None = None
        acknowledged = withdrawn = False
        for delivery in pending:
            if not self._time_for_one(deadline):
                break
            one = await self._one_manual(endpoint, context, delivery)
            if one is None:
                withdrawn = True
                break
            attempted, answer = one
            done.append(attempted)
            if answer is None:  # not rendered: nothing was sent, nothing to count
                continue
            if not answer.delivered:
                failure = answer
                break
            acknowledged = True
        if not done:
            return None if withdrawn else state
        state = self._after(endpoint, state, acknowledged, failure)
        recorded = await self._record(endpoint, done, state)
        if recorded is not Recorded.COUNTED or failure is not None or withdrawn:
            return None
        return state

    async def _one_manual(
        self, endpoint: EndpointRecord, context: Context, delivery: DeliveryRecord
    ) -> tuple[Attempted, attempt.Answer | None] | None:
        """One ping or redelivery: what to write, and the answer (None: not rendered, so not
        sent). None when the endpoint changed and nothing was sent."""
        if delivery.kind is DeliveryKind.PING:
            data = {"ping": {"endpointId": endpoint.id, "deliveryId": str(delivery.id)}}
            body = render.body("ping", data)
        else:
            assert delivery.log is not None and delivery.event_id is not None
            try:
                body = await self._render_one(endpoint, context, delivery.log, delivery.event_id)
            except render.RenderFailed as exc:
                return _attempted(delivery, None, error=f"not rendered: {exc}"), None
        answer, started = await self._send(endpoint, delivery.message_id, body)
        if answer is None:
            return None
        return _attempted(delivery, answer, at=started), answer

    async def _render_one(
        self, endpoint: EndpointRecord, context: Context, log_name: str, event_id: int
    ) -> bytes:
        if endpoint.payload_format is not PayloadFormat.STANDARD:
            # Redeliveries are asked for through the owners' endpoints only, which are standard.
            raise render.RenderFailed("only a standard endpoint's messages are redelivered")
        variables = endpoint.task_filter if log_name == "task" else endpoint.run_filter
        if variables is None:
            raise render.RenderFailed(f"the endpoint no longer takes {log_name} events")
        principal = context.principal
        async with self.db.connection() as conn:
            ids = await render.matching_ids(
                conn, log_name, principal, variables, event_id - 1, event_id, 1
            )
        if ids != [event_id]:
            raise render.RenderFailed("the event does not match the endpoint's filter")
        (body,) = await self._render(context, log_name, variables, event_id - 1, ids)
        return body

    async def _rendered(
        self,
        context: Context,
        endpoint: EndpointRecord,
        log_name: str,
        variables: dict[str, Any],
        cursor: int,
        ids: list[int],
    ) -> list[bytes]:
        """The standard bodies of `ids` (the matching events right after `cursor`), rendered
        once for the endpoints of the owner and filter that reach them (see `_rendering`)."""
        shape = orjson.dumps(variables, option=orjson.OPT_SORT_KEYS)
        found: list[bytes] = []
        while len(found) < len(ids):
            key = (endpoint.owner, log_name, shape, ids[len(found)])
            body = self._renders.get(key)
            if body is not None:
                self._renders.move_to_end(key)
                found.append(body)
                continue
            # The rest, from the last event had: a render from there already on its way
            # serves as far as it goes (both are the events matching after that one, in
            # order: one read may just have seen more of them committed).
            after = ids[len(found) - 1] if found else cursor
            rest = ids[len(found) :]
            at = (endpoint.owner, log_name, shape, after)
            flight = self._rendering.get(at)
            if flight is None:
                rendering = self._render(context, log_name, variables, after, rest)
                task = asyncio.create_task(rendering, name="baton-webhooks-render")
                flight = self._rendering[at] = (rest, task)
                task.add_done_callback(functools.partial(self._rendered_done, at, rest))
            theirs, task = flight
            n = min(len(theirs), len(rest))
            try:
                if theirs[:n] != rest[:n]:
                    raise render.RenderFailed(f"events after {after} read as {theirs}, {rest}")
                rendered = await asyncio.shield(task)
            except render.RenderFailed:
                if theirs == rest:
                    raise  # this turn's own render
                # Another turn's, of more events than this one needs (or others): what this
                # one needs is rendered alone, and fails, or not, on its own.
                found += await self._render(context, log_name, variables, after, rest)
                break
            found += rendered[:n]
        return found

    async def _render(
        self, context: Context, log_name: str, variables: dict[str, Any], after: int, ids: list[int]
    ) -> list[bytes]:
        """The standard bodies of `ids`, the matching events right after `after`."""
        found = await render.render(
            self.engine, context, log_name, variables, after, ids, self.settings.timeout
        )
        field = render.FIELDS[log_name]
        return [render.body(field, data, render.event_time(log_name, data)) for data in found]

    def _rendered_done(
        self,
        at: tuple[str, str, bytes, int],
        ids: list[int],
        task: asyncio.Task[list[bytes]],
    ) -> None:
        """Keep a render's events for the endpoints that reach them next."""
        if self._rendering.get(at, (None, None))[1] is task:
            del self._rendering[at]
        if task.cancelled() or task.exception() is not None:
            return  # retrieved, even when every turn waiting on it has gone
        owner, log_name, shape, _ = at
        for event_id, body in zip(ids, task.result(), strict=True):
            self._renders[(owner, log_name, shape, event_id)] = body
        while len(self._renders) > KEPT_RENDERS:
            self._renders.popitem(last=False)

    async def _bodies(
        self,
        context: Context,
        endpoint: EndpointRecord,
        log_name: str,
        variables: dict[str, Any],
        cursor: int,
        ids: list[int],
    ) -> tuple[list[list[bytes]], int | None]:
        """The bodies of each of `ids` (the matching events right after `cursor`), and, for a
        task-scoped endpoint, which of them is its task's final event (None: none is)."""
        final: int | None = None
        events = []
        if endpoint.scoped or endpoint.payload_format is not PayloadFormat.STANDARD:
            if log_name != "task":
                raise render.RenderFailed(f"{endpoint.payload_format} endpoints take task events")
            async with self.db.connection() as conn:
                events = await TASK_LOG.by_ids(conn, ids)
            if [e.id for e in events] != ids:
                raise render.RenderFailed("the events to send were not all found")
            final = next(
                (
                    e.id
                    for e in events
                    if endpoint.scoped
                    and e.to_state is not None
                    and HANDOFF.is_terminal(e.to_state)
                ),
                None,
            )
        if endpoint.payload_format is PayloadFormat.STANDARD:
            rendered = await self._rendered(context, endpoint, log_name, variables, cursor, ids)
            return [[body] for body in rendered], final
        format = self.formats.get(endpoint.payload_format)
        if format is None:
            raise render.RenderFailed(f"this process writes no {endpoint.payload_format} messages")
        try:
            bodies = await asyncio.wait_for(
                format.render(context, endpoint, events), self.settings.timeout
            )
        except TimeoutError:
            raise render.RenderFailed(
                f"no {endpoint.payload_format} message within {self.settings.timeout:g} s"
            ) from None
        if len(bodies) != len(ids):
            raise render.RenderFailed(f"{len(bodies)} messages written for {len(ids)} events")
        return bodies, final

    async def _events(
        self,
        endpoint: EndpointRecord,
        context: Context,
        deadline: float,
        state: store.Outcome,
    ) -> None:
        taken = [
            (log_name, variables)
            for log_name, variables in zip(
                render.LOGS, (endpoint.task_filter, endpoint.run_filter), strict=True
            )
            if variables is not None
        ]
        for n, (log_name, variables) in enumerate(taken):
            while self._time_for_one(deadline):
                cursor = state.task_cursor if log_name == "task" else state.run_cursor
                commits, found = await self._read_shared(
                    context, endpoint, log_name, variables, cursor
                )
                through, ids = found.through, found.ids
                if cursor >= through:
                    break
                # A task-scoped endpoint's task is removed with the endpoint (`gaps`).
                oldest = None if endpoint.scoped or cursor >= found.floor else found.floor
                if oldest is not None:  # events after the cursor were removed (retention)
                    done, state, stop = await self._expired(
                        endpoint, log_name, cursor, oldest, state
                    )
                else:
                    done, state, stop = await self._batch(
                        endpoint, context, log_name, variables, cursor, through, ids, state,
                        deadline,
                    )  # fmt: skip
                # Up to the horizon with no event committed since the read: nothing more to
                # look for in this log (a later commit wakes the worker, which claims the
                # endpoint again once this turn is over).
                position = state.task_cursor if log_name == "task" else state.run_cursor
                done_here = position == through and commits == self._commits
                last = stop or (done_here and n == len(taken) - 1)
                recorded = await self._record(endpoint, done, state, last=last)
                if recorded is Recorded.LOST:
                    log.info(
                        "webhooks: %s was deleted or its lease lost; its messages go again",
                        endpoint.id,
                    )
                if last or recorded is not Recorded.COUNTED:
                    return  # the next turn starts from the endpoint as it is now
                if done_here:
                    break

    async def _read_shared(
        self,
        context: Context,
        endpoint: EndpointRecord,
        log_name: str,
        variables: dict[str, Any],
        cursor: int,
    ) -> tuple[int, store.Batch]:
        """`_read`, one round trip for every turn that asks it of the same owner, log, filter
        and cursor while it is on its way (the turns a commit woke together), with the count
        of commits when it began: events committed after that may be missing from it."""
        shape = orjson.dumps(variables, option=orjson.OPT_SORT_KEYS)
        key = (endpoint.owner, log_name, shape, cursor)
        task = self._reads.get(key)
        if task is None:
            task = asyncio.create_task(self._read_at(context, log_name, variables, cursor))
            self._reads[key] = task
            task.add_done_callback(functools.partial(self._read_done, key))
        return await asyncio.shield(task)

    def _read_done(
        self, key: tuple[str, str, bytes, int], task: asyncio.Task[tuple[int, store.Batch]]
    ) -> None:
        if self._reads.get(key) is task:
            del self._reads[key]
        if not task.cancelled():
            task.exception()  # retrieved, even when every turn waiting on it was cancelled

    async def _read_at(
        self, context: Context, log_name: str, variables: dict[str, Any], cursor: int
    ) -> tuple[int, store.Batch]:
        commits = self._commits
        return commits, await self._read(context, log_name, variables, cursor)

    async def _read(
        self, context: Context, log_name: str, variables: dict[str, Any], cursor: int
    ) -> store.Batch:
        """What lies after `cursor` for the endpoint: the horizon, the floor and the matching
        events' ids, in one round trip (what `render.matching_ids`, `readable_through` and
        `gaps.expired` read one by one)."""
        p = Params(start=2)  # $1 and $2 are the cursor and the limit
        if log_name == "task":
            select = TASK_LOG.select
            where = EventFilter.from_stored(variables).where(context.principal, p)
        else:
            select = RUN_LOG.select
            where = RunEventFilter.from_stored(variables).where(context.principal, p)
        return await store.batch(self.db, log_name, select, where, p.values, cursor, BATCH)

    async def _expired(
        self,
        endpoint: EndpointRecord,
        log_name: str,
        cursor: int,
        oldest: int,
        state: store.Outcome,
    ) -> tuple[list[Attempted], store.Outcome, bool]:
        """Tell the endpoint that events after its cursor were removed; once acknowledged, its
        cursor is the oldest one kept (`baton.webhooks.gaps`). As `_batch` answers."""
        message, body = gaps.notice(endpoint.id, log_name, cursor, oldest)
        answer, started = await self._send(endpoint, message, body)
        if answer is None:  # the endpoint changed: nothing was sent
            return [], state, True
        done = [_outbox_attempt(log_name, oldest, message, answer, started)]
        position = oldest if answer.delivered else cursor
        if log_name == "task":
            state = replace(state, task_cursor=position, task_acked=position)
        else:
            state = replace(state, run_cursor=position, run_acked=position)
        failure = None if answer.delivered else answer
        state = self._after(endpoint, state, answer.delivered, failure)
        return done, state, failure is not None

    async def _batch(
        self,
        endpoint: EndpointRecord,
        context: Context,
        log_name: str,
        variables: dict[str, Any],
        cursor: int,
        through: int,
        ids: list[int],
        state: store.Outcome,
        deadline: float,
    ) -> tuple[list[Attempted], store.Outcome, bool]:
        """Send `ids` in order until one fails, the endpoint changes or time runs short: the
        attempts, the endpoint's state after them, and whether to stop this turn."""
        done: list[Attempted] = []
        acknowledged = cursor  # the last event acknowledged (or the cursor)
        failure: attempt.Answer | None = None
        bodies: list[list[bytes]] = []
        final: int | None = None
        render_error: str | None = None
        if ids:
            try:
                bodies, final = await self._bodies(
                    context, endpoint, log_name, variables, cursor, ids
                )
            except render.RenderFailed as exc:
                render_error = f"not rendered: {exc}"
        if render_error is not None:
            failure = attempt.Answer(False, None, None, render_error, 0)
            mid = message_id(endpoint.id, log_name, ids[0])
            done.append(_outbox_attempt(log_name, ids[0], mid, failure, datetime.now(UTC)))
        short = withdrawn = ended = False
        # Nothing is sent after a render failure (`bodies` is empty then): it is the failure.
        for event_id, parts in zip(ids if render_error is None else [], bodies, strict=True):
            if not self._time_for_one(deadline):
                short = True
                break
            mid = message_id(endpoint.id, log_name, event_id)
            sent = await self._send_all(endpoint, mid, parts, deadline)
            if sent is None:
                withdrawn = True
                break
            if sent.short and acknowledged != cursor:
                # Earlier events took the turn's time: no fault of the receiver's.
                short = True
                break
            answer, started = sent.answer, sent.started
            if answer is not None:  # None: the event had nothing to send
                done.append(_outbox_attempt(log_name, event_id, mid, answer, started))
                if not answer.delivered:
                    failure = answer
                    break
            acknowledged = event_id
            if event_id == final:
                ended = True  # the task's last message: nothing follows it
                break
        position = acknowledged
        if failure is None and not (short or withdrawn or ended) and len(ids) < BATCH:
            position = through  # nothing else up to `through` is for this endpoint
        if log_name == "task":
            state = replace(state, task_cursor=position, task_acked=acknowledged, ended=ended)
        else:
            state = replace(state, run_cursor=position, run_acked=acknowledged)
        delivered = any(a.delivered for a in done) or acknowledged != cursor
        state = self._after(endpoint, state, delivered, failure)
        return done, state, short or withdrawn or ended or failure is not None


def _settle(found: asyncio.Future[Recorded], outcome: Recorded | Exception) -> None:
    """Answer a turn waiting on its write (unless it stopped waiting)."""
    if found.done():
        return
    if isinstance(outcome, Exception):
        found.set_exception(outcome)
    else:
        found.set_result(outcome)


@dataclass(frozen=True)
class _Sending:
    """What every message of a turn to `endpoint` is sent with."""

    endpoint: EndpointRecord
    way: attempt.Way
    secrets: list[str]
    own: attempt.Headers


@dataclass(frozen=True)
class _Sent:
    """What became of an event's bodies: the answer that decides (the last one, with the time
    of all; None for an event with nothing to send), when the first began, and whether time
    ran short before the last was sent (the answer then says so, as a failure)."""

    answer: attempt.Answer | None
    started: datetime
    short: bool = False


def _outbox_attempt(
    log: str, event_id: int, message: str, answer: attempt.Answer, at: datetime
) -> Attempted:
    """The row of one attempt at an outbox message: what the receiver answered, and when."""
    return Attempted(
        log=log,
        event_id=event_id,
        message_id=message,
        delivered=answer.delivered,
        response_status=answer.status,
        response_body=answer.body,
        duration_ms=answer.duration_ms,
        error=answer.error,
        at=at,
    )


def _attempted(
    delivery: DeliveryRecord,
    answer: attempt.Answer | None,
    *,
    at: datetime | None = None,
    error: str | None = None,
) -> Attempted:
    return Attempted(
        log=delivery.log,
        event_id=delivery.event_id,
        message_id=delivery.message_id,
        delivered=answer.delivered if answer else False,
        response_status=answer.status if answer else None,
        response_body=answer.body if answer else None,
        duration_ms=answer.duration_ms if answer else 0,
        error=answer.error if answer else error,
        at=at or datetime.now(UTC),
        delivery_id=delivery.id,
    )
