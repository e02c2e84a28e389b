"""The owner's permission gate over GraphQL, its rules, and idempotent hand-offs.

Every hand-off here goes through the `handOff` mutation and every rule through `setGateRule`, so
the gate is tested the way an integration drives it. Each test's owners are unique (`world`), so
no rule from one test can match a hand-off of another.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Callable
from typing import Any

import pytest

from baton.access.principals import ADMIN, Principal
from baton.protocol.task_object import ID_MAX_LENGTH as ID_MAX
from baton.services import gate_rules
from baton.services.gate_rules import GateRules
from baton.services.tasks import TaskService
from tests.helpers import (
    PACKET_INPUT,
    World,
    agent,
    counting_statements,
    execute,
    execute_raw,
    owner,
    task_id_of,
)

# --- GraphQL documents -----------------------------------------------------------------------

ERROR = "... on Error { code message } ... on InvalidInputError { field }"
RULE = "id owner requester project deliverableTypes decision priority"
TASK = "id state waitingOn version"
EVENT = "kind move fromState toState actor"

HAND_OFF = f"""
mutation HandOff($input: HandOffInput!) {{
  handOff(input: $input) {{
    __typename {ERROR}
    ... on HandOffSuccess {{ task {{ {TASK} }} events {{ {EVENT} }} }}
    ... on DuplicateTaskError {{ id }}
  }}
}}
"""

SET_RULE = f"""
mutation SetRule($input: SetGateRuleInput!) {{
  setGateRule(input: $input) {{
    __typename {ERROR} ... on GateRuleSuccess {{ rule {{ {RULE} }} }}
  }}
}}
"""

DELETE_RULE = f"""
mutation DeleteRule($input: DeleteGateRuleInput!) {{
  deleteGateRule(input: $input) {{
    __typename {ERROR} ... on DeleteGateRuleSuccess {{ rule {{ {RULE} }} }}
  }}
}}
"""

RULES = f"query Rules($owner: String) {{ gateRules(owner: $owner) {{ {RULE} }} }}"

TASK_EVENTS = f"""
query Task($id: ID!) {{
  task(id: $id) {{
    {TASK} packet {{ task }} events(first: 100) {{ edges {{ node {{ {EVENT} }} }} }}
  }}
}}
"""


def move_document(mutation: str) -> str:
    input_type = mutation[0].upper() + mutation[1:] + "Input"
    return f"""
    mutation Move($input: {input_type}!) {{
      {mutation}(input: $input) {{
        __typename {ERROR} ... on MoveSuccess {{ task {{ {TASK} }} events {{ {EVENT} }} }}
      }}
    }}
    """


# --- helpers ---------------------------------------------------------------------------------


async def hand_off(
    service: TaskService,
    world: World,
    **overrides: Any,
) -> dict[str, Any]:
    """`handOff` from the world's requester to its assignee; `overrides` replace input fields
    (`packet` is merged into the default packet)."""
    given: dict[str, Any] = {
        "project": world.project,
        "requester": world.requester,
        "assignee": world.assignee,
        **overrides,
        "packet": {**PACKET_INPUT, **overrides.get("packet", {})},
    }
    data = await execute(service, agent(given["requester"]), HAND_OFF, {"input": given})
    outcome: dict[str, Any] = data["handOff"]
    return outcome


async def handed_off_state(service: TaskService, world: World, **overrides: Any) -> str:
    outcome = await hand_off(service, world, **overrides)
    assert outcome["__typename"] == "HandOffSuccess", outcome
    state: str = outcome["task"]["state"]
    return state


async def set_rule(service: TaskService, principal: Principal, **input: Any) -> dict[str, Any]:
    data = await execute(service, principal, SET_RULE, {"input": input})
    outcome: dict[str, Any] = data["setGateRule"]
    return outcome


async def add_rule(service: TaskService, world: World, **input: Any) -> dict[str, Any]:
    """A rule on the assignee owner's gate, set by that owner; the rule."""
    outcome = await set_rule(service, owner(world.asg_owner), **input)
    assert outcome["__typename"] == "GateRuleSuccess", outcome
    rule: dict[str, Any] = outcome["rule"]
    return rule


async def delete_rule(service: TaskService, principal: Principal, rule_id: str) -> dict[str, Any]:
    data = await execute(service, principal, DELETE_RULE, {"input": {"id": rule_id}})
    outcome: dict[str, Any] = data["deleteGateRule"]
    return outcome


