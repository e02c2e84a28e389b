"""Everything derived from the protocol table agrees with it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from graphql import GraphQLEnumType, GraphQLObjectType
from jsonschema import Draft202012Validator, FormatChecker

from baton.api.schema import schema
from baton.protocol.handoff import CHECKPOINT_STATES, HANDOFF, MoveName, TaskState, WaitingOn
from baton.services.tasks import TaskService
from tests.helpers import World, execute

ROOT = Path(__file__).resolve().parents[2]
NON_MOVE_MUTATIONS = {"handOff", "saveCheckpoint", "setGateRule", "deleteGateRule"}


def test_there_is_one_mutation_per_move_name_and_no_other_move_mutation() -> None:
    mutation = schema._schema.mutation_type
    assert isinstance(mutation, GraphQLObjectType)
    assert set(mutation.fields) == {m.mutation for m in HANDOFF.moves} | NON_MOVE_MUTATIONS
    assert len({m.mutation for m in HANDOFF.moves}) == len(HANDOFF.names()) == 16


def test_graphql_enums_are_the_protocol_enums() -> None:
    types = schema._schema.type_map
    for enum in (TaskState, WaitingOn, MoveName):
        graphql_enum = types[enum.__name__]
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
