"""Leases fence claimed runs: only the holder of the live lease drives one, in the statement.

Leases are put out of date with SQL (`expire`) rather than by waiting: the servers other tests
start on this database sweep every few seconds, and a wait would race them.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from baton.access.principals import ADMIN, SYSTEM, Principal
from baton.errors import InvalidInput, LeaseLost
from baton.protocol.pipeline import RunCheckpoint, RunEvent, RunStatus
from baton.services.runs import RunService, _change
from baton.store import runs as store
from baton.store.db import Connection, Database
from baton.store.records import RunRecord
from tests.helpers import agent
from tests.runs_helpers import Runs

# The runner's events that the lease fences, with arguments that fit a freshly claimed run.
LATE = {
    RunEvent.CHECKPOINT_REACHED: {"checkpoint": RunCheckpoint.plans_complete},
    RunEvent.PLAN_NEEDS_INPUT: {"questions": ["Which database?"]},
    RunEvent.FAILED: {"reason": "tests kept failing"},
}


async def expire(db: Database, run_id: str) -> None:
    """Make the run's lease one that ran out a second ago."""
    await db.execute(
        "UPDATE run_leases SET expires_at = now() - interval '1 second' WHERE run_id = $1", run_id
    )


async def lease_row(db: Database, run_id: str) -> dict[str, Any] | None:
    row = await db.fetchrow(
        "SELECT id, holder, expires_at FROM run_leases WHERE run_id = $1", run_id
    )
    return dict(row) if row is not None else None


async def events_of(service: RunService, run_id: str) -> list[Any]:
    return (await service.events_of_many([run_id], 100, None))[run_id][0]


async def lost_to_another_claim(
    runs: Runs, first: Principal, second: Principal
) -> tuple[RunRecord, str, str]:
    """A run `first` claimed, whose lease ran out and was swept, then claimed by `second`: the
    run as `second` left it, and the two lease ids."""
    service = runs.service
    run = await runs.new()
    one = await service.claim(first, run_id=run.id)
    assert one.lease is not None
    await expire(service.db, run.id)
    await service.sweep(limit=10_000)  # (or a server's sweeper did it first: the same move)
    assert (await service.get(ADMIN, run.id)).status is RunStatus.waiting_for_agent
    two = await service.claim(second, run_id=run.id)
    assert two.lease is not None and two.lease.id != one.lease.id
    return two.run, one.lease.id, two.lease.id


async def test_a_daemon_that_lost_its_run_to_another_claim_is_refused_and_changes_nothing(
    db: Database,
) -> None:
    runs = Runs(RunService(db))
    first, second = agent(f"o{runs.tag}/first"), agent(f"o{runs.tag}/second")
    run, first_lease, _ = await lost_to_another_claim(runs, first, second)
    logged = len(await events_of(runs.service, run.id))
    lease = await lease_row(db, run.id)
    for lease_id in (None, first_lease):
        for name, args in LATE.items():
            with pytest.raises(LeaseLost) as lost:
                await runs.service.event(first, name, run.id, args=args, lease_id=lease_id)
            assert lost.value.code == "lease_lost" and lost.value.id == run.id
        with pytest.raises(LeaseLost):
            await runs.service.heartbeat(first, run.id, lease_id)
    assert await runs.service.get(ADMIN, run.id) == run  # unchanged: status, version, all
    assert len(await events_of(runs.service, run.id)) == logged
    assert await lease_row(db, run.id) == lease  # the new holder's lease, not extended
    # The holder goes on.
    moved = await runs.event(
        run, RunEvent.CHECKPOINT_REACHED, by=second, checkpoint=RunCheckpoint.plans_complete
    )
    assert moved.version == run.version + 1


async def test_two_daemons_sharing_one_principal_are_told_apart_by_the_lease_id(
    db: Database,
) -> None:
    runs = Runs(RunService(db))
    daemon = runs.daemon  # both daemons run as this one agent
    run, old_lease, new_lease = await lost_to_another_claim(runs, daemon, daemon)
    for name, args in LATE.items():
        with pytest.raises(LeaseLost):
            await runs.service.event(daemon, name, run.id, args=args, lease_id=old_lease)
    with pytest.raises(LeaseLost):
        await runs.service.heartbeat(daemon, run.id, old_lease)
    assert await runs.service.get(ADMIN, run.id) == run
    # The current claim's id works, for heartbeats and events alike.
    _, lease = await runs.service.heartbeat(daemon, run.id, new_lease)
    assert lease.id == new_lease and lease.holder == daemon.handle
    outcome = await runs.service.event(
        daemon, RunEvent.FAILED, run.id, args=LATE[RunEvent.FAILED], lease_id=new_lease
    )
    assert outcome.run.status is RunStatus.errored