async def rules_of(
    service: TaskService, principal: Principal, owner: str | None = None
) -> list[dict[str, Any]]:
    data = await execute(service, principal, RULES, {"owner": owner})
    rules: list[dict[str, Any]] = data["gateRules"]
    return rules


async def move(
    service: TaskService, principal: Principal, mutation: str, task_id: str
) -> dict[str, Any]:
    data = await execute(service, principal, move_document(mutation), {"input": {"id": task_id}})
    outcome: dict[str, Any] = data[mutation]
    return outcome


async def task_with_events(service: TaskService, task_id: str) -> dict[str, Any]:
    data = await execute(service, ADMIN, TASK_EVENTS, {"id": task_id})
    task: dict[str, Any] = data["task"]
    return task


def event_log(task: dict[str, Any]) -> list[dict[str, Any]]:
    return [edge["node"] for edge in task["events"]["edges"]]


# --- what each decision does at hand-off -----------------------------------------------------


@pytest.mark.parametrize(
    ("decision", "state", "waiting_on", "moves"),
    [
        ("ALLOW", "routed", None, ["ROUTE"]),
        ("ASK", "waiting", "owner_approval", ["HOLD"]),
        ("DENY", "rejected", None, ["REJECT"]),
        ("EXTERNAL", "requested", None, []),
    ],
)
async def test_the_matching_rules_decision_moves_the_task_in_the_hand_off_call(
    service: TaskService,
    world: World,
    decision: str,
    state: str,
    waiting_on: str | None,
    moves: list[str],
) -> None:
    await add_rule(service, world, decision=decision)

    outcome = await hand_off(service, world)

    assert outcome["__typename"] == "HandOffSuccess", outcome
    task = outcome["task"]
    assert (task["state"], task["waitingOn"]) == (state, waiting_on)
    events = outcome["events"]
    assert [e["kind"] for e in events] == ["created"] + ["moved"] * len(moves)
    assert [e["move"] for e in events] == [None, *moves]
    assert events[0]["toState"] == "requested"
    assert events[-1]["toState"] == state
    assert task["version"] == len(events)
    assert event_log(await task_with_events(service, task["id"])) == events


@pytest.mark.parametrize(
    ("mutation", "state", "waiting_on"),
    [
        ("routeTask", "routed", None),
        ("holdTask", "waiting", "owner_approval"),
        ("rejectTask", "rejected", None),
    ],
)
async def test_an_external_decision_leaves_the_move_to_the_assignees_owner(
    service: TaskService, world: World, mutation: str, state: str, waiting_on: str | None
) -> None:
    await add_rule(service, world, decision="EXTERNAL")
    handed = await hand_off(service, world)
    assert handed["task"]["state"] == "requested"
    assert len(handed["events"]) == 1
    task_id = handed["task"]["id"]

    by_agent = await move(service, agent(world.assignee), mutation, task_id)
    assert by_agent["__typename"] == "ForbiddenError"

    outcome = await move(service, owner(world.asg_owner), mutation, task_id)
    assert outcome["__typename"] == "MoveSuccess", outcome
    assert (outcome["task"]["state"], outcome["task"]["waitingOn"]) == (state, waiting_on)
    assert outcome["task"]["version"] == 2


# --- defaults and the owner's answer ---------------------------------------------------------


async def test_with_no_rule_a_hand_off_within_one_owner_is_routed(
    service: TaskService, world: World
) -> None:
    sibling = f"{world.req_owner}/helper"
    assert await handed_off_state(service, world, assignee=sibling) == "routed"


async def test_with_no_rule_a_hand_off_to_another_owner_waits_for_its_approval(
    service: TaskService, world: World
) -> None:
    outcome = await hand_off(service, world)
    assert (outcome["task"]["state"], outcome["task"]["waitingOn"]) == (
        "waiting",
        "owner_approval",
    )
    assert [e["move"] for e in outcome["events"]] == [None, "HOLD"]


@pytest.mark.parametrize(
    ("mutation", "state"), [("approveTask", "routed"), ("denyTask", "rejected")]
)
async def test_the_assignees_owner_answers_a_held_hand_off(
    service: TaskService, world: World, mutation: str, state: str
) -> None:
    task_id = (await hand_off(service, world))["task"]["id"]

    for not_the_owner in (agent(world.assignee), owner(world.req_owner)):
        refused = await move(service, not_the_owner, mutation, task_id)
        assert refused["__typename"] == "ForbiddenError", refused

    outcome = await move(service, owner(world.asg_owner), mutation, task_id)
    assert outcome["__typename"] == "MoveSuccess", outcome
    assert (outcome["task"]["state"], outcome["task"]["waitingOn"]) == (state, None)
    assert outcome["task"]["version"] == 3


