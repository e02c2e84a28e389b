"""Replay from a cursor with each filter: exactly the matching events, from the database.

A subscription with `after` first reads the committed events after the cursor with its filter
as SQL (`baton.live.filters`), then continues live with the same filter in Python. Each test
here subscribes as an owner to a history it wrote itself (tasks or runs of its agents, with
another owner's interleaved), after the server's reader has moved past that history (so it
can only come from the SQL), then writes a closing stretch that the filter matches. What it
receives up to there must be exactly what this file's own predicate picks from the events it
wrote, in id order: nothing missing, nothing extra, nothing of the other owner.
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from baton.access.principals import Principal, PrincipalKind
from tests.conftest import LiveServer
from tests.helpers import PACKET_INPUT, RESULT_INPUT
from tests.live.client import TRANSPORT_WS, HTTPClient, WSClient

TASK_EVENTS = """subscription($filter: TaskEventFilter, $after: ID) {
  taskEvents(filter: $filter, after: $after) { id kind taskId toState } }"""
RUN_EVENTS = """subscription($filter: RunEventFilter, $after: ID) {
  runEvents(filter: $filter, after: $after) { id kind runId event toStatus } }"""

HAND_OFF = """mutation($input: HandOffInput!) { handOff(input: $input) {
  __typename ... on HandOffSuccess { task { id } events { id kind toState } }
  ... on Error { code message } } }"""
CREATE_RUN = """mutation($input: CreateRunInput!) { createRun(input: $input) {
  __typename ... on RunMoveSuccess { run { id } events { id kind event toStatus } }
  ... on Error { code message } } }"""


def move_document(mutation: str, *, run: bool = False) -> str:
    input_type = mutation[0].upper() + mutation[1:] + "Input"
    success = (
        "... on RunMoveSuccess { events { id kind event toStatus } }"
        if run
        else "... on MoveSuccess { events { id kind toState } }"
    )
    return f"""mutation($input: {input_type}!) {{ {mutation}(input: $input) {{
      __typename {success} ... on Error {{ code message }} }} }}"""


@dataclass(frozen=True)
class Written:
    """An event as the test wrote it: what its own predicates read."""

    id: int
    kind: str
    subject: str  # the task's or the run's id
    to: str  # toState / toStatus
    event: str | None = None  # a run event's name
    project: str = ""
    requester: str = ""
    assignee: str = ""
    task_id: str | None = None  # the task a run is linked to
    mine: bool = True  # False: another owner's, never to be delivered


@dataclass
class Owner:
    """An owner unique to this module with an HTTP client, and every event it wrote."""

    name: str
    http: HTTPClient
    token: str
    written: list[Written] = field(default_factory=list)

    async def call(self, document: str, field_name: str, **variables: Any) -> dict[str, Any]:
        answer: dict[str, Any] = (await self.http(document, **variables))[field_name]
        assert answer["__typename"] in ("HandOffSuccess", "MoveSuccess", "RunMoveSuccess"), answer
        return answer


async def make_owner(live_server: LiveServer, name: str) -> Owner:
    token = await live_server.token(Principal(PrincipalKind.OWNER, name))
    return Owner(name, HTTPClient(live_server.url, token), token)


# --- tasks ---------------------------------------------------------------------------------


class Tasks:
    def __init__(self, owner: Owner, other: Owner) -> None:
        self.owner, self.other = owner, other
        self.tag = owner.name
        self.project = {"1": f"{self.tag}-one", "2": f"{self.tag}-two"}

    def agent(self, name: str, owner: Owner | None = None) -> str:
        return f"{(owner or self.owner).name}/{name}"

    async def hand_off(
        self, project: str, requester: str, assignee: str, owner: Owner | None = None
    ) -> str:
        who = owner or self.owner
        answer = await who.call(
            HAND_OFF,
            "handOff",
            input={
                "project": project,
                "requester": self.agent(requester, who),
                "assignee": self.agent(assignee, who),
                "packet": PACKET_INPUT,
            },
        )
        task_id: str = answer["task"]["id"]
        self._record(who, answer["events"], task_id, project, requester, assignee)
        return task_id

    async def move(self, task_id: str, mutation: str, **input: Any) -> None:
        answer = await self.owner.call(
            move_document(mutation), mutation, input={"id": task_id, **input}
        )
        first = next(e for e in self.owner.written if e.subject == task_id)
        self._record(
            self.owner,
            answer["events"],
            task_id,
            first.project,
            first.requester.split("/")[1],
            first.assignee.split("/")[1],
        )

    def _record(
        self,
        who: Owner,
        events: list[dict[str, Any]],
        task_id: str,
        project: str,
        requester: str,
        assignee: str,
    ) -> None:
        for e in events:
            self.owner.written.append(
                Written(
                    int(e["id"]),
                    e["kind"],
                    task_id,
                    e["toState"],
                    project=project,
                    requester=self.agent(requester, who),
                    assignee=self.agent(assignee, who),
                    mine=who is self.owner,
                )
            )

    async def history(self) -> None:
        """Tasks in many states, kinds and pairs of agents, another owner's in between."""
        one, two = self.project["1"], self.project["2"]
        first = await self.hand_off(one, "r1", "a1")
        await self.hand_off(one, "r1", "a1", owner=self.other)  # never seen by the owner
        for mutation in ("acceptTask", "startTask"):
            await self.move(first, mutation)
        await self.move(first, "saveCheckpoint", checkpoint={"progress": "half way"})
        await self.move(first, "pauseTask", waitingOn="human")
        second = await self.hand_off(two, "r2", "a1")
        await self.move(second, "acceptTask")
        await self.move(second, "cancelTask", reason="not now")
        third = await self.hand_off(one, "r1", "a2")
        for mutation in ("acceptTask", "startTask"):
            await self.move(third, mutation)
        await self.move(third, "submitResult", result=RESULT_INPUT)  # verifying, completed
        await self.hand_off(two, "r2", "a2", owner=self.other)
        await self.hand_off(two, "r2", "a2")

    async def closing(self) -> None:
        """What every filter below matches some of: created, routed, accepted, working (a
        move and a checkpoint), cancelled; requester r1, assignee a2."""
        task = await self.hand_off(self.project["1"], "r1", "a2")
        for mutation in ("acceptTask", "startTask"):
            await self.move(task, mutation)
        await self.move(task, "saveCheckpoint", checkpoint={"progress": "started"})
        await self.move(task, "cancelTask")


