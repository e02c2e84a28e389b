"""Every error type a tool answers reads over MCP as the same call's error over GraphQL: the
same type name, code, message and fields, field for field, for each type there is."""

from __future__ import annotations

import secrets
from typing import Any

import httpx
from graphql import GraphQLInterfaceType, GraphQLUnionType, get_named_type

from baton import errors
from baton.access.principals import Principal, PrincipalKind
from baton.api.schema import schema
from baton.mcp import sessions  # noqa: F401  (its errors are subclasses too: counted below)
from tests.conftest import LiveServer
from tests.helpers import PACKET_INPUT
from tests.mcp.conftest import http_client, ok, refused


def _named_types() -> set[str]:
    """The error type every expected failure names (`BatonError.type_name`)."""
    found: set[str] = set()
    pending: list[type[errors.BatonError]] = [errors.BatonError]
    while pending:
        cls = pending.pop()
        pending.extend(cls.__subclasses__())
        if cls.type_name is not None:
            found.add(cls.type_name)
    return found


def _selection(mutation: str) -> str:
    """Every field of every error type the mutation's result union holds, read from the
    schema."""
    root = schema._schema.mutation_type
    assert root is not None
    union = get_named_type(root.fields[mutation].type)
    assert isinstance(union, GraphQLUnionType)
    interface = schema._schema.get_type("Error")
    parts = ["__typename ... on Error { code message }"]
    for kind in union.types:
        own = [name for name in kind.fields if name not in ("code", "message")]
        if own and interface in kind.interfaces:
            parts.append(f"... on {kind.name} {{ {' '.join(own)} }}")
    return " ".join(parts)


async def _over_graphql(
    server: LiveServer, token: str, tool: str, arguments: dict[str, Any]
) -> dict[str, Any]:
    kind = tool[0].upper() + tool[1:] + "Input"
    query = f"mutation($input: {kind}!) {{ {tool}(input: $input) {{ {_selection(tool)} }} }}"
    async with httpx.AsyncClient(base_url=server.url) as client:
        answer = await client.post(
            "/graphql",
            json={"query": query, "variables": {"input": arguments}},
            headers={"Authorization": f"Bearer {token}"},
        )
    body = answer.json()
    assert "errors" not in body, body
    found: dict[str, Any] = body["data"][tool]
    return {"type": found.pop("__typename"), **found}


def test_every_error_type_the_api_declares_is_named_by_a_domain_error() -> None:
    interface = schema._schema.get_type("Error")
    assert isinstance(interface, GraphQLInterfaceType)
    declared = {kind.name for kind in schema._schema.get_possible_types(interface)}
    assert declared == _named_types()


async def test_every_error_type_reads_over_mcp_as_graphql_returns_it(
    live_server: LiveServer,
) -> None:
    tag = secrets.token_hex(4)
    requester, assignee = f"r{tag}/r", f"a{tag}/a"
    tokens = {
        who: await live_server.token(p)
        for who, p in {
            "requester": Principal(PrincipalKind.AGENT, requester),
            "assignee": Principal(PrincipalKind.AGENT, assignee),
            "owner": Principal(PrincipalKind.OWNER, f"a{tag}"),
            "runner": Principal(PrincipalKind.AGENT, f"a{tag}/runner"),
        }.items()
    }
    hand_off = {"project": "web", "requester": requester, "assignee": assignee}
    cases: list[tuple[str, str, dict[str, Any]]] = []
    async with http_client(live_server.url, tokens["requester"]) as client:
        task = ok(await client.call_tool("handOff", {**hand_off, "packet": PACKET_INPUT}))["task"]
        assert task["state"] == "waiting"  # on the assignee's owner
        ok(await client.call_tool("handOff", {**hand_off, "packet": PACKET_INPUT, "id": tag}))
    cases += [
        ("requester", "acceptTask", {"id": f"r{tag}_missing"}),  # NotFoundError
        ("requester", "approveTask", {"id": task["id"]}),  # ForbiddenError
        ("assignee", "acceptTask", {"id": task["id"]}),  # InvalidStateError
        ("owner", "approveTask", {"id": task["id"], "expectedVersion": 99}),  # VersionConflict
        ("requester", "handOff", {**hand_off, "packet": {**PACKET_INPUT, "task": " "}}),
        (
            "requester",
            "handOff",
            {**hand_off, "packet": {**PACKET_INPUT, "task": "Other"}, "id": tag},
        ),  # DuplicateTaskError
    ]
    async with http_client(live_server.url, tokens["runner"]) as client:
        run = ok(await client.call_tool("createRun", {"project": "web", "title": "R"}))["run"]
        ok(await client.call_tool("claimRun", {"id": run["id"]}))
    cases += [
        ("runner", "openPullRequest", {"id": run["id"], "url": "https://example.com/pull/1"}),
        ("runner", "runHeartbeat", {"id": run["id"], "leaseId": "l" + "0" * 24}),  # LeaseLost
    ]

    seen: set[str] = set()
    for who, tool, arguments in cases:
        async with http_client(live_server.url, tokens[who]) as client:
            over_mcp = refused(await client.call_tool(tool, arguments))
        over_graphql = await _over_graphql(live_server, tokens[who], tool, arguments)
        assert over_mcp == over_graphql, (tool, arguments)
        seen.add(over_mcp["type"])
    assert seen == _named_types()
