"""The work queue: claims race safely, leases run out, sweepers never record an event twice."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Iterable
from datetime import datetime

import pytest

from baton.access.principals import ADMIN
from baton.errors import NothingToClaim
from baton.protocol.pipeline import RunCheckpoint, RunEvent, RunPhase, RunStatus
from baton.services.runs import RunService
from baton.store.db import Database
from tests.helpers import agent
from tests.runs_helpers import Runs


async def until_past(db: Database, moments: Iterable[datetime]) -> None:
    """Until the database's clock, the one leases are compared with, is past every moment."""
    latest = max(moments)
    for _ in range(100):
        left = float(await db.fetchval("SELECT extract(epoch FROM $1 - now())", latest))
        if left < 0:
            return
        await asyncio.sleep(left + 0.01)
    raise AssertionError(f"the database's clock never passed {latest}")


async def expiry(service: RunService, run_id: str) -> datetime:
    return (await service.leases([run_id]))[run_id].expires_at


async def lease_end(db: Database, seconds: float) -> datetime:
    """When a lease of `seconds` taken before this call ends at the latest, by the rule (not
    by what the lease row says), on the database's clock."""
    end: datetime = await db.fetchval("SELECT now() + make_interval(secs => $1)", seconds)
    return end


async def test_twenty_daemons_draining_a_queue_of_a_hundred_claim_each_run_once(
    db: Database,
) -> None:
    runs = Runs(RunService(db))
    queued = {(await runs.new()).id for _ in range(100)}
    daemons = [agent(f"o{runs.tag}/d{i}") for i in range(20)]
    claimed: list[str] = []

    async def drain(daemon: object) -> None:
        while True:
            try:
                outcome = await runs.service.claim(daemon, project=runs.project)  # type: ignore[arg-type]
            except NothingToClaim:
                return
            claimed.append(outcome.run.id)

    await asyncio.gather(*(drain(d) for d in daemons))
    assert Counter(claimed).most_common(1)[0][1] == 1  # no run twice
    assert set(claimed) == queued  # every run once
    for run_id in queued:
        run = await runs.service.get(ADMIN, run_id)
        assert (run.status, run.version) == (RunStatus.in_progress, 2)


async def test_claiming_takes_the_oldest_claimable_run_of_the_callers_owner_and_project(
    db: Database,
) -> None:
    runs = Runs(RunService(db))
    other_project = await runs.new(project=f"q{runs.tag}")
    first, second = await runs.new(), await runs.new()
    interrupted = await runs.event(await runs.new(), RunEvent.USER_INTERRUPTED)
    outsider = Runs(RunService(db))
    await outsider.new(project=runs.project)  # another owner's run in the same project name
    got = [(await runs.service.claim(runs.daemon, project=runs.project)).run.id for _ in range(2)]
    assert got == [first.id, second.id]
    with pytest.raises(NothingToClaim):
        await runs.service.claim(runs.daemon, project=runs.project)
    assert (await runs.service.claim(runs.daemon)).run.id == other_project.id
    assert (await runs.service.get(ADMIN, interrupted.id)).status is RunStatus.interrupted