# --- which rule matches ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("glob", "matches"),
    [
        ("{req}/*", True),
        ("*/*", True),
        ("*", True),
        ("{req}/r", True),
        ("{req}/other", False),
        ("{asg}/*", False),
        ("x{req}/*", False),
    ],
)
async def test_a_rule_matches_the_requester_by_glob(
    service: TaskService, world: World, glob: str, matches: bool
) -> None:
    requester = glob.format(req=world.req_owner, asg=world.asg_owner)
    await add_rule(service, world, requester=requester, decision="DENY")
    # DENY when the rule matches; the default (ASK, the owners differ) when it does not.
    assert await handed_off_state(service, world) == ("rejected" if matches else "waiting")


@pytest.mark.parametrize(
    ("project", "matches"),
    [("web-{tag}", True), ("web-a-{tag}", True), ("api-{tag}", False), ("web", False)],
)
async def test_a_rule_matches_the_project_by_glob(
    service: TaskService, world: World, project: str, matches: bool
) -> None:
    await add_rule(service, world, project="web-*", decision="DENY")
    state = await handed_off_state(service, world, project=project.format(tag=world.tag))
    assert state == ("rejected" if matches else "waiting")


@pytest.mark.parametrize(
    ("types", "deliverable", "matches"),
    [
        (["code"], "code", True),
        (["code"], "doc", False),
        (["code", "design"], "design", True),
        ([], "doc", True),
        ([], "screenshots", True),
    ],
)
async def test_a_rule_matches_the_deliverable_types_it_lists_or_any_when_empty(
    service: TaskService, world: World, types: list[str], deliverable: str, matches: bool
) -> None:
    await add_rule(service, world, deliverableTypes=types, decision="DENY")
    state = await handed_off_state(service, world, packet={"deliverableType": deliverable})
    assert state == ("rejected" if matches else "waiting")


@pytest.mark.parametrize(
    ("rules", "state"),
    [
        ([("ALLOW", 1), ("DENY", 5)], "rejected"),
        ([("DENY", 5), ("ALLOW", 1)], "rejected"),
        ([("ALLOW", 5), ("DENY", 1)], "routed"),
        ([("ALLOW", 3), ("DENY", 3)], "routed"),
        ([("DENY", 3), ("ALLOW", 3)], "rejected"),
        ([("EXTERNAL", -1), ("DENY", -2)], "requested"),
    ],
    ids=[
        "higher-wins",
        "higher-wins-added-first",
        "higher-allow",
        "tie-older-allow",
        "tie-older-deny",
        "negative-priorities",
    ],
)
async def test_the_first_matching_rule_by_priority_decides_and_the_older_wins_a_tie(
    service: TaskService, world: World, rules: list[tuple[str, int]], state: str
) -> None:
    for decision, priority in rules:
        await add_rule(service, world, decision=decision, priority=priority)
    assert await handed_off_state(service, world) == state


async def test_a_higher_rule_that_does_not_match_is_passed_over(
    service: TaskService, world: World
) -> None:
    await add_rule(service, world, project="elsewhere", decision="DENY", priority=10)
    await add_rule(service, world, requester="x*/*", decision="DENY", priority=9)
    await add_rule(service, world, deliverableTypes=["code"], decision="DENY", priority=8)
    await add_rule(service, world, decision="ALLOW", priority=0)
    assert await handed_off_state(service, world) == "routed"


async def test_gate_rules_are_listed_in_the_order_they_are_tried(
    service: TaskService, world: World
) -> None:
    low = await add_rule(service, world, decision="ALLOW", priority=1)
    tie_old = await add_rule(service, world, decision="ASK", priority=5)
    tie_new = await add_rule(service, world, decision="DENY", priority=5)
    listed = await rules_of(service, owner(world.asg_owner))
    assert [r["id"] for r in listed] == [tie_old["id"], tie_new["id"], low["id"]]


# --- managing rules --------------------------------------------------------------------------


