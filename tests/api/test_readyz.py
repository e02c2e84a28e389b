"""/readyz answers a fixed reason to anyone; the database's own words go to the log."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from tests.conftest import start_server, stop_server
from tests.proxy import DatabaseProxy


@pytest.fixture(scope="module")
def cut_off(
    server_url: str, database_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[DatabaseProxy, str, Path, subprocess.Popen[bytes]]]:
    """`baton serve` on the test database through a proxy the test can cut."""
    log = tmp_path_factory.mktemp("readyz") / "serve.log"
    database = urlsplit(database_url).path.lstrip("/")
    with DatabaseProxy(server_url) as proxy:
        url, process = start_server({"BATON_DATABASE_URL": proxy.url(database)}, log)
        yield proxy, url, log, process
        stop_server(process)


async def test_readyz_gives_a_fixed_reason_and_logs_the_detail(
    cut_off: tuple[DatabaseProxy, str, Path, subprocess.Popen[bytes]],
) -> None:
    proxy, url, log, _ = cut_off
    async with httpx.AsyncClient(base_url=url, timeout=30) as client:
        assert (await client.get("/readyz")).status_code == 200
        proxy.cut()
        try:
            answer = await client.get("/readyz")
        finally:
            proxy.restore()
        assert answer.status_code == 503
        assert answer.json() == {"status": "unavailable", "reason": "the database does not answer"}
        for detail in (str(proxy.port), "127.0.0.1", "Error", "connection"):
            assert detail not in answer.text
        assert "readyz: the database does not answer" in log.read_text()
        # Back when the database is.
        for _ in range(50):
            if (await client.get("/readyz")).status_code == 200:
                break
        else:
            raise AssertionError("readyz did not recover")
