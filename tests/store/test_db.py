"""The request path's pool: how a server's connections are shared among its processes."""

from __future__ import annotations

import pytest

from baton.store.db import pool_share


@pytest.mark.parametrize(
    ("total", "processes", "each"), [(16, 1, 16), (16, 2, 8), (16, 3, 5), (16, 20, 2), (2, 4, 2)]
)
def test_worker_processes_split_the_servers_connections_and_keep_two_each(
    total: int, processes: int, each: int
) -> None:
    assert pool_share(total, processes) == each
