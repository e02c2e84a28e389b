"""Log lines an operator can use: one JSON object a line naming the request (its id, principal,
operation, duration), the request id answered to the client, and never a token or a secret."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import secrets
import sys
from typing import Any

import httpx
import pytest

from baton.access.principals import ADMIN, Principal, PrincipalKind
from baton.telemetry import logs, requests
from tests.live.client import TRANSPORT_WS, WSClient
from tests.mcp.conftest import handed_off, http_client
from tests.sse.client import subscribe
from tests.telemetry.conftest import Observed
from tests.webhooks.conftest import Receiver, create_endpoint, graphql

TOKEN = "baton_" + "A1b2C3" + "x" * 37  # the shape of an API token


def _record(message: str, *args: object, **extra: object) -> logging.LogRecord:
    return logging.LogRecord("baton.test", logging.WARNING, __file__, 1, message, args, None)


def test_a_json_line_names_the_request_it_belongs_to() -> None:
    token = requests.CURRENT.set(requests.Request("req-1", "alice/bot", "HandOff"))
    try:
        line = logs.JSONFormatter().format(_record("two\nlines: %s", "x"))
    finally:
        requests.CURRENT.reset(token)
    assert "\n" not in line
    parsed = json.loads(line)
    assert parsed["level"] == "warning" and parsed["logger"] == "baton.test"
    assert parsed["message"] == "two\nlines: x"
    assert (parsed["request_id"], parsed["principal"], parsed["operation"]) == (
        "req-1",
        "alice/bot",
        "HandOff",
    )
    assert parsed["time"].endswith("Z") and "T" in parsed["time"]


def test_a_line_outside_a_request_names_none_and_a_failure_keeps_its_traceback() -> None:
    try:
        raise ValueError(f"bad token {TOKEN}")
    except ValueError:
        record = _record("failed")
        record.exc_info = sys.exc_info()
    parsed = json.loads(logs.JSONFormatter().format(record))
    assert "request_id" not in parsed and "principal" not in parsed
    assert "ValueError: bad token baton_A1b2C3…" in parsed["exception"]
    assert TOKEN not in parsed["exception"]


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        (f"Authorization: Bearer {TOKEN}", "Authorization: Bearer baton_A1b2C3…"),
        ("secret whsec_" + "Zm9v" * 11 + " rotated", "secret whsec_… rotated"),
        ("postgresql://baton:hunter2@db:5432/baton", "postgresql://baton:***@db:5432/baton"),
        # Not secrets: a database named like a token's prefix, an address without a password.
        ("database baton_test_1234_abcdef", "database baton_test_1234_abcdef"),
        ("postgresql://baton@db/baton", "postgresql://baton@db/baton"),
    ],
)
def test_what_looks_like_a_secret_is_scrubbed_from_every_line(text: str, shown: str) -> None:
    assert logs.scrub(text) == shown
    assert json.loads(logs.JSONFormatter().format(_record("%s", text)))["message"] == shown
    assert logs.TextFormatter(logs.TEXT).format(_record("%s", text)).endswith(shown)


@pytest.mark.parametrize(
    ("given", "kept"),
    [
        (b"abc-123", True),
        (b"x" * requests.MAX_REQUEST_ID, True),
        (b"x" * (requests.MAX_REQUEST_ID + 1), False),
        (b"has space", False),
        (b"line\nbreak", False),
        (b"", False),
        ("caf\u00e9".encode(), False),
    ],
)
def test_a_client_request_id_is_kept_only_when_bounded_and_printable(
    given: bytes, kept: bool
) -> None:
    found = requests.request_id([(b"x-request-id", given)])
    assert (found == given.decode("utf-8", "replace")) is kept
    if not kept:
        assert len(found) == 16 and found != requests.request_id([])


def test_configure_writes_json_lines_to_the_stream() -> None:
    stream = io.StringIO()
    root = logging.getLogger()
    before = root.handlers[:], root.level
    root.handlers = []
    try:
        logs.configure("info", "json", stream)
        logging.getLogger("baton.test").info("hello %s", TOKEN)
    finally:
        root.handlers, _ = before
        root.setLevel(before[1])
        logging.captureWarnings(False)
    parsed = json.loads(stream.getvalue())
    assert parsed["message"] == "hello baton_A1b2C3…"


async def test_no_token_or_secret_reaches_the_log_or_the_traces_and_each_request_has_its_line(
    observed: Observed, receiver: Receiver
) -> None:
    owner = f"lg{secrets.token_hex(4)}"
    token = await observed.token(Principal(PrincipalKind.OWNER, owner))
    admin = await observed.token(ADMIN)
    wrong = "baton_" + secrets.token_urlsafe(32)  # a token's shape, but no token
    asked = f"mine-{secrets.token_hex(4)}"
    async with httpx.AsyncClient(base_url=observed.url, timeout=30) as http:
        answer = await http.post(
            "/graphql",
            json={"query": "query WhoAmI { viewer { handle } }"},
            headers={"authorization": f"Bearer {token}", "x-request-id": asked},
        )
        assert answer.headers["x-request-id"] == asked
        refused = await http.post(
            "/graphql", json={"query": "{ viewer { handle } }"}, headers={"authorization": wrong}
        )
        assert refused.status_code == 401 and len(refused.headers["x-request-id"]) == 16
        await http.get("/metrics", headers={"authorization": f"Bearer {admin}"})
        await http.get("/metrics", headers={"authorization": f"Bearer {wrong}"})
    created = await create_endpoint(observed, token, receiver.at("/logged"))
    endpoint = created["endpoint"]["id"]
    rotate = """mutation($id: ID!) { rotateWebhookSecret(input: {id: $id, graceSeconds: 60}) {
      ... on WebhookSecretSuccess { secret } ... on Error { code message } } }"""
    rotated = (await graphql(observed, token, rotate, {"id": endpoint}))["rotateWebhookSecret"]
    async with http_client(observed.url, token, mode="legacy") as client:
        task = await handed_off(client, f"{owner}/a", f"{owner}/b")
    socket = await WSClient.open(observed.url, token, TRANSPORT_WS)
    await socket.close()
    query = "subscription($id: ID!) { taskUpdated(id: $id) { id state } }"
    async with subscribe(observed.url, token, query, {"id": task["id"]}) as stream:
        assert await stream.message() is not None
    # Signed with both secrets: the delivery worker held them both.
    await receiver.wait_for("/logged", 2)

    def lines() -> list[dict[str, Any]]:
        return [json.loads(line) for line in observed.log.read_text().splitlines()]

    def theirs(written: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [line for line in written if line.get("principal") == owner]

    def written_all(found: list[dict[str, Any]]) -> bool:
        return any(line.get("operation") == "subscription" for line in found) and any(
            "delivered" in line["message"] for line in found
        )

    # A stream's line is written as the server ends it, a delivery's once its answer is in:
    # maybe after the client has moved on.
    for _ in range(150):
        if written_all(theirs(lines())):
            break
        await asyncio.sleep(0.1)
    await observed.spans.wait(
        lambda spans: any(
            s.name == "webhook delivery" and s.attributes.get("enduser.id") == owner for s in spans
        )
    )
    text = observed.log.read_text()
    exported = b"".join(observed.spans.bodies)
    for secret in (token, admin, wrong, created["secret"], rotated["secret"]):
        # Nor what follows the prefix `baton token list` shows.
        for part in (secret, secret[12:]):
            assert part not in text
            assert part.encode() not in exported
    written = lines()  # every line is one JSON object
    access = [line for line in written if line["logger"] == "baton.access"]
    mine = [line for line in access if line.get("request_id") == asked]
    assert len(mine) == 1
    assert mine[0]["principal"] == owner and mine[0]["operation"] == "WhoAmI"
    assert mine[0]["status"] == 200 and mine[0]["path"] == "/graphql"
    assert isinstance(mine[0]["duration_ms"], float)
    own = theirs(access)
    assert any(line["path"] == "/mcp" and line.get("operation") == "handOff" for line in own), (
        "an MCP call's line names its tool"
    )
    assert any(line["method"] == "WS" and line["path"] == "/graphql" for line in own)
    assert any(line.get("operation") == "subscription" for line in own)  # the SSE stream
    # A delivery's lines name it, and the endpoint's owner; never its URL (which may hold a
    # secret of the receiver's).
    deliveries = [line for line in written if line.get("operation") == "webhook delivery"]
    assert deliveries and all(line["principal"] == owner for line in deliveries)
    assert any("delivered" in str(line["message"]) for line in deliveries)
    assert "/logged" not in text