async def test_an_owner_sets_lists_and_deletes_its_own_rules(
    service: TaskService, world: World
) -> None:
    me = owner(world.asg_owner)
    rule = await add_rule(
        service,
        world,
        requester=f"{world.req_owner}/*",
        project="web-*",
        deliverableTypes=["code", "doc"],
        decision="DENY",
        priority=7,
    )
    assert {k: v for k, v in rule.items() if k != "id"} == {
        "owner": world.asg_owner,
        "requester": f"{world.req_owner}/*",
        "project": "web-*",
        "deliverableTypes": ["code", "doc"],
        "decision": "DENY",
        "priority": 7,
    }
    assert await rules_of(service, me) == [rule]
    assert await rules_of(service, owner(world.req_owner)) == []

    deleted = await delete_rule(service, me, rule["id"])
    assert deleted == {"__typename": "DeleteGateRuleSuccess", "rule": rule}
    assert await rules_of(service, me) == []


async def test_setting_a_rule_with_its_id_replaces_it(service: TaskService, world: World) -> None:
    rule = await add_rule(service, world, decision="DENY")
    replaced = await add_rule(service, world, id=rule["id"], decision="ALLOW", priority=2)
    assert replaced["id"] == rule["id"]
    assert await rules_of(service, owner(world.asg_owner)) == [replaced]
    assert await handed_off_state(service, world) == "routed"


async def test_a_deleted_rule_no_longer_decides(service: TaskService, world: World) -> None:
    rule = await add_rule(service, world, decision="DENY")
    assert await handed_off_state(service, world) == "rejected"
    await delete_rule(service, owner(world.asg_owner), rule["id"])
    assert await handed_off_state(service, world) == "waiting"


async def test_a_rule_changed_through_another_server_decides_this_servers_next_hand_off(
    service: TaskService, world: World
) -> None:
    """Each server keeps the rules it read; the hand-off's own statement checks they are still
    current, so a rule set or deleted elsewhere applies at once."""
    elsewhere = TaskService(service.db)
    assert await handed_off_state(service, world) == "waiting"  # this server now keeps them
    rule = await add_rule(elsewhere, world, decision="DENY")
    assert await handed_off_state(service, world) == "rejected"
    await add_rule(elsewhere, world, id=rule["id"], decision="ALLOW")
    assert await handed_off_state(service, world) == "routed"
    await delete_rule(elsewhere, owner(world.asg_owner), rule["id"])
    assert await handed_off_state(service, world) == "waiting"


