"""The worker agent behind the A2A conformance kit and `bench.a2a` (`bench.a2a_worker`), against
a real `baton serve`: it does the tasks routed to it before and after it starts, lets another
owner's agents through its owner's gate, and picks up what was routed while its stream was
cut."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from bench.a2a_worker import Step, Worker, allow_requesters, plan

from baton.access.gate import GateDecision
from baton.protocol.handoff import TaskState, Verification, WaitingOn
from tests.conftest import LiveServer
from tests.helpers import World
from tests.proxy import DatabaseProxy


@asynccontextmanager
async def running(worker: Worker) -> AsyncIterator[Worker]:
    working = asyncio.create_task(worker.run())
    try:
        await asyncio.wait_for(worker.listening.wait(), 20)
        yield worker
    finally:
        working.cancel()
        await asyncio.gather(working, return_exceptions=True)


async def finished(worker: Worker, *task_ids: str) -> None:
    await asyncio.wait_for(worker.finished(*task_ids), 20)


async def test_the_worker_does_tasks_routed_before_and_after_it_started(
    live_server: LiveServer, world: World
) -> None:
    before = await world.hand_off()
    token = await live_server.token(world.roles["assignee"])
    async with running(Worker(live_server.url, token)) as worker:
        auto = await world.hand_off()
        review = await world.hand_off(verification=Verification.REVIEW)
        await finished(worker, before.id, auto.id, review.id)
    assignee = world.roles["assignee"]
    tasks = {t: await world.service.get(assignee, t) for t in (before.id, auto.id, review.id)}
    assert [tasks[t].state for t in (before.id, auto.id, review.id)] == [
        TaskState.completed,
        TaskState.completed,
        TaskState.verifying,  # a REVIEW result waits for its requester
    ]
    assert worker.done == {before.id: "completed", auto.id: "completed", review.id: "verifying"}
    for task in tasks.values():
        assert task.latest_checkpoint is not None
        assert task.result is not None and task.result["evidence"][0]["kind"] == "note"


async def test_the_owners_allow_rule_routes_another_owners_hand_off_to_the_worker(
    live_server: LiveServer, world: World
) -> None:
    owner_token = await live_server.token(world.roles["assignee_owner"])
    await allow_requesters(live_server.url, owner_token, f"{world.req_owner}/*")
    held = await world.hand_off(decision=None)  # no rule of the test's own: the worker's decides
    assert held.state is TaskState.routed


async def test_a_hand_off_routed_while_the_stream_was_cut_is_done_after_it_resumes(
    live_server: LiveServer, world: World
) -> None:
    token = await live_server.token(world.roles["assignee"])
    with DatabaseProxy(live_server.url) as proxy:  # any TCP upstream: here the server
        worker = Worker(f"http://127.0.0.1:{proxy.port}", token)
        async with running(worker):
            first = await world.hand_off()
            await finished(worker, first.id)
            proxy.cut()
            during = await world.hand_off(decision=GateDecision.ALLOW)
            await asyncio.sleep(0.5)
            assert during.id not in worker.done
            proxy.restore()
            await finished(worker, during.id)
    assert worker.done[during.id] == "completed"


async def test_a_plan_given_as_a_coroutine_is_followed_step_by_step(
    live_server: LiveServer, world: World
) -> None:
    """The conformance kit's plan reads each task before it answers its steps; here: accept,
    start, then pause waiting on a person, after a delay."""
    asked: list[str] = []

    async def pause(task_id: str) -> list[Step]:
        asked.append(task_id)
        return [
            *plan(task_id)[:2],
            Step("pauseTask", "PauseTaskInput", {"waitingOn": "human"}, delay=0.1),
        ]

    token = await live_server.token(world.roles["assignee"])
    async with running(Worker(live_server.url, token, plan=pause)) as worker:
        task = await world.hand_off()
        await finished(worker, task.id)
    assert asked == [task.id]
    assert worker.done == {task.id: "waiting"}
    paused = await world.service.get(world.roles["assignee"], task.id)
    assert (paused.state, paused.waiting_on) == (TaskState.waiting, WaitingOn.human)
