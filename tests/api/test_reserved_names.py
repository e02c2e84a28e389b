"""`admin`, `system` and the empty name are reserved owner names: a requester, an assignee or
a gate-rule owner so named is `invalid_input` naming the field, and nothing is written."""

from __future__ import annotations

import pytest

from baton.access.principals import ADMIN
from baton.services.tasks import TaskService
from tests.helpers import PACKET_INPUT, execute

OUTCOME = "__typename ... on Error { code } ... on InvalidInputError { field }"
HAND_OFF = f"mutation($input: HandOffInput!) {{ handOff(input: $input) {{ {OUTCOME} }} }}"
SET_RULE = f"""mutation($owner: String) {{
  setGateRule(input: {{owner: $owner, decision: ALLOW}}) {{ {OUTCOME} }} }}"""


@pytest.mark.parametrize("reserved", ["admin", "system"])
@pytest.mark.parametrize("field", ["requester", "assignee"])
async def test_a_hand_off_naming_a_reserved_owner_is_refused(
    service: TaskService, reserved: str, field: str
) -> None:
    task_input = {
        "project": "reserved",
        "requester": "someone/r",
        "assignee": "someone/a",
        "packet": PACKET_INPUT,
        field: f"{reserved}/agent",
    }
    answer = (await execute(service, ADMIN, HAND_OFF, {"input": task_input}))["handOff"]
    assert answer == {"__typename": "InvalidInputError", "code": "invalid_input", "field": field}


@pytest.mark.parametrize("reserved", ["admin", "system", ""])
async def test_a_gate_rule_for_a_reserved_owner_is_refused(
    service: TaskService, reserved: str
) -> None:
    answer = (await execute(service, ADMIN, SET_RULE, {"owner": reserved}))["setGateRule"]
    assert answer == {"__typename": "InvalidInputError", "code": "invalid_input", "field": "owner"}