async def test_without_a_lease_id_the_holder_principal_alone_is_checked(db: Database) -> None:
    """What keeps clients that never send a lease id working, and why daemons sharing a
    principal must send one: the late daemon's call passes as the principal's."""
    runs = Runs(RunService(db))
    run, _, _ = await lost_to_another_claim(runs, runs.daemon, runs.daemon)
    outcome = await runs.service.event(
        runs.daemon, RunEvent.CHECKPOINT_REACHED, run.id, args=LATE[RunEvent.CHECKPOINT_REACHED]
    )
    assert outcome.run.checkpoint is RunCheckpoint.plans_complete


async def test_an_expired_lease_is_lost_before_the_sweeper_moves_the_run(db: Database) -> None:
    """In one transaction that holds the run's row (so no server's sweeper moves it): the
    lease put out of date, then the holder's heartbeat and events write nothing."""
    service = RunService(db)
    runs = Runs(service)
    run = (await service.claim(runs.daemon, run_id=(await runs.new()).id)).run
    async with db.transaction() as conn:
        await conn.execute("SELECT 1 FROM runs WHERE id = $1 FOR UPDATE", run.id)
        await conn.execute(
            "UPDATE run_leases SET expires_at = now() - interval '1 second' WHERE run_id = $1",
            run.id,
        )
        before = await conn.fetchval("SELECT expires_at FROM run_leases WHERE run_id = $1", run.id)
        assert await store.heartbeat(conn, run.id, runs.daemon, 60) is None
        assert await store.heartbeat(conn, run.id, runs.owner, 60) is None
        for name, args in LATE.items():
            assert await store.change(conn, run.id, _change(name, args), runs.daemon) is None
        after = await conn.fetchval("SELECT expires_at FROM run_leases WHERE run_id = $1", run.id)
        assert after == before  # not revived
        status = await conn.fetchval("SELECT status FROM runs WHERE id = $1", run.id)
        assert status == RunStatus.in_progress.value
    # Committed as expired, it is the sweeper's: the run goes back to the queue.
    await service.sweep(limit=10_000)
    assert (await service.get(ADMIN, run.id)).status is RunStatus.waiting_for_agent


async def test_a_late_heartbeat_naming_its_lease_is_lease_lost_whether_or_not_swept(
    db: Database,
) -> None:
    service = RunService(db)
    runs = Runs(service)
    claimed = await service.claim(runs.daemon, run_id=(await runs.new()).id)
    assert claimed.lease is not None
    await expire(db, claimed.run.id)
    with pytest.raises(LeaseLost):
        await service.heartbeat(runs.daemon, claimed.run.id, claimed.lease.id)
    await service.sweep(limit=10_000)
    with pytest.raises(LeaseLost):  # the run is waiting for an agent now: still lost
        await service.heartbeat(runs.daemon, claimed.run.id, claimed.lease.id)
    with pytest.raises(LeaseLost):
        await service.event(
            runs.daemon,
            RunEvent.FAILED,
            claimed.run.id,
            args=LATE[RunEvent.FAILED],
            lease_id=claimed.lease.id,
        )


async def test_the_fence_reads_the_lease_as_committed_when_the_event_waited_for_the_run(
    db: Database,
) -> None:
    """An event that starts while its lease is live, then waits for the run's row while
    another transaction replaces the lease (as the sweeper and a new claim do), must see the
    new lease: a check against the statement's starting snapshot would let it through."""
    runs = Runs(RunService(db))
    run = (await runs.service.claim(runs.daemon, run_id=(await runs.new()).id)).run
    other = agent(f"o{runs.tag}/other")
    change = _change(RunEvent.CHECKPOINT_REACHED, LATE[RunEvent.CHECKPOINT_REACHED])
    async with db.connection() as late:
        async with db.transaction() as writer:
            await writer.execute("SELECT 1 FROM runs WHERE id = $1 FOR UPDATE", run.id)
            await writer.execute(
                "UPDATE run_leases SET id = 'l' || repeat('0', 24), holder = $2 WHERE run_id = $1",
                run.id,
                other.handle,
            )
            event = asyncio.ensure_future(store.change(late, run.id, change, runs.daemon))
            await wait_until_blocked(db, late)
        assert await event is None  # the writer has committed; the event went on, and lost
    assert await runs.service.get(ADMIN, run.id) == run


