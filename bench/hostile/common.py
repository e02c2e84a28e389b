"""The harness every door's attacks share: a victim's latency, the server's CPU and memory."""

from __future__ import annotations

import asyncio
import contextlib
import statistics
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import httpx

from bench.server import Server

# An attack: runs until the monotonic deadline it is given, counting its answers by kind
# ("200 ok", "429 too_many_sessions", …). It is started after the victim's first request.
Attack = Callable[[float, Counter[str]], Awaitable[None]]

VICTIM_QUERY = "{ viewer { handle } }"


@dataclass
class Row:
    kind: str
    sent: int
    answers: str
    victim: list[float]
    cpu_ms: float
    peak_mib: float


def reset_peak(pid: int) -> None:
    with contextlib.suppress(OSError):
        Path(f"/proc/{pid}/clear_refs").write_text("5")  # resets VmHWM to the current RSS


def peak_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def measure(
    server: Server, token: str, kind: str, attack: Attack | None, seconds: float
) -> Row:
    """Run `attack` for `seconds` while a victim with `token` sends `{ viewer { handle } }`
    one request at a time over GraphQL; the victim's latency, the server's CPU per attacking
    request and its peak RSS."""
    answers: Counter[str] = Counter()
    victim: list[float] = []
    stop = time.monotonic() + seconds
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(base_url=server.url, headers=headers, timeout=120) as calm:

        async def ask() -> None:
            response = await calm.post("/graphql", json={"query": VICTIM_QUERY})
            body = response.json()
            assert response.status_code == 200 and "errors" not in body, body

        async def victim_loop() -> None:
            while time.monotonic() < stop:
                started = time.perf_counter()
                await ask()
                victim.append((time.perf_counter() - started) * 1000)

        await ask()  # the victim's document is cached
        reset_peak(server.pid)
        cpu = server.cpu_seconds()
        await asyncio.gather(victim_loop(), *([attack(stop, answers)] if attack else []))
        cpu = server.cpu_seconds() - cpu
    sent = sum(answers.values())
    shown = ", ".join(f"{n} x {a}" for a, n in answers.most_common()) or "-"
    return Row(kind, sent, shown, victim, cpu * 1000 / sent if sent else 0.0, peak_mib(server.pid))


def percentile(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def table(rows: list[Row]) -> str:
    lines = [
        "| hostile request | sent | answered | victim p50 / p99 / max ms | server CPU ms per "
        "hostile request | peak RSS MiB |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        latency = (
            f"{statistics.median(r.victim):.1f} / {percentile(r.victim, 99):.1f} / "
            f"{max(r.victim):.1f}"
            if r.victim
            else "—"
        )
        cpu = f"{r.cpu_ms:.1f}" if r.sent else "—"
        lines.append(
            f"| {r.kind} | {r.sent} | {r.answers} | {latency} | {cpu} | {r.peak_mib:.0f} |"
        )
    return "\n".join(lines)
