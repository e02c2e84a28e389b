"""The GraphQL-over-HTTP spec's MUSTs, SHOULDs and the MAYs Baton meets, against a real server.

The same checks as the `graphql-http` package's server audit (its ids in the test names), written
here so that they run without Node or network: a client asking for
`application/graphql-response+json` gets it, with 400 for a request refused before execution;
`application/json` (also for `*/*` and no Accept) answers 200 for any well-formed request.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from baton.access.principals import ADMIN
from tests.conftest import LiveServer

GQL_RESPONSE = "application/graphql-response+json"
JSON = "application/json"
QUERY = "{ __typename }"
INVALID = "{ 8f31403dfe404bccbb0e835f2629c6a7 }"
COERCE = "query CoerceMe($id: ID!) { __typename }"


@pytest.fixture
async def client(live_server: LiveServer) -> AsyncIterator[httpx.AsyncClient]:
    token = await live_server.token(ADMIN)
    async with httpx.AsyncClient(
        base_url=live_server.url, headers={"Authorization": f"Bearer {token}"}, timeout=30
    ) as client:
        yield client


@dataclass(frozen=True)
class Case:
    body: Any = None  # a JSON value, or bytes sent as they are
    accept: str | None = JSON
    content_type: str | None = JSON
    method: str = "POST"
    params: dict[str, str] = field(default_factory=dict)
    status: int | tuple[int, ...] = 200
    media_type: str | None = None  # checked when given
    has_data: bool | None = None  # checked when given


def post(body: Any, accept: str | None = JSON, **kw: Any) -> Case:
    return Case(body=body, accept=accept, **kw)


CASES = {
    # media types
    "22EB accepts graphql-response+json": post(
        {"query": QUERY}, GQL_RESPONSE, media_type=GQL_RESPONSE
    ),
    "4655 accepts application/json": post({"query": QUERY}, JSON, media_type=JSON),
    "47DE answers */* with application/json": post({"query": QUERY}, "*/*", media_type=JSON),
    "80D8 assumes application/json without Accept": post({"query": QUERY}, None, media_type=JSON),
    "BF61 accepts a utf-8 request": post(
        {"query": QUERY}, content_type="application/json; charset=utf-8"
    ),
    "78D5 assumes utf-8 when unspecified": post({"query": QUERY}),
    "2C94 03D4 accepts POST application/json": post({"query": QUERY}),
    "5A70 accepts GET": Case(method="GET", params={"query": QUERY}, content_type=None),
    "9C48 refuses a mutation on GET": Case(
        method="GET",
        params={"query": 'mutation { deleteGateRule(input: {id: "1"}) { __typename } }'},
        content_type=None,
        status=405,
    ),
    "9ABE POST without content-type is 4xx": post(
        {"query": QUERY}, content_type=None, status=(400, 415)
    ),
    "A5BF POST without a body is 400": post(b"", status=400),
    # the query parameter
    "423L missing query is 400": post({"notquery": QUERY}, status=400),
    "LKJ0 object query is 400": post({"query": {"obj": 1}}, status=400),
    "LKJ1 number query is 400": post({"query": 0}, status=400),
    "LKJ2 boolean query is 400": post({"query": False}, status=400),
    "LKJ3 array query is 400": post({"query": []}, status=400),
    "34A2 string query, graphql-response+json": post({"query": QUERY}, GQL_RESPONSE),
    "13EE string query, application/json": post({"query": QUERY}, JSON),
    # operationName
    "6C00 object operationName is 400": post({"query": QUERY, "operationName": {}}, status=400),
    "6C01 number operationName is 400": post({"query": QUERY, "operationName": 0}, status=400),
    "6C02 boolean operationName is 400": post({"query": QUERY, "operationName": False}, status=400),
    "6C03 array operationName is 400": post({"query": QUERY, "operationName": []}, status=400),
    "8161 string operationName, graphql-response+json": post(
        {"query": "query Query { __typename }", "operationName": "Query"}, GQL_RESPONSE
    ),
    "B8B3 string operationName, application/json": post(
        {"query": "query Query { __typename }", "operationName": "Query"}
    ),
    # nulls
    "94B0 null variables, graphql-response+json": post(
        {"query": QUERY, "variables": None}, GQL_RESPONSE
    ),
    "0220 null variables, application/json": post({"query": QUERY, "variables": None}),
    "94B1 null operationName, graphql-response+json": post(
        {"query": QUERY, "operationName": None}, GQL_RESPONSE
    ),
    "0221 null operationName, application/json": post({"query": QUERY, "operationName": None}),
    "94B2 null extensions, graphql-response+json": post(
        {"query": QUERY, "extensions": None}, GQL_RESPONSE
    ),
    "0222 null extensions, application/json": post({"query": QUERY, "extensions": None}),
    # variables
    "4760 string variables is 400": post({"query": QUERY, "variables": "str"}, status=400),
    "4761 number variables is 400": post({"query": QUERY, "variables": 0}, status=400),
    "4762 boolean variables is 400": post({"query": QUERY, "variables": False}, status=400),
    "4763 array variables is 400": post({"query": QUERY, "variables": []}, status=400),
    "2EA1 map variables, graphql-response+json": post(
        {
            "query": "query Type($name: String!) { __type(name: $name) { name } }",
            "variables": {"name": "sometype"},
        },
        GQL_RESPONSE,
    ),
    "28B9 map variables, application/json": post(
        {
            "query": "query Type($name: String!) { __type(name: $name) { name } }",
            "variables": {"name": "sometype"},
        }
    ),
    "D6D5 6A70 URL-encoded variables on GET": Case(
        method="GET",
        params={
            "query": "query Type($name: String!) { __type(name: $name) { name } }",
            "variables": json.dumps({"name": "sometype"}),
        },
        content_type=None,
        accept=GQL_RESPONSE,
    ),
    # extensions
    "58B0 string extensions is 400": post({"query": QUERY, "extensions": "str"}, status=400),
    "58B1 number extensions is 400": post({"query": QUERY, "extensions": 0}, status=400),
    "58B2 boolean extensions is 400": post({"query": QUERY, "extensions": False}, status=400),
    "58B3 array extensions is 400": post({"query": QUERY, "extensions": []}, status=400),
    "428F 39AA map extensions, graphql-response+json": post(
        {"query": QUERY, "extensions": {"some": "value"}}, GQL_RESPONSE
    ),
    "1B7A map extensions, application/json": post(
        {"query": QUERY, "extensions": {"some": "value"}}
    ),
    # failures
    "BCF8 malformed JSON is 400, application/json": post(b'{ "not a JSON', status=400),
    "B7N8 malformed JSON is 400, graphql-response+json": post(
        b'{ "not a JSON', GQL_RESPONSE, status=400
    ),
    "572B parse failure is 200, application/json": post({"query": "{"}, status=200),
    "FDE2 validation failure is 200, application/json": post({"query": INVALID}, status=200),
    "7B9B coercion failure is 200, application/json": post(
        {"query": COERCE, "variables": {"id": False}}, status=200
    ),
    "865D 556A D586 parse failure is 400 with no data, graphql-response+json": post(
        {"query": "{"}, GQL_RESPONSE, status=400, has_data=False, media_type=GQL_RESPONSE
    ),
    "51FE 74FF 5E5B validation failure is 400 with no data, graphql-response+json": post(
        {"query": INVALID}, GQL_RESPONSE, status=400, has_data=False
    ),
    "86EE coercion failure is 400, graphql-response+json": post(
        {"query": COERCE, "variables": {"id": False}}, GQL_RESPONSE, status=400
    ),
    "EE52 data present is 2xx, graphql-response+json": post(
        {"query": QUERY}, GQL_RESPONSE, status=200, has_data=True
    ),
}


@pytest.mark.parametrize("case", list(CASES.values()), ids=list(CASES))
async def test_graphql_over_http(client: httpx.AsyncClient, case: Case) -> None:
    headers: dict[str, str] = {}
    if case.accept is not None:
        headers["Accept"] = case.accept
    if case.content_type is not None:
        headers["Content-Type"] = case.content_type
    if case.method == "GET":
        response = await client.get("/graphql", params=case.params, headers=headers)
    else:
        raw = case.body if isinstance(case.body, bytes) else json.dumps(case.body).encode()
        response = await client.post("/graphql", content=raw, headers=headers)

    expected = case.status if isinstance(case.status, tuple) else (case.status,)
    assert response.status_code in expected, (response.status_code, response.text)
    content_type = response.headers["content-type"]
    assert "charset=utf-8" in content_type  # 82A3
    if case.media_type is not None:
        assert content_type.split(";")[0] == case.media_type
    body = response.json()
    if response.status_code == 200:
        assert "data" in body or "errors" in body
    if case.has_data is not None:
        assert ("data" in body and body["data"] is not None) is case.has_data, body


async def test_bc58_a_request_without_a_token_is_401(live_server: LiveServer) -> None:
    async with httpx.AsyncClient(base_url=live_server.url) as anonymous:
        response = await anonymous.post("/graphql", json={"query": QUERY})
    assert response.status_code in (401, 403)
