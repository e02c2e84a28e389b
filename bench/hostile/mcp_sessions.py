"""Hostile use of the MCP door's sessions and subscriptions, spoken by hand over HTTP so that the
requests race: one token floods `initialize` 40 at a time (how many sessions does it end up
holding, and can another token still open one?), and sessions race `resources/subscribe` 60 at
a time for one URI, or for 250 URIs at once, before being deleted (how many subscriptions does
each keep, and how many outlive their session?)."""

from __future__ import annotations

import asyncio
import itertools
import re
import statistics
import subprocess
import sys
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import httpx
import psutil  # type: ignore[import-untyped, unused-ignore]

from bench.server import Server

from .common import Attack, Row, measure

HANDSHAKE = "2025-06-18"
BURST = 40  # initialize requests sent at once
HELD = 19  # sessions the flooding token keeps open (the bound is 20 at the defaults)
RACE = 60  # resources/subscribe requests for one URI sent at once
DISTINCT = 250  # resources/subscribe requests for distinct URIs sent at once
HUB_SUBSCRIBERS = "baton_live_subscriptions"  # what the event hubs feed, every door
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {
        "protocolVersion": HANDSHAKE,
        "capabilities": {},
        "clientInfo": {"name": "bench.hostile", "version": "0"},
    },
}

_IDS = itertools.count(1)  # request ids: distinct among requests in flight on a session


def _headers(token: str, session: str | None = None) -> dict[str, str]:
    headers = {
        "Authorization": f"Bearer {token}",
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
    }
    if session is not None:
        headers |= {"Mcp-Session-Id": session, "MCP-Protocol-Version": HANDSHAKE}
    return headers


@asynccontextmanager
async def _connections(url: str, n: int) -> AsyncIterator[list[httpx.AsyncClient]]:
    """`n` clients with their connections open, so requests sent together arrive together."""
    async with AsyncExitStack() as stack:
        clients = [
            await stack.enter_async_context(httpx.AsyncClient(base_url=url, timeout=120))
            for _ in range(n)
        ]
        await asyncio.gather(*(c.get("/healthz") for c in clients))
        yield clients


async def _initialize(client: httpx.AsyncClient, token: str) -> tuple[str, str | None]:
    """An `initialize`: its answer ("200 session", "429 too_many_sessions", …) and the session
    id it carries."""
    response = await client.post("/mcp", json=INITIALIZE, headers=_headers(token))
    session = response.headers.get("mcp-session-id")
    try:
        error = response.json().get("error")
    except ValueError:
        error = None
    if error is None:
        return f"{response.status_code} session", session
    code = (error.get("data") or {}).get("code") or error.get("message", "?")[:40]
    return f"{response.status_code} {code}{' + session id' if session else ''}", session


async def _open(client: httpx.AsyncClient, token: str) -> str:
    kind, session = await _initialize(client, token)
    assert session is not None and kind == "200 session", kind
    await client.post(
        "/mcp",
        json={"jsonrpc": "2.0", "method": "notifications/initialized"},
        headers=_headers(token, session),
    )
    return session


async def _request(
    client: httpx.AsyncClient, token: str, session: str, method: str, params: dict[str, Any]
) -> dict[str, Any]:
    body = {"jsonrpc": "2.0", "id": next(_IDS), "method": method, "params": params}
    response = await client.post("/mcp", json=body, headers=_headers(token, session))
    answer: dict[str, Any] = response.json() if response.status_code == 200 else {}
    return answer


async def _live(client: httpx.AsyncClient, token: str, session: str) -> bool:
    body = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    response = await client.post("/mcp", json=body, headers=_headers(token, session))
    return response.status_code == 200


async def _delete(client: httpx.AsyncClient, token: str, session: str) -> None:
    await client.delete("/mcp", headers=_headers(token, session))


async def _gauge(server: Server, admin: str, name: str) -> float:
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
        response = await client.get("/metrics", headers={"Authorization": f"Bearer {admin}"})
    found = re.search(rf"^{name} (\S+)$", response.text, re.M)
    return float(found.group(1)) if found else float("nan")


# --- one token floods initialize ------------------------------------------------------------


def _flood(
    clients: list[httpx.AsyncClient],
    flooder: str,
    bystander: str,
    sessions: list[str],
    report: dict[str, str],
) -> Attack:
    """Bursts of `BURST` initializes of `flooder` holding `HELD` sessions (the ids of the
    sessions it keeps go to `sessions`); meanwhile another token opens and closes a session one
    at a time (its answers and latency go to `report`)."""
    clients = clients[: BURST + 1]

    async def attack(stop: float, answers: Counter[str]) -> None:
        calm: Counter[str] = Counter()
        calm_ms: list[float] = []

        async def bursts() -> None:
            # One place short of the token's bound, then: burst, give back the places the
            # answers said were taken, again. Sessions refused in words but made are kept.
            sessions.extend([await _open(clients[1], flooder) for _ in range(HELD)])
            while time.monotonic() < stop:
                got = await asyncio.gather(*(_initialize(c, flooder) for c in clients[1:]))
                admitted: list[str] = []
                for kind, session in got:
                    answers[kind] += 1
                    if session is not None:
                        (admitted if kind == "200 session" else sessions).append(session)
                await _each(clients[1:], admitted, lambda c, s: _delete(c, flooder, s))

        async def bystanding() -> None:
            while time.monotonic() < stop:
                started = time.perf_counter()
                kind, session = await _initialize(clients[0], bystander)
                calm_ms.append((time.perf_counter() - started) * 1000)
                calm[kind] += 1
                if session is not None:
                    await _delete(clients[0], bystander, session)

        await asyncio.gather(bursts(), bystanding())
        shown = ", ".join(f"{n} x {k}" for k, n in calm.most_common())
        median = statistics.median(calm_ms) if calm_ms else float("nan")
        report["bystander"] = f"another token's initialize: {shown} (p50 {median:.0f} ms)"

    return attack