async def settled(live_server: LiveServer, document: str, kind: str) -> None:
    """Until the server's reader of `kind` events has read everything committed so far: a
    live subscription (no cursor) of a fresh owner receives one of its own new events, which
    only that reader delivers, after every event written before it."""
    probe = await make_owner(live_server, f"z{secrets.token_hex(4)}")
    ws = await WSClient.open(live_server.url, probe.token, TRANSPORT_WS)
    try:
        await ws.subscribe(document, {"filter": {"projects": [probe.name]}})
        while True:  # until the subscription shows it is listening
            if kind == "task":
                await Tasks(probe, probe).hand_off(probe.name, "r", "a")
            else:
                await probe.call(
                    CREATE_RUN, "createRun", input={"project": probe.name, "title": "p"}
                )
            try:
                await ws.next(wait=1)
                return
            except TimeoutError:
                continue
    finally:
        await ws.close()
        await probe.http.aclose()


@pytest.fixture(scope="module")
async def tasks(live_server: LiveServer) -> AsyncIterator[Tasks]:
    tag = secrets.token_hex(4)
    owner, other = (
        await make_owner(live_server, f"f{tag}"),
        await make_owner(live_server, f"g{tag}"),
    )
    tasks = Tasks(owner, other)
    try:
        await tasks.history()
        yield tasks
    finally:
        await owner.http.aclose()
        await other.http.aclose()


TaskCase = tuple[dict[str, Any], Callable[[Written, Tasks], bool]]
TASK_FILTERS: dict[str, TaskCase] = {
    "kinds=checkpoint_saved": (
        {"kinds": ["checkpoint_saved"]},
        lambda e, t: e.kind == "checkpoint_saved",
    ),
    "kinds=created,checkpoint_saved": (
        {"kinds": ["created", "checkpoint_saved"]},
        lambda e, t: e.kind in ("created", "checkpoint_saved"),
    ),
    "states=working": ({"states": ["working"]}, lambda e, t: e.to == "working"),
    "states=routed,cancelled": (
        {"states": ["routed", "cancelled"]},
        lambda e, t: e.to in ("routed", "cancelled"),
    ),
    "requester": (
        {"requester": "{owner}/r1"},
        lambda e, t: e.requester == t.agent("r1"),
    ),
    "assignee": ({"assignee": "{owner}/a2"}, lambda e, t: e.assignee == t.agent("a2")),
    "requester+assignee+states": (
        {"requester": "{owner}/r1", "assignee": "{owner}/a2", "states": ["working"]},
        lambda e, t: (
            e.requester == t.agent("r1") and e.assignee == t.agent("a2") and e.to == "working"
        ),
    ),
    "projects+kinds": (
        {"projects": ["{one}"], "kinds": ["moved"]},
        lambda e, t: e.project == t.project["1"] and e.kind == "moved",
    ),
}


