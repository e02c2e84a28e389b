"""The ceiling: Baton's own SQL (the store's statements, through Baton's asyncpg pool) with no
GraphQL, as a bare Starlette endpoint per workload and as a direct asyncpg client.

Each handler runs the statements one Baton request of that workload runs, in the same order and
on as many connections at once, and answers the JSON Baton would (the `data` member). Tokens
are looked up in a table given at start, as for PostGraphile.

    python -m bench.compare.ceiling serve PORT            # the endpoint (env: see `main`)
    python -m bench.compare.ceiling drive W C SECONDS WARMUP   # the client (see `drive`)
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import sys
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

import orjson
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from baton.access.gate import decide
from baton.access.principals import SYSTEM, Principal, PrincipalKind
from baton.protocol.handoff import MoveName, TaskState
from baton.protocol.pipeline import PIPELINE, RunCheckpoint, RunEvent
from baton.protocol.task_object import DeliverableType
from baton.services.gate_rules import GateRules
from baton.services.tasks import MoveArgs, change_for, gate_move
from baton.store import runs as run_store
from baton.store import tasks as store
from baton.store.db import Database
from baton.store.records import TaskRecord

from .workloads import STORED_PACKET, Values, value_at

Handler = Callable[[Database, Principal, str, dict[str, Any]], Awaitable[dict[str, Any]]]
POOL_SIZE = 16  # as each `baton serve` process
ACQUIRE_TIMEOUT = 30.0


class Refused(Exception):
    """The request was refused (the answer Baton gives as an error member)."""


def _time(value: datetime) -> str:
    return value.astimezone(UTC).isoformat()


def _task(t: TaskRecord) -> dict[str, Any]:
    return {
        "id": t.id,
        "state": t.state.name,
        "assignee": t.assignee,
        "packet": {"task": t.packet["task"]},
        "updatedAt": _time(t.updated_at),
    }


async def w1(db: Database, who: Principal, value: str, _: dict[str, Any]) -> dict[str, Any]:
    async with db.connection() as conn:
        t = await store.load(conn, value)
    if t is None or not who.sees(requester=t.requester, assignee=t.assignee):
        return {"task": None}
    return {"task": _task(t)}


async def w2(db: Database, who: Principal, value: str, _: dict[str, Any]) -> dict[str, Any]:
    query = store.TaskQuery(projects=[value], states=[TaskState.working])
    async with db.connection() as conn:
        rows, _more = await store.page(conn, who, query, 50, None)
    return {"tasks": {"edges": [{"node": _task(t)} for t in rows]}}


async def _notify(db: Database, channel: str, event_id: int) -> None:
    """The live announcement, on its own connection as Baton's broadcaster sends it."""
    async with db.connection() as conn:
        await conn.execute("SELECT pg_notify($1, $2)", channel, str(event_id))


async def w3(db: Database, who: Principal, value: str, _: dict[str, Any]) -> dict[str, Any]:
    change = change_for(MoveName.ACCEPT, MoveArgs())
    async with db.connection() as conn:
        event = await store.change(conn, value, change, who, expected_version=None)
    if event is None:
        raise Refused(f"acceptTask {value}")
    await _notify(db, "baton_task_events", event.id)
    t = event.task
    task = {"id": t.id, "state": t.state.name, "version": t.version}
    return {"acceptTask": {"__typename": "MoveSuccess", "task": task}}


# The gate rules each pool keeps, as a Baton process does.
_RULES: dict[int, GateRules] = {}


async def w4(db: Database, who: Principal, value: str, extra: dict[str, Any]) -> dict[str, Any]:
    packet = extra.get("packet", STORED_PACKET)
    requester, assignee = extra["requester"], extra["assignee"]
    owner = assignee.split("/", 1)[0]
    rules = _RULES.setdefault(id(db), GateRules(db))
    ruleset = await rules.current(owner)
    decision = decide(
        ruleset.rules,
        requester=requester,
        assignee=assignee,
        project=extra["project"],
        deliverable_type=DeliverableType(packet["deliverable_type"]),
    )
    new = store.NewTask(value, extra["project"], requester, assignee, packet, "AUTO", value)
    async with db.connection() as conn:
        events = await store.create(
            conn, new, who.handle, gate_move(decision), SYSTEM.handle, (owner, ruleset.version)
        )
    if not events:
        raise Refused(f"handOff {value} exists")
    event = events[-1]
    await _notify(db, "baton_task_events", event.id)
    t = event.task
    waiting = t.waiting_on.name if t.waiting_on else None
    task = {"id": t.id, "state": t.state.name, "waitingOn": waiting, "version": t.version}
    return {"handOff": {"__typename": "HandOffSuccess", "task": task}}