async def test_a_server_keeps_a_bounded_number_of_rules(
    service: TaskService, world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(gate_rules, "KEPT_RULES", 3)
    rules = GateRules(service.db)
    for i in range(3):
        await add_rule(service, world, decision="DENY", priority=i)
    kept = await rules.current(world.asg_owner)
    assert len(kept.rules) == 3 and rules.kept == 1
    for i in range(5):
        await rules.current(f"{world.tag}-nobody-{i}")
    assert rules.kept == 3  # the owner with three rules went first: at most three rules kept
    with counting_statements() as statements:
        assert await rules.current(world.asg_owner) == kept
    assert statements() == 1  # read again: it was no longer kept


async def test_an_agent_cannot_manage_gate_rules(service: TaskService, world: World) -> None:
    rule = await add_rule(service, world, decision="DENY")
    its_agent = agent(world.assignee)

    assert (await set_rule(service, its_agent, decision="ALLOW"))["__typename"] == "ForbiddenError"
    assert (await delete_rule(service, its_agent, rule["id"]))["__typename"] == "ForbiddenError"
    response = await execute_raw(service, its_agent, RULES, {"owner": None})
    assert [e["extensions"]["code"] for e in response.errors] == ["forbidden"]
    assert await rules_of(service, owner(world.asg_owner)) == [rule]


async def test_an_owner_cannot_touch_another_owners_rules(
    service: TaskService, world: World
) -> None:
    rule = await add_rule(service, world, decision="DENY")
    other = owner(world.req_owner)

    deleted = await delete_rule(service, other, rule["id"])
    assert deleted["__typename"] == "NotFoundError", deleted
    replaced = await set_rule(service, other, id=rule["id"], decision="ALLOW")
    assert replaced["__typename"] == "NotFoundError", replaced
    named = await set_rule(service, other, owner=world.asg_owner, decision="ALLOW")
    assert named["__typename"] == "ForbiddenError", named
    response = await execute_raw(service, other, RULES, {"owner": world.asg_owner})
    assert [e["extensions"]["code"] for e in response.errors] == ["forbidden"]

    assert await rules_of(service, owner(world.asg_owner)) == [rule]
    assert await handed_off_state(service, world) == "rejected"


async def test_admin_manages_rules_by_naming_the_owner(service: TaskService, world: World) -> None:
    unnamed = await set_rule(service, ADMIN, decision="DENY")
    assert unnamed["__typename"] == "InvalidInputError"
    assert unnamed["field"] == "owner"

    set_ = await set_rule(service, ADMIN, owner=world.asg_owner, decision="DENY")
    assert set_["__typename"] == "GateRuleSuccess", set_
    rule = set_["rule"]
    assert rule["owner"] == world.asg_owner
    assert await rules_of(service, ADMIN, world.asg_owner) == [rule]
    assert await rules_of(service, owner(world.asg_owner)) == [rule]
    assert await handed_off_state(service, world) == "rejected"

    deleted = await delete_rule(service, ADMIN, rule["id"])
    assert deleted["__typename"] == "DeleteGateRuleSuccess"
    assert await rules_of(service, ADMIN, world.asg_owner) == []


@pytest.mark.parametrize(
    ("field", "glob"),
    [
        ("requester", "Bob/*"),
        ("requester", "bob"),
        ("requester", "bob/*/x"),
        ("requester", "bob/[ab]"),
        ("requester", "bob/a?"),
        ("requester", ""),
        ("project", "Web-*"),
        ("project", "web_*"),
        ("project", "web/x"),
        ("project", "[ab]*"),
        ("project", ""),
    ],
)
async def test_an_invalid_glob_is_invalid_input_and_adds_no_rule(
    service: TaskService, world: World, field: str, glob: str
) -> None:
    outcome = await set_rule(service, owner(world.asg_owner), decision="DENY", **{field: glob})
    assert outcome["__typename"] == "InvalidInputError", outcome
    assert outcome["code"] == "invalid_input"
    assert outcome["field"] == field
    assert await rules_of(service, owner(world.asg_owner)) == []


def in_digits(zero: str) -> Callable[[str], str]:
    """The rule's own id written with another script's digits (which `str.isdigit` accepts)."""
    return lambda real: real.translate({ord("0") + i: chr(ord(zero) + i) for i in range(10)})


NOT_RULE_IDS: dict[str, Callable[[str], str]] = {
    "letters": lambda real: "abc",
    "negative": lambda real: f"-{real}",
    "30 digits": lambda real: "1" * 30,
    "5,000 digits": lambda real: "9" * 5000,
    "a superscript": lambda real: f"{real}\u00b2",
    "empty": lambda real: "",
    "with a trailing newline": lambda real: f"{real}\n",
    "its own id in Arabic-Indic digits": in_digits("\u0660"),
    "its own id in fullwidth digits": in_digits("\uff10"),
}


@pytest.mark.parametrize("spell", list(NOT_RULE_IDS.values()), ids=list(NOT_RULE_IDS))
async def test_a_rule_id_that_is_not_ascii_digits_is_invalid_input_and_deletes_nothing(
    service: TaskService, world: World, spell: Callable[[str], str]
) -> None:
    mine = await set_rule(service, owner(world.asg_owner), decision="DENY")
    assert mine["__typename"] == "GateRuleSuccess", mine
    outcome = await delete_rule(service, owner(world.asg_owner), spell(mine["rule"]["id"]))
    assert outcome["__typename"] == "InvalidInputError", outcome
    assert outcome["field"] == "id"
    assert await rules_of(service, owner(world.asg_owner)) == [mine["rule"]]


# --- idempotent hand-off ---------------------------------------------------------------------


def client_id() -> str:
    return f"client-{secrets.token_hex(6)}"


async def test_a_repeated_hand_off_with_the_same_id_and_input_returns_the_task_unchanged(
    service: TaskService, world: World
) -> None:
    given = client_id()
    task_id = task_id_of(world.requester, given)
    first = await hand_off(service, world, id=given)
    assert first["__typename"] == "HandOffSuccess"
    assert first["task"]["id"] == task_id
    assert len(first["events"]) == 2

    again = await hand_off(service, world, id=given)

    assert again == {**first, "events": []}
    assert len(event_log(await task_with_events(service, task_id))) == 2


async def test_a_repeated_hand_off_after_the_task_moved_returns_it_as_it_is_now(
    service: TaskService, world: World
) -> None:
    given = client_id()
    task_id = task_id_of(world.requester, given)
    await add_rule(service, world, decision="ALLOW")
    await hand_off(service, world, id=given)
    accepted = await move(service, agent(world.assignee), "acceptTask", task_id)

    again = await hand_off(service, world, id=given)

    assert again["task"] == accepted["task"]
    assert again["events"] == []


@pytest.mark.parametrize(
    "change",
    [
        {"packet": {"task": "Something else"}},
        {"packet": {"deliverableType": "code"}},
        {"verification": "REVIEW"},
        {"assignee": "{asg}/b"},
        {"project": "q{tag}"},
    ],
    ids=["task", "deliverableType", "verification", "assignee", "project"],
)
async def test_the_same_id_with_different_input_is_a_duplicate_and_changes_nothing(
    service: TaskService, world: World, change: dict[str, Any]
) -> None:
    given = client_id()
    task_id = task_id_of(world.requester, given)
    first = await hand_off(service, world, id=given)
    change = {
        k: v.format(asg=world.asg_owner, tag=world.tag) if isinstance(v, str) else v
        for k, v in change.items()
    }

    again = await hand_off(service, world, id=given, **change)

    assert again["__typename"] == "DuplicateTaskError", again
    assert again["code"] == "duplicate"
    assert again["id"] == task_id
    now = await task_with_events(service, task_id)
    assert {k: now[k] for k in ("id", "state", "waitingOn", "version")} == first["task"]
    assert now["packet"]["task"] == PACKET_INPUT["task"]
    assert len(event_log(now)) == len(first["events"])


async def test_concurrent_identical_hand_offs_with_one_id_create_one_task(
    service: TaskService, world: World
) -> None:
    given = client_id()
    task_id = task_id_of(world.requester, given)
    await add_rule(service, world, decision="ALLOW")

    outcomes = await asyncio.gather(*(hand_off(service, world, id=given) for _ in range(5)))

    assert {o["__typename"] for o in outcomes} == {"HandOffSuccess"}
    assert {o["task"]["id"] for o in outcomes} == {task_id}
    assert all(o["task"] == outcomes[0]["task"] for o in outcomes)
    assert outcomes[0]["task"]["state"] == "routed"
    appended = [o["events"] for o in outcomes if o["events"]]
    assert len(appended) == 1
    assert [e["move"] for e in appended[0]] == [None, "ROUTE"]
    log = event_log(await task_with_events(service, task_id))
    assert [e["kind"] for e in log] == ["created", "moved"]


# --- client ids are scoped to the requester's owner ------------------------------------------


async def test_two_owners_hand_off_with_the_same_client_id_and_get_two_tasks(
    service: TaskService, world: World
) -> None:
    other = World(service)
    given = client_id()

    mine = await hand_off(service, world, id=given)
    theirs = await hand_off(service, other, id=given)

    assert mine["__typename"] == theirs["__typename"] == "HandOffSuccess", (mine, theirs)
    assert mine["task"]["id"] == f"{world.req_owner}_{given}"
    assert theirs["task"]["id"] == f"{other.req_owner}_{given}"
    assert len(theirs["events"]) == 2


@pytest.mark.parametrize("probe", ["client id", "task id"])
async def test_another_owners_id_tells_nothing_and_claims_nothing(
    service: TaskService, world: World, probe: str
) -> None:
    given = client_id()
    victim = await hand_off(service, world, id=given)
    prober = World(service)
    spelled = given if probe == "client id" else victim["task"]["id"]

    # Different input than the victim's: a shared id space would answer DuplicateTaskError.
    outcome = await hand_off(service, prober, id=spelled, packet={"task": "Something else"})

    assert outcome["__typename"] == "HandOffSuccess", outcome
    assert outcome["task"]["id"] == f"{prober.req_owner}_{spelled}"
    still = await task_with_events(service, victim["task"]["id"])
    assert still["packet"]["task"] == PACKET_INPUT["task"]
    assert len(event_log(still)) == len(victim["events"])
    # And the victim's later idempotent hand-off still finds its own task.
    assert await hand_off(service, world, id=given) == {**victim, "events": []}


async def test_a_client_id_that_does_not_fit_beside_the_owner_is_invalid_input(
    service: TaskService, world: World
) -> None:
    room = ID_MAX - len(world.req_owner) - 1
    fits = await hand_off(service, world, id="x" * room)
    too_long = await hand_off(service, world, id="y" * (room + 1))

    assert fits["__typename"] == "HandOffSuccess", fits
    assert len(fits["task"]["id"]) == ID_MAX
    assert too_long["__typename"] == "InvalidInputError", too_long
    assert too_long["field"] == "id"
    assert f"at most {room} characters" in too_long["message"]
