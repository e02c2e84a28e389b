"""Hostile use of webhooks: one owner's endpoints all hang, and another owner's deliveries wait.

The owner `hog` has 20 endpoints (the most an owner may have) at a receiver that never answers,
and queues 4 pings at each: 80 attempts that each hold a delivery slot until the attempt
timeout (10 s at the defaults; the server runs with its default settings but for
BATON_WEBHOOK_ALLOW_PRIVATE and BATON_WEBHOOK_ALLOW_HTTP, since the receiver is on this
machine). Meanwhile the victim, the owner `bench`, hands off a task every `PACE` seconds and
its one endpoint should get both events of each. The victim's latency is its deliveries' (from
an event's commit, its `at`, to the receiver having the message), not a GraphQL request's: the
first row is the same victim with nothing hanging. The victim runs for at least `MIN_SECONDS`,
twice the default attempt timeout, so that a victim held back by hanging attempts shows it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import httpx
import orjson
import psutil  # type: ignore[import-untyped, unused-ignore]
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from bench.server import Server

from .common import Row, peak_mib, reset_peak

# What the server needs so that it may call a receiver on this machine over http.
SERVER_ENV = {"BATON_WEBHOOK_ALLOW_PRIVATE": "true", "BATON_WEBHOOK_ALLOW_HTTP": "true"}

HOG_ENDPOINTS = 20
PINGS_EACH = 4
PACE = 0.5  # seconds between the victim's hand-offs
MIN_SECONDS = 20.0
DRAIN_SECONDS = 90.0  # the most the victim's last messages are waited for

CREATE = """mutation($input: CreateWebhookEndpointInput!) { createWebhookEndpoint(input: $input) {
    __typename ... on WebhookSecretSuccess { endpoint { id } } ... on Error { message } } }"""
PING = """mutation($id: ID!) { pingWebhookEndpoint(input: {id: $id}) { __typename } }"""
DELETE = """mutation($id: ID!) { deleteWebhookEndpoint(input: {id: $id}) { __typename } }"""
HAND_OFF = """mutation($input: HandOffInput!) { handOff(input: $input) { __typename } }"""


@dataclass
class Receiver:
    """`/hang/...` never answers (until released); `/victim` answers 200 and keeps, for each
    message, the seconds from its event's commit to its arrival."""

    release: asyncio.Event = field(default_factory=asyncio.Event)
    arrived: asyncio.Event = field(default_factory=asyncio.Event)
    hanging: int = 0
    lags: dict[str, float] = field(default_factory=dict)  # webhook-id -> seconds

    async def handle(self, request: Request) -> Response:
        body = await request.body()
        if request.url.path.startswith("/hang"):
            self.hanging += 1
            await self.release.wait()
            return Response("late")
        event = orjson.loads(body)["data"]["taskEvents"]
        at = datetime.fromisoformat(event["at"]).timestamp()
        self.lags.setdefault(request.headers["webhook-id"], time.time() - at)
        self.arrived.set()
        return Response("ok")


async def mint(server: Server, principal: str) -> str:
    """A token made by the server's own code (its `--src`, its database)."""
    environ = psutil.Process(server.pid).environ()
    env = {
        **os.environ,
        "BATON_DATABASE_URL": environ["BATON_DATABASE_URL"],
        **({"PYTHONPATH": environ["PYTHONPATH"]} if "PYTHONPATH" in environ else {}),
    }
    done = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "baton.cli", "token", "create", "--principal", principal],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip().splitlines()[-1]


async def call(client: httpx.AsyncClient, token: str, query: str, **variables: Any) -> Any:
    response = await client.post(
        "/graphql",
        json={"query": query, "variables": variables},
        headers={"Authorization": f"Bearer {token}"},
    )
    body = response.json()
    assert "errors" not in body, body
    return body["data"]


async def create(client: httpx.AsyncClient, token: str, url: str, **filters: Any) -> str:
    data = await call(client, token, CREATE, input={"url": url, **filters})
    made = data["createWebhookEndpoint"]
    assert made["__typename"] == "WebhookSecretSuccess", made
    return str(made["endpoint"]["id"])


async def victim(
    client: httpx.AsyncClient, token: str, receiver: Receiver, seconds: float
) -> list[float]:
    """Hand-offs every `PACE` s for `seconds`; each one's two events' delivery lag, in ms."""
    sent = 0
    stop = time.monotonic() + seconds
    while time.monotonic() < stop:
        started = time.monotonic()
        packet = {"task": f"victim {sent}", "deliverableType": "doc", "acceptanceCriteria": ["x"]}
        variables = {"project": "bench", "requester": "bench/r", "assignee": "bench/a"}
        data = await call(client, token, HAND_OFF, input={**variables, "packet": packet})
        assert data["handOff"]["__typename"] == "HandOffSuccess", data
        sent += 1
        await asyncio.sleep(max(0.0, started + PACE - time.monotonic()))
    deadline = time.monotonic() + DRAIN_SECONDS
    while len(receiver.lags) < 2 * sent and time.monotonic() < deadline:
        receiver.arrived.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(receiver.arrived.wait(), deadline - time.monotonic())
    lags = [lag * 1000 for lag in receiver.lags.values()]
    missing = 2 * sent - len(lags)
    return lags + [DRAIN_SECONDS * 1000] * missing  # not delivered within the drain: counted so


async def attacks(server: Server, token: str, seconds: float, attackers: int) -> list[Row]:
    receiver = Receiver()
    app = Starlette(routes=[Route("/{path:path}", receiver.handle, methods=["POST"])])
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))  # its port is known before uvicorn listens on it
    web = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    serving = asyncio.create_task(web.serve(sockets=[sock]))
    base = f"http://127.0.0.1:{sock.getsockname()[1]}"
    duration = max(seconds, MIN_SECONDS)
    hog = await mint(server, "hog")
    rows: list[Row] = []
    async with httpx.AsyncClient(base_url=server.url, timeout=60) as client:
        mine = await create(client, token, f"{base}/victim", taskEvents={})
        hogs = [
            await create(client, hog, f"{base}/hang/{n}", runEvents={})
            for n in range(HOG_ENDPOINTS)
        ]
        try:
            for kind, attack in (
                ("none (the victim's webhook deliveries alone)", False),
                (
                    f"one owner's {HOG_ENDPOINTS} webhook endpoints hanging, {PINGS_EACH} "
                    "pings queued at each (victim: another owner's deliveries)",
                    True,
                ),
            ):
                receiver.lags.clear()
                receiver.hanging = 0
                answers: Counter[str] = Counter()
                reset_peak(server.pid)
                cpu = server.cpu_seconds()
                if attack:
                    pinged = await asyncio.gather(
                        *(call(client, hog, PING, id=id) for id in hogs for _ in range(PINGS_EACH))
                    )
                    answers.update(p["pingWebhookEndpoint"]["__typename"] for p in pinged)
                lags = await victim(client, token, receiver, duration)
                cpu = server.cpu_seconds() - cpu
                if attack:
                    answers["hanging attempts received"] = receiver.hanging
                sent = sum(n for a, n in answers.items() if a != "hanging attempts received")
                shown = ", ".join(f"{n} x {a}" for a, n in answers.most_common()) or "-"
                rows.append(
                    Row(
                        kind,
                        sent,
                        shown,
                        lags,
                        cpu * 1000 / sent if sent else 0.0,
                        peak_mib(server.pid),
                    )
                )
        finally:
            receiver.release.set()
            for id in [*hogs]:
                await call(client, hog, DELETE, id=id)
            await call(client, token, DELETE, id=mine)
            web.should_exit = True
            await serving
            sock.close()
    return rows