async def _each(
    clients: list[httpx.AsyncClient],
    sessions: list[str],
    do: Callable[[httpx.AsyncClient, str], Awaitable[Any]],
) -> list[Any]:
    """`do(client, session)` for every session, as many at once as there are clients."""
    out: list[Any] = []
    for start in range(0, len(sessions), len(clients)):
        chunk = sessions[start : start + len(clients)]
        out += await asyncio.gather(*(do(c, s) for c, s in zip(clients, chunk, strict=False)))
    return out


# --- sessions race resources/subscribe --------------------------------------------------------


async def _tasks(server: Server, token: str, n: int) -> list[str]:
    """`n` tasks of `bench`, handed off over GraphQL."""
    query = """mutation($p: PacketInput!) { handOff(input: {project: "bench", requester:
        "bench/a", assignee: "bench/b", packet: $p}) { ... on HandOffSuccess { task { id } }
        ... on Error { code message } } }"""
    packet = {"task": "Be followed", "deliverableType": "doc", "acceptanceCriteria": ["seen"]}
    async with httpx.AsyncClient(base_url=server.url, timeout=60) as client:

        async def one() -> str:
            response = await client.post(
                "/graphql",
                json={"query": query, "variables": {"p": packet}},
                headers={"Authorization": f"Bearer {token}"},
            )
            task_id: str = response.json()["data"]["handOff"]["task"]["id"]
            return task_id

        return [await one() for _ in range(n)]


def _race(
    server: Server,
    clients: list[httpx.AsyncClient],
    token: str,
    admin: str,
    uris: list[str],
    report: dict[str, str],
) -> Attack:
    """Sessions that each send `resources/subscribe` for every one of `uris` at once (over
    `clients`), then are deleted; how many subscriptions each one held (the event hubs'
    subscribers it added) goes to `report`."""

    async def attack(stop: float, answers: Counter[str]) -> None:
        held: list[int] = []
        while time.monotonic() < stop:
            before = await _gauge(server, admin, HUB_SUBSCRIBERS)
            session = await _open(clients[0], token)
            got = await asyncio.gather(
                *(
                    _request(
                        clients[i % len(clients)],
                        token,
                        session,
                        "resources/subscribe",
                        {"uri": uri},
                    )
                    for i, uri in enumerate(uris)
                )
            )
            await asyncio.sleep(0.05)  # the followers start
            held.append(round(await _gauge(server, admin, HUB_SUBSCRIBERS) - before))
            ok = sum("result" in answer for answer in got)
            answers["200 subscribed"] += ok
            answers["200 refused"] += len(got) - ok
            await _delete(clients[0], token, session)
        report["held"] = (
            f"subscriptions per session {min(held)} to {max(held)}" if held else "no session"
        )

    return attack


async def _mint(server: Server, *who: str) -> str:
    """A token minted by the server's own code (`baton token create` from its `--src`), as
    the harness mints its own: the tokens table may differ between versions."""
    env = psutil.Process(server.pid).environ()  # BATON_DATABASE_URL, PYTHONPATH
    done = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "baton.cli", "token", "create", *who],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip().splitlines()[-1]


async def attacks(server: Server, token: str, seconds: float, attackers: int) -> list[Row]:
    flooder = await _mint(server, "--principal", "flood/a")
    bystander = await _mint(server, "--principal", "calm/a")
    admin = await _mint(server, "--admin")  # reads /metrics
    ids = await _tasks(server, token, DISTINCT)
    rows: list[Row] = []
    # Connections opened before each attack starts, so that its requests race from the first.
    async with _connections(server.url, DISTINCT // 2) as clients:
        flood: dict[str, str] = {}
        sessions: list[str] = []
        attack = _flood(clients, flooder, bystander, sessions, flood)
        kind = (
            f"MCP initialize, {BURST} at once from one token holding {HELD} sessions; "
            "those admitted closed, again and again"
        )
        row = await measure(server, token, kind, attack, seconds)
        live = await _each(clients, sessions, lambda c, s: _live(c, flooder, s))
        await _each(clients, sessions, lambda c, s: _delete(c, flooder, s))
        row.answers += (
            f"; {sum(live)} of the flooding token's sessions live at the end; {flood['bystander']}"
        )
        rows.append(row)

        for kind, uris in (
            (
                f"MCP resources/subscribe, {RACE} at once for one URI, session then deleted",
                [f"baton://tasks/{ids[0]}"] * RACE,
            ),
            (
                f"MCP resources/subscribe, {DISTINCT} URIs at once, session then deleted",
                [f"baton://tasks/{task_id}" for task_id in ids],
            ),
        ):
            race: dict[str, str] = {}
            attack = _race(server, clients, token, admin, uris, race)
            before = await _gauge(server, admin, HUB_SUBSCRIBERS)
            row = await measure(server, token, kind, attack, seconds)
            await asyncio.sleep(2)  # sessions' teardown
            orphans = await _gauge(server, admin, HUB_SUBSCRIBERS) - before
            row.answers += f"; {race['held']}; {orphans:.0f} still followed after every DELETE"
            rows.append(row)
    return rows
