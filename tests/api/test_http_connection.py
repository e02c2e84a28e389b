"""The corked HTTP connection: writes within one turn of the loop leave as one write, in
order, and nothing waiting is lost when the connection closes or upgrades."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from baton.web.http_connection import MAX_WAITING, CorkedHttpToolsProtocol, CorkedTransport
from tests.helpers import uvicorn_serving


class Recorder(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.writes: list[bytes] = []
        self.closed = False
        self.aborted = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.writes.append(bytes(data))

    def is_closing(self) -> bool:
        return self.closed or self.aborted

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.aborted = True

    def get_write_buffer_size(self) -> int:
        return 0


async def test_writes_in_one_turn_leave_together() -> None:
    real = Recorder()
    corked = CorkedTransport(real, asyncio.get_running_loop())
    corked.write(b"HTTP/1.1 200 OK\r\n\r\n")
    corked.write(memoryview(b"body"))
    assert real.writes == []
    assert corked.get_write_buffer_size() == len(b"HTTP/1.1 200 OK\r\n\r\nbody")
    await asyncio.sleep(0)
    assert real.writes == [b"HTTP/1.1 200 OK\r\n\r\nbody"]
    corked.write(b"next")
    await asyncio.sleep(0)
    assert real.writes[1:] == [b"next"]


async def test_a_large_write_leaves_at_once() -> None:
    real = Recorder()
    corked = CorkedTransport(real, asyncio.get_running_loop())
    corked.write(b"head")
    corked.write(b"x" * MAX_WAITING)
    assert real.writes == [b"head" + b"x" * MAX_WAITING]
    assert corked.get_write_buffer_size() == 0
    await asyncio.sleep(0)
    assert len(real.writes) == 1


async def test_close_sends_what_waits_and_abort_drops_it() -> None:
    real = Recorder()
    corked = CorkedTransport(real, asyncio.get_running_loop())
    corked.write(b"last words")
    corked.close()
    assert real.writes == [b"last words"] and real.closed
    await asyncio.sleep(0)  # the scheduled flush finds nothing more to send
    assert real.writes == [b"last words"]

    other = Recorder()
    corked = CorkedTransport(other, asyncio.get_running_loop())
    corked.write(b"never")
    corked.abort()
    await asyncio.sleep(0)
    assert other.writes == [] and other.aborted


async def test_a_closed_socket_is_not_written() -> None:
    real = Recorder()
    corked = CorkedTransport(real, asyncio.get_running_loop())
    corked.write(b"late")
    real.closed = True  # the peer went away within the turn
    await asyncio.sleep(0)
    assert real.writes == []


@pytest.fixture
async def server() -> AsyncIterator[int]:
    async def app(scope: dict[str, object], receive: object, send: object) -> None:
        assert scope["type"] == "http"
        await send({"type": "http.response.start", "status": 200, "headers": []})  # type: ignore[operator]
        await send({"type": "http.response.body", "body": b"a", "more_body": True})  # type: ignore[operator]
        await send({"type": "http.response.body", "body": b"b"})  # type: ignore[operator]

    async with uvicorn_serving(app, http=CorkedHttpToolsProtocol) as port:
        yield port


async def test_keep_alive_answers_arrive_whole_and_in_order(server: int) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", server)
    request = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"
    writer.write(request * 3)  # pipelined: three answers on one connection
    answers = []
    for _ in range(3):
        head = await reader.readuntil(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200 OK\r\n")
        assert b"transfer-encoding: chunked" in head
        answers.append(await reader.readuntil(b"0\r\n\r\n"))
    assert answers == [b"1\r\na\r\n1\r\nb\r\n0\r\n\r\n"] * 3
    writer.close()
    await writer.wait_closed()