async def w5(db: Database, who: Principal, value: str, _: dict[str, Any]) -> dict[str, Any]:
    async with db.connection() as conn:
        rows, _more = await store.page(conn, who, store.TaskQuery(projects=[value]), 100, None)
    ids = [t.id for t in rows]
    wanted = list(dict.fromkeys(d for t in rows for d in t.packet["depends_on"]))

    async def dependencies() -> list[TaskRecord]:
        async with db.connection() as conn:
            return await store.visible_by_ids(conn, who, wanted)

    async def dependents() -> dict[str, list[TaskRecord]]:
        async with db.connection() as conn:
            return await store.dependents_per_task(conn, who, ids, 50)

    async def events() -> dict[str, Any]:
        async with db.connection() as conn:
            return await store.events_of_many(conn, ids, 1, None)

    found, below, first = await asyncio.gather(dependencies(), dependents(), events())
    by_id = {t.id: t for t in found}
    nodes = []
    for t in rows:
        deps = [by_id[d] for d in t.packet["depends_on"] if d in by_id]
        page, _ = first[t.id]
        nodes.append(
            {
                "node": {
                    "id": t.id,
                    "state": t.state.name,
                    "dependencies": [{"id": d.id, "state": d.state.name} for d in deps],
                    "dependents": [{"id": d.id} for d in below[t.id]],
                    "events": {
                        "edges": [
                            {"node": {"id": str(e.id), "kind": e.kind, "at": _time(e.at)}}
                            for e in page
                        ]
                    },
                }
            }
        )
    return {"tasks": {"edges": nodes}}


def _reach() -> run_store.RunChange:
    args = {"checkpoint": RunCheckpoint.plans_complete}
    return run_store.RunChange(
        event=RunEvent.CHECKPOINT_REACHED,
        pairs=PIPELINE.changes(RunEvent.CHECKPOINT_REACHED, args),
        actor=PIPELINE.named(RunEvent.CHECKPOINT_REACHED)[0].actor,
        details={"checkpoint": RunCheckpoint.plans_complete.value},
    )


REACH = _reach()


async def w6(db: Database, who: Principal, value: str, _: dict[str, Any]) -> dict[str, Any]:
    async with db.connection() as conn:
        event = await run_store.change(conn, value, REACH, who)
    if event is None:
        raise Refused(f"reachCheckpoint {value}")
    await _notify(db, "baton_run_events", event.id)
    r = event.run
    run = {
        "id": r.id,
        "status": r.status.name,
        "phase": r.phase.name,
        "checkpoint": r.checkpoint.name,
        "version": r.version,
    }
    return {"reachCheckpoint": {"__typename": "RunMoveSuccess", "run": run}}


HANDLERS: dict[str, Handler] = {"W1": w1, "W2": w2, "W3": w3, "W4": w4, "W5": w5, "W6": w6}


# --- the endpoint ------------------------------------------------------------------------------


def principal_of(raw: dict[str, str]) -> Principal:
    return Principal(PrincipalKind(raw["kind"]), raw["handle"])


def app(database_url: str, tokens: dict[str, Principal], extra: dict[str, Any]) -> Starlette:
    state: dict[str, Database] = {}

    def endpoint(handler: Handler) -> Callable[[Request], Awaitable[Response]]:
        async def answer(request: Request) -> Response:
            header = request.headers.get("authorization", "")
            who = tokens.get(header.removeprefix("Bearer "))
            if who is None:
                return Response(b'{"errors": [{"message": "unknown token"}]}', 401)
            value = orjson.loads(await request.body())["v"]
            try:
                data = await handler(state["db"], who, value, extra)
            except Refused as exc:
                return Response(orjson.dumps({"errors": [{"message": str(exc)}]}), 200)
            return Response(orjson.dumps({"data": data}), media_type="application/json")

        return answer

    async def lifespan(_: Starlette) -> Any:
        state["db"] = await Database.connect(
            database_url, min_size=2, max_size=POOL_SIZE, acquire_timeout=ACQUIRE_TIMEOUT
        )
        yield
        await state["db"].close()

    routes = [
        Route(f"/{name.lower()}", endpoint(h), methods=["POST"]) for name, h in HANDLERS.items()
    ]
    return Starlette(routes=routes, lifespan=lifespan)


