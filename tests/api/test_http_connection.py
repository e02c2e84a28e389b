"""The corked HTTP connection: writes within one turn of the loop leave as one write, in
order, and nothing waiting is lost when the connection closes or upgrades; a streamed answer's
chunks written past `send` (`write_chunk`) land in their own answer, in order, and only while
they may."""

from __future__ import annotations

import asyncio
import gc
import select
import socket
import weakref
from collections.abc import AsyncIterator
from typing import Any

import pytest

from baton.sending import cycle_of, write_chunk
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


async def test_write_now_leaves_at_once_after_what_waits() -> None:
    real = Recorder()
    corked = CorkedTransport(real, asyncio.get_running_loop())
    corked.write_now(b"event 1")
    assert real.writes == [b"event 1"]
    corked.write(b"head")
    corked.write_now(b"event 2")
    assert real.writes == [b"event 1", b"headevent 2"]
    await asyncio.sleep(0)  # the scheduled flush finds nothing more to send
    assert real.writes == [b"event 1", b"headevent 2"]
    real.closed = True
    corked.write_now(b"never")
    assert real.writes == [b"event 1", b"headevent 2"]


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


async def test_a_complete_answer_leaves_before_the_rest_of_its_task_runs() -> None:
    """The answer is written when its last part is sent, not at the end of the turn: what
    its task does after that (here, wait for the client's socket, the loop blocked) does not
    hold it back."""
    client: list[socket.socket] = []
    arrived: list[bytes] = []
    done = asyncio.Event()

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        headers = [(b"content-length", b"2")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": b"ok"})
        readable, _, _ = select.select(client, [], [], 2.0)  # blocks the loop, on purpose
        arrived.append(client[0].recv(4096) if readable else b"")
        done.set()

    async with uvicorn_serving(app, http=CorkedHttpToolsProtocol) as port:
        sock = socket.create_connection(("127.0.0.1", port))
        client.append(sock)
        try:
            sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            await asyncio.wait_for(done.wait(), 10)
        finally:
            sock.close()
    [answer] = arrived
    assert answer.startswith(b"HTTP/1.1 200 OK\r\n") and answer.endswith(b"\r\n\r\nok")


async def test_chunks_written_past_send_keep_their_answer_and_order() -> None:
    wrote: list[bool] = []

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        cycle = cycle_of(scope)
        await send({"type": "http.response.start", "status": 200, "headers": []})
        wrote.append(write_chunk(cycle, b"a"))
        wrote.append(write_chunk(cycle, b"bb"))
        await send({"type": "http.response.body", "body": b"c", "more_body": True})
        await asyncio.sleep(0)  # the client took it: the writer is not paused
        wrote.append(write_chunk(cycle, scope["path"].encode()))
        await send({"type": "http.response.body", "body": b"e"})

    async with uvicorn_serving(app, http=CorkedHttpToolsProtocol) as port:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        # Pipelined: each answer's chunks go into that answer, whatever the connection's
        # latest request.
        writer.write(b"".join(f"GET /{n} HTTP/1.1\r\nHost: x\r\n\r\n".encode() for n in range(3)))
        for n in range(3):
            head = await reader.readuntil(b"\r\n\r\n")
            assert b"transfer-encoding: chunked" in head
            body = await reader.readuntil(b"0\r\n\r\n")
            assert body == b"1\r\na\r\n2\r\nbb\r\n1\r\nc\r\n2\r\n/%d\r\n1\r\ne\r\n0\r\n\r\n" % n
        writer.close()
        await writer.wait_closed()
    assert wrote == [True] * 9


async def test_write_chunk_declines_where_send_must_answer() -> None:
    declined: dict[str, bool] = {}

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        cycle = cycle_of(scope)
        path = scope["path"]
        declined[f"{path} before the head"] = not write_chunk(cycle, b"x")
        headers = [(b"content-length", b"1")] if path == "/sized" else []
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        declined[f"{path} empty"] = not write_chunk(cycle, b"")
        declined[f"{path} body"] = not write_chunk(cycle, b"y")
        await send({"type": "http.response.body", "body": b"z"})
        declined[f"{path} after the end"] = not write_chunk(cycle, b"w")

    async with uvicorn_serving(app, http=CorkedHttpToolsProtocol) as port:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"GET /sized HTTP/1.1\r\nHost: x\r\n\r\n")
        head = await reader.readuntil(b"\r\n\r\n")
        assert b"content-length: 1" in head and await reader.readexactly(1) == b"z"
        writer.write(b"HEAD /head HTTP/1.1\r\nHost: x\r\n\r\n")
        assert b"200 OK" in await reader.readuntil(b"\r\n\r\n")
        writer.write(b"GET /chunked HTTP/1.1\r\nHost: x\r\n\r\n")
        await reader.readuntil(b"\r\n\r\n")
        assert await reader.readuntil(b"0\r\n\r\n") == b"1\r\ny\r\n1\r\nz\r\n0\r\n\r\n"
        writer.close()
        await writer.wait_closed()
    assert declined.pop("/chunked body") is False  # the one case it writes
    assert all(declined.values()), declined
    assert len(declined) == 11


async def test_write_chunk_declines_while_the_client_is_behind() -> None:
    answers: list[bool] = []
    big = b"x" * (16 * 1024 * 1024)  # more than the socket buffers hold

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        cycle = cycle_of(scope)
        await send({"type": "http.response.start", "status": 200, "headers": []})
        write = asyncio.create_task(
            send({"type": "http.response.body", "body": big, "more_body": True})
        )
        for _ in range(5):
            await asyncio.sleep(0)
        answers.append(write_chunk(cycle, b"behind"))  # the client has not read
        await write
        # `send` waits until the client has taken what was written: then a chunk may go.
        await send({"type": "http.response.body", "body": b"", "more_body": True})
        answers.append(write_chunk(cycle, b"caught up"))
        await send({"type": "http.response.body", "body": b""})

    async with uvicorn_serving(app, http=CorkedHttpToolsProtocol) as port:
        reader, writer = await asyncio.open_connection("127.0.0.1", port, limit=2**25)
        writer.write(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        await reader.readuntil(b"\r\n\r\n")
        await asyncio.sleep(0.2)  # the server meets a full socket
        body = await reader.readuntil(b"0\r\n\r\n")
        assert body.endswith(b"\r\n9\r\ncaught up\r\n0\r\n\r\n")
        assert b"behind" not in body
        writer.close()
        await writer.wait_closed()
    assert answers == [False, True]


async def test_a_request_s_cycle_is_freed_without_the_collector() -> None:
    cycles: list[weakref.ref[Any]] = []

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        cycle = cycle_of(scope)
        assert cycle is not None
        cycles.append(weakref.ref(cycle))
        del cycle
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"x"})

    gc.disable()  # what is freed is freed by its count of references alone
    try:
        async with uvicorn_serving(app, http=CorkedHttpToolsProtocol) as port:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            for _ in range(2):
                writer.write(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
                await reader.readuntil(b"0\r\n\r\n")
            await asyncio.sleep(0.05)  # the second request's task is over
            # The connection holds its latest cycle; the one before is gone: its scope holds
            # it weakly, so the two make no reference cycle.
            assert cycles[0]() is None
            assert cycles[1]() is not None
            writer.close()
            await writer.wait_closed()
    finally:
        gc.enable()
