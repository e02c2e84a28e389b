"""An A2A hand-off costs the statements GraphQL's does: the task, its events, the gate's move
and the A2A context beside the task are one statement (the handler in process, counted with the
store's statement counter)."""

from __future__ import annotations

import orjson
import pytest
from a2a.helpers.proto_helpers import new_data_part
from a2a.server.context import ServerCallContext
from a2a.types.a2a_pb2 import (
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    Task,
)
from a2a.utils.errors import InvalidParamsError

from baton.a2a.handler import STATE_KEY, BatonHandler, Call
from baton.a2a.mapping import derived_id
from baton.access.gate import GateDecision
from baton.access.principals import Principal, owner_of
from baton.errors import NotFound
from baton.protocol.task_object import task_id_for
from baton.services.context import Context
from baton.services.runs import RunService
from baton.services.task_contexts import TaskContext, TaskContexts
from baton.services.tasks import TaskService
from baton.store.db import Database
from tests.helpers import World, agent, counting_statements


def handler_for(service: TaskService, db: Database) -> BatonHandler:
    def context(principal: Principal) -> Context:
        return Context(principal, service, RunService(db))

    return BatonHandler(context, lambda: TaskContexts(db))


def called(world: World) -> ServerCallContext:
    """A call at the assignee's URL, with the requester's token."""
    return ServerCallContext(state={STATE_KEY: Call(agent(world.requester), world.assignee, "t")})


def hand_off(world: World, message_id: str, context_id: str = "") -> SendMessageRequest:
    message = Message(
        message_id=message_id,
        context_id=context_id,
        role=Role.ROLE_USER,
        parts=[Part(text="Write the release notes"), new_data_part({"project": world.project})],
    )
    return SendMessageRequest(
        message=message, configuration=SendMessageConfiguration(return_immediately=True)
    )


async def sent(handler: BatonHandler, world: World, params: SendMessageRequest) -> Task:
    answer = await handler.on_message_send(params, called(world))
    assert isinstance(answer, Task)
    return answer


async def test_a_hand_off_and_its_context_are_one_statement_once_the_rules_are_kept(
    service: TaskService, db: Database, world: World
) -> None:
    await world.decide(GateDecision.ALLOW)
    handler = handler_for(service, db)
    counts, tasks = [], []
    for n in range(2):
        with counting_statements() as statements:
            task = await sent(handler, world, hand_off(world, f"m{n}", f"conversation-{n}"))
        counts.append(statements())
        tasks.append(task)
    assert counts == [2, 1]  # the first reads the owner's rules, as over GraphQL
    kept = await TaskContexts(db).of([t.id for t in tasks])
    assert kept == {
        tasks[0].id: TaskContext("conversation-0", "m0"),
        tasks[1].id: TaskContext("conversation-1", "m1"),
    }
    assert [t.context_id for t in tasks] == ["conversation-0", "conversation-1"]


async def test_a_hand_off_without_a_context_keeps_the_task_id_as_its_context(
    service: TaskService, db: Database, world: World
) -> None:
    await world.decide(GateDecision.ALLOW)
    task = await sent(handler_for(service, db), world, hand_off(world, "alone"))
    assert task.context_id == task.id
    assert await TaskContexts(db).of([task.id]) == {task.id: TaskContext(task.id, "alone")}


async def test_a_repeated_hand_off_is_the_same_task_in_its_first_context(
    service: TaskService, db: Database, world: World
) -> None:
    await world.decide(GateDecision.ALLOW)
    handler = handler_for(service, db)
    first = await sent(handler, world, hand_off(world, "again", "first"))
    again = await sent(handler, world, hand_off(world, "again", "second"))
    assert again.id == first.id and again.context_id == "first"
    assert again.status.state == first.status.state
    assert await TaskContexts(db).of([first.id]) == {first.id: TaskContext("first", "again")}


async def test_a_hand_off_refused_for_its_context_writes_no_task(
    service: TaskService, db: Database, world: World
) -> None:
    """The context is checked before the statement: a refused one leaves nothing behind."""
    await world.decide(GateDecision.ALLOW)
    with pytest.raises(InvalidParamsError) as refused:
        await sent(handler_for(service, db), world, hand_off(world, "long", "c" * 300))
    assert (refused.value.data or {})["field"] == "message.contextId"
    task_id = task_id_for(owner_of(world.requester), derived_id(world.assignee, "long"))
    with pytest.raises(NotFound):
        await service.get(agent(world.requester), task_id)


async def test_a_read_of_a_task_reads_its_context_and_history_in_one_statement(
    service: TaskService, db: Database, world: World
) -> None:
    """GetTask: the task (as the caller may see it), then its kept context and its newest
    events together; they are what the two reads made one by one answer."""
    await world.decide(GateDecision.ALLOW)
    handler = handler_for(service, db)
    task = await sent(handler, world, hand_off(world, "read", "conversation"))
    plain = await world.hand_off()  # handed off over GraphQL's service: no context kept
    params = GetTaskRequest(id=task.id, history_length=5)
    with counting_statements() as statements:
        answer = orjson.loads(await handler.get_task_json(params, called(world)))
    assert statements() == 2
    assert answer["contextId"] == "conversation" and answer["id"] == task.id
    assert [m["messageId"] for m in answer["history"]][:1] == ["read"]
    contexts = TaskContexts(db)
    ids = [task.id, plain.id, "no such task"]
    for count in (1, 2, 5):
        kept, newest = await contexts.kept_and_newest(ids, count)
        assert kept == await contexts.of(ids)
        assert newest == await contexts.newest_events(ids, count)
    assert plain.id not in kept and len(newest[task.id]) == 2