async def wait_until_blocked(db: Database, conn: Connection) -> None:
    """Until `conn`'s statement waits for a lock (it has started, and sees the old lease)."""
    pid = conn.raw.get_server_pid()
    for _ in range(500):
        waiting = await db.fetchval(
            "SELECT wait_event_type = 'Lock' FROM pg_stat_activity WHERE pid = $1", pid
        )
        if waiting:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the event never waited for the run's row")


async def test_a_heartbeat_between_the_sweepers_read_and_its_write_keeps_the_run(
    db: Database,
) -> None:
    """The sweep in its two steps, driven by hand: it reads the expired leases, a heartbeat
    that began while the lease was live commits, then the sweep writes. The write re-checks
    that the lease is still expired, so the run stays in progress."""
    service = RunService(db, lease_seconds=0.5)
    runs = Runs(service)
    run = (await service.claim(runs.daemon, run_id=(await runs.new()).id)).run
    async with db.transaction() as beating:
        assert await store.heartbeat(beating, run.id, runs.daemon, 60) is not None
        await asyncio.sleep(1.0)  # the lease as committed runs out meanwhile
        async with db.connection() as sweeper:
            assert run.id in await store.expired(sweeper, 10_000)
    # The heartbeat has committed; now the sweeper's write.
    async with db.connection() as sweeper:
        moved = await store.offline(sweeper, run.id, _change(RunEvent.HOST_OFFLINE, {}), SYSTEM)
    assert moved is None
    after = await service.get(ADMIN, run.id)
    assert (after.status, after.version) == (RunStatus.in_progress, run.version)


async def test_the_claim_answers_the_lease_as_stored(db: Database) -> None:
    service = RunService(db, lease_seconds=30)
    runs = Runs(service)
    claimed = await service.claim(runs.daemon, run_id=(await runs.new()).id)
    stored = (await service.leases([claimed.run.id]))[claimed.run.id]
    assert claimed.lease == stored
    assert stored.holder == runs.daemon.handle and stored.live


async def test_admin_is_fenced_only_when_it_names_a_lease(db: Database) -> None:
    runs = Runs(RunService(db))
    claimed = await runs.service.claim(runs.daemon, run_id=(await runs.new()).id)
    assert claimed.lease is not None
    stale = "l" + "f" * 24
    with pytest.raises(LeaseLost):
        await runs.service.event(
            ADMIN,
            RunEvent.CHECKPOINT_REACHED,
            claimed.run.id,
            args=LATE[RunEvent.CHECKPOINT_REACHED],
            lease_id=stale,
        )
    named = await runs.service.event(
        ADMIN,
        RunEvent.CHECKPOINT_REACHED,
        claimed.run.id,
        args=LATE[RunEvent.CHECKPOINT_REACHED],
        lease_id=claimed.lease.id,
    )
    unnamed = await runs.service.event(
        ADMIN, RunEvent.FAILED, claimed.run.id, args=LATE[RunEvent.FAILED]
    )
    assert (named.run.version, unnamed.run.status) == (3, RunStatus.errored)


async def test_the_owner_may_still_interrupt_a_claimed_run_but_not_drive_it(db: Database) -> None:
    runs = Runs(RunService(db))
    run = (await runs.service.claim(runs.daemon, run_id=(await runs.new()).id)).run
    with pytest.raises(LeaseLost):
        await runs.service.event(runs.owner, RunEvent.FAILED, run.id, args=LATE[RunEvent.FAILED])
    assert RunService.allowed_events(runs.owner, run, None) == [RunEvent.USER_INTERRUPTED]
    lease = (await runs.service.leases([run.id]))[run.id]
    assert RunService.allowed_events(runs.daemon, run, lease) == [
        RunEvent.CHECKPOINT_REACHED,
        RunEvent.PLAN_NEEDS_INPUT,
        RunEvent.FAILED,
    ]
    stopped = await runs.event(run, RunEvent.USER_INTERRUPTED)
    assert stopped.status is RunStatus.interrupted
    assert await runs.service.leases([run.id]) == {}


@pytest.mark.parametrize("lease_id", ["", "nope", "l" + "0" * 23 + "\x00", "l" * 10_000])
async def test_a_lease_id_of_the_wrong_shape_is_invalid_input(db: Database, lease_id: str) -> None:
    runs = Runs(RunService(db))
    run = (await runs.service.claim(runs.daemon, run_id=(await runs.new()).id)).run
    with pytest.raises(InvalidInput) as refused:
        await runs.service.heartbeat(runs.daemon, run.id, lease_id)
    assert refused.value.field == "leaseId"
    with pytest.raises(InvalidInput):
        await runs.service.event(
            runs.daemon, RunEvent.FAILED, run.id, args=LATE[RunEvent.FAILED], lease_id=lease_id
        )
    assert await runs.service.get(ADMIN, run.id) == run
