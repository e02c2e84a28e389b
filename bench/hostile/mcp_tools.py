"""Hostile MCP tool arguments: each call over a real MCP session (the SDK's client, the
initialize handshake), new each time, by `--attackers` clients as fast as answered.

- `handOff` with 524,000 list items in `packet.files` (a body of 1 MiB);
- the same with 260,000 valid strings;
- a sweep of the arguments PostgreSQL cannot store or GraphQL's `Int` cannot hold: NUL in
  `task`'s id, `tasks`' and `runs`' project, a packet's text, `run`'s id, and an
  `expectedVersion` of 2^40, one after another.

An answer is counted as the tool's error code (`tool invalid_input`), `tool ok`, or the JSON-RPC
error the client got (`JSON-RPC -32603`).
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError

from bench.server import Server
from mcp import Client

from .common import Attack, Row, measure

# A tool's name and arguments, the n-th of an attack.
Call = tuple[str, dict[str, Any]]
PACKET = {"deliverableType": "doc", "acceptanceCriteria": ["refused"]}
HAND_OFF = {"project": "bench", "requester": "bench/a", "assignee": "bench/b"}


def list_items(n: int) -> Call:
    """524,000 numbers in `packet.files`: two bytes each, a body of 1 MiB."""
    packet = {**PACKET, "task": f"attack {n}", "files": [0] * 524_000}
    return "handOff", {**HAND_OFF, "packet": packet}


def valid_strings(n: int) -> Call:
    """260,000 one-letter file names, each valid on its own."""
    packet = {**PACKET, "task": f"attack {n}", "files": ["a"] * 260_000}
    return "handOff", {**HAND_OFF, "packet": packet}


def _sweep() -> list[Callable[[int], Call]]:
    return [
        lambda n: ("task", {"id": f"t{n}\x00"}),
        lambda n: ("tasks", {"project": f"p{n}\x00"}),
        lambda n: ("runs", {"project": f"p{n}\x00"}),
        lambda n: ("run", {"id": f"r{n}\x00"}),
        lambda n: ("handOff", {**HAND_OFF, "packet": {**PACKET, "task": f"a{n}\x00"}}),
        lambda n: ("acceptTask", {"id": f"t{n}", "expectedVersion": 2**40}),
    ]


def nul_sweep(n: int) -> Call:
    """The n-th of the sweep's arguments, round and round."""
    cases = _sweep()
    return cases[n % len(cases)](n)


async def call_once(url: str, token: str, call: Call) -> str:
    """`call` over a new MCP session; what it answered."""
    name, arguments = call
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    try:
        async with (
            http,
            Client(
                streamable_http_client(f"{url}/mcp", http_client=http), mode="legacy", cache=None
            ) as client,
        ):
            result = await client.call_tool(name, arguments)
    except Exception as exc:  # an attack counts whatever it was answered
        leaf: BaseException = exc
        while isinstance(leaf, BaseExceptionGroup) and leaf.exceptions:
            leaf = leaf.exceptions[0]  # the SDK's task groups wrap a JSON-RPC error
        return f"JSON-RPC {leaf.error.code}" if isinstance(leaf, MCPError) else type(leaf).__name__
    if not result.is_error:
        return "tool ok"
    content = result.structured_content or {}
    return f"tool {content.get('code', '?')}"


def calls(make: Callable[[int], Call], token: str, url: str, attackers: int) -> Attack:
    counter = itertools.count()

    async def attack(stop: float, answers: Counter[str]) -> None:
        async def one() -> None:
            while time.monotonic() < stop:
                answers[await call_once(url, token, make(next(counter)))] += 1

        await asyncio.gather(*(one() for _ in range(attackers)))

    return attack


async def attacks(server: Server, token: str, seconds: float, attackers: int) -> list[Row]:
    kinds: list[tuple[str, Callable[[int], Call]]] = [
        ("MCP handOff, 524k list items (1 MiB)", list_items),
        ("MCP handOff, 260k valid strings (1 MiB)", valid_strings),
        ("MCP NUL / 2^40 arguments, 6 tools", nul_sweep),
    ]
    return [
        await measure(server, token, kind, calls(make, token, server.url, attackers), seconds)
        for kind, make in kinds
    ]