async def test_a_daemon_that_stops_heartbeating_loses_its_run_and_another_claims_it(
    db: Database,
) -> None:
    service = RunService(db, lease_seconds=1.5)
    runs = Runs(service)
    run = await runs.new()
    first, second = agent(f"o{runs.tag}/first"), agent(f"o{runs.tag}/second")
    claimed = (await service.claim(first, project=runs.project)).run
    first_end = await lease_end(db, 1.5)
    assert await expiry(service, run.id) <= first_end  # the lease is as long as asked, no more
    claimed = await runs.event(
        claimed, RunEvent.CHECKPOINT_REACHED, by=first, checkpoint=RunCheckpoint.plans_complete
    )
    # Heartbeats well inside the lease keep it, past the moment the first lease ended.
    while await db.fetchval("SELECT now() <= $1", first_end):
        await asyncio.sleep(0.5)
        await service.heartbeat(first, run.id)
        await service.sweep()
        assert (await service.get(ADMIN, run.id)).status is RunStatus.in_progress
    await until_past(db, [await lease_end(db, 1.5)])  # silence: the lease runs out
    # Sweeping is global and takes the oldest expired leases first, 100 at a time: other
    # tests' runs may be ahead of this one, so sweep until nothing is left to move.
    while await service.sweep():
        pass
    lost = await service.get(ADMIN, run.id)
    assert (lost.status, lost.phase, lost.checkpoint) == (
        RunStatus.waiting_for_agent,
        RunPhase.idle,
        RunCheckpoint.plans_complete,
    )
    events = (await service.events_of_many([run.id], 50, None))[run.id][0]
    assert (events[-1].event, events[-1].actor) == (RunEvent.HOST_OFFLINE, "system")
    with pytest.raises(Exception) as late:
        await service.heartbeat(first, run.id)
    assert getattr(late.value, "code", None) == "invalid_state"
    again = (await service.claim(second, project=runs.project)).run
    assert (again.id, again.status, again.checkpoint) == (
        run.id,
        RunStatus.in_progress,
        RunCheckpoint.plans_complete,
    )


async def test_concurrent_sweepers_record_one_host_offline_per_run(db: Database) -> None:
    service = RunService(db, lease_seconds=0.1)
    runs = Runs(service)
    ids = []
    for _ in range(10):
        await runs.new()
        ids.append((await service.claim(runs.daemon, project=runs.project)).run.id)
    await until_past(db, [await lease_end(db, 0.1)])
    sweepers = [RunService(db, lease_seconds=0.1) for _ in range(4)]
    await asyncio.gather(*(s.sweep() for s in sweepers))
    # Sweeping is global: a `baton serve` of another test on this database may sweep some of
    # these runs first. Either way each must have been moved exactly once.
    pages = await service.events_of_many(ids, 50, None)
    for run_id in ids:
        offline = [e for e in pages[run_id][0] if e.event is RunEvent.HOST_OFFLINE]
        assert len(offline) == 1, run_id
        assert (await service.get(ADMIN, run_id)).status is RunStatus.waiting_for_agent


async def test_only_the_lease_holder_or_the_owner_extends_a_lease(db: Database) -> None:
    service = RunService(db)
    runs = Runs(service)
    await runs.new()
    run = (await service.claim(runs.daemon, project=runs.project)).run
    sibling = agent(f"o{runs.tag}/sibling")
    with pytest.raises(Exception) as refused:
        await service.heartbeat(sibling, run.id)
    # To the lease, a sibling is what a daemon that lost the run to another claim is.
    assert getattr(refused.value, "code", None) == "lease_lost"
    _, expires = await service.heartbeat(runs.owner, run.id)
    assert expires is not None
    after = await service.get(ADMIN, run.id)
    assert after.version == run.version  # a heartbeat is not an event


async def test_an_event_that_leaves_in_progress_drops_the_lease(db: Database) -> None:
    service = RunService(db, lease_seconds=0.1)
    runs = Runs(service)
    await runs.new()
    run = (await service.claim(runs.daemon, project=runs.project)).run
    ended = await lease_end(db, 0.1)
    asked = await runs.event(run, RunEvent.PLAN_NEEDS_INPUT)
    assert await service.leases([run.id]) == {}
    await until_past(db, [ended])  # when the dropped lease would have run out
    await service.sweep()  # global: it may move other tests' runs, never this one
    after = await service.get(ADMIN, run.id)
    assert (after.status, after.version) == (RunStatus.awaiting_user, asked.version)
    events = (await service.events_of_many([run.id], 50, None))[run.id][0]
    assert RunEvent.HOST_OFFLINE not in [e.event for e in events]