def filled(value: Any, names: dict[str, str]) -> Any:
    if isinstance(value, str):
        return value.format(**names)
    if isinstance(value, list):
        return [filled(v, names) for v in value]
    return {k: filled(v, names) for k, v in value.items()}


async def replayed(
    live_server: LiveServer,
    owner: Owner,
    document: str,
    variables: dict[str, Any],
    expected: Callable[[], list[Written]],
    closing: Callable[[], Any],
    field_name: str,
) -> tuple[list[dict[str, Any]], list[Written]]:
    ws = await WSClient.open(live_server.url, owner.token, TRANSPORT_WS)
    try:
        await ws.subscribe(document, variables)
        await closing()
        want = expected()
        got: list[dict[str, Any]] = []
        while len(got) < len(want):
            try:
                data = await ws.next(wait=30)
            except TimeoutError:
                break  # fewer than expected: the comparison shows which
            assert data is not None, "the server ended the subscription"
            got.append(data[field_name])
        return got, want
    finally:
        await ws.close()


@pytest.mark.parametrize("case", list(TASK_FILTERS), ids=list(TASK_FILTERS))
async def test_task_events_replay_exactly_what_the_filter_matches(
    live_server: LiveServer, tasks: Tasks, case: str
) -> None:
    raw, predicate = TASK_FILTERS[case]
    names = {"owner": tasks.owner.name, "one": tasks.project["1"]}
    after = min(e.id for e in tasks.owner.written) - 1
    before_closing = len(tasks.owner.written)
    assert any(predicate(e, tasks) for e in tasks.owner.written if e.mine), "history matches"
    assert not all(predicate(e, tasks) for e in tasks.owner.written), "history not all matches"
    await settled(live_server, TASK_EVENTS, "task")

    def expected() -> list[Written]:
        return [e for e in tasks.owner.written if e.mine and predicate(e, tasks)]

    got, want = await replayed(
        live_server,
        tasks.owner,
        TASK_EVENTS,
        {"filter": filled(raw, names), "after": str(after)},
        expected,
        tasks.closing,
        "taskEvents",
    )
    assert any(predicate(e, tasks) for e in tasks.owner.written[before_closing:]), "closing"
    assert [(int(e["id"]), e["kind"], e["taskId"], e["toState"]) for e in got] == [
        (e.id, e.kind, e.subject, e.to) for e in want
    ]


# --- runs ----------------------------------------------------------------------------------


class Runs:
    def __init__(self, owner: Owner, other: Owner) -> None:
        self.owner, self.other = owner, other
        self.project = {"1": f"{owner.name}-q1", "2": f"{owner.name}-q2"}
        self.runs: dict[str, tuple[str, str | None]] = {}  # run id -> project, task id
        self.task_ids: list[str] = []

    async def create(self, project: str, task_id: str | None, owner: Owner | None = None) -> str:
        who = owner or self.owner
        input = {"project": project, "title": "Fix the login page"}
        if task_id is not None:
            input["taskId"] = task_id
        answer = await who.call(CREATE_RUN, "createRun", input=input)
        run_id: str = answer["run"]["id"]
        self.runs[run_id] = (project, task_id)
        self._record(who, run_id, answer["events"])
        return run_id

    async def event(self, run_id: str, mutation: str, **input: Any) -> None:
        answer = await self.owner.call(
            move_document(mutation, run=True), mutation, input={"id": run_id, **input}
        )
        self._record(self.owner, run_id, answer["events"])

    def _record(self, who: Owner, run_id: str, events: list[dict[str, Any]]) -> None:
        project, task_id = self.runs[run_id]
        for e in events:
            self.owner.written.append(
                Written(
                    int(e["id"]),
                    e["kind"],
                    run_id,
                    e["toStatus"],
                    event=e["event"],
                    project=project,
                    task_id=task_id,
                    mine=who is self.owner,
                )
            )

    async def history(self, tasks: Tasks) -> None:
        one, two = self.project["1"], self.project["2"]
        first_task = await tasks.hand_off(one, "r", "a")
        second_task = await tasks.hand_off(one, "r", "a")
        self.task_ids = [first_task, second_task]
        r1 = await self.create(one, first_task)
        await self.create(one, None, owner=self.other)  # never seen by the owner
        await self.event(r1, "claimRun")
        await self.event(r1, "requestUserInput", questions=["Which database?"])
        await self.event(r1, "provideUserInput", answers=["PostgreSQL"])
        await self.event(r1, "claimRun")
        await self.event(r1, "reachCheckpoint", checkpoint="plans_complete")
        self.second = await self.create(two, None)
        await self.event(self.second, "interruptRun")
        await self.event(self.second, "resumeRun")
        r3 = await self.create(one, second_task)
        await self.event(r3, "claimRun")
        await self.event(r3, "failRun", reason="the tests kept failing")
        await self.event(r3, "requestRerun")

    async def closing(self) -> None:
        """What every filter below matches some of: a new run of project one on the first
        task, claimed, at a checkpoint, interrupted; the second run interrupted and resumed."""
        run = await self.create(self.project["1"], self.task_ids[0])
        await self.event(run, "claimRun")
        await self.event(run, "reachCheckpoint", checkpoint="plans_complete")
        await self.event(run, "interruptRun")
        await self.event(self.second, "interruptRun")
        await self.event(self.second, "resumeRun")


