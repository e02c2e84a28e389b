"""Bad input over GraphQL: every schema bound refused, naming the field, writing nothing.

The bounds are read from the seed's schema (`task_object`), never restated: a value one past each
bound goes through `handOff`, `submitResult` or `saveCheckpoint`, comes back as an
`InvalidInputError` whose `field` is the camelCase path of the offending input, and leaves the
store as it was. Values GraphQL itself refuses (unknown enum values, page sizes, cursors) are
GraphQL errors carrying `extensions.code == "invalid_input"`.
"""

from __future__ import annotations

import base64
import secrets
from typing import Any

import pytest

from baton.access.principals import ADMIN
from baton.protocol.handoff import TaskState
from baton.protocol.task_object import CHECKPOINT_SCHEMA, PACKET_SCHEMA, RESULT_SCHEMA, TASK_SCHEMA
from baton.services.tasks import TaskService
from baton.store.records import TaskRecord
from tests.helpers import PACKET_INPUT, RESULT_INPUT, World, agent, execute, execute_raw, task_id_of

# --- bounds, read from the schema ------------------------------------------------------------

PACKET = PACKET_SCHEMA["properties"]
RESULT = RESULT_SCHEMA["properties"]
EVIDENCE = RESULT["evidence"]["items"]["properties"]
RESULT_MAX_EVIDENCE = RESULT["evidence"]["maxItems"]
CHECKPOINT = CHECKPOINT_SCHEMA["properties"]
ID_MAX = TASK_SCHEMA["properties"]["id"]["maxLength"]


def too_long(prop: dict[str, Any]) -> str:
    return "x" * (int(prop["maxLength"]) + 1)


def too_many(prop: dict[str, Any], item: str = "x") -> list[str]:
    return [item] * (prop["maxItems"] + 1)


# --- GraphQL documents -----------------------------------------------------------------------

OUTCOME = """
  __typename
  ... on Error { code message }
  ... on InvalidInputError { field }
"""

HAND_OFF = f"""
mutation HandOff($input: HandOffInput!) {{
  handOff(input: $input) {{ {OUTCOME} ... on HandOffSuccess {{ task {{ id state }} }} }}
}}
"""

SUBMIT_RESULT = f"""
mutation Submit($input: SubmitResultInput!) {{
  submitResult(input: $input) {{ {OUTCOME} }}
}}
"""

SAVE_CHECKPOINT = f"""
mutation Save($input: SaveCheckpointInput!) {{
  saveCheckpoint(input: $input) {{ {OUTCOME} }}
}}
"""

TASK = """
query Task($id: ID!) {
  task(id: $id) { id state version result { summary } latestCheckpoint { progress } }
}
"""

COUNT = "query Count($project: String!) { tasks(filter: {project: $project}) { totalCount } }"


async def task_by_id(service: TaskService, task_id: str) -> dict[str, Any] | None:
    data = await execute(service, ADMIN, TASK, {"id": task_id})
    found: dict[str, Any] | None = data["task"]
    return found


async def count_in(service: TaskService, project: str) -> int:
    data = await execute(service, ADMIN, COUNT, {"project": project})
    return int(data["tasks"]["totalCount"])


async def assert_untouched(service: TaskService, task: TaskRecord) -> None:
    now = await task_by_id(service, task.id)
    assert now is not None
    assert now["state"] == task.state.value
    assert now["version"] == task.version
    assert now["result"] is None
    assert now["latestCheckpoint"] is None


def error_codes(response: Any) -> list[str | None]:
    return [e.get("extensions", {}).get("code") for e in response.errors]


# --- handOff ---------------------------------------------------------------------------------


def hand_off_input(world: World, task_id: str, **packet: Any) -> dict[str, Any]:
    return {
        "id": task_id,
        "project": world.project,
        "requester": world.requester,
        "assignee": world.assignee,
        "packet": {**PACKET_INPUT, **packet},
    }


