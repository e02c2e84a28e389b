"""A real PgBouncer in transaction mode for the tests that run Baton behind one."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from bench.pgbouncer import PgBouncer, pgbouncer_program

from tests.tools import missing


@contextmanager
def pgbouncer_in_front(server_url: str, *, pool_size: int) -> Iterator[PgBouncer]:
    """PgBouncer on a free port in front of the test PostgreSQL at `server_url`, with at most
    `pool_size` server sessions per database; skips (fails under CI) without `pgbouncer`."""
    if pgbouncer_program() is None:
        missing("pgbouncer", "apt-get install pgbouncer")
    bouncer = PgBouncer(server_url, pool_size=pool_size)
    bouncer.start()
    try:
        yield bouncer
    finally:
        bouncer.stop()
