"""bench.live_delivery over several server processes: `--processes 2` runs `baton serve
--workers 2` with a real Redis between the workers, spreads the subscribers over both, and
finds every event delivered once and in order to every one of them."""

from __future__ import annotations

import contextlib
import io

from bench.live_delivery import main_async, parse_args

from tests.live.cluster import RedisProcess


async def test_two_server_processes_deliver_every_event_once_in_order(
    server_url: str, redis: RedisProcess
) -> None:
    args = parse_args(
        [
            "--subscribers",
            "200",
            "--processes",
            "2",
            "--events",
            "5",
            "--broadcast-url",
            redis.url,
            "--database-url",
            server_url,
        ]
    )
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        status = await main_async(args)
    report = out.getvalue()
    assert status == 0, report  # nothing lost, repeated or out of order
    row = next(line for line in report.splitlines() if line.lstrip().startswith("200 "))
    assert row.split()[2] == "1000"  # 5 events x 200 subscribers
    assert "2 server processes, sockets per process" in report
    spread = report.split("sockets per process [")[1].split("]")[0]
    assert all(int(n) > 0 for n in spread.split(","))  # both processes hold subscribers
