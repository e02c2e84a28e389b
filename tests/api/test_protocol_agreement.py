"""Everything derived from the protocol table agrees with it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from graphql import GraphQLEnumType, GraphQLNonNull, GraphQLObjectType
from jsonschema import Draft202012Validator, FormatChecker

from baton.api.schema import schema
from baton.protocol.handoff import CHECKPOINT_STATES, HANDOFF, MoveName, TaskState, WaitingOn
from baton.protocol.machine import Machine
from baton.protocol.pipeline import PIPELINE, RunCheckpoint, RunEvent, RunPhase, RunStatus
from baton.services.tasks import TaskService
from baton.store.runs import FENCED
from tests.helpers import World, execute

ROOT = Path(__file__).resolve().parents[2]
NON_MOVE_MUTATIONS = {
    "handOff",
    "saveCheckpoint",
    "setGateRule",
    "deleteGateRule",
    "createRun",
    "runHeartbeat",
    # webhooks (baton.api.webhooks)
    "createWebhookEndpoint",
    "updateWebhookEndpoint",
    "deleteWebhookEndpoint",
    "rotateWebhookSecret",
    "pingWebhookEndpoint",
    "redeliverWebhook",
}


def test_there_is_one_mutation_per_move_name_and_no_other_move_mutation() -> None:
    mutation = schema._schema.mutation_type
    assert isinstance(mutation, GraphQLObjectType)
    moves = {m.mutation for m in HANDOFF.moves} | {m.mutation for m in PIPELINE.moves}
    assert set(mutation.fields) == moves | NON_MOVE_MUTATIONS
    assert len({m.mutation for m in HANDOFF.moves}) == len(HANDOFF.names()) == 16
    assert len({m.mutation for m in PIPELINE.moves}) == len(PIPELINE.names()) == 12


@pytest.mark.parametrize("machine", [HANDOFF, PIPELINE], ids=lambda m: m.name)
def test_each_move_mutation_takes_the_parameters_the_table_declares(
    machine: Machine[Any, Any, Any],
) -> None:
    """Input fields: id, expectedVersion, one per declared parameter (and the queue's own
    `project` on claimRun, the lease's `leaseId` on the runner's events on a claimed run),
    required exactly when the table requires it."""
    mutation = schema._schema.mutation_type
    assert isinstance(mutation, GraphQLObjectType)
    for name in machine.names():
        move = machine.named(name)[0]
        input_type = mutation.fields[move.mutation].args["input"].type.of_type
        fields = input_type.fields
        declared = {p.field: p.required for p in move.params}
        extra = {"project"} if move.mutation == "claimRun" else set()
        if name in FENCED:
            extra = {"leaseId"}
        assert set(fields) == {"id", "expectedVersion", *declared, *extra}, move.mutation
        for field, required in declared.items():
            assert isinstance(fields[field].type, GraphQLNonNull) == required, field


def test_graphql_enums_are_the_protocol_enums() -> None:
    types = schema._schema.type_map
    for enum, name in (
        (TaskState, "TaskState"),
        (WaitingOn, "WaitingOn"),
        (MoveName, "MoveName"),
        (RunStatus, "RunStatus"),
        (RunPhase, "RunPhase"),
        (RunCheckpoint, "RunCheckpoint"),
        (RunEvent, "RunEventName"),
    ):
        graphql_enum = types[name]
        assert isinstance(graphql_enum, GraphQLEnumType)
        assert list(graphql_enum.values) == [member.value for member in enum]


def test_schema_graphql_is_current() -> None:
    committed = (ROOT / "schema.graphql").read_text()
    assert committed == schema.as_str() + "\n", "run: baton export-schema > schema.graphql"


def test_the_repo_carries_the_seed_task_schema_verbatim() -> None:
    carried = ROOT / "src" / "baton" / "protocol" / "task.schema.json"
    assert json.loads(carried.read_text())["required"][0] == "id"


async def test_protocol_query_returns_the_table(service: TaskService, world: World) -> None:
    data = await execute(
        service,
        world.roles["assignee"],
        """{ protocol { handoff {
              states { name description terminal initial note inBaton movesTo reachedFrom }
              moves { name from to mutation actor } } } }""",
    )
    handoff = data["protocol"]["handoff"]
    assert [s["name"] for s in handoff["states"]] == [s.value for s in TaskState]
    assert len(handoff["moves"]) == 22
    assert {(m["from"], m["to"], m["name"], m["mutation"]) for m in handoff["moves"]} == {
        (m.source.value, m.target.value, m.name.value, m.mutation) for m in HANDOFF.moves
    }
    for state in handoff["states"]:
        s = TaskState(state["name"])
        assert state["terminal"] == HANDOFF.is_terminal(s)
        assert state["movesTo"] == [t.value for t in HANDOFF.targets(s)]
        assert state["reachedFrom"] == [t.value for t in HANDOFF.sources(s)]
        assert state["description"] == HANDOFF.info(s).description
        assert state["note"] == HANDOFF.info(s).note
        assert state["inBaton"] == HANDOFF.info(s).in_baton
        assert (state["note"] is None) == (state["inBaton"] is None), s


TASK_SCHEMA = json.loads((ROOT / "src" / "baton" / "protocol" / "task.schema.json").read_text())
VALIDATOR = Draft202012Validator(TASK_SCHEMA, format_checker=FormatChecker())


@pytest.mark.parametrize("state", list(TaskState), ids=[s.value for s in TaskState])
async def test_protocol_object_is_valid_against_the_seed_schema_in_every_state(
    service: TaskService, world: World, state: TaskState
) -> None:
    task = await world.task_in(state)
    if state in CHECKPOINT_STATES:
        checkpoint = {
            "progress": "half way",
            "decisions": ["use tables"],
            "files_touched": ["a.py"],
            "next_steps": [],
            "open_questions": [],
        }
        task = (await service.save_checkpoint(world.roles["assignee"], task.id, checkpoint)).task
    data = await execute(
        service,
        world.roles["requester"],
        "query($id: ID!) { task(id: $id) { state protocolObject } }",
        {"id": task.id},
    )
    obj = data["task"]["protocolObject"]
    assert data["task"]["state"] == state.value == obj["state"]
    errors = [e.message for e in VALIDATOR.iter_errors(obj)]
    assert errors == []
    assert (obj["waiting_on"] is not None) == (state is TaskState.waiting)
    if state is TaskState.completed:
        # Submitted by admin on the assignee's behalf: returned as the assignee.
        assert obj["result"]["returned_by"] == world.assignee


async def test_protocol_query_returns_the_pipeline_table(
    service: TaskService, world: World
) -> None:
    data = await execute(
        service,
        world.roles["assignee"],
        """{ protocol { pipeline { name states { name label terminal initial failure }
              moves { name from to mutation actor }
              attributes { name ordered values { name label } } } } }""",
    )
    pipeline = data["protocol"]["pipeline"]
    assert [s["name"] for s in pipeline["states"]] == [s.value for s in RunStatus]
    assert {s["name"]: s["label"] for s in pipeline["states"]}["awaiting_user"] == (
        "Needs your input"
    )
    assert [s["name"] for s in pipeline["states"] if s["terminal"]] == ["completed"]
    assert [s["name"] for s in pipeline["states"] if s["failure"]] == ["errored"]
    assert {(m["name"], m["from"], m["to"], m["mutation"]) for m in pipeline["moves"]} == {
        (m.name.value, m.source.value, m.target.value, m.mutation) for m in PIPELINE.moves
    }
    attributes = {a["name"]: a for a in pipeline["attributes"]}
    assert [v["name"] for v in attributes["checkpoint"]["values"]] == [
        c.value for c in RunCheckpoint
    ]
    assert attributes["checkpoint"]["ordered"] and not attributes["phase"]["ordered"]
    assert {v["name"]: v["label"] for v in attributes["phase"]["values"]}["opening_pr"] == (
        "Opening pull request"
    )
