"""The plain form of an answer's head is read here only when h11 would read it the same; any
other form is left to h11 (None)."""

from __future__ import annotations

import h11
import pytest

from baton.webhooks import wire


def by_h11(head: bytes) -> wire.Head:
    """What h11 reads from the same head (a POST's answer)."""
    parser = h11.Connection(h11.CLIENT)
    parser.send(h11.Request(method="POST", target="/", headers=[("host", "-")]))
    parser.send(h11.EndOfMessage())
    parser.receive_data(head + b"\r\n\r\n" + b"x" * 20)
    response = parser.next_event()
    assert isinstance(response, h11.Response)
    length = 0
    while not isinstance(event := parser.next_event(), h11.EndOfMessage):
        assert isinstance(event, h11.Data)
        length += len(event.data)
    return wire.Head(response.status_code, length, parser.their_state is h11.MUST_CLOSE)


@pytest.mark.parametrize(
    "head",
    [
        b"HTTP/1.1 200 OK\r\ncontent-length: 2",
        b"HTTP/1.1 200\r\nContent-Length:2",
        b"HTTP/1.1 201 Created\r\nx-a: b c \r\ncontent-length: 0\r\nserver: uvicorn",
        b"HTTP/1.1 410 Gone\r\nconnection: keep-alive, close\r\ncontent-length: 4",
        b"HTTP/1.1 204 No Content\r\ncontent-length: 9",
        b"HTTP/1.1 204 No Content",
        b"HTTP/1.1 503 \xe9t\xe9\r\nx-b: \xe9\r\ncontent-length: 10",
    ],
)
def test_a_plain_head_reads_as_h11_reads_it(head: bytes) -> None:
    assert wire.plain_head(head) == by_h11(head)


@pytest.mark.parametrize(
    "head",
    [
        b"HTTP/1.1 100 Continue",  # informational: the answer follows
        b"HTTP/1.0 200 OK\r\ncontent-length: 2",
        b"HTTP/1.1 200 OK",  # unframed: read to the end
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked",
        b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\ntransfer-encoding: chunked",
        b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\ncontent-length: 2",
        b"HTTP/1.1 200 OK\r\ncontent-length: +2",
        b"HTTP/1.1 200 OK\r\ncontent-length: 2, 2",
        b"HTTP/1.1 200 OK\r\ncontent-length : 2",
        b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n folded",
        b"HTTP/1.1 200 OK\r\nx-a: b\x00\r\ncontent-length: 2",
        b"HTTP/1.1 200 OK\r\ncontent-length: 99999999999999999999",
        b"HTTP/1.1 2000 OK\r\ncontent-length: 2",
        b"http/1.1 200 OK\r\ncontent-length: 2",
    ],
)
def test_any_other_form_is_left_to_h11(head: bytes) -> None:
    assert wire.plain_head(head) is None


def test_a_request_carries_its_length_and_only_what_http_allows() -> None:
    start = wire.head("/in?k=v", [("host", "h.test")])
    written = wire.request(start, [("webhook-id", "m1"), ("x-b", "")], b"{}")
    assert written == (
        b"POST /in?k=v HTTP/1.1\r\nhost: h.test\r\nwebhook-id: m1\r\nx-b: \r\n"
        b"content-length: 2\r\n\r\n{}"
    )
    assert wire.request(wire.head("/", []), [], b"") == (
        b"POST / HTTP/1.1\r\ncontent-length: 0\r\n\r\n"
    )
    with pytest.raises(wire.Unsendable):
        wire.head("/a b", [])
    for headers in (
        [("x-a", "b\r\nx-injected: 1")],
        [("x-a", "b\nx-injected: 1")],
        [("x-a", "1"), ("x-b\ny", "2")],  # a line feed in a name: one join too many
        [("x a", "b")],
        [("x-a: b", "c")],
        [("x-a", " b")],
        [("x-a", "\xe9")],
    ):
        with pytest.raises(wire.Unsendable):
            wire.head("/", headers)
        with pytest.raises(wire.Unsendable):
            wire.request(start, headers, b"")
