"""The tool list: generated from the tables, shown by role, answering as the API does."""

from __future__ import annotations

import secrets
from typing import Any

from jsonschema import Draft202012Validator

from baton.access.principals import ADMIN, Principal, PrincipalKind
from baton.mcp.schemas import OBJECTS
from baton.mcp.tools import TOOLS, shown
from baton.protocol.handoff import HANDOFF
from baton.protocol.params import Kind
from baton.protocol.pipeline import PIPELINE
from baton.store.runs import FENCED
from tests.conftest import LiveServer
from tests.helpers import PACKET_INPUT, RESULT_INPUT
from tests.mcp.conftest import http_client, ok, refused

KIND_TYPES = {
    Kind.TEXT: "string",
    Kind.TEXT_LIST: "array",
    Kind.URL: "string",
    Kind.OBJECT: "object",
}


def test_every_move_of_either_lifecycle_has_its_tool_with_a_matching_schema() -> None:
    for machine in (HANDOFF, PIPELINE):
        for name in machine.names():
            move = machine.named(name)[0]
            tool = TOOLS[move.mutation]
            assert (tool.lifecycle, tool.move) == (machine.name, name)
            Draft202012Validator.check_schema(tool.input_schema)
            props = tool.input_schema["properties"]
            required = set(tool.input_schema["required"])
            assert "expectedVersion" in props
            assert ("id" in required) is (move.mutation != "claimRun")
            for param in move.params:
                schema = props[param.field]
                assert (param.field in required) is param.required, (move.mutation, param)
                if param.kind is Kind.CHOICE:
                    assert schema["enum"] == [c.value for c in param.choices]
                else:
                    assert schema["type"] == KIND_TYPES[param.kind]
            expected = {"id", "expectedVersion", *(p.field for p in move.params)}
            if name in FENCED:
                expected.add("leaseId")
            if move.mutation == "claimRun":
                expected.add("project")
            assert set(props) == expected, move.mutation
    # nothing else claims to be a move
    moves = {t.move for t in TOOLS.values() if t.move is not None}
    assert moves == {*HANDOFF.names(), *PIPELINE.names()}


def test_object_inputs_are_the_seeds_schemas_camelcased() -> None:
    result = OBJECTS["result"]
    assert set(result["properties"]) == {"summary", "evidence", "provenance"}
    assert result["required"] == ["summary", "evidence"]
    assert result["properties"]["evidence"]["maxItems"] == 20
    packet = OBJECTS["packet"]
    assert packet["required"] == ["task", "deliverableType", "acceptanceCriteria"]
    assert packet["properties"]["acceptanceCriteria"]["maxItems"] == 20
    assert OBJECTS["checkpoint"]["required"] == ["progress"]
    Draft202012Validator(TOOLS["handOff"].input_schema).validate(
        {"project": "web", "requester": "a/b", "assignee": "c/d", "packet": PACKET_INPUT}
    )
    Draft202012Validator(TOOLS["submitResult"].input_schema).validate(
        {"id": "t1", "result": RESULT_INPUT}
    )


def test_agents_are_not_shown_the_owners_decisions() -> None:
    agent = {t.name for t in shown(Principal(PrincipalKind.AGENT, "o/a"))}
    owner = {t.name for t in shown(Principal(PrincipalKind.OWNER, "o"))}
    admin = {t.name for t in shown(ADMIN)}
    gate = {"routeTask", "holdTask", "rejectTask", "approveTask", "denyTask"}
    owner_only = {"signOffTask", "requestChanges", "provideUserInput", "interruptRun"}
    owner_only |= {"resumeRun", "requestRerun"}
    assert not (gate | owner_only) & agent
    assert gate | owner_only <= owner
    assert "reportHostOffline" in admin - owner
    assert {"handOff", "acceptTask", "submitResult", "claimRun", "reachCheckpoint"} <= agent
    assert admin == set(TOOLS)


