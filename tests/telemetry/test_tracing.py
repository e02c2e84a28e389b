"""Traces as an operator's collector receives them, from a real `baton serve` over OTLP/HTTP:
each request is one trace (the ASGI server span, Baton's spans and asyncpg's statements nested
under it), whichever door it came through, and a webhook delivery is a trace of its own."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import textwrap

import httpx

from baton.access.principals import Principal, PrincipalKind
from tests.helpers import PACKET_INPUT
from tests.live.client import TRANSPORT_WS, WSClient, move_mutation
from tests.mcp.conftest import handed_off, http_client
from tests.sse.client import subscribe
from tests.telemetry.conftest import Observed
from tests.telemetry.otlp import CLIENT, SERVER, Span, ancestors
from tests.webhooks.conftest import Receiver, create_endpoint

HAND_OFF = """
mutation HandOffForTheTrace($in: HandOffInput!) {  # %s
  handOff(input: $in) {
    ... on HandOffSuccess { task { id state } }
    ... on Error { code message }
  }
}
"""


def _owner() -> str:
    return f"tr{secrets.token_hex(4)}"


def _statements(spans: list[Span]) -> list[Span]:
    return [s for s in spans if s.attributes.get("db.system") == "postgresql"]


def _one(spans: list[Span], name: str) -> Span:
    found = [s for s in spans if s.name == name]
    assert len(found) == 1, (name, [s.name for s in spans])
    return found[0]


async def _hand_off(server: Observed, token: str, agent: str, **headers: str) -> httpx.Response:
    # A document no request sent before (its comment), so it is parsed and validated now.
    query = HAND_OFF % secrets.token_hex(8)
    variables = {
        "in": {"project": "web", "requester": agent, "assignee": agent, "packet": PACKET_INPUT}
    }
    async with httpx.AsyncClient(timeout=30) as http:
        response = await http.post(
            server.graphql,
            json={"query": query, "variables": variables},
            headers={"authorization": f"Bearer {token}", **headers},
        )
    assert response.status_code == 200 and "task" in response.json()["data"]["handOff"]
    return response


async def _server_span(server: Observed, request_id: str) -> Span:
    def found(spans: list[Span]) -> Span | None:
        for span in spans:
            if span.kind == SERVER and span.attributes.get("baton.request_id") == request_id:
                return span
        return None

    span: Span = await server.spans.wait(found)
    return span


async def test_a_graphql_mutation_is_one_trace_with_baton_and_statement_spans_nested(
    observed: Observed,
) -> None:
    agent = f"{_owner()}/agent"
    token = await observed.token(Principal(PrincipalKind.AGENT, agent))
    response = await _hand_off(observed, token, agent)
    root = await _server_span(observed, response.headers["x-request-id"])

    assert root.parent_id == "" and root.name == "POST /graphql"
    assert root.attributes["enduser.id"] == agent  # the principal's name
    trace = observed.spans.trace(root.trace_id)
    parse, validate = _one(trace, "graphql.parse"), _one(trace, "graphql.validate")
    execute = _one(trace, "graphql.execute")
    assert parse.parent_id == validate.parent_id == execute.parent_id == root.span_id
    assert execute.attributes["graphql.operation.type"] == "mutation"
    assert execute.attributes["graphql.operation.name"] == "HandOffForTheTrace"
    gate, move = _one(trace, "baton.gate"), _one(trace, "baton.move")
    assert gate.parent_id == move.parent_id == execute.span_id
    assert gate.attributes["baton.gate.decision"] == "ALLOW"  # one owner's agents
    assert move.attributes["baton.move"] == "HAND_OFF"
    # The gate reads its rules and the move writes the task: asyncpg's spans, under them.
    under = {s.parent_id for s in _statements(trace) if s.kind == CLIENT}
    assert gate.span_id in under and move.span_id in under
    assert all(s.resource["service.name"] == "baton" for s in trace)


async def test_a_clients_trace_context_is_continued(observed: Observed) -> None:
    agent = f"{_owner()}/agent"
    token = await observed.token(Principal(PrincipalKind.AGENT, agent))
    trace_id, parent = secrets.token_hex(16), secrets.token_hex(8)
    response = await _hand_off(observed, token, agent, traceparent=f"00-{trace_id}-{parent}-01")
    root = await _server_span(observed, response.headers["x-request-id"])
    assert (root.trace_id, root.parent_id) == (trace_id, parent)


async def test_an_mcp_call_in_a_session_is_a_trace_of_its_own_request(observed: Observed) -> None:
    owner = _owner()
    token = await observed.token(Principal(PrincipalKind.OWNER, owner))
    # The handshake era: a session, whose handlers the SDK runs in the session's own task,
    # begun by another request (`initialize`).
    async with http_client(observed.url, token, mode="legacy") as client:
        task = await handed_off(client, f"{owner}/a", f"{owner}/b")

    def found(spans: list[Span]) -> list[Span] | None:
        moves = [
            s
            for s in spans
            if s.name == "baton.move" and s.attributes["baton.task.id"] == task["id"]
        ]
        if not moves:
            return None
        chain = ancestors(moves[0], spans)
        return [moves[0], *chain] if chain and chain[-1].parent_id == "" else None

    move, *chain = await observed.spans.wait(found)
    root = chain[-1]
    assert root.kind == SERVER and root.name == "POST /mcp"
    assert "tools/call handOff" in [s.name for s in chain]  # the SDK's own span, between
    assert {s.trace_id for s in [move, *chain]} == {root.trace_id}
    initialize = [s for s in observed.spans.snapshot() if s.name == "initialize"]
    assert initialize and root.trace_id not in {s.trace_id for s in initialize}


async def test_operations_over_a_websocket_and_an_event_stream_are_under_their_request(
    observed: Observed,
) -> None:
    owner = _owner()
    token = await observed.token(Principal(PrincipalKind.OWNER, owner))
    response = await _hand_off(observed, token, f"{owner}/a")
    task_id = response.json()["data"]["handOff"]["task"]["id"]
    client = await WSClient.open(observed.url, token, TRANSPORT_WS)
    try:
        await client.subscribe(move_mutation("cancelTask", ', reason: "traced"'), {"id": task_id})
        answer = await client.next()
        assert answer is not None and answer["cancelTask"]["task"]["state"] == "cancelled"
    finally:
        await client.close()
    stream_id = f"sse-{secrets.token_hex(6)}"
    query = "subscription Follow($id: ID!) { taskUpdated(id: $id) { id state } }"
    async with subscribe(
        observed.url, token, query, {"id": task_id}, headers={"X-Request-Id": stream_id}
    ) as stream:
        assert await stream.message() is not None

    def cancelled(spans: list[Span]) -> list[Span] | None:
        for span in spans:
            if (
                span.attributes.get("baton.task.id") == task_id
                and span.attributes.get("baton.move") == "CANCEL"
            ):
                chain = ancestors(span, spans)
                if chain and chain[-1].parent_id == "":
                    return chain
        return None

    chain = await observed.spans.wait(cancelled)
    assert chain[-1].kind == SERVER and chain[-1].name == "WS /graphql"  # the WebSocket's span
    assert "graphql.execute" in [s.name for s in chain]
    sse = await _server_span(observed, stream_id)
    assert sse.name == "POST /graphql" and sse.attributes["enduser.id"] == owner
    # The subscription read the task for its first answer: a statement of the stream's trace.
    assert _statements(observed.spans.trace(sse.trace_id))


async def test_a_webhook_delivery_is_a_trace_of_its_own_naming_no_url_path(
    observed: Observed, receiver: Receiver
) -> None:
    owner = _owner()
    token = await observed.token(Principal(PrincipalKind.OWNER, owner))
    hidden = secrets.token_hex(12)  # what a receiver might hide in its URL
    await create_endpoint(observed, token, receiver.at(f"/hooks/{hidden}"))
    await _hand_off(observed, token, f"{owner}/a")
    await receiver.wait_for(f"/hooks/{hidden}", 1)

    def found(spans: list[Span]) -> tuple[Span, list[Span]] | None:
        for span in spans:
            if span.name == "webhook delivery" and span.attributes.get("baton.request_id"):
                trace = [s for s in spans if s.trace_id == span.trace_id]
                attempts = [s for s in trace if s.name == "webhook attempt"]
                if attempts and attempts[0].attributes.get("http.response.status_code") == 200:
                    return span, trace
        return None

    delivery, trace = await observed.spans.wait(found)
    assert delivery.parent_id == ""
    # One attempt per message (a hand-off's two events), each under the delivery.
    attempts = [s for s in trace if s.name == "webhook attempt"]
    assert {a.parent_id for a in attempts} == {delivery.span_id}
    assert {a.attributes["server.address"] for a in attempts} == {"127.0.0.1"}
    assert _statements(trace), "the delivery's statements are in its trace"
    for span in trace:
        assert not any(hidden in str(value) for value in span.attributes.values()), span


async def test_statements_outside_any_request_start_no_trace(observed: Observed) -> None:
    # The hubs and the webhook worker poll every 0.2 s here: none of it is a trace.
    agent = f"{_owner()}/agent"
    token = await observed.token(Principal(PrincipalKind.AGENT, agent))
    response = await _hand_off(observed, token, agent)
    await _server_span(observed, response.headers["x-request-id"])
    roots = [s for s in observed.spans.snapshot() if s.parent_id == ""]
    assert roots
    for root in roots:
        assert root.kind == SERVER or root.name == "webhook delivery", root


def test_with_tracing_off_no_tracer_exporter_or_instrumentation_is_imported() -> None:
    # (redis-py imports the SDK's metrics module whenever it is installed, for its own
    # metrics, which stay off unless an application turns them on.)
    program = textwrap.dedent(
        """
        import sys
        from baton.app import create_app
        from baton.settings import Settings
        app = create_app(Settings(database_url="postgresql://nowhere/x"))
        assert type(app).__name__ == "Front", type(app)
        loaded = [m for m in sys.modules if m.startswith((
            "opentelemetry.sdk.trace", "opentelemetry.exporter", "opentelemetry.instrumentation",
            "baton.telemetry.tracing"))]
        print(loaded)
        """
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, env=env, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