def case(label: str, path: str, value: Any, field: str | None = None) -> Any:
    """One input one step past a bound: the input path, its value, and the field to be named."""
    return pytest.param(path, value, field or path, id=label)


def replaced(given: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """`given` with the input at `path` (`id`, `packet.task`) replaced by `value`."""
    head, _, key = path.rpartition(".")
    (given[head] if head else given)[key] = value
    return given


HAND_OFF_CASES = [
    case("task empty", "packet.task", ""),
    case("task too long", "packet.task", too_long(PACKET["task"])),
    case("no acceptance criteria", "packet.acceptanceCriteria", []),
    case(
        "too many acceptance criteria",
        "packet.acceptanceCriteria",
        too_many(PACKET["acceptance_criteria"]),
    ),
    case(
        "acceptance criterion too long",
        "packet.acceptanceCriteria",
        ["fine", too_long(PACKET["acceptance_criteria"]["items"])],
        "packet.acceptanceCriteria[1]",
    ),
    case(
        "acceptance criterion empty",
        "packet.acceptanceCriteria",
        [""],
        "packet.acceptanceCriteria[0]",
    ),
    case("context too long", "packet.context", too_long(PACKET["context"])),
    case("too many files", "packet.files", too_many(PACKET["files"])),
    case(
        "file too long",
        "packet.files",
        ["a.py", too_long(PACKET["files"]["items"])],
        "packet.files[1]",
    ),
    case("file empty", "packet.files", [""], "packet.files[0]"),
    case("too many dependencies", "packet.dependsOn", too_many(PACKET["depends_on"])),
    case(
        "dependency too long",
        "packet.dependsOn",
        [too_long(PACKET["depends_on"]["items"])],
        "packet.dependsOn[0]",
    ),
    case("id with a space", "id", "a b"),
    case("id too long", "id", "a" * (ID_MAX + 1)),
    case("id empty", "id", ""),
    # Python's `$` also matches before a final newline; the schema's (ECMA-262) does not.
    case("id with a trailing newline", "id", "ok-id\n"),
    case("id in Arabic-Indic digits", "id", "\u0661\u0662"),
    case("project with a trailing newline", "project", "web\n"),
    case("requester with a trailing newline", "requester", "alice/coder\n"),
    case("project with capitals", "project", "Web"),
    case("project with a leading dash", "project", "-web"),
    case("project too long", "project", "a" * 40),  # the pattern allows 1 + 38 characters
    case("requester without an agent", "requester", "alice"),
    case("requester with capitals", "requester", "Alice/a"),
    case("assignee without an agent", "assignee", "alice"),
    case("assignee with capitals", "assignee", "Alice/a"),
]


async def test_a_valid_hand_off_is_written_so_the_checks_below_can_see_a_write(
    service: TaskService, world: World
) -> None:
    client_id = f"ok-{secrets.token_hex(4)}"
    data = await execute(service, ADMIN, HAND_OFF, {"input": hand_off_input(world, client_id)})
    assert data["handOff"]["__typename"] == "HandOffSuccess"
    assert await count_in(service, world.project) == 1
    assert await task_by_id(service, task_id_of(world.requester, client_id)) is not None


@pytest.mark.parametrize(("path", "value", "field"), HAND_OFF_CASES)
async def test_hand_off_past_a_schema_bound_names_the_field_and_writes_nothing(
    service: TaskService, world: World, path: str, value: Any, field: str
) -> None:
    given = replaced(hand_off_input(world, f"bad-{secrets.token_hex(4)}"), path, value)

    data = await execute(service, ADMIN, HAND_OFF, {"input": given})

    outcome = data["handOff"]
    assert outcome["__typename"] == "InvalidInputError", outcome
    assert outcome["code"] == "invalid_input"
    assert outcome["field"] == field
    assert await count_in(service, world.project) == 0
    assert await count_in(service, given["project"]) == 0
    owner = world.requester.split("/", 1)[0]
    assert await task_by_id(service, f"{owner}_{given['id']}") is None


PACKET_LITERAL = 'task: "t", acceptanceCriteria: ["a"]'


@pytest.mark.parametrize(
    ("bad", "literal"),
    [
        ("poem", f"packet: {{{PACKET_LITERAL}, deliverableType: poem}}"),
        ("MAYBE", f"verification: MAYBE, packet: {{{PACKET_LITERAL}, deliverableType: doc}}"),
    ],
    ids=["deliverableType", "verification"],
)
async def test_an_enum_value_that_does_not_exist_is_a_graphql_error_and_writes_nothing(
    service: TaskService, world: World, bad: str, literal: str
) -> None:
    task_id = f"enum-{secrets.token_hex(4)}"
    document = f"""
    mutation {{
      handOff(input: {{id: "{task_id}", project: "{world.project}", requester: "{world.requester}",
                      assignee: "{world.assignee}", {literal}}}) {{ __typename }}
    }}
    """
    response = await execute_raw(service, ADMIN, document)
    assert response.data is None
    assert error_codes(response) == ["invalid_input"], response.errors
    assert bad in response.errors[0]["message"]
    assert await count_in(service, world.project) == 0
    assert await task_by_id(service, task_id) is None


async def test_an_unknown_enum_value_in_variables_is_a_graphql_error_and_writes_nothing(
    service: TaskService, world: World
) -> None:
    task_id = f"enum-{secrets.token_hex(4)}"
    given = hand_off_input(world, task_id, deliverableType="poem")
    response = await execute_raw(service, ADMIN, HAND_OFF, {"input": given})
    assert response.data is None
    assert error_codes(response) == ["invalid_input"], response.errors
    assert await count_in(service, world.project) == 0
    assert await task_by_id(service, task_id) is None


async def test_a_nul_character_in_the_packet_is_refused_before_anything_runs(
    service: TaskService, world: World
) -> None:
    # Refused for the whole operation (no string may hold NUL), naming the variable's path.
    task_id = f"nul-{secrets.token_hex(4)}"
    response = await execute_raw(
        service, ADMIN, HAND_OFF, {"input": hand_off_input(world, task_id, task="a\x00b")}
    )
    assert await count_in(service, world.project) == 0
    assert response.data is None
    assert error_codes(response) == ["invalid_input"]
    assert "variables.input.packet.task" in response.errors[0]["message"]


# --- submitResult ----------------------------------------------------------------------------


def with_evidence(**fields: Any) -> dict[str, Any]:
    return {**RESULT_INPUT, "evidence": [{"kind": "link", "summary": "see", **fields}]}


RESULT_CASES = [
    pytest.param({**RESULT_INPUT, "summary": ""}, "result.summary", id="summary empty"),
    pytest.param(
        {**RESULT_INPUT, "summary": too_long(RESULT["summary"])},
        "result.summary",
        id="summary too long",
    ),
    pytest.param({**RESULT_INPUT, "evidence": []}, "result.evidence", id="no evidence"),
    pytest.param(
        {
            **RESULT_INPUT,
            "evidence": [{"kind": "note", "summary": "s"}] * (RESULT_MAX_EVIDENCE + 1),
        },
        "result.evidence",
        id="too much evidence",
    ),
    pytest.param(
        with_evidence(summary=too_long(EVIDENCE["summary"])),
        "result.evidence[0].summary",
        id="evidence summary too long",
    ),
    pytest.param(
        with_evidence(summary=""), "result.evidence[0].summary", id="evidence summary empty"
    ),
    pytest.param(
        with_evidence(url="not a uri"), "result.evidence[0].url", id="evidence url not a uri"
    ),
    pytest.param(
        with_evidence(content=too_long(EVIDENCE["content"])),
        "result.evidence[0].content",
        id="evidence content too long",
    ),
]


@pytest.mark.parametrize(("result", "field"), RESULT_CASES)
async def test_submit_result_past_a_schema_bound_names_the_field_and_leaves_the_task_working(
    service: TaskService, world: World, result: dict[str, Any], field: str
) -> None:
    task = await world.task_in(TaskState.working)

    data = await execute(
        service, agent(world.assignee), SUBMIT_RESULT, {"input": {"id": task.id, "result": result}}
    )

    outcome = data["submitResult"]
    assert outcome["__typename"] == "InvalidInputError", outcome
    assert outcome["code"] == "invalid_input"
    assert outcome["field"] == field
    await assert_untouched(service, task)


async def test_an_unknown_evidence_kind_is_a_graphql_error_and_leaves_the_task_working(
    service: TaskService, world: World
) -> None:
    task = await world.task_in(TaskState.working)
    result = {**RESULT_INPUT, "evidence": [{"kind": "essay", "summary": "s"}]}
    response = await execute_raw(
        service, agent(world.assignee), SUBMIT_RESULT, {"input": {"id": task.id, "result": result}}
    )
    assert response.data is None
    assert error_codes(response) == ["invalid_input"]
    await assert_untouched(service, task)


# --- saveCheckpoint --------------------------------------------------------------------------

GOOD_CHECKPOINT = {"progress": "half way"}

CHECKPOINT_CASES = [
    pytest.param({"progress": ""}, "checkpoint.progress", id="progress empty"),
    pytest.param(
        {"progress": too_long(CHECKPOINT["progress"])},
        "checkpoint.progress",
        id="progress too long",
    ),
    pytest.param(
        {**GOOD_CHECKPOINT, "filesTouched": too_many(CHECKPOINT["files_touched"])},
        "checkpoint.filesTouched",
        id="too many files touched",
    ),
    pytest.param(
        {**GOOD_CHECKPOINT, "filesTouched": [too_long(CHECKPOINT["files_touched"]["items"])]},
        "checkpoint.filesTouched[0]",
        id="file touched too long",
    ),
    pytest.param(
        {**GOOD_CHECKPOINT, "decisions": too_many(CHECKPOINT["decisions"])},
        "checkpoint.decisions",
        id="too many decisions",
    ),
    pytest.param(
        {**GOOD_CHECKPOINT, "nextSteps": too_many(CHECKPOINT["next_steps"])},
        "checkpoint.nextSteps",
        id="too many next steps",
    ),
    pytest.param(
        {**GOOD_CHECKPOINT, "openQuestions": [too_long(CHECKPOINT["open_questions"]["items"])]},
        "checkpoint.openQuestions[0]",
        id="open question too long",
    ),
]


@pytest.mark.parametrize(("checkpoint", "field"), CHECKPOINT_CASES)
async def test_save_checkpoint_past_a_schema_bound_names_the_field_and_saves_nothing(
    service: TaskService, world: World, checkpoint: dict[str, Any], field: str
) -> None:
    task = await world.task_in(TaskState.working)

    data = await execute(
        service,
        agent(world.assignee),
        SAVE_CHECKPOINT,
        {"input": {"id": task.id, "checkpoint": checkpoint}},
    )

    outcome = data["saveCheckpoint"]
    assert outcome["__typename"] == "InvalidInputError", outcome
    assert outcome["code"] == "invalid_input"
    assert outcome["field"] == field
    await assert_untouched(service, task)


# --- reading: page sizes and cursors ---------------------------------------------------------

PAGE = """
query Page($first: Int!, $after: String) { tasks(first: $first, after: $after) { totalCount } }
"""


@pytest.mark.parametrize("first", [101, -1])
async def test_a_page_size_outside_0_to_100_is_an_invalid_input_error_with_no_data(
    service: TaskService, first: int
) -> None:
    response = await execute_raw(service, ADMIN, PAGE, {"first": first})
    assert response.data is None
    assert error_codes(response) == ["invalid_input"]


async def test_a_page_of_100_is_allowed(service: TaskService) -> None:
    data = await execute(service, ADMIN, PAGE, {"first": 100})  # fails on any GraphQL error
    assert isinstance(data["tasks"]["totalCount"], int)


@pytest.mark.parametrize(
    "after",
    [
        "not a cursor",
        "zzz",
        base64.urlsafe_b64encode(b"no separator").decode(),
        base64.urlsafe_b64encode(b"not a date|t1").decode(),
        base64.urlsafe_b64encode(b"\xff\xfe|t1").decode(),
        "",
    ],
)
async def test_a_cursor_this_server_did_not_issue_is_an_invalid_input_error(
    service: TaskService, after: str
) -> None:
    response = await execute_raw(service, ADMIN, PAGE, {"first": 10, "after": after})
    assert response.data is None
    assert error_codes(response) == ["invalid_input"]
    assert "after" in response.errors[0]["message"]


@pytest.mark.parametrize(
    "raw",
    [
        "0001-01-01T00:00:00+14:00|t1",
        "9999-12-31T23:59:59-23:59|t1",
        "2024-01-01T00:00:00+00:00|a\x00b",
    ],
)
async def test_a_forged_cursor_postgres_cannot_hold_is_an_invalid_input_error(
    service: TaskService, raw: str
) -> None:
    after = base64.urlsafe_b64encode(raw.encode()).decode()
    response = await execute_raw(service, ADMIN, PAGE, {"first": 10, "after": after})
    assert error_codes(response) == ["invalid_input"]


@pytest.mark.parametrize("when", ["0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59-23:59"])
async def test_an_updated_after_postgres_cannot_hold_is_not_an_internal_error(
    service: TaskService, when: str
) -> None:
    document = "query($d: DateTime) { tasks(filter: {updatedAfter: $d}) { totalCount } }"
    response = await execute_raw(service, ADMIN, document, {"d": when})
    assert "internal" not in error_codes(response)


@pytest.mark.parametrize(
    ("document", "variables"),
    [
        ("query($v: ID!) { task(id: $v) { id } }", {"v": "a\x00b"}),
        ("query($v: String) { tasks(filter: {project: $v}) { totalCount } }", {"v": "a\x00b"}),
        ("query($v: String) { tasks(filter: {requester: $v}) { totalCount } }", {"v": "a\x00"}),
        ("query($v: String) { tasks(filter: {project: $v}) { totalCount } }", {"v": "\ud800"}),
        ("query($v: ID!) { task(id: $v) { id } }", {"v": "\udfff"}),
    ],
    ids=[
        "NUL task id",
        "NUL project filter",
        "NUL requester filter",
        "surrogate project filter",
        "surrogate task id",
    ],
)
async def test_a_string_postgres_cannot_encode_is_not_an_internal_error(
    service: TaskService, document: str, variables: dict[str, Any]
) -> None:
    response = await execute_raw(service, ADMIN, document, variables)
    assert "internal" not in error_codes(response)


EVENTS = """
query Events($id: ID!, $first: Int!, $after: String) {
  task(id: $id) { events(first: $first, after: $after) { edges { cursor } } }
}
"""


@pytest.mark.parametrize(
    ("first", "after"),
    [
        (101, None),
        (-1, None),
        (10, "x1"),
        (10, "-1"),
        (10, "9" * 20),
        (10, str(2**63)),
        (10, "0" * 24 + "9" * 30),
        (10, "9" * 5000),
        (10, "\u0661"),
        (10, "\u00b2"),
    ],
)
async def test_task_events_refuse_bad_page_sizes_and_cursors(
    service: TaskService, world: World, first: int, after: str | None
) -> None:
    task = await world.hand_off()
    response = await execute_raw(
        service, ADMIN, EVENTS, {"id": task.id, "first": first, "after": after}
    )
    assert error_codes(response) == ["invalid_input"]
