"""HTTP/1.1 as bytes for webhook POSTs, with no I/O: a request written, and an answer's head
read when it has the plain form almost every receiver sends.

h11 reads any answer strictly, at about 50 µs of CPU per exchange here, three times what a
WebSocket frame costs the server. Most answers are one form: `HTTP/1.1`, a final status, tidy
header lines and one `content-length`. `plain_head` reads that form alone, by the grammar h11
applies to it (RFC 9110/9112's tokens and field values), and answers None for anything else
(an informational status, chunked or unframed bodies, HTTP/1.0, folded lines, bare line
feeds, a repeated `content-length`), which then goes to h11 whole (`baton.webhooks.http1`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

_TOKEN = "[-!#$%&'*+.^_`|~0-9A-Za-z]+"
_REQUEST_TARGET = re.compile(r"[\x21-\x7e]+")
_REQUEST_NAME = re.compile(_TOKEN)
_REQUEST_VALUE = re.compile(r"(?:[\x21-\x7e](?:[\t \x21-\x7e]*[\x21-\x7e])?)?")
_STATUS_LINE = re.compile(rb"HTTP/1\.1 ([2-5][0-9][0-9])(?: [\t \x21-\x7e\x80-\xff]*)?")
_FIELD_LINE = re.compile(
    rb"(" + _TOKEN.encode() + rb"):[ \t]*"
    rb"((?:[\x21-\x7e\x80-\xff](?:[\t \x21-\x7e\x80-\xff]*[\x21-\x7e\x80-\xff])?)?)[ \t]*"
)
_MAX_LENGTH_DIGITS = 18


class Unsendable(ValueError):
    """A request target or header that HTTP/1.1 cannot carry as it is."""


def head(target: str, headers: Iterable[tuple[str, str]]) -> bytes:
    """The start of a POST to `target` (its path and query, ASCII): the request line and
    `headers`, each line ended. What every message to a URL has alike is made once, kept by
    the caller, and ended by `request`."""
    if not _REQUEST_TARGET.fullmatch(target):
        raise Unsendable("the request target is not printable ASCII")
    return f"POST {target} HTTP/1.1\r\n{_lines(headers)}".encode("ascii")


def request(start: bytes, headers: Iterable[tuple[str, str]], body: bytes) -> bytes:
    """The POST that `start` begins (`head`), with `headers`, the body's length and `body`."""
    end = f"{_lines(headers)}content-length: {len(body)}\r\n\r\n".encode("ascii")
    return b"".join((start, end, body))


def _lines(headers: Iterable[tuple[str, str]]) -> str:
    """`headers` as header lines, each ended; `Unsendable` if HTTP/1.1 cannot carry one."""
    lines = []
    for name, value in headers:
        if not _REQUEST_NAME.fullmatch(name):
            raise Unsendable(f"{name!r} is not a header name")
        if not _REQUEST_VALUE.fullmatch(value):
            raise Unsendable(f"the value of {name} is not a header value (ASCII, one line)")
        lines.append(f"{name}: {value}\r\n")
    return "".join(lines)


@dataclass(frozen=True)
class Head:
    status: int
    length: int  # of the body that follows
    close: bool  # the receiver closes the connection after it


def plain_head(head: bytes) -> Head | None:
    """The answer whose head is `head` (up to, without, its blank line), or None when it is
    not of the plain form (see the module's text). A receiver answers each message with the
    same head, but for its `date` once a second: short heads are kept, read once."""
    if len(head) > _KEPT_HEAD_BYTES:
        return _plain_head(head)
    try:
        return _HEADS[head]
    except KeyError:
        pass
    if len(_HEADS) >= _KEPT_HEADS:
        _HEADS.clear()
    found = _HEADS[head] = _plain_head(head)
    return found


_KEPT_HEADS = 256
_KEPT_HEAD_BYTES = 512
_HEADS: dict[bytes, Head | None] = {}


def _plain_head(head: bytes) -> Head | None:
    lines = head.split(b"\r\n")
    status_line = _STATUS_LINE.fullmatch(lines[0])
    if status_line is None:
        return None
    length: int | None = None
    close = False
    for line in lines[1:]:
        field = _FIELD_LINE.fullmatch(line)
        if field is None:
            return None
        name, value = field[1].lower(), field[2]
        if name == b"content-length":
            if length is not None or not value.isdigit() or len(value) > _MAX_LENGTH_DIGITS:
                return None
            length = int(value)
        elif name == b"transfer-encoding":
            return None
        elif name == b"connection":
            close = close or b"close" in (t.strip().lower() for t in value.split(b","))
    status = int(status_line[1])
    if status in (204, 304):
        length = 0  # no body, whatever the head says (RFC 9112 6.3)
    if length is None:
        return None
    return Head(status, length, close)
