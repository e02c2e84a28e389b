"""The seed pages and API.md, copied by hand: the oracles the protocol tables are checked against.

The repo never reads the documents at run time, so what the tests need of them is here,
verbatim, with small parsers. Nothing here is derived from `HANDOFF` or `PIPELINE`.
"""

from __future__ import annotations

import re

# --- seed 000_00409f17a4e40636.txt (the handoff protocol), verbatim excerpts ----------------

SEED_HEADER = "10 states · 22 allowed moves · 3 end a task"

SEED_STATES = """
### `requested`
- **Moves to:** `routed`, `waiting`, `rejected`, `cancelled`
- **Reached from:** nothing. A handoff creates the task here.
### `routed`
- **Moves to:** `accepted`, `cancelled`
- **Reached from:** `requested`, `waiting`
### `accepted`
- **Moves to:** `working`, `cancelled`
- **Reached from:** `routed`
### `working`
- **Moves to:** `waiting`, `verifying`, `cancelled`
- **Reached from:** `accepted`, `waiting`, `verifying`, `approval`
### `waiting`
- **Moves to:** `routed`, `working`, `rejected`, `cancelled`
- **Reached from:** `requested`, `working`
### `verifying`
- **Moves to:** `approval`, `completed`, `working`, `cancelled`
- **Reached from:** `working`
### `approval`
- **Moves to:** `completed`, `working`, `cancelled`
- **Reached from:** `verifying`
### `completed`
- **Moves to:** nothing. This state ends the task.
- **Reached from:** `verifying`, `approval`
### `rejected`
- **Moves to:** nothing. This state ends the task.
- **Reached from:** `requested`, `waiting`
### `cancelled`
- **Moves to:** nothing. This state ends the task.
- **Reached from:** `requested`, `routed`, `accepted`, `working`, `waiting`, `verifying`, `approval`
"""

SEED_ALLOWED_MOVES = """
- `requested` → `routed`
- `requested` → `waiting`
- `requested` → `rejected`
- `requested` → `cancelled`
- `routed` → `accepted`
- `routed` → `cancelled`
- `accepted` → `working`
- `accepted` → `cancelled`
- `working` → `waiting`
- `working` → `verifying`
- `working` → `cancelled`
- `waiting` → `routed`
- `waiting` → `working`
- `waiting` → `rejected`
- `waiting` → `cancelled`
- `verifying` → `approval`
- `verifying` → `completed`
- `verifying` → `working`
- `verifying` → `cancelled`
- `approval` → `completed`
- `approval` → `working`
- `approval` → `cancelled`
"""

# --- API.md §3: each pair's mutation and who makes it, verbatim rows -----------------------

API_HANDOFF_ROWS = """
| requested → routed | `routeTask` | the gate; or the assignee's owner |
| requested → waiting (`owner_approval`) | `holdTask` | the gate; or the assignee's owner |
| requested → rejected | `rejectTask` | the gate; or the assignee's owner |
| routed → accepted | `acceptTask` | assignee |
| accepted → working | `startTask` | assignee |
| working → waiting (`human` or `agent`) | `pauseTask(waitingOn:)` | assignee |
| working → verifying | `submitResult(result:)` | assignee |
| waiting → routed | `approveTask` (only when waiting on `owner_approval`) | assignee's owner |
| waiting → rejected | `denyTask` (only when waiting on `owner_approval`) | assignee's owner |
| waiting → working | `resumeTask` (only when waiting on `human` or `agent`) | assignee |
| verifying → completed | `completeTask` | the verifier (see below) |
| verifying → approval | `requestSignOff` | the verifier |
| verifying → working | `sendBackTask(reason:)` | the verifier |
| approval → completed | `signOffTask` | requester's owner |
| approval → working | `requestChanges(reason:)` | requester's owner |
| requested/routed/accepted/working/waiting/verifying/approval → cancelled | `cancelTask(reason:)` | requester |
"""  # noqa: E501

# API.md's words for who makes a move, as the table's actor names (§3 and §8 "Who, precisely").
API_WHO = {
    "the gate; or the assignee's owner": "gate",
    "assignee's owner": "gate",  # approve/deny: the assignee's owner, as the gate would
    "assignee": "assignee",
    "the verifier (see below)": "verifier",
    "the verifier": "verifier",
    "requester's owner": "requester_owner",
    "requester": "requester",
}

# --- seed 003_dd39d8073992741d.txt (the pipeline lifecycle), verbatim ------------------------

