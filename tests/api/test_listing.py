"""Listing over GraphQL: `tasks` order, Relay pagination, filters, and `Task.events` pages.

Each test reads as one of its `world`'s owners (unique to the test), so only the test's own
tasks are visible and no filter has to lean on another to keep strangers out.
"""

from __future__ import annotations

from datetime import datetime
from itertools import pairwise
from typing import Any

import pytest

from baton.access.gate import GateDecision
from baton.access.principals import ADMIN, Principal
from baton.protocol.handoff import MoveName, TaskState, WaitingOn
from baton.services.tasks import HandOff, TaskService
from baton.store.records import TaskRecord
from tests.helpers import World, execute, owner, packet

M = MoveName

TASKS = """
query Tasks($filter: TaskFilter, $first: Int!, $after: String) {
  tasks(filter: $filter, first: $first, after: $after) {
    totalCount
    edges { cursor node { id updatedAt } }
    pageInfo { hasNextPage hasPreviousPage startCursor endCursor }
  }
}
"""

EVENTS = """
query Events($id: ID!, $first: Int!, $after: String) {
  task(id: $id) {
    events(first: $first, after: $after) {
      edges { cursor node { id kind move fromState toState version } }
      pageInfo { hasNextPage hasPreviousPage endCursor }
    }
  }
}
"""


async def page(
    service: TaskService,
    principal: Principal,
    *,
    first: int = 50,
    after: str | None = None,
    filter: dict[str, Any] | None = None,
) -> dict[str, Any]:
    variables = {"filter": filter, "first": first, "after": after}
    data = await execute(service, principal, TASKS, variables)
    connection: dict[str, Any] = data["tasks"]
    return connection


def ids(connection: dict[str, Any]) -> list[str]:
    return [edge["node"]["id"] for edge in connection["edges"]]


# --- order and pagination --------------------------------------------------------------------


async def test_tasks_are_listed_newest_update_first(service: TaskService, world: World) -> None:
    first = await world.hand_off()
    second = await world.hand_off()
    third = await world.hand_off()
    await world.move(first, M.ACCEPT)  # the oldest task becomes the most recently updated

    listed = await page(service, owner(world.req_owner))

    assert ids(listed) == [first.id, third.id, second.id]
    stamps = [datetime.fromisoformat(e["node"]["updatedAt"]) for e in listed["edges"]]
    assert stamps == sorted(stamps, reverse=True)


async def test_pages_of_two_walk_every_task_exactly_once(
    service: TaskService, world: World
) -> None:
    made = [await world.hand_off() for _ in range(5)]
    reader = owner(world.asg_owner)
    everything = await page(service, reader)

    seen: list[str] = []
    sizes: list[int] = []
    after: str | None = None
    while True:
        connection = await page(service, reader, first=2, after=after)
        assert connection["totalCount"] == len(made)
        assert connection["pageInfo"]["hasPreviousPage"] is (after is not None)
        seen += ids(connection)
        sizes.append(len(connection["edges"]))
        if connection["edges"]:
            assert connection["pageInfo"]["endCursor"] == connection["edges"][-1]["cursor"]
            assert connection["pageInfo"]["startCursor"] == connection["edges"][0]["cursor"]
        if not connection["pageInfo"]["hasNextPage"]:
            break
        after = connection["pageInfo"]["endCursor"]

    assert sizes == [2, 2, 1]
    assert seen == ids(everything)
    assert sorted(seen) == sorted(t.id for t in made)


async def test_a_task_updated_during_a_walk_is_not_seen_twice(
    service: TaskService, world: World
) -> None:
    made = [await world.hand_off() for _ in range(4)]
    reader = owner(world.req_owner)
    first_page = await page(service, reader, first=2)
    # The task at the top moves: it is now newer still, so it stays behind the cursor.
    await world.move(next(t for t in made if t.id == ids(first_page)[0]), M.ACCEPT)

    rest = await page(service, reader, first=10, after=first_page["pageInfo"]["endCursor"])

    seen = ids(first_page) + ids(rest)
    assert len(seen) == len(set(seen)) == len(made)


async def test_a_page_of_zero_counts_without_listing(service: TaskService, world: World) -> None:
    await world.hand_off()
    await world.hand_off()
    connection = await page(service, owner(world.req_owner), first=0)
    assert connection["edges"] == []
    assert connection["totalCount"] == 2
    assert connection["pageInfo"]["hasNextPage"] is True


# --- filters ---------------------------------------------------------------------------------


async def filter_world(service: TaskService, world: World) -> dict[str, TaskRecord]:
    """Six tasks of one requester owner, told apart by state, people and deliverable."""
    tasks = {
        "routed": await world.hand_off(),
        "held": await world.task_in(TaskState.waiting, WaitingOn.owner_approval),
        "on_human": await world.task_in(TaskState.waiting, WaitingOn.human),
        "rejected_code": await world.hand_off(decision=GateDecision.DENY, deliverable_type="code"),
        "working_design": await world.hand_off(deliverable_type="design"),
    }
    tasks["working_design"] = await world.move(tasks["working_design"], M.ACCEPT)
    tasks["working_design"] = await world.move(tasks["working_design"], M.START)
    # Between the two siblings no rule matches: the owners differ, so the gate holds it.
    sibling = await service.hand_off(
        ADMIN,
        HandOff(
            project=world.project,
            requester=f"{world.req_owner}/other",
            assignee=f"{world.asg_owner}/other",
            packet=packet(deliverable_type="answer"),
        ),
    )
    tasks["siblings"] = sibling.task
    return tasks


