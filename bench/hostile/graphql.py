"""Hostile GraphQL documents over HTTP: each new to the server (a counter in a comment or a
literal defeats a cache keyed by text), sent by `--attackers` clients as fast as answered."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import httpx

from bench.server import Server

from .common import Attack, Row, measure

BIG = "x" * 490
Request = tuple[str, dict[str, Any] | None]


def repeated_names(n: int) -> Request:
    """450 copies of one field: quadratic in graphql-core's overlapping-fields rule."""
    return "{ " + "viewer { handle } " * 450 + f"}} # {n}", None


def fragment_chain(n: int) -> Request:
    """600 fragment spreads in a chain: recursion in validation and execution."""
    chain = " ".join(f"fragment F{i} on Query {{ ...F{i + 1} }}" for i in range(599))
    return f"{{ ...F0 }} {chain} fragment F599 on Query {{ viewer {{ handle }} }} # {n}", None


def largest_valid(n: int) -> Request:
    """A document at the bounds that validates and runs: 30 fragments on one type, each
    selecting the same fields (as many merged copies as allowed), new each time."""
    fields = "id state version requester assignee project verification allowedMoves"
    fragments = " ".join(f"fragment T{i} on Task {{ {fields} }}" for i in range(30))
    spreads = " ".join(f"...T{i}" for i in range(30))
    query = (
        f'{{ tasks(first: 5, filter: {{project: "p{n}"}}) {{ edges {{ node {{ {spreads} }} }} }} }}'
    )
    return f"{query} {fragments}", None


def introspection_over_budget(n: int) -> Request:
    """Introspection whose answer is over the cost budget: twenty aliases of the schema's
    types in full (graphql-core's own rule bounds introspection's depth, not its breadth)."""
    type_ref = "name kind ofType { name kind ofType { name kind } }"
    value = f"name description defaultValue type {{ {type_ref} }}"
    field = f"name description isDeprecated args {{ {value} }} type {{ {type_ref} }}"
    one = (
        f"__schema {{ types {{ name kind description fields {{ {field} }} inputFields {{ {value} "
        f"}} enumValues {{ name description }} interfaces {{ name }} }} }}"
    )
    aliases = " ".join(f"s{i}: {one}" for i in range(20))
    return f"{{ {aliases} }} # {n}", None


def big_variables(n: int) -> Request:
    """Variables at the bound of values (about 200 KB), coerced before anything else."""
    ids = [f"t{n}-{i}" for i in range(1_999)]
    return "query($ids: [ID!]!) { taskGraph(ids: $ids) { nodes { id } } }", {"ids": ids}


def huge_response(task_id: str) -> Callable[[int], Request]:
    """Twenty aliases reading back a task's hundred maximal checkpoints (was ~378 MB)."""

    def make(n: int) -> Request:
        aliases = " ".join(
            f'a{i}: task(id: "{task_id}") {{ events(first: 100) {{ edges {{ node {{ task {{ '
            "protocolObject } } } } }"
            for i in range(20)
        )
        return f"{{ {aliases} }} # {n}", None

    return make


async def post(client: httpx.AsyncClient, request: Request) -> tuple[int, str]:
    query, variables = request
    response = await client.post("/graphql", json={"query": query, "variables": variables})
    try:
        body = response.json()
        codes = {e.get("extensions", {}).get("code", "?") for e in body.get("errors", ())}
        code = ",".join(sorted(codes)) or "ok"
    except ValueError:
        code = "not json"
    return response.status_code, code


def maximal_checkpoint(n: int) -> dict[str, Any]:
    return {
        "progress": f"{n} " + "p" * 1990,
        "decisions": [BIG] * 20,
        "filesTouched": [f"src/{'f' * 280}/{i}.py" for i in range(100)],
        "nextSteps": [BIG] * 20,
        "openQuestions": [BIG] * 20,
    }


async def seed_big_task(server: Server, token: str) -> str:
    """A task of `bench`'s with a hundred maximal checkpoints, made through the API."""
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(base_url=server.url, headers=headers, timeout=60) as client:

        async def call(query: str, **variables: Any) -> dict[str, Any]:
            response = await client.post("/graphql", json={"query": query, "variables": variables})
            body: dict[str, Any] = response.json()
            assert "errors" not in body, body
            data: dict[str, Any] = body["data"]
            return data

        handed = await call(
            """mutation($p: PacketInput!) { handOff(input: {project: "bench", requester:
            "bench/a", assignee: "bench/b", packet: $p}) { ... on HandOffSuccess { task { id }
            } ... on Error { code message } } }""",
            p={
                "task": "Hold big checkpoints",
                "deliverableType": "doc",
                "acceptanceCriteria": ["many"],
            },
        )
        task_id: str = handed["handOff"]["task"]["id"]
        for move in ("acceptTask", "startTask"):
            await call(f'mutation {{ {move}(input: {{id: "{task_id}"}}) {{ __typename }} }}')
        for n in range(100):
            await call(
                """mutation($id: ID!, $c: CheckpointInput!) { saveCheckpoint(input: {id: $id,
                checkpoint: $c}) { __typename } }""",
                id=task_id,
                c=maximal_checkpoint(n),
            )
        return task_id


def documents(make: Callable[[int], Request], token: str, url: str, attackers: int) -> Attack:
    """`attackers` clients posting `make(n)` for n = 0, 1, … as fast as they are answered."""
    counter = itertools.count()

    async def attack(stop: float, answers: Counter[str]) -> None:
        headers = {"Authorization": f"Bearer {token}"}
        async with httpx.AsyncClient(base_url=url, headers=headers, timeout=120) as client:

            async def one() -> None:
                while time.monotonic() < stop:
                    status, code = await post(client, make(next(counter)))
                    answers[f"{status} {code}"] += 1

            await asyncio.gather(*(one() for _ in range(attackers)))

    return attack


async def attacks(server: Server, token: str, seconds: float, attackers: int) -> list[Row]:
    task_id = await seed_big_task(server, token)
    kinds: list[tuple[str, Callable[[int], Request]]] = [
        ("450 copies of one field, 8 KB", repeated_names),
        ("600 chained fragment spreads", fragment_chain),
        ("largest valid document (30 merged fragments)", largest_valid),
        ("introspection over the cost budget", introspection_over_budget),
        ("variables of 2,000 values", big_variables),
        ("20 aliases of 100 events' protocolObject", huge_response(task_id)),
    ]
    return [
        await measure(server, token, kind, documents(make, token, server.url, attackers), seconds)
        for kind, make in kinds
    ]