@pytest.fixture(scope="module")
async def runs(live_server: LiveServer, tasks: Tasks) -> AsyncIterator[Runs]:
    owner = tasks.owner
    runs = Runs(Owner(owner.name, owner.http, owner.token), tasks.other)
    # The runs' events go to a list of their own; the tasks they link to stay in `tasks`.
    await runs.history(Tasks(owner, tasks.other))
    yield runs


RunCase = tuple[Callable[[Runs], dict[str, Any]], Callable[[Written, Runs], bool]]
RUN_FILTERS: dict[str, RunCase] = {
    "runIds": (
        lambda r: {"runIds": [r.second]},
        lambda e, r: e.subject == r.second,
    ),
    "projects": (
        lambda r: {"projects": [r.project["1"]]},
        lambda e, r: e.project == r.project["1"],
    ),
    "taskIds": (
        lambda r: {"taskIds": [r.task_ids[0]]},
        lambda e, r: e.task_id == r.task_ids[0],
    ),
    "events=USER_INTERRUPTED": (
        lambda r: {"events": ["USER_INTERRUPTED"]},
        lambda e, r: e.event == "USER_INTERRUPTED",
    ),
    "events=CLAIM,USER_RESUMED": (
        lambda r: {"events": ["CLAIM", "USER_RESUMED"]},
        lambda e, r: e.event in ("CLAIM", "USER_RESUMED"),
    ),
    "statuses=interrupted": (
        lambda r: {"statuses": ["interrupted"]},
        lambda e, r: e.to == "interrupted",
    ),
    "statuses=in_progress,backlog": (
        lambda r: {"statuses": ["in_progress", "backlog"]},
        lambda e, r: e.to in ("in_progress", "backlog"),
    ),
    "projects+events": (
        lambda r: {"projects": [r.project["1"]], "events": ["CHECKPOINT_REACHED"]},
        lambda e, r: e.project == r.project["1"] and e.event == "CHECKPOINT_REACHED",
    ),
}


@pytest.mark.parametrize("case", list(RUN_FILTERS), ids=list(RUN_FILTERS))
async def test_run_events_replay_exactly_what_the_filter_matches(
    live_server: LiveServer, runs: Runs, case: str
) -> None:
    make_filter, predicate = RUN_FILTERS[case]
    written = runs.owner.written
    after = min(e.id for e in written) - 1
    before_closing = len(written)
    assert any(predicate(e, runs) for e in written if e.mine), "history matches"
    assert not all(predicate(e, runs) for e in written), "history not all matches"
    await settled(live_server, RUN_EVENTS, "run")

    def expected() -> list[Written]:
        return [e for e in written if e.mine and predicate(e, runs)]

    got, want = await replayed(
        live_server,
        runs.owner,
        RUN_EVENTS,
        {"filter": make_filter(runs), "after": str(after)},
        expected,
        runs.closing,
        "runEvents",
    )
    assert any(predicate(e, runs) for e in written[before_closing:]), "closing"
    assert [(int(e["id"]), e["kind"], e["runId"], e["event"], e["toStatus"]) for e in got] == [
        (e.id, e.kind, e.subject, e.event, e.to) for e in want
    ]