async def test_the_tool_list_and_calls_respect_the_callers_role(
    live_server: LiveServer, era: str
) -> None:
    tag = secrets.token_hex(4)
    requester, assignee = f"r{tag}/r", f"a{tag}/a"
    tokens = {
        who: await live_server.token(p)
        for who, p in {
            "requester": Principal(PrincipalKind.AGENT, requester),
            "assignee": Principal(PrincipalKind.AGENT, assignee),
            "owner": Principal(PrincipalKind.OWNER, f"a{tag}"),
            "outsider": Principal(PrincipalKind.AGENT, f"x{tag}/x"),
        }.items()
    }
    async with http_client(live_server.url, tokens["assignee"], mode=era) as agent:
        listed = {t.name: t for t in (await agent.list_tools()).tools}
        assert "approveTask" not in listed and "acceptTask" in listed
        assert listed["acceptTask"].input_schema == TOOLS["acceptTask"].input_schema
        assert listed["task"].annotations is not None and listed["task"].annotations.read_only_hint
    async with http_client(live_server.url, tokens["owner"], mode=era) as owner:
        assert "approveTask" in {t.name for t in (await owner.list_tools()).tools}
    async with http_client(live_server.url, tokens["requester"], mode=era) as req:
        task = ok(
            await req.call_tool(
                "handOff",
                {
                    "project": "web",
                    "requester": requester,
                    "assignee": assignee,
                    "packet": PACKET_INPUT,
                },
            )
        )["task"]
        assert task["state"] == "waiting"
        # a move the caller may not make: forbidden, the task unchanged
        error = refused(await req.call_tool("approveTask", {"id": task["id"]}))
        assert (error["type"], error["code"]) == ("ForbiddenError", "forbidden")
    async with http_client(live_server.url, tokens["outsider"], mode=era) as outsider:
        error = refused(await outsider.call_tool("task", {"id": task["id"]}))
        assert (error["code"], error["id"]) == ("not_found", task["id"])
    async with http_client(live_server.url, tokens["assignee"], mode=era) as agent:
        # still waiting on the owner: the protocol refuses it, with what is allowed
        error = refused(await agent.call_tool("acceptTask", {"id": task["id"]}))
        assert error["code"] == "invalid_state"
        assert (error["state"], error["move"], error["allowedMoves"]) == ("waiting", "ACCEPT", [])


BAD: list[tuple[str, dict[str, Any], str, str]] = [
    ("acceptTask", {}, "invalid_input", "id"),
    ("acceptTask", {"id": 5}, "invalid_input", "id"),
    ("acceptTask", {"id": "t1", "nope": 1}, "invalid_input", "nope"),
    ("pauseTask", {"id": "t1", "waitingOn": "owner_approval"}, "invalid_input", "waitingOn"),
    ("submitResult", {"id": "t1", "result": {"summary": "x"}}, "invalid_input", "result.evidence"),
    (
        "handOff",
        {
            "project": "web",
            "requester": "a/b",
            "assignee": "c/d",
            "packet": {**PACKET_INPUT, "acceptanceCriteria": []},
        },
        "invalid_input",
        "packet.acceptanceCriteria",
    ),
    ("tasks", {"first": 101}, "invalid_input", "first"),
    ("tasks", {"after": "nope"}, "invalid_input", "after"),
    ("reachCheckpoint", {"id": "r1", "checkpoint": "notified"}, "invalid_input", "checkpoint"),
    ("openPullRequest", {"id": "r1", "url": "javascript:alert(1)"}, "invalid_input", "url"),
]


async def test_bad_input_is_a_tool_error_naming_its_code_and_field(
    live_server: LiveServer, era: str
) -> None:
    token = await live_server.token(Principal(PrincipalKind.AGENT, f"b{secrets.token_hex(4)}/b"))
    async with http_client(live_server.url, token, mode=era) as client:
        for name, arguments, code, field in BAD:
            result = await client.call_tool(name, arguments)
            error = refused(result)
            assert (error["code"], error["field"]) == (code, field), (name, error)
            assert result.content and f"{code}: " in result.content[0].text  # type: ignore[union-attr]
        missing = await client.call_tool("task", {"id": "t" + "0" * 28})
        assert refused(missing)["code"] == "not_found"
