"""Where the bytes of an idle subscription go: a tracemalloc diff per subscription.

    .venv/bin/python -m bench.idle_memory [--subscribers 1000] [--base 100] [--top 25]

Runs the server in this process (uvicorn as `baton serve` configures it) with tracemalloc on,
opens `--base` subscriptions (to warm every cache), takes a snapshot, opens `--subscribers`
more from a worker process (`bench.subscribers`: the same clients as `bench.live_delivery`),
takes another, and prints the growth per subscription grouped by the allocating line (and by
file), beside the growth of the process's RSS. tracemalloc sees Python's allocations only: the
rest of the RSS growth is C (the event loop's transports, the kernel's socket bookkeeping is
not in RSS at all) and the allocator's slack. See bench/README.md.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import secrets
import socket
import sys
import tempfile
import tracemalloc
from pathlib import Path

import psutil  # type: ignore[import-untyped, unused-ignore]
import uvicorn

from baton.app import create_app
from baton.cli import SERVER_GC_THRESHOLDS, server_config
from baton.settings import Settings

from .live_delivery import Mover, WorkerPool, prepare, progress
from .server import Server, bench_database, raise_open_files_limit
from .subscribers import WorkerSpec

TASK_EVENTS = """
subscription($filter: TaskEventFilter, $after: ID) {
  taskEvents(filter: $filter, after: $after) {
    id kind taskId move fromState toState actor task { id state version }
  }
}
"""


def _rss() -> int:
    return int(psutil.Process(os.getpid()).memory_info().rss)


def _free_socket() -> socket.socket:
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(2048)
    return sock


async def _settled() -> tuple[tracemalloc.Snapshot | None, int]:
    await asyncio.sleep(1.0)
    gc.collect()
    return (tracemalloc.take_snapshot() if tracemalloc.is_tracing() else None), _rss()


def _report(
    before: tracemalloc.Snapshot, after: tracemalloc.Snapshot, n: int, rss: int, top: int
) -> str:
    filters = [tracemalloc.Filter(False, tracemalloc.__file__)]
    before, after = before.filter_traces(filters), after.filter_traces(filters)
    lines = []
    total = sum(s.size_diff for s in after.compare_to(before, "filename"))
    lines.append(
        f"{n} subscriptions: RSS +{rss / n / 1024:.1f} KB each, "
        f"Python allocations (tracemalloc) +{total / n / 1024:.1f} KB each\n"
    )
    lines.append(f"{'B/sub':>8}  {'blocks/sub':>10}  file")
    for stat in after.compare_to(before, "filename")[:top]:
        name = stat.traceback[0].filename
        short = name.split("site-packages/")[-1].split("/src/")[-1]
        lines.append(f"{stat.size_diff / n:>8.0f}  {stat.count_diff / n:>10.1f}  {short}")
    lines.append(f"\n{'B/sub':>8}  {'blocks/sub':>10}  line")
    for stat in after.compare_to(before, "lineno")[:top]:
        frame = stat.traceback[0]
        short = frame.filename.split("site-packages/")[-1].split("/src/")[-1]
        lines.append(
            f"{stat.size_diff / n:>8.0f}  {stat.count_diff / n:>10.1f}  {short}:{frame.lineno}"
        )
    if after.traces and len(after.traces[0].traceback) > 1:
        lines.append("\nlargest by whole traceback (innermost last):")
        for stat in after.compare_to(before, "traceback")[:top]:
            lines.append(
                f"\n{stat.size_diff / n:>8.0f} B/sub  {stat.count_diff / n:.1f} blocks/sub"
            )
            for frame in stat.traceback:
                short = frame.filename.split("site-packages/")[-1].split("/src/")[-1]
                lines.append(f"    {short}:{frame.lineno}")
    return "\n".join(lines)


async def _run(args: argparse.Namespace) -> str:
    with tempfile.TemporaryDirectory(prefix="baton-bench-", dir="/tmp") as logs:
        async with bench_database(args.database_url) as (url, _):
            setup = await prepare(url, Path(logs))
            env = {
                **os.environ,
                "BATON_DATABASE_URL": url,
                "BATON_MAX_SOCKETS_PER_TOKEN": "1000000",
                "BATON_MAX_SOCKETS": "1000000",
            }
            os.environ.update(env)
            settings = Settings.from_env()
            app = create_app(settings, run_migrations=False)
            gc.set_threshold(*SERVER_GC_THRESHOLDS)
            sock = _free_socket()
            port = sock.getsockname()[1]
            config = server_config(app, settings, loop="none")  # this process runs uvloop
            if args.stock:
                config.ws = "websockets-sansio"
            if args.stock_deflate:
                config.ws_per_message_deflate = True
            server = uvicorn.Server(config)
            serving = asyncio.create_task(server.serve(sockets=[sock]))
            while not server.started:  # noqa: ASYNC110 (uvicorn offers only this flag)
                await asyncio.sleep(0.05)
            base_url = f"http://127.0.0.1:{port}"
            fake = Server(base_url, None, Path(logs) / "x.log")  # type: ignore[arg-type]
            mover = Mover(base_url, setup.admin_token)
            project = f"mem-{secrets.token_hex(3)}"
            cursor = await mover.hand_off(project, setup.requester, setup.assignee)
            variables = {"filter": {"projects": [project]}, "after": str(cursor)}
            spec = WorkerSpec(
                base_url, setup.watcher_token, TASK_EVENTS, variables, count=0, deflate=args.deflate
            )
            pools: list[WorkerPool] = []
            try:
                pools.append(WorkerPool(spec, args.base, 1))
                await pools[0].subscribed()
                await pools[0].warm((await mover.move(_accept())).event_id)
                if not args.rss_only:
                    tracemalloc.start(args.frames)
                progress(f"{args.base} warm subscriptions; snapshot")
                before, rss_before = await _settled()
                pools.append(WorkerPool(spec, args.subscribers, args.workers))
                await pools[1].subscribed()
                progress(f"{args.subscribers} more subscriptions; snapshot")
                after, rss_after = await _settled()
                tracemalloc.stop()
                if args.rss_only:
                    rss = (rss_after - rss_before) / args.subscribers / 1024
                    return f"{args.subscribers} subscriptions: RSS +{rss:.1f} KB each"
            finally:
                for pool in pools:
                    pool.stop()
                await mover.aclose()
                server.should_exit = True
                await serving
                del fake
            assert before is not None and after is not None
            return _report(before, after, args.subscribers, rss_after - rss_before, args.top)


def _accept() -> str:
    from .live_delivery import ACCEPT

    return ACCEPT


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.idle_memory", description=__doc__)
    p.add_argument("--subscribers", type=int, default=1000)
    p.add_argument("--base", type=int, default=100)
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--top", type=int, default=25)
    p.add_argument("--frames", type=int, default=1, help="frames per traceback")
    p.add_argument(
        "--rss-only", action="store_true", help="no tracemalloc (its own bookkeeping is in RSS)"
    )
    p.add_argument("--deflate", action="store_true", help="the clients offer permessage-deflate")
    p.add_argument(
        "--stock-deflate",
        action="store_true",
        help="accept permessage-deflate, as uvicorn does by default",
    )
    p.add_argument(
        "--stock", action="store_true", help="uvicorn's own websockets-sansio connection class"
    )
    p.add_argument("--database-url", default=os.environ.get("BATON_BENCH_DATABASE_URL"))
    args = p.parse_args(argv)
    raise_open_files_limit()
    import uvloop

    print(uvloop.run(_run(args)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
