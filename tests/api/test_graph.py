"""Task graphs from `packet.dependsOn`: edges, directions, depth, cycles, and query cost."""

from __future__ import annotations

from typing import Any

from baton.services.graphs import find_cycles
from baton.services.tasks import HandOff, TaskService
from tests.helpers import World, agent, counting_statements, execute, packet, task_id_of

GRAPH = """
query($ids: [ID!]!, $direction: GraphDirection!, $depth: Int!) {
  taskGraph(ids: $ids, direction: $direction, depth: $depth) {
    nodes { id dependencies { id } dependents { id } }
    edges { from to }
    cycles
    unresolved
  }
}
"""


async def chain(
    world: World, service: TaskService, ids: list[str], deps: dict[str, list[str]]
) -> None:
    for task_id in ids:
        await service.hand_off(
            agent(world.requester),
            HandOff(
                id=task_id,
                project=world.project,
                requester=world.requester,
                assignee=world.assignee,
                packet=packet(depends_on=[full(world, d) for d in deps.get(task_id, [])]),
            ),
        )


def full(world: World, name: str) -> str:
    """The id of the task the world's requester handed off as `name`."""
    return task_id_of(world.requester, name)


def short(world: World, ids: list[str]) -> list[str]:
    return [i.removeprefix(f"{world.req_owner}_") for i in ids]


async def graph(
    service: TaskService, world: World, ids: list[str], direction: str = "BOTH", depth: int = 10
) -> dict[str, Any]:
    data = await execute(
        service,
        world.roles["requester"],
        GRAPH,
        {"ids": [full(world, i) for i in ids], "direction": direction, "depth": depth},
    )
    return data["taskGraph"]  # type: ignore[no-any-return]


async def test_upstream_follows_dependencies_and_depth_counts_hops(
    service: TaskService, world: World
) -> None:
    # a -> b -> c -> d  (a depends on b, …)
    await chain(world, service, ["d", "c", "b", "a"], {"a": ["b"], "b": ["c"], "c": ["d"]})
    one_hop = await graph(service, world, ["a"], "UPSTREAM", 1)
    assert sorted(short(world, [n["id"] for n in one_hop["nodes"]])) == ["a", "b"]
    full = await graph(service, world, ["a"], "UPSTREAM", 10)
    assert sorted(short(world, [n["id"] for n in full["nodes"]])) == ["a", "b", "c", "d"]
    edges = {(e["from"], e["to"]) for e in full["edges"]}
    assert {(a, b) for a, b in (tuple(short(world, [e[0], e[1]])) for e in edges)} == {
        ("a", "b"),
        ("b", "c"),
        ("c", "d"),
    }
    assert full["cycles"] == [] and full["unresolved"] == []


async def test_downstream_follows_dependents(service: TaskService, world: World) -> None:
    await chain(world, service, ["d", "c", "b", "a"], {"a": ["b"], "b": ["c"], "c": ["d"]})
    down = await graph(service, world, ["c"], "DOWNSTREAM", 10)
    assert sorted(short(world, [n["id"] for n in down["nodes"]])) == ["a", "b", "c"]
    both = await graph(service, world, ["b"], "BOTH", 1)
    assert sorted(short(world, [n["id"] for n in both["nodes"]])) == ["a", "b", "c"]
    node_b = next(n for n in both["nodes"] if n["id"] == full(world, "b"))
    assert short(world, [d["id"] for d in node_b["dependencies"]]) == ["c"]
    assert short(world, [d["id"] for d in node_b["dependents"]]) == ["a"]


async def test_cycles_and_unresolved_entries_are_reported(
    service: TaskService, world: World
) -> None:
    await chain(world, service, ["x", "y", "z"], {"x": ["y"], "y": ["z"], "z": ["x", "ghost"]})
    result = await graph(service, world, ["x"], "UPSTREAM", 10)
    assert [short(world, c) for c in result["cycles"]] == [["x", "y", "z"]]
    assert result["unresolved"] == [full(world, "ghost")]


async def test_tasks_the_caller_cannot_see_are_unresolved(
    service: TaskService, world: World
) -> None:
    other = World(service)
    await chain(other, service, ["hidden"], {})
    await service.hand_off(
        agent(world.requester),
        HandOff(
            id="seen",
            project=world.project,
            requester=world.requester,
            assignee=world.assignee,
            packet=packet(depends_on=[full(other, "hidden")]),
        ),
    )
    result = await graph(service, world, ["seen"], "UPSTREAM", 5)
    assert short(world, [n["id"] for n in result["nodes"]]) == ["seen"]
    assert result["unresolved"] == [full(other, "hidden")]


async def test_a_graph_costs_a_bounded_number_of_queries_not_one_per_node(
    service: TaskService, world: World
) -> None:
    # A wide, three-level tree: root depends on 10 tasks, each of which depends on 3 leaves.
    mids = [f"m{i}" for i in range(10)]
    leaves = {m: [f"{m}l{j}" for j in range(3)] for m in mids}
    await chain(world, service, [leaf for ls in leaves.values() for leaf in ls], {})
    await chain(world, service, mids, leaves)
    await chain(world, service, ["root"], {"root": mids})
    with counting_statements() as statements:
        result = await graph(service, world, ["root"], "BOTH", 10)
    assert len(result["nodes"]) == 41
    # Per hop at most two look-ups (up and down), plus the roots, the final check of
    # outside references, and the batched dependencies/dependents of the selection.
    assert 0 < statements() <= 2 * 4 + 2 + 2


def test_find_cycles_reports_one_cycle_per_strongly_connected_group() -> None:
    edges = [("a", "b"), ("b", "a"), ("c", "c"), ("d", "e"), ("e", "f"), ("f", "d"), ("f", "g")]
    assert find_cycles("abcdefg", edges) == [["a", "b"], ["c"], ["d", "e", "f"]]
    assert find_cycles("xyz", [("x", "y"), ("y", "z")]) == []