# --- the direct client ---------------------------------------------------------------------------


async def drive(
    database_url: str,
    handler: Handler,
    who: Principal,
    values: Values,
    extra: dict[str, Any],
    *,
    concurrency: int,
    seconds: float,
    warmup: float,
) -> None:
    """`concurrency` loops calling `handler` back to back: a warm-up, then `seconds` measured.
    Talks to the parent over stdin/stdout, so that its pool's connections (and their
    PostgreSQL backends) live through the parent's CPU snapshots: prints `warm` and waits for
    a line, runs, prints the counts as JSON and waits for a line before closing."""
    size = min(concurrency, POOL_SIZE)
    # W5 holds three connections at once: 32 loops wait for the pool, which is no error.
    db = await Database.connect(
        database_url, min_size=size, max_size=POOL_SIZE, acquire_timeout=ACQUIRE_TIMEOUT
    )
    try:
        await _loops(db, handler, who, values, extra, concurrency, warmup)
        print("warm", flush=True)
        await asyncio.to_thread(sys.stdin.readline)
        if values.kind == "unique":  # not the warm-up's ids again
            values = dataclasses.replace(values, prefix=f"{values.prefix}m")
        result = await _loops(db, handler, who, values, extra, concurrency, seconds)
        print(json.dumps(result), flush=True)
        await asyncio.to_thread(sys.stdin.readline)
    finally:
        await db.close()


async def _loops(
    db: Database,
    handler: Handler,
    who: Principal,
    values: Values,
    extra: dict[str, Any],
    concurrency: int,
    seconds: float,
) -> dict[str, Any]:
    latencies: list[float] = []
    errors = 0
    deadline = time.monotonic() + seconds

    async def loop(thread: int) -> None:
        nonlocal errors
        counter = 0
        while time.monotonic() < deadline:
            value = value_at(values, thread, concurrency, counter)
            counter += 1
            started = time.perf_counter()
            try:
                await handler(db, who, value, extra)
            except Exception:
                errors += 1
            latencies.append(time.perf_counter() - started)

    started, cpu = time.monotonic(), time.process_time()
    await asyncio.gather(*(loop(i) for i in range(concurrency)))
    elapsed, cpu = time.monotonic() - started, time.process_time() - cpu
    latencies.sort()

    def pct(q: float) -> float:
        return (
            latencies[min(len(latencies) - 1, int(q * len(latencies)))] * 1000 if latencies else 0
        )

    return {
        "requests": len(latencies),
        "seconds": elapsed,
        "errors": errors,
        "cpu_seconds": cpu,
        "p50_ms": pct(0.50),
        "p99_ms": pct(0.99),
    }


def main(argv: list[str]) -> int:
    """Configuration comes from the environment: BENCH_DATABASE_URL, BENCH_PRINCIPALS (token
    -> {kind, handle}; for `drive`, one entry), BENCH_EXTRA (W4's fixed inputs), BENCH_VALUES."""
    database_url = os.environ["BENCH_DATABASE_URL"]
    principals = {t: principal_of(p) for t, p in json.loads(os.environ["BENCH_PRINCIPALS"]).items()}
    extra = json.loads(os.environ.get("BENCH_EXTRA", "{}"))
    if argv[0] == "serve":
        import uvicorn

        uvicorn.run(
            app(database_url, principals, extra),
            host="127.0.0.1",
            port=int(argv[1]),
            log_level="warning",
            access_log=False,
        )
        return 0
    name, concurrency, seconds, warmup = argv[1], int(argv[2]), float(argv[3]), float(argv[4])
    values = Values.from_json(os.environ["BENCH_VALUES"])
    (who,) = principals.values()
    asyncio.run(
        drive(
            database_url,
            HANDLERS[name],
            who,
            values,
            extra,
            concurrency=concurrency,
            seconds=seconds,
            warmup=warmup,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