SEED_PIPELINE_TRANSITIONS = """
| `CLAIM`                           | → `in_progress`                 |
| `PLAN_NEEDS_INPUT`                | → `awaiting_user`               |
| `PR_OPENED`                       | → `in_review` + `pr_complete`   |
| `PR_MERGED` / `NOTIFIED`          | → `completed`                   |
| `HOST_OFFLINE`                    | → `waiting_for_agent`           |
| `USER_INTERRUPTED`                | → `interrupted`                 |
| `FAILED` / verification exhausted | → `errored`                     |
| `RERUN_REQUESTED`                 | → `backlog` + checkpoint `none` |
"""

# --- API.md §6: every event with its mutation, the statuses it leaves and where it goes ---

API_PIPELINE_ROWS = """
| CLAIM | `claimRun` | backlog, waiting_for_agent | in_progress |
| (checkpoint reached) | `reachCheckpoint(checkpoint:)` | in_progress | in_progress |
| PLAN_NEEDS_INPUT | `requestUserInput(questions:)` | in_progress, phase `planning` | awaiting_user |
| (answers given) | `provideUserInput(answers:)` | awaiting_user | backlog |
| PR_OPENED | `openPullRequest(url:)` | in_progress, checkpoint `summary_complete` | in_review |
| PR_MERGED | `mergePullRequest` | in_review | completed |
| NOTIFIED | `markNotified` | in_review | completed |
| HOST_OFFLINE | `reportHostOffline` | in_progress | waiting_for_agent |
| USER_INTERRUPTED | `interruptRun` | backlog, in_progress, awaiting_user, waiting_for_agent | interrupted |
| (resume) | `resumeRun` | interrupted | backlog |
| FAILED / verification exhausted | `failRun(reason:)` | in_progress | errored |
| RERUN_REQUESTED | `requestRerun` | errored, interrupted | backlog |
"""  # noqa: E501

# The names Baton gives the three events API.md leaves unnamed (the table's own choice,
# pinned here so a rename is a decision, not an accident).
UNNAMED_EVENTS = {
    "(checkpoint reached)": "CHECKPOINT_REACHED",
    "(answers given)": "USER_ANSWERED",
    "(resume)": "USER_RESUMED",
    "FAILED / verification exhausted": "FAILED",
}

Pair = tuple[str, str]


def _names(cell: str) -> list[str]:
    return re.findall(r"`(\w+)`", cell)


def seed_list_pairs() -> set[Pair]:
    found = re.findall(r"^- `(\w+)` → `(\w+)`$", SEED_ALLOWED_MOVES, re.MULTILINE)
    assert len(found) == len(SEED_ALLOWED_MOVES.strip().splitlines())  # every line parsed
    return set(found)


def seed_state_sections() -> dict[str, tuple[list[str], list[str], bool]]:
    """Per state: the targets it moves to, the sources it is reached from, whether it ends."""
    out: dict[str, tuple[list[str], list[str], bool]] = {}
    for block in SEED_STATES.strip().split("### ")[1:]:
        head, moves_to, reached_from = block.strip().splitlines()
        assert moves_to.startswith("- **Moves to:** ") and reached_from.startswith(
            "- **Reached from:** "
        )
        out[_names(head)[0]] = (
            _names(moves_to),
            _names(reached_from),
            "This state ends the task." in moves_to,
        )
    return out


def _mutation(cell: str) -> str:
    """`pauseTask(waitingOn:)` (only when …) is pauseTask."""
    return re.findall(r"`(\w+)", cell)[0]


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def api_handoff_rows() -> set[tuple[str, str, str, str]]:
    """(source, target, mutation, actor) for each pair API.md §3 lists."""
    rows = set()
    for line in API_HANDOFF_ROWS.strip().splitlines():
        pair, mutation, who = _cells(line)
        sources, target = re.match(r"([\w/]+) → (\w+)", pair).groups()  # type: ignore[union-attr]
        for source in sources.split("/"):
            rows.add((source, target, _mutation(mutation), API_WHO[who]))
    return rows


def api_pipeline_rows() -> set[tuple[str, str, str, str]]:
    """(event, source, target, mutation) for each row and source status of API.md §6."""
    rows = set()
    for line in API_PIPELINE_ROWS.strip().splitlines():
        event, mutation, sources, target = _cells(line)
        name = UNNAMED_EVENTS.get(event, event)
        for source in sources.split(", "):
            if " " in source:  # "phase `planning`", "checkpoint `summary_complete`": guards
                continue
            rows.add((name, source, target, _mutation(mutation)))
    return rows


def seed_pipeline_targets() -> dict[str, str]:
    """Seed 003's "Important transitions": each event it names and the status it leads to."""
    out = {}
    for line in SEED_PIPELINE_TRANSITIONS.strip().splitlines():
        events, result = _cells(line)
        for event in re.findall(r"`([A-Z_]+)`", events):
            out[event] = _names(result)[0]
    return out
