"""The webhook client against real receivers on 127.0.0.1: a raw asyncio server whose every
byte the test chooses, and a Starlette app under uvicorn."""

from __future__ import annotations

import asyncio
import shutil
import ssl
import subprocess
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from baton.services.webhook_addresses import Policy
from baton.webhooks import attempt, http1, wire
from tests.helpers import uvicorn_serving

POLICY = Policy(allow_private=True, allow_http=True)
OK = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok"


@dataclass
class Peer:
    """What a raw receiver saw: the requests' heads and bodies, and how many connections."""

    port: int = 0
    connections: int = 0
    requests: list[tuple[bytes, bytes]] = field(default_factory=list)
    closed: asyncio.Event = field(default_factory=asyncio.Event)  # a connection was closed
    received: asyncio.Event = field(default_factory=asyncio.Event)  # a request was read


Handler = Callable[[Peer, asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


async def read_request(peer: Peer, reader: asyncio.StreamReader) -> bool:
    """One request read and recorded (False: the client closed the connection)."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError:
        return False
    length = 0
    for line in head.split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    peer.requests.append((head, await reader.readexactly(length)))
    peer.received.set()
    return True


@asynccontextmanager
async def raw(handler: Handler, tls: ssl.SSLContext | None = None) -> AsyncIterator[Peer]:
    peer = Peer()

    async def connected(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer.connections += 1
        try:
            await handler(peer, reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()
            peer.closed.set()

    server = await asyncio.start_server(connected, "127.0.0.1", 0, ssl=tls)
    peer.port = server.sockets[0].getsockname()[1]
    try:
        yield peer
    finally:
        server.close()


async def answering(answer: bytes) -> Handler:
    async def handler(peer: Peer, reader: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        while await read_request(peer, reader):
            w.write(answer)
            await w.drain()

    return handler


def origin(peer: Peer, server_name: str | None = None) -> http1.Origin:
    return http1.Origin("127.0.0.1", peer.port, server_name)


async def post(client: http1.Client, peer: Peer, body: bytes = b"{}") -> http1.Reply:
    start = wire.head("/hook", [("host", "receiver.test")])
    return await client.post(origin(peer), start, [], body, 1024)


async def test_one_connection_carries_many_messages() -> None:
    async with raw(await answering(OK)) as peer:
        client = http1.Client(max_idle=4, keep_alive=10)
        for n in range(20):
            reply = await post(client, peer, f'{{"n":{n}}}'.encode())
            assert (reply.status, reply.body) == (200, b"ok")
        assert peer.connections == 1 and client.opened == 1 and len(peer.requests) == 20
        assert peer.requests[-1][1] == b'{"n":19}'
        client.close()


async def test_a_real_server_keeps_the_connection_and_sees_the_pinned_host() -> None:
    seen: list[dict[str, str]] = []

    async def handle(request: Request) -> Response:
        seen.append(dict(request.headers))
        return Response(await request.body(), 201)

    app = Starlette(routes=[Route("/{path:path}", handle, methods=["POST"])])
    async with uvicorn_serving(app) as port:
        client = attempt.client(4)
        way = attempt.Way(f"http://127.0.0.1:{port}/in?k=v", POLICY)
        answers = [
            await attempt.send(client, way, {"webhook-id": f"m{n}"}, b"{}", 5) for n in range(5)
        ]
        client.close()
    assert all(a is not None and a.delivered and a.status == 201 for a in answers)
    assert answers[0] is not None and answers[0].body == "{}"
    assert client.opened == 1
    assert seen[0]["host"] == f"127.0.0.1:{port}"
    assert seen[0]["accept-encoding"] == "identity"
    assert seen[0]["content-type"] == "application/json"
    assert [s["webhook-id"] for s in seen] == ["m0", "m1", "m2", "m3", "m4"]


async def test_a_connection_the_receiver_closed_while_idle_is_opened_again_once() -> None:
    async def handler(peer: Peer, reader: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        await read_request(peer, reader)
        w.write(OK)  # keep-alive, as far as the answer says
        await w.drain()
        await asyncio.sleep(0.05)  # then it closes the idle connection

    async with raw(handler) as peer:
        client = http1.Client(max_idle=4, keep_alive=10)
        assert (await post(client, peer)).status == 200
        await peer.closed.wait()
        await asyncio.sleep(0.05)  # the close reaches the client
        assert (await post(client, peer)).status == 200
        assert len(peer.requests) == 2 and peer.connections == 2
        client.close()


async def test_a_request_the_receiver_may_have_read_is_never_sent_again() -> None:
    async def handler(peer: Peer, reader: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        while await read_request(peer, reader):
            if len(peer.requests) == 2:
                return  # read, maybe acted on, and no answer: the connection closes
            w.write(OK)
            await w.drain()

    async with raw(handler) as peer:
        client = http1.Client(max_idle=4, keep_alive=10)
        await post(client, peer)
        with pytest.raises(http1.RemoteProtocolError, match="without sending a response"):
            await post(client, peer)
        assert len(peer.requests) == 2 and peer.connections == 1
        client.close()


async def test_a_chunked_answer_is_read_and_the_connection_kept() -> None:
    chunked = (
        b"HTTP/1.1 202 Accepted\r\ntransfer-encoding: chunked\r\n\r\n"
        b"5\r\nhello\r\n1\r\n \r\n5\r\nworld\r\n0\r\n\r\n"
    )
    async with raw(await answering(chunked)) as peer:
        client = http1.Client(max_idle=4, keep_alive=10)
        first, second = await post(client, peer), await post(client, peer)
        assert first == second == http1.Reply(202, b"hello world")
        assert peer.connections == 1
        client.close()


@pytest.mark.parametrize(("size", "kept"), [(10_000, True), (1_000_000, False)])
async def test_a_long_answer_is_cut_and_drained_or_its_connection_closed(
    size: int, kept: bool
) -> None:
    long = b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n" % size + b"x" * size
    async with raw(await answering(long)) as peer:
        client = http1.Client(max_idle=4, keep_alive=10)
        reply = await post(client, peer)
        assert reply == http1.Reply(200, b"x" * 1024)
        assert (await post(client, peer)).status == 200
        assert peer.connections == (1 if kept else 2)
        client.close()


async def test_an_endless_answer_head_fails_without_a_hang() -> None:
    async def handler(peer: Peer, reader: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        await read_request(peer, reader)
        w.write(b"HTTP/1.1 200 OK\r\n")
        while True:  # headers for ever
            w.write(b"x-filler: " + b"y" * 1000 + b"\r\n")
            await w.drain()

    async with raw(handler) as peer:
        client = http1.Client(max_idle=4, keep_alive=10)
        started = time.monotonic()
        with pytest.raises(http1.RemoteProtocolError, match="too long"):
            await asyncio.wait_for(post(client, peer), 5)
        assert time.monotonic() - started < 2
        assert client.idle == 0
        client.close()


async def test_a_redirect_is_a_failure_and_not_followed() -> None:
    moved = b"HTTP/1.1 307 Temporary Redirect\r\nlocation: /elsewhere\r\ncontent-length: 0\r\n\r\n"
    async with raw(await answering(moved)) as peer:
        client = attempt.client(4)
        way = attempt.Way(f"http://127.0.0.1:{peer.port}/hook", POLICY)
        answer = await attempt.send(client, way, {}, b"{}", 5)
        assert answer is not None and not answer.delivered and answer.status == 307
        assert answer.error == "HTTP 307 (redirects are not followed)"
        assert [head.split(b" ")[1] for head, _ in peer.requests] == [b"/hook"]
        client.close()


async def test_headers_http_cannot_carry_fail_the_attempt_and_nothing_is_sent() -> None:
    """An endpoint's own header (a credential with a line break) or a message's: the attempt
    fails with what is wrong, and the receiver gets no request; a good one after it goes."""
    async with raw(await answering(OK)) as peer:
        client = attempt.client(4)
        way = attempt.Way(f"http://127.0.0.1:{peer.port}/hook", POLICY)
        injected = (("authorization", "Bearer a\r\nx-injected: 1"),)
        for headers, own in (({}, injected), ({"webhook-id": "m\n1"}, ())):
            answer = await attempt.send(client, way, headers, b"{}", 5, own=own)
            assert answer is not None and not answer.delivered and answer.status is None
            assert answer.error is not None and "is not a header value" in answer.error
        assert peer.requests == []
        answer = await attempt.send(client, way, {"webhook-id": "m1"}, b"{}", 5)
        assert answer is not None and answer.delivered
        assert len(peer.requests) == 1
        client.close()


async def test_a_receiver_that_does_not_read_or_answer_times_out_and_its_connection_goes() -> None:
    async def silent(peer: Peer, reader: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        await reader.read()  # until the client closes

    async def unread(peer: Peer, reader: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        await asyncio.sleep(30)  # reads nothing: the request fills the socket's buffers

    for handler, body in ((silent, b"{}"), (unread, b"x" * 8_000_000)):
        async with raw(handler) as peer:
            client = attempt.client(4)
            way = attempt.Way(f"http://127.0.0.1:{peer.port}/hook", POLICY)
            answer = await attempt.send(client, way, {}, body, 0.3)
            assert answer is not None and answer.error == "no answer within 0.3 s"
            assert answer.duration_ms < 1000
            assert client.idle == 0
            if handler is silent:
                await asyncio.wait_for(peer.closed.wait(), 2)  # the client let it go
            client.close()


async def test_closing_waits_on_no_receiver() -> None:
    async def held(peer: Peer, reader: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        await read_request(peer, reader)
        await asyncio.sleep(30)

    async with raw(await answering(OK)) as idle_peer, raw(held) as busy_peer:
        client = http1.Client(max_idle=4, keep_alive=10)
        await post(client, idle_peer)
        on_its_way = asyncio.create_task(post(client, busy_peer))
        await asyncio.wait_for(busy_peer.received.wait(), 2)
        started = time.monotonic()
        client.close()
        with pytest.raises(http1.ReadError):
            await asyncio.wait_for(on_its_way, 1)
        assert time.monotonic() - started < 0.5
        await asyncio.wait_for(idle_peer.closed.wait(), 1)


async def test_idle_connections_are_bounded_and_let_go_after_the_keep_alive() -> None:
    async with (
        raw(await answering(OK)) as a,
        raw(await answering(OK)) as b,
        raw(await answering(OK)) as c,
    ):
        client = http1.Client(max_idle=2, keep_alive=0.2)
        for peer in (a, b, c):
            await post(client, peer)
        assert client.idle == 2
        await asyncio.wait_for(a.closed.wait(), 1)  # the least recently used went first
        await asyncio.wait_for(asyncio.gather(b.closed.wait(), c.closed.wait()), 2)
        assert client.idle == 0
        client.close()


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A self-signed certificate for receiver.test (made with the openssl command)."""
    if shutil.which("openssl") is None:
        pytest.skip("no openssl command")
    folder = tmp_path_factory.mktemp("tls")
    key, cert = folder / "key.pem", folder / "cert.pem"
    command = ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"]
    command += ["-subj", "/CN=receiver.test", "-addext", "subjectAltName=DNS:receiver.test"]
    command += ["-keyout", str(key), "-out", str(cert)]
    subprocess.run(
        command,
        check=True,
        capture_output=True,
    )
    return cert, key


async def test_tls_names_the_urls_host_to_the_checked_address(
    certificate: tuple[Path, Path],
) -> None:
    cert, key = certificate
    served = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    served.load_cert_chain(cert, key)
    trusting = ssl.create_default_context(cafile=str(cert))
    async with raw(await answering(OK), tls=served) as peer:
        client = http1.Client(max_idle=4, keep_alive=10, tls=trusting)
        start = wire.head("/", [("host", "receiver.test")])
        for _ in range(3):
            named = origin(peer, "receiver.test")
            assert (await client.post(named, start, [], b"{}", 1024)).status == 200
        assert peer.connections == 1
        with pytest.raises(http1.ConnectError, match="certificate"):
            await client.post(origin(peer, "other.test"), start, [], b"{}", 1024)
        client.close()


@pytest.mark.parametrize(
    ("answer", "reused"),
    [
        (b"HTTP/1.1 100 Continue\r\n\r\n" + OK, True),  # h11 reads it, and keeps it
        (b"HTTP/1.0 200 OK\r\n\r\nok", False),  # unframed: ends with the connection
        (OK + b"surplus", False),  # more than announced: nothing may come unasked
        (b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok", False),
    ],
)
async def test_other_forms_of_answer_are_read_and_their_connections_kept_only_when_sound(
    answer: bytes, reused: bool
) -> None:
    async def handler(peer: Peer, reader: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        while await read_request(peer, reader):
            w.write(answer)
            await w.drain()
            if answer.startswith(b"HTTP/1.0"):
                return

    async with raw(handler) as peer:
        client = http1.Client(max_idle=4, keep_alive=10)
        for _ in range(2):
            assert await post(client, peer) == http1.Reply(200, b"ok")
        assert peer.connections == (1 if reused else 2)
        client.close()


async def test_a_head_over_the_bound_fails_even_when_it_arrives_whole() -> None:
    big = b"HTTP/1.1 200 OK\r\nx-filler: " + b"y" * 20_000 + b"\r\ncontent-length: 2\r\n\r\nok"
    async with raw(await answering(big)) as peer:
        client = http1.Client(max_idle=4, keep_alive=10)
        with pytest.raises(http1.RemoteProtocolError, match="too long"):
            await asyncio.wait_for(post(client, peer), 5)
        client.close()