@pytest.mark.parametrize(
    ("filter", "expected"),
    [
        ({"states": ["routed"]}, {"routed"}),
        ({"states": ["waiting", "rejected"]}, {"held", "on_human", "rejected_code", "siblings"}),
        ({"states": ["completed"]}, set()),
        (
            {"requester": "{req}/r"},
            {"routed", "held", "on_human", "rejected_code", "working_design"},
        ),
        ({"requester": "{req}/other"}, {"siblings"}),
        ({"assignee": "{asg}/other"}, {"siblings"}),
        (
            {"assignee": "{asg}/a"},
            {"routed", "held", "on_human", "rejected_code", "working_design"},
        ),
        ({"waitingOn": "owner_approval"}, {"held", "siblings"}),
        ({"waitingOn": "human"}, {"on_human"}),
        ({"waitingOn": "agent"}, set()),
        ({"deliverableTypes": ["code"]}, {"rejected_code"}),
        ({"deliverableTypes": ["design", "answer"]}, {"working_design", "siblings"}),
        ({"states": ["waiting"], "deliverableTypes": ["answer"]}, {"siblings"}),
        (
            {"project": "{project}"},
            {"routed", "held", "on_human", "rejected_code", "working_design", "siblings"},
        ),
        ({"project": "elsewhere"}, set()),
    ],
    ids=lambda v: "-".join(f"{k}={v[k]}" for k in v) if isinstance(v, dict) else None,
)
async def test_each_filter_narrows_the_list_to_the_tasks_it_describes(
    service: TaskService, world: World, filter: dict[str, Any], expected: set[str]
) -> None:
    tasks = await filter_world(service, world)
    names = {t.id: name for name, t in tasks.items()}
    given = {
        k: v.format(req=world.req_owner, asg=world.asg_owner, project=world.project)
        if isinstance(v, str)
        else v
        for k, v in filter.items()
    }

    connection = await page(service, owner(world.req_owner), filter=given)

    assert {names[i] for i in ids(connection)} == expected
    assert connection["totalCount"] == len(expected)


async def test_updated_after_keeps_only_tasks_changed_since(
    service: TaskService, world: World
) -> None:
    earlier = await world.hand_off()
    later = await world.hand_off()
    mark = later.updated_at
    await world.move(earlier, M.ACCEPT)

    connection = await page(
        service, owner(world.req_owner), filter={"updatedAfter": mark.isoformat()}
    )

    assert ids(connection) == [earlier.id]
    assert connection["totalCount"] == 1


async def test_the_project_filter_separates_one_owners_projects(
    service: TaskService, world: World
) -> None:
    here = await world.hand_off()
    other_project = f"q{world.tag}"
    there = await service.hand_off(
        ADMIN,
        HandOff(
            project=other_project,
            requester=world.requester,
            assignee=world.assignee,
            packet=packet(),
        ),
    )
    reader = owner(world.req_owner)

    assert set(ids(await page(service, reader))) == {here.id, there.task.id}
    assert ids(await page(service, reader, filter={"project": world.project})) == [here.id]
    assert ids(await page(service, reader, filter={"project": other_project})) == [there.task.id]


# --- a task's events -------------------------------------------------------------------------


async def busy_task(service: TaskService, world: World) -> TaskRecord:
    """A task with seven events: created, routed, accepted, started, checkpoint, paused, resumed."""
    task = await world.hand_off()
    task = await world.move(task, M.ACCEPT)
    task = await world.move(task, M.START)
    saved = await service.save_checkpoint(
        ADMIN,
        task.id,
        {
            "progress": "half way",
            "decisions": [],
            "files_touched": [],
            "next_steps": [],
            "open_questions": [],
        },
    )
    task = await world.move(saved.task, M.PAUSE, waiting_on=WaitingOn.human)
    return await world.move(task, M.RESUME)


async def test_task_events_page_oldest_first(service: TaskService, world: World) -> None:
    task = await busy_task(service, world)

    events: list[dict[str, Any]] = []
    sizes: list[int] = []
    after: str | None = None
    while True:
        data = await execute(service, ADMIN, EVENTS, {"id": task.id, "first": 3, "after": after})
        connection = data["task"]["events"]
        assert connection["pageInfo"]["hasPreviousPage"] is (after is not None)
        events += [edge["node"] for edge in connection["edges"]]
        sizes.append(len(connection["edges"]))
        if not connection["pageInfo"]["hasNextPage"]:
            break
        after = connection["pageInfo"]["endCursor"]

    assert sizes == [3, 3, 1]
    assert [e["kind"] for e in events] == ["created"] + ["moved"] * 3 + [
        "checkpoint_saved",
        "moved",
        "moved",
    ]
    assert [e["move"] for e in events] == [
        None,
        "ROUTE",
        "ACCEPT",
        "START",
        None,
        "PAUSE",
        "RESUME",
    ]
    assert [e["version"] for e in events] == list(range(1, 8))
    assert [int(e["id"]) for e in events] == sorted(int(e["id"]) for e in events)
    assert len({e["id"] for e in events}) == 7
    for before, then in pairwise(events):
        assert then["fromState"] == before["toState"]


async def test_task_events_after_the_last_cursor_is_an_empty_last_page(
    service: TaskService, world: World
) -> None:
    task = await world.hand_off()
    data = await execute(service, ADMIN, EVENTS, {"id": task.id, "first": 50, "after": None})
    last = data["task"]["events"]["pageInfo"]["endCursor"]

    data = await execute(service, ADMIN, EVENTS, {"id": task.id, "first": 50, "after": last})

    connection = data["task"]["events"]
    assert connection["edges"] == []
    assert connection["pageInfo"]["hasNextPage"] is False
