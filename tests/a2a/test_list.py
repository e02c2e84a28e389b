"""ListTasks: the caller's tasks of the agent, newest first, by page, filtered by context and by
A2A state, with what each asks for (history, artifacts)."""

from __future__ import annotations

from a2a.types.a2a_pb2 import ListTasksRequest, Role
from a2a.types.a2a_pb2 import TaskState as A2AState

from baton.access.gate import GateDecision
from baton.protocol.handoff import TaskState, WaitingOn
from tests.a2a.conftest import a2a_client, agent_url, message, send
from tests.conftest import LiveServer
from tests.helpers import World


async def test_a_context_is_paged_through_with_its_tokens_newest_first(
    live_server: LiveServer, world: World, binding: str
) -> None:
    await world.decide(GateDecision.ALLOW)
    token = await live_server.token(world.roles["requester"])
    context = f"ctx-{world.tag}"
    async with a2a_client(agent_url(live_server, world.assignee), token, binding) as client:
        made = [
            (await send(client, message(data={"project": world.project}, context_id=context))).id
            for _ in range(5)
        ]
        await send(client, message(data={"project": world.project}))  # another context
        seen: list[str] = []
        page_token = ""
        while True:
            page = await client.list_tasks(
                ListTasksRequest(context_id=context, page_size=2, page_token=page_token)
            )
            assert page.total_size == 5 and page.page_size == 2 and len(page.tasks) <= 2
            assert all(t.context_id == context for t in page.tasks)
            seen += [t.id for t in page.tasks]
            if not page.next_page_token:
                break
            page_token = page.next_page_token
    assert seen == made[::-1]


async def test_a_state_filter_lists_the_tasks_in_that_a2a_state_and_counts_them(
    live_server: LiveServer, world: World, binding: str
) -> None:
    held = await world.task_in(TaskState.waiting, WaitingOn.owner_approval)
    paused = await world.task_in(TaskState.waiting, WaitingOn.human)
    working = await world.task_in(TaskState.working)
    routed = await world.task_in(TaskState.routed)
    token = await live_server.token(world.roles["requester"])
    async with a2a_client(agent_url(live_server, world.assignee), token, binding) as client:

        async def listed(state: A2AState.ValueType) -> tuple[set[str], int]:
            page = await client.list_tasks(ListTasksRequest(status=state, page_size=100))
            return {t.id for t in page.tasks}, page.total_size

        assert await listed(A2AState.TASK_STATE_AUTH_REQUIRED) == ({held.id}, 1)
        assert await listed(A2AState.TASK_STATE_WORKING) == ({paused.id, working.id}, 2)
        assert await listed(A2AState.TASK_STATE_SUBMITTED) == ({routed.id}, 1)
        assert await listed(A2AState.TASK_STATE_FAILED) == (set(), 0)


async def test_artifacts_and_history_are_listed_only_when_asked_for(
    live_server: LiveServer, world: World, binding: str
) -> None:
    done = await world.task_in(TaskState.completed)
    token = await live_server.token(world.roles["requester"])
    async with a2a_client(agent_url(live_server, world.assignee), token, binding) as client:
        plain = await client.list_tasks(ListTasksRequest())
        full = await client.list_tasks(ListTasksRequest(include_artifacts=True, history_length=2))
    (bare,) = [t for t in plain.tasks if t.id == done.id]
    (whole,) = [t for t in full.tasks if t.id == done.id]
    assert not bare.artifacts and not bare.history
    assert [a.artifact_id for a in whole.artifacts] == ["result", "evidence"]
    # The hand-off's message; the newest two events (the result, its completion) said nothing.
    assert [m.role for m in whole.history] == [Role.ROLE_USER]
