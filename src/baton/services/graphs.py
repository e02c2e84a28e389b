"""Task graphs: bounded traversal over `packet.depends_on`, and cycle finding. No I/O here;
the caller passes the two batched look-ups."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum

from baton.store.records import TaskRecord

Lookup = Callable[[Sequence[str]], Awaitable[list[TaskRecord]]]
LimitedLookup = Callable[[Sequence[str], int], Awaitable[list[TaskRecord]]]


class Direction(StrEnum):
    UPSTREAM = "UPSTREAM"
    DOWNSTREAM = "DOWNSTREAM"
    BOTH = "BOTH"


@dataclass(frozen=True)
class Graph:
    nodes: list[TaskRecord]
    edges: list[tuple[str, str]]  # (dependent, dependency)
    cycles: list[list[str]]
    unresolved: list[str]
    truncated: bool = False


async def traverse(
    start: Sequence[str],
    direction: Direction,
    depth: int,
    *,
    max_nodes: int,
    by_ids: Lookup,
    dependents_of: LimitedLookup,
) -> Graph:
    """Breadth first from `start`, `depth` hops, `max_nodes` tasks at most; one or two batched
    look-ups per hop, each asking for no more than the room left."""
    roots = list(dict.fromkeys(start))
    nodes = {t.id: t for t in (await by_ids(roots))[:max_nodes]}
    unresolved = [i for i in roots if i not in nodes]
    truncated = len(nodes) < len(roots) - len(unresolved)
    frontier = list(nodes)
    for _ in range(depth):
        room = max_nodes - len(nodes)
        if not frontier or room <= 0:
            truncated = truncated or bool(frontier)
            break
        found: list[TaskRecord] = []
        if direction in (Direction.UPSTREAM, Direction.BOTH):
            refs = {r for i in frontier for r in nodes[i].packet["depends_on"]} - nodes.keys()
            found += await by_ids(sorted(refs))
        if direction in (Direction.DOWNSTREAM, Direction.BOTH):
            limit = room + len(nodes)  # enough for every new one even if all the known return
            dependents = await dependents_of(frontier, limit)
            truncated = truncated or len(dependents) >= limit
            found += dependents
        frontier = []
        for task in found:
            if task.id in nodes:
                continue
            if len(nodes) >= max_nodes:
                truncated = True
                break
            nodes[task.id] = task
            frontier.append(task.id)
    refs = {r for t in nodes.values() for r in t.packet["depends_on"]}
    outside = sorted(refs - nodes.keys())
    visible_outside = {t.id for t in await by_ids(outside)} if outside else set()
    unresolved += [r for r in outside if r not in visible_outside]
    edges = sorted(
        {(t.id, r) for t in nodes.values() for r in t.packet["depends_on"] if r in nodes}
    )
    ordered = sorted(nodes.values(), key=lambda t: t.id)
    return Graph(ordered, edges, find_cycles(nodes.keys(), edges), unresolved, truncated)


def find_cycles(nodes: Iterable[str], edges: Sequence[tuple[str, str]]) -> list[list[str]]:
    """One cycle per strongly connected group (Tarjan), starting at its smallest id."""
    graph: dict[str, list[str]] = {n: [] for n in nodes}
    for a, b in edges:
        graph[a].append(b)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def connect(v: str) -> None:
        # Iterative Tarjan, so long dependency chains cannot hit the recursion limit.
        work = [(v, iter(sorted(graph[v])))]
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    group = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        group.append(w)
                        if w == node:
                            break
                    groups.append(group)
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(graph[child]))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])

    for n in sorted(graph):
        if n not in index:
            connect(n)
    cycles = []
    for group in groups:
        members = set(group)
        if len(group) == 1 and group[0] not in graph[group[0]]:
            continue
        cycles.append(_cycle_within(min(group), members, graph))
    return sorted(cycles)


def _cycle_within(start: str, members: set[str], graph: dict[str, list[str]]) -> list[str]:
    """A simple path start → … → start inside one strongly connected group."""
    parent: dict[str, str] = {}
    queue = [start]
    seen = {start}
    while queue:
        node = queue.pop(0)
        for nxt in sorted(graph[node]):
            if nxt == start:
                path = [node]
                while path[-1] != start:
                    path.append(parent[path[-1]])
                return list(reversed(path))
            if nxt in members and nxt not in seen:
                seen.add(nxt)
                parent[nxt] = node
                queue.append(nxt)
    raise AssertionError("a strongly connected group always closes a cycle")
