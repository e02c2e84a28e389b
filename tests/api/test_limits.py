"""Request limits and hostile input against a real `baton serve`, over HTTP.

Query depth (12), aliases (20) and tokens (5,000) are refused before execution; bodies over
1 MiB are refused with 413 before the app reads them. Each limit is shown from both sides: a
mutation just inside it writes, the same mutation just past it writes nothing. A sweep of hostile
requests then checks that nothing makes the server answer 500 or an uncoded error.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from graphql.language import Lexer, Source, TokenKind

from baton.access.principals import ADMIN
from baton.engine.limits import DEFAULT_LIMITS
from baton.settings import Settings
from tests.conftest import LiveServer
from tests.helpers import owner

MAX_BODY = Settings.max_body_bytes  # the default; `baton serve` under test does not change it
MAX_DEPTH = DEFAULT_LIMITS.max_depth
MAX_ALIASES = DEFAULT_LIMITS.max_aliases
MAX_TOKENS = DEFAULT_LIMITS.max_tokens


@pytest.fixture
async def client(live_server: LiveServer) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=live_server.url, timeout=30) as client:
        yield client


@pytest.fixture
async def admin(live_server: LiveServer) -> dict[str, str]:
    return {"Authorization": f"Bearer {await live_server.token(ADMIN)}"}


@pytest.fixture
async def gate_owner(live_server: LiveServer) -> dict[str, str]:
    """The auth header of an owner unique to the test; writes here are its gate rules."""
    handle = f"lim{secrets.token_hex(4)}"
    return {"Authorization": f"Bearer {await live_server.token(owner(handle))}"}


async def graphql(
    client: httpx.AsyncClient,
    headers: dict[str, str],
    query: str,
    variables: dict[str, Any] | None = None,
) -> dict[str, Any]:
    response = await client.post(
        "/graphql", json={"query": query, "variables": variables}, headers=headers
    )
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


async def rule_count(client: httpx.AsyncClient, headers: dict[str, str]) -> int:
    body = await graphql(client, headers, "{ gateRules { id } }")
    return len(body["data"]["gateRules"])


async def task_exists(client: httpx.AsyncClient, admin: dict[str, str], task_id: str) -> bool:
    body = await graphql(client, admin, "query($id: ID!) { task(id: $id) { id } }", {"id": task_id})
    return body["data"]["task"] is not None


def assert_refused(body: dict[str, Any]) -> None:
    """Refused before execution: errors, each with a code, and no data."""
    assert "data" not in body, body
    assert body["errors"], body
    assert all(e["extensions"]["code"] == "invalid_input" for e in body["errors"]), body


def set_rule(alias: str = "", *, types: list[str] | None = None) -> str:
    deliverable_types = " ".join(types or [])
    prefix = f"{alias}: " if alias else ""
    return (
        f"{prefix}setGateRule(input: {{decision: DENY, deliverableTypes: [{deliverable_types}]}})"
        " { __typename }"
    )


# --- depth -----------------------------------------------------------------------------------


def hand_off_of_depth(depth: int, task_id: str) -> str:
    """A `handOff` whose deepest field is `depth` levels below the root field.

    Depth as Strawberry's limiter counts it: root fields are at 0, every nested selection set adds
    one, inline fragments add nothing. `handOff` (0) > `task` (1) > `dependents` … > `id`
    (`first: 1` keeps the cost tiny: only the depth is tested).
    """
    assert depth >= 2
    selection = "dependents(first: 1) { " * (depth - 2) + "id" + " }" * (depth - 2)
    return f"""
    mutation {{
      handOff(input: {{
        id: "{task_id}", project: "limits", requester: "lim/r", assignee: "lim/a",
        packet: {{task: "t", deliverableType: doc, acceptanceCriteria: ["a"]}}
      }}) {{ ... on HandOffSuccess {{ task {{ {selection} }} }} }}
    }}
    """


async def test_a_mutation_at_the_depth_limit_runs(
    client: httpx.AsyncClient, admin: dict[str, str]
) -> None:
    task_id = f"depth-{secrets.token_hex(4)}"
    body = await graphql(client, admin, hand_off_of_depth(MAX_DEPTH, task_id))
    assert "errors" not in body, body
    assert await task_exists(client, admin, f"lim_{task_id}")


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 40])
async def test_a_mutation_past_the_depth_limit_is_refused_and_writes_nothing(
    client: httpx.AsyncClient, admin: dict[str, str], depth: int
) -> None:
    task_id = f"depth-{secrets.token_hex(4)}"
    body = await graphql(client, admin, hand_off_of_depth(depth, task_id))
    assert_refused(body)
    assert "depth" in body["errors"][0]["message"]
    assert not await task_exists(client, admin, f"lim_{task_id}")


async def test_a_query_past_the_depth_limit_is_refused(
    client: httpx.AsyncClient, admin: dict[str, str]
) -> None:
    def tasks_of_depth(depth: int) -> str:
        nested = "dependents(first: 1) { " * (depth - 3) + "id" + " }" * (depth - 3)
        return "{ tasks { edges { node { " + nested + " } } } }"

    assert "errors" not in await graphql(client, admin, tasks_of_depth(MAX_DEPTH))
    assert_refused(await graphql(client, admin, tasks_of_depth(MAX_DEPTH + 1)))


async def test_a_page_over_one_hundred_is_refused_with_no_data(
    client: httpx.AsyncClient, admin: dict[str, str]
) -> None:
    assert "errors" not in await graphql(client, admin, "{ tasks(first: 100) { totalCount } }")
    assert_refused(await graphql(client, admin, "{ tasks(first: 101) { totalCount } }"))


# --- aliases ---------------------------------------------------------------------------------


async def test_a_mutation_with_the_most_aliases_allowed_runs(
    client: httpx.AsyncClient, gate_owner: dict[str, str]
) -> None:
    headers = gate_owner
    fields = " ".join(set_rule(f"r{i}") for i in range(MAX_ALIASES))
    body = await graphql(client, headers, f"mutation {{ {fields} }}")
    assert "errors" not in body, body
    assert await rule_count(client, headers) == MAX_ALIASES


async def test_a_mutation_with_one_alias_too_many_is_refused_and_writes_nothing(
    client: httpx.AsyncClient, gate_owner: dict[str, str]
) -> None:
    headers = gate_owner
    fields = " ".join(set_rule(f"r{i}") for i in range(MAX_ALIASES + 1))
    body = await graphql(client, headers, f"mutation {{ {fields} }}")
    assert_refused(body)
    assert await rule_count(client, headers) == 0


# --- tokens ----------------------------------------------------------------------------------


def token_count(document: str) -> int:
    lexer = Lexer(Source(document))
    count = 0
    while lexer.advance().kind is not TokenKind.EOF:
        count += 1
    return count


def set_rule_of_tokens(tokens: int) -> str:
    """A `setGateRule` mutation of exactly `tokens` lexical tokens (padded with enum values)."""
    bare = f"mutation {{ {set_rule()} }}"
    padding = tokens - token_count(bare)
    document = f"mutation {{ {set_rule(types=['code'] * padding)} }}"
    assert token_count(document) == tokens
    return document


async def test_a_mutation_of_the_most_tokens_allowed_runs(
    client: httpx.AsyncClient, gate_owner: dict[str, str]
) -> None:
    headers = gate_owner
    body = await graphql(client, headers, set_rule_of_tokens(MAX_TOKENS))
    assert "errors" not in body, body
    assert await rule_count(client, headers) == 1


@pytest.mark.parametrize("tokens", [MAX_TOKENS + 1, 50_000])
async def test_a_mutation_of_too_many_tokens_is_refused_and_writes_nothing(
    client: httpx.AsyncClient, gate_owner: dict[str, str], tokens: int
) -> None:
    headers = gate_owner
    body = await graphql(client, headers, set_rule_of_tokens(tokens))
    assert_refused(body)
    assert "tokens" in body["errors"][0]["message"]
    assert await rule_count(client, headers) == 0


# --- body size -------------------------------------------------------------------------------


def padded_body(size: int) -> bytes:
    """A valid `setGateRule` request of exactly `size` bytes (padding in `extensions`)."""
    request: dict[str, Any] = {"query": f"mutation {{ {set_rule()} }}", "extensions": {"pad": ""}}
    bare = len(json.dumps(request).encode())
    request["extensions"]["pad"] = "x" * (size - bare)
    body = json.dumps(request).encode()
    assert len(body) == size
    return body


def json_headers(headers: dict[str, str]) -> dict[str, str]:
    return {**headers, "Content-Type": "application/json"}


async def test_a_body_of_exactly_one_mebibyte_is_served(
    client: httpx.AsyncClient, gate_owner: dict[str, str]
) -> None:
    headers = gate_owner
    response = await client.post(
        "/graphql", content=padded_body(MAX_BODY), headers=json_headers(headers)
    )
    assert response.status_code == 200, response.text
    assert await rule_count(client, headers) == 1


async def test_a_body_over_one_mebibyte_is_413_and_writes_nothing(
    client: httpx.AsyncClient, gate_owner: dict[str, str]
) -> None:
    headers = gate_owner
    response = await client.post(
        "/graphql", content=padded_body(MAX_BODY + 1), headers=json_headers(headers)
    )
    assert response.status_code == 413
    assert response.json()["errors"][0]["extensions"]["code"] == "payload_too_large"
    assert await rule_count(client, headers) == 0


async def test_a_chunked_body_over_one_mebibyte_is_413_and_writes_nothing(
    client: httpx.AsyncClient, gate_owner: dict[str, str]
) -> None:
    """With no Content-Length to refuse up front, the limit holds while the body streams in."""
    headers = gate_owner
    body = padded_body(2 * MAX_BODY)

    async def chunks() -> AsyncIterator[bytes]:
        for start in range(0, len(body), 64 * 1024):
            yield body[start : start + 64 * 1024]

    response = await client.post("/graphql", content=chunks(), headers=json_headers(headers))
    assert "content-length" not in response.request.headers
    assert response.status_code == 413
    assert await rule_count(client, headers) == 0


# --- malformed requests ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "query",
    ["{ viewer { handle ", "{ viewer { handle } } }", "query {", "{ viewer(: 1) { handle } }"],
)
async def test_a_syntax_error_is_an_invalid_input_error(
    client: httpx.AsyncClient, admin: dict[str, str], query: str
) -> None:
    response = await client.post("/graphql", json={"query": query}, headers=admin)
    assert response.status_code in (200, 400)
    body = response.json()
    assert_refused(body)
    assert "Syntax Error" in body["errors"][0]["message"]


@pytest.mark.parametrize(
    ("content", "content_type"),
    [
        (b"{not json", "application/json"),
        (b"", "application/json"),
        pytest.param(b"\xff\xfe\x00", "application/json"),
        pytest.param(b'{"query": "\xff"}', "application/json"),
        (b'{"query": "{ viewer { handle } }"', "application/json"),
        (b"[]", "application/json"),
        (b'{"query": 5}', "application/json"),
        (b'{"query": "{ viewer { handle } }", "variables": [1]}', "application/json"),
        (b'{"query": "{ viewer { handle } }"}', "text/plain"),
        (b"query={viewer{handle}}", "application/x-www-form-urlencoded"),
        (b'{"query": "{ viewer { handle } }"}', "application/xml"),
        (b"--x\r\n\r\n--x--", "multipart/form-data; boundary=x"),
    ],
)
async def test_a_malformed_body_or_wrong_content_type_is_a_4xx(
    client: httpx.AsyncClient, admin: dict[str, str], content: bytes, content_type: str
) -> None:
    response = await client.post(
        "/graphql", content=content, headers={**admin, "Content-Type": content_type}
    )
    assert 400 <= response.status_code < 500, (response.status_code, response.text)


# --- the no-500 sweep ------------------------------------------------------------------------


@dataclass(frozen=True)
class Hostile:
    query: str | None = None
    variables: Any = None
    raw: bytes | None = None  # a body sent as is, instead of query and variables
    method: str = "POST"
    extra_headers: dict[str, str] = field(default_factory=dict)

    def request(self, headers: dict[str, str]) -> dict[str, Any]:
        if self.method == "GET":
            params = {"query": self.query or ""}
            if self.variables is not None:
                params["variables"] = json.dumps(self.variables)
            return {"method": "GET", "url": "/graphql", "params": params, "headers": headers}
        if self.raw is not None:
            content = self.raw
        else:
            content = json.dumps({"query": self.query, "variables": self.variables}).encode()
        return {
            "method": self.method,
            "url": "/graphql",
            "content": content,
            "headers": {**headers, "Content-Type": "application/json", **self.extra_headers},
        }


TASKS_FIRST = "query($n: Int) { tasks(first: $n) { totalCount } }"
TASKS_FILTER = "query($f: TaskFilter) { tasks(filter: $f) { totalCount } }"
TASK_BY_ID = "query($id: ID!) { task(id: $id) { id } }"
HAND_OFF = """
mutation($input: HandOffInput!) { handOff(input: $input) { __typename ... on Error { code } } }
"""
EVENTS_AFTER = """
query($after: String) {
  tasks(first: 1) { edges { node { events(after: $after) { edges { cursor } } } } }
}
"""
VALID_HAND_OFF: dict[str, Any] = {
    "project": "sweep",
    "requester": "sweep/r",
    "assignee": "sweep/a",
    "packet": {"task": "t", "deliverableType": "doc", "acceptanceCriteria": ["a"]},
}


def nested_list(depth: int) -> Any:
    value: Any = "routed"
    for _ in range(depth):
        value = [value]
    return value


def nested_object(depth: int) -> Any:
    value: Any = "x"
    for _ in range(depth):
        value = {"project": value}
    return value


SWEEP = {
    # numbers
    "first literal beyond Int": Hostile("{ tasks(first: 99999999999) { totalCount } }"),
    "first negative": Hostile("{ tasks(first: -1) { totalCount } }"),
    "first variable 2**70": Hostile(TASKS_FIRST, {"n": 2**70}),
    "first variable a string": Hostile(TASKS_FIRST, {"n": "ten"}),
    "first variable a float": Hostile(TASKS_FIRST, {"n": 1.5}),
    "first variable a huge float": Hostile(
        None, raw=b'{"query": "' + TASKS_FIRST.encode() + b'", "variables": {"n": 1e400}}'
    ),
    "expectedVersion beyond Int": Hostile(
        'mutation { acceptTask(input: {id: "x", expectedVersion: 2147483648}) { __typename } }'
    ),
    "graph depth out of range": Hostile('{ taskGraph(ids: ["x"], depth: 100000) { unresolved } }'),
    "event cursor of 20 digits": Hostile(EVENTS_AFTER, {"after": "9" * 20}),
    "event cursor beyond bigint": pytest.param(Hostile(EVENTS_AFTER, {"after": "9" * 19})),
    "event cursor beyond bigint after zeros": Hostile(EVENTS_AFTER, {"after": "0" * 24 + "9" * 30}),
    "event cursor of 5,000 digits": Hostile(EVENTS_AFTER, {"after": "9" * 5000}),
    "event cursor in Arabic-Indic digits": Hostile(EVENTS_AFTER, {"after": "\u0661\u0662"}),
    "gate rule id a superscript": Hostile(
        'mutation { deleteGateRule(input: {id: "\u00b2"}) { __typename } }'
    ),
    "gate rule id in Arabic-Indic digits": Hostile(
        'mutation { deleteGateRule(input: {id: "\u0661"}) { __typename } }'
    ),
    "a filter list of 40,000 values": Hostile(TASKS_FILTER, {"f": {"states": ["routed"] * 40_000}}),
    "taskGraph of 40,000 ids": Hostile(
        "query($ids: [ID!]!) { taskGraph(ids: $ids) { truncated } }", {"ids": ["x"] * 40_000}
    ),
    # wrong shapes and types
    "input as a list": Hostile(HAND_OFF, {"input": [VALID_HAND_OFF]}),
    "input missing": Hostile(HAND_OFF, {}),
    "id as an object": Hostile(TASK_BY_ID, {"id": {"a": 1}}),
    "deeply nested list variable": Hostile(TASKS_FILTER, {"f": {"states": nested_list(500)}}),
    "deeply nested object variable": Hostile(TASKS_FILTER, {"f": nested_object(500)}),
    "unknown variable type": Hostile("query($x: Nope) { viewer { handle } }", {"x": 1}),
    "unknown argument": Hostile("{ tasks(last: 5) { totalCount } }"),
    "fragment cycle": Hostile("query { ...A } fragment A on Query { ...A }"),
    "unknown directive": Hostile("{ viewer @nope { handle } }"),
    "subscription over HTTP": pytest.param(Hostile('subscription { taskUpdated(id: "x") { id } }')),
    "mutation over GET": Hostile(
        'mutation { deleteGateRule(input: {id: "1"}) { __typename } }', method="GET"
    ),
    "updatedAfter not a date": Hostile(TASKS_FILTER, {"f": {"updatedAfter": "yesterday"}}),
    "updatedAfter out of range": pytest.param(
        Hostile(TASKS_FILTER, {"f": {"updatedAfter": "0001-01-01T00:00:00+14:00"}})
    ),
    "operation name unknown": Hostile(
        None, raw=b'{"query": "{ viewer { handle } }", "operationName": "Nope"}'
    ),
    # strings
    "NUL in the document": pytest.param(Hostile('{ task(id: "a\x00b") { id } }')),
    "NUL outside any string": Hostile("{ viewer { handle } }\x00"),
    "NUL in an id": pytest.param(Hostile(TASK_BY_ID, {"id": "a\x00b"})),
    "NUL in a packet": pytest.param(
        Hostile(
            HAND_OFF,
            {"input": {**VALID_HAND_OFF, "packet": {**VALID_HAND_OFF["packet"], "task": "a\x00"}}},
        )
    ),
    "lone surrogate in a filter": pytest.param(
        Hostile(
            None,
            raw=b'{"query": "'
            + TASKS_FILTER.encode()
            + b'", "variables": {"f": {"project": "\\ud800"}}}',
        )
    ),
    "emoji and bidi controls": Hostile(TASKS_FILTER, {"f": {"project": "\U0001f600\u202e\u2066"}}),
    "a 500 kB id": Hostile(TASK_BY_ID, {"id": "x" * 500_000}),
    "a 500 kB packet task": Hostile(
        HAND_OFF,
        {
            "input": {
                **VALID_HAND_OFF,
                "packet": {**VALID_HAND_OFF["packet"], "task": "x" * 500_000},
            }
        },
    ),
    "a forged task cursor": Hostile('{ tasks(after: "AAAA") { totalCount } }'),
    # bodies
    "body a JSON string": pytest.param(Hostile(raw=b'"{ viewer { handle } }"')),
    "body JSON null": pytest.param(Hostile(raw=b"null")),
    "body a JSON number": pytest.param(Hostile(raw=b"1e999")),
    "body deeply nested JSON": pytest.param(
        Hostile(
            raw=b'{"query": "{ viewer { handle } }", "variables": {"x": '
            + b"[" * 5000
            + b"]" * 5000
            + b"}}"
        )
    ),
    "batch of operations": Hostile(raw=b'[{"query": "{ viewer { handle } }"}]'),
    "PUT": Hostile("{ viewer { handle } }", method="PUT"),
}


@pytest.fixture(scope="module")
async def a_task(live_server: LiveServer) -> None:
    """At least one task, so that the event-cursor requests reach `Task.events`."""
    headers = {"Authorization": f"Bearer {await live_server.token(ADMIN)}"}
    async with httpx.AsyncClient(base_url=live_server.url) as client:
        body = await graphql(client, headers, HAND_OFF, {"input": VALID_HAND_OFF})
    assert body["data"]["handOff"]["__typename"] == "HandOffSuccess", body


@pytest.mark.usefixtures("a_task")
@pytest.mark.parametrize("hostile", list(SWEEP.values()), ids=list(SWEEP))
async def test_no_hostile_request_gets_a_500_or_an_uncoded_error(
    client: httpx.AsyncClient, admin: dict[str, str], hostile: Hostile
) -> None:
    response = await client.request(**hostile.request(admin))

    assert response.status_code < 500, response.text
    if response.headers.get("content-type", "").startswith("application/json"):
        errors = response.json().get("errors") or []
        codes = [e.get("extensions", {}).get("code") for e in errors]
        assert None not in codes, response.text
        assert "internal" not in codes, response.text
    # The server is still serving.
    alive = await graphql(client, admin, "{ viewer { handle } }")
    assert alive == {"data": {"viewer": {"handle": "admin"}}}
