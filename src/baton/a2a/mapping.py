"""Baton's tasks and events as A2A's types, and A2A messages as hand-offs and replies. No I/O.

One table, `STATES`, says which A2A task state each position of the handoff lifecycle is;
everything else here reads it. What the door renders from a task or an event is a pure
function of it (and of the task's A2A context), so a task streamed, fetched, resumed after a
restart or pushed to a webhook says the same.

- A task: its status is the newest event's (below), its artifacts its result (`result`: the
  summary as text, the result but its evidence as data; `evidence`: the evidence), its history
  the message that handed it off (rebuilt from the packet) and the status messages of its newest
  events, its metadata Baton's view (`{"baton": {state, waitingOn, version, ...}}`).
- An event: a status update (and, for a returned result, the result's artifact updates first).
  A status message says what A2A's state cannot: a checkpoint (its progress as text, the whole
  checkpoint as data), a move's reason, and where the task waits on someone (the owner's
  approval, a person or agent, the requester's verdict or sign-off), in the seed's words.
  Every update's metadata carries `generation` (the task's version) and the event id.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from a2a.helpers.proto_helpers import new_data_part
from a2a.types.a2a_pb2 import (
    Artifact,
    Message,
    Part,
    Role,
    StreamResponse,
    Task,
    TaskArtifactUpdateEvent,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from a2a.types.a2a_pb2 import TaskState as A2AState
from a2a.utils.errors import ContentTypeNotSupportedError
from google.protobuf.struct_pb2 import Value  # type: ignore[import-untyped]  # no stubs

from baton.access.principals import Principal, PrincipalKind
from baton.errors import InvalidInput
from baton.protocol.handoff import (
    HANDOFF,
    MUTATIONS,
    WAITING_ON_DESCRIPTIONS,
    Actor,
    MoveName,
    TaskState,
    Verification,
    WaitingOn,
)
from baton.protocol.params import camel
from baton.protocol.task_object import PACKET_SCHEMA, DeliverableType
from baton.services.tasks import HandOff, MoveArgs
from baton.store.records import EventRecord, TaskEventKind, TaskRecord

S, W = TaskState, WaitingOn

# Every position of the handoff lifecycle as an A2A task state. INPUT_REQUIRED only where the
# requester's side (the A2A client) has the next move; AUTH_REQUIRED where the receiving owner
# must approve (the client cannot). A pause on a person or another agent is the assignee's own:
# the task is still being worked on, and the status message says on what it waits.
STATES: Final[Mapping[tuple[TaskState, WaitingOn | None], A2AState]] = {
    (S.requested, None): A2AState.TASK_STATE_SUBMITTED,
    (S.routed, None): A2AState.TASK_STATE_SUBMITTED,
    (S.accepted, None): A2AState.TASK_STATE_WORKING,
    (S.working, None): A2AState.TASK_STATE_WORKING,
    (S.waiting, W.owner_approval): A2AState.TASK_STATE_AUTH_REQUIRED,
    (S.waiting, W.human): A2AState.TASK_STATE_WORKING,
    (S.waiting, W.agent): A2AState.TASK_STATE_WORKING,
    (S.verifying, None): A2AState.TASK_STATE_INPUT_REQUIRED,
    (S.approval, None): A2AState.TASK_STATE_INPUT_REQUIRED,
    (S.completed, None): A2AState.TASK_STATE_COMPLETED,
    (S.rejected, None): A2AState.TASK_STATE_REJECTED,
    (S.cancelled, None): A2AState.TASK_STATE_CANCELED,
}
# The one rule beside the table: a result handed off with AUTO or SIGN_OFF verification passes
# through `verifying` in the same step that returned it (`AFTER_VERIFYING`), so it asks the
# client for nothing there: the result is being checked.
PASSING_THROUGH: Final = A2AState.TASK_STATE_WORKING
# FAILED is never used: Baton has no failure state (work that cannot be done is cancelled,
# sent back or rejected).
TERMINAL: Final = frozenset(
    {A2AState.TASK_STATE_COMPLETED, A2AState.TASK_STATE_REJECTED, A2AState.TASK_STATE_CANCELED}
)
INTERRUPTED: Final = frozenset(
    {A2AState.TASK_STATE_INPUT_REQUIRED, A2AState.TASK_STATE_AUTH_REQUIRED}
)

# The message parts one request may carry (a packet needs a few: text, one data part, files).
MAX_PARTS: Final = 32
DEFAULT_PROJECT: Final = "a2a"
DEFAULT_DELIVERABLE: Final = DeliverableType.answer
JSON: Final = "application/json"
TEXT: Final = "text/plain"
# Room in a task id for an id derived from a message id: owner handles have at most 39
# characters, task ids at most 64 (`owner_<id>`).
DERIVED_ID_LENGTH: Final = 24


def a2a_state(
    state: TaskState, waiting_on: WaitingOn | None, verification: Verification
) -> A2AState:
    if state is S.verifying and verification is not Verification.REVIEW:
        return PASSING_THROUGH
    return STATES[(state, waiting_on)]


def state_of(task: TaskRecord) -> A2AState:
    return a2a_state(task.state, task.waiting_on, task.verification)


# --- what comes in: a message's parts ---------------------------------------------------------


@dataclass(frozen=True)
class Parts:
    """A message's parts, read: the text parts joined, the data parts' objects merged (each
    key with where it came from), and the URLs of its file parts."""

    text: str
    data: dict[str, Any]
    fields: dict[str, str]  # data key -> `message.parts[i].data.key`
    files: list[str]


def read_parts(message: Message) -> Parts:
    """The parts of `message`, held to `MAX_PARTS`; a file given as raw bytes is refused
    (Baton keeps no blobs: give its URL), as is a data part that is not a JSON object."""
    if len(message.parts) > MAX_PARTS:
        raise InvalidInput("message.parts", f"at most {MAX_PARTS} parts")
    texts: list[str] = []
    data: dict[str, Any] = {}
    fields: dict[str, str] = {}
    files: list[str] = []
    for index, part in enumerate(message.parts):
        where = f"message.parts[{index}]"
        kind = part.WhichOneof("content")
        if kind == "text":
            texts.append(part.text)
        elif kind == "url":
            files.append(part.url)
        elif kind == "raw":
            raise ContentTypeNotSupportedError(
                "a file part with raw bytes: Baton keeps no files, give the file's URL",
                data={"code": "invalid_input", "field": f"{where}.raw"},
            )
        elif kind == "data":
            value = plain(part.data)
            if not isinstance(value, dict):
                raise InvalidInput(f"{where}.data", "must be a JSON object")
            for key, item in value.items():
                data[key] = item
                fields[key] = f"{where}.data.{key}"
        else:
            raise InvalidInput(where, "has no content (text, url, raw or data)")
    return Parts("\n\n".join(t for t in texts if t), data, fields, files)


def plain(value: Value) -> Any:
    """A data part's value as the JSON it was parsed from: what the SDK's `get_data_parts`
    answers (`MessageToDict`: every number a float), without walking descriptors."""
    kind = value.WhichOneof("kind")
    if kind == "struct_value":
        return {key: plain(item) for key, item in value.struct_value.fields.items()}
    if kind == "list_value":
        return [plain(item) for item in value.list_value.values]
    if kind == "string_value":
        return value.string_value
    if kind == "number_value":
        number = value.number_value
        if not math.isfinite(number):  # JSON has none (MessageToDict refuses them too)
            raise InvalidInput("message.parts", "numbers must be finite")
        return number
    if kind == "bool_value":
        return value.bool_value
    return None  # null_value, or no value at all


# The packet's fields by the names a data part may give them (snake_case or camelCase).
PACKET_FIELDS: Final = {
    **{name: name for name in PACKET_SCHEMA["properties"]},
    **{camel(name): name for name in PACKET_SCHEMA["properties"]},
}
HAND_OFF_KEYS: Final = frozenset(
    {"project", "verification", "id", "requester", "assignee", *PACKET_FIELDS}
)
REPLY_KEYS: Final = frozenset({"move", "reason", "result", "waitingOn", "waiting_on"})
MOVES_BY_MUTATION: Final = {mutation: name for name, mutation in MUTATIONS.items()}


def _unknown(parts: Parts, allowed: frozenset[str], what: str) -> None:
    for key in parts.data:
        if key not in allowed:
            raise InvalidInput(parts.fields[key], f"is not a field of {what}")


def _text(parts: Parts, key: str) -> str | None:
    value = parts.data.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidInput(parts.fields[key], "must be a string")
    return value


def _strings(parts: Parts, key: str) -> list[Any]:
    value = parts.data.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise InvalidInput(parts.fields[key], "must be a list")
    return value


@dataclass(frozen=True)
class Delegation:
    """A message that hands a task off: the hand-off, and the A2A ids kept beside it."""

    hand_off: HandOff
    context_id: str | None
    message_id: str


def derived_id(assignee: str, message_id: str) -> str:
    """The client id a hand-off takes from its message (the same message to the same agent is
    the same task: a retried SendMessage makes no second one)."""
    digest = hashlib.sha256(f"{assignee}\n{message_id}".encode()).hexdigest()
    return "a2a-" + digest[: DERIVED_ID_LENGTH - 4]


def delegation(
    message: Message, caller: Principal, agent: str | None, skill: str | None = None
) -> Delegation:
    """The hand-off `message` makes to `agent` (None: the agent a data part names as
    `assignee`), as `caller`. The text parts are the packet's `task`; a data part may give the
    packet's fields (snake_case or camelCase), `project` (default `a2a`), `verification`, `id`
    (a client id; default: one derived from the message id), `requester` (needed with an
    owner's or admin's token; an agent's token is the requester) and `assignee`; file parts'
    URLs are its `files`, `referenceTaskIds` its `dependsOn`. Defaults for what the data part
    leaves out: the deliverable type `skill` (the message's `metadata.skill`) or `answer`,
    the acceptance criterion the task itself (clipped to 500 characters). The service checks
    the rest, as it does for `handOff`."""
    parts = read_parts(message)
    _unknown(parts, HAND_OFF_KEYS, "a hand-off")
    packet: dict[str, Any] = {}
    for key, value in parts.data.items():
        name = PACKET_FIELDS.get(key)
        if name is not None:
            packet[name] = value
    if parts.text and "task" not in packet:
        packet["task"] = parts.text
    if "deliverable_type" not in packet:
        packet["deliverable_type"] = skill or DEFAULT_DELIVERABLE.value
    task_text = packet.get("task")
    if "acceptance_criteria" not in packet and isinstance(task_text, str) and task_text:
        packet["acceptance_criteria"] = [task_text[:500]]
    packet.setdefault("context", "")
    packet["files"] = [*_strings(parts, _given(parts, "files")), *parts.files]
    depends = [*_strings(parts, _given(parts, "depends_on")), *message.reference_task_ids]
    packet["depends_on"] = list(dict.fromkeys(depends))
    given_agent = _text(parts, "assignee")
    if agent is not None and given_agent is not None and given_agent != agent:
        raise InvalidInput(parts.fields["assignee"], f"this agent's card hands off to {agent}")
    assignee = agent or given_agent
    if assignee is None:
        raise InvalidInput("assignee", "name the agent to hand off to: a data part `assignee`")
    requester = _text(parts, "requester")
    if requester is None:
        if caller.kind is not PrincipalKind.AGENT:
            raise InvalidInput(
                "requester",
                "an owner's or admin's token hands off in an agent's name: give it as "
                "`requester` in a data part",
            )
        requester = caller.handle
    verification = _text(parts, "verification") or Verification.AUTO.value
    try:
        mode = Verification(verification.upper())
    except ValueError:
        modes = ", ".join(v.value for v in Verification)
        raise InvalidInput(parts.fields["verification"], f"must be one of {modes}") from None
    client_id = _text(parts, "id") or derived_id(assignee, message.message_id)
    h = HandOff(
        project=_text(parts, "project") or DEFAULT_PROJECT,
        requester=requester,
        assignee=assignee,
        packet=packet,
        verification=mode,
        id=client_id,
    )
    return Delegation(h, message.context_id or None, message.message_id)


def _given(parts: Parts, name: str) -> str:
    """The key a data part gave the packet field `name` as (snake_case or camelCase)."""
    return camel(name) if camel(name) in parts.data else name


@dataclass(frozen=True)
class Reply:
    """A message to an existing task: the move it names (None: the one open to the caller),
    and what the move takes."""

    move: MoveName | None
    args: MoveArgs


def reply(message: Message) -> Reply:
    """The reply `message` makes to the task it names: a data part may name the move by its
    mutation (`{"move": "completeTask"}`) and give its `reason`, `result` or `waitingOn`; the
    text parts are the reason when the data part gives none."""
    parts = read_parts(message)
    _unknown(parts, REPLY_KEYS, "a reply (move, reason, result, waitingOn)")
    move: MoveName | None = None
    mutation = _text(parts, "move")
    if mutation is not None:
        move = MOVES_BY_MUTATION.get(mutation)
        if move is None:
            names = ", ".join(sorted(MOVES_BY_MUTATION))
            raise InvalidInput(parts.fields["move"], f"must be one of {names}")
    waiting = _text(parts, "waitingOn") or _text(parts, "waiting_on")
    waiting_on: WaitingOn | None = None
    if waiting is not None:
        try:
            waiting_on = WaitingOn(waiting)
        except ValueError:
            field = parts.fields.get("waitingOn") or parts.fields["waiting_on"]
            raise InvalidInput(field, "must be human or agent") from None
    result = parts.data.get("result")
    if result is not None and not isinstance(result, dict):
        raise InvalidInput(parts.fields["result"], "must be an object")
    reason = _text(parts, "reason") or parts.text or None
    return Reply(move, MoveArgs(waiting_on=waiting_on, result=result, reason=reason))


# --- what goes out: tasks, messages, artifacts -----------------------------------------------


def camel_keys(value: Any) -> Any:
    """Baton's JSON (a packet, a result, a checkpoint: snake_case) as its APIs show it."""
    if isinstance(value, Mapping):
        return {camel(str(k)): camel_keys(v) for k, v in value.items()}
    if isinstance(value, list):
        return [camel_keys(v) for v in value]
    return value


# A part of what Baton says in a message or an artifact: a str is a text part, a mapping data.
Said = str | Mapping[str, Any]


def data_part(value: Mapping[str, Any]) -> Part:
    return new_data_part(dict(value), JSON)


def text_part(text: str) -> Part:
    return Part(text=text, media_type=TEXT)


def handoff_message(task: TaskRecord, context_id: str, message_id: str | None) -> Message:
    """The message that handed `task` off, as its history's first entry: the task as text, the
    packet and the hand-off's other fields as data."""
    packet = task.packet
    data = {
        **camel_keys(packet),
        "project": task.project,
        "requester": task.requester,
        "assignee": task.assignee,
        "verification": task.verification.value,
    }
    return Message(
        message_id=message_id or f"{task.id}-handoff",
        context_id=context_id,
        task_id=task.id,
        role=Role.ROLE_USER,
        parts=[text_part(packet["task"]), data_part(data)],
        reference_task_ids=packet.get("depends_on") or [],
    )


def result_artifacts(result: Mapping[str, Any] | None) -> list[tuple[str, str, list[Said]]]:
    """A result as the task's artifacts, each (its id and name, its description, its parts):
    `result` (its summary as text, the rest of it but the evidence as data) and `evidence`
    (the evidence it was verified with, as data): each part of the result once."""
    if not result:
        return []
    shown = camel_keys(result)
    evidence = shown.pop("evidence", None) or []
    return [
        (
            "result",
            "The result the assignee returned, as Baton keeps it.",
            [str(result.get("summary", "")), shown],
        ),
        ("evidence", "The evidence the result was verified with.", [{"evidence": evidence}]),
    ]


def artifacts_of(result: Mapping[str, Any] | None) -> list[Artifact]:
    """`result_artifacts` as the SDK's messages."""
    return [
        Artifact(artifact_id=name, name=name, description=description, parts=_parts(parts))
        for name, description, parts in result_artifacts(result)
    ]


def _parts(said: Sequence[Said]) -> list[Part]:
    return [text_part(p) if isinstance(p, str) else data_part(p) for p in said]


# The requester-side roles: whoever moves a task there answers an A2A client's INPUT_REQUIRED.
_REQUESTER_SIDE = frozenset({Actor.VERIFIER, Actor.REQUESTER, Actor.REQUESTER_OWNER})


def _open_to_requester(state: TaskState) -> list[str]:
    return [
        m.mutation
        for m in HANDOFF.moves_from(state)
        if m.actor in _REQUESTER_SIDE and m.name is not MoveName.CANCEL
    ]


def explanation(task: TaskRecord) -> str | None:
    """What the A2A state does not say about where `task` waits, in the seed's words."""
    state = task.state
    if state is S.waiting and task.waiting_on is not None:
        return WAITING_ON_DESCRIPTIONS[task.waiting_on]
    if state is S.rejected or (
        state in (S.verifying, S.approval) and state_of(task) in INTERRUPTED
    ):
        text = HANDOFF.info(state).description
        moves = _open_to_requester(state)
        if moves:
            text += f" Open to the requester's side: {', '.join(moves)}."
        return text
    return None


def status_said(event: EventRecord) -> list[Said]:
    """What `event` says beside the state it left the task in, as a status message's parts:
    its checkpoint (its progress as text, then all of it as data), else its reason and where
    the task now waits (as text); none when it says nothing more."""
    task = event.task
    if event.kind == TaskEventKind.checkpoint_saved and task.latest_checkpoint:
        checkpoint = task.latest_checkpoint
        return [str(checkpoint.get("progress", "")), camel_keys(checkpoint)]
    said = [s for s in (explanation(task), event.reason) if s]
    return [" ".join(said)] if said else []


def status_message_id(event: EventRecord) -> str:
    return f"{event.task.id}-{event.id}"


def status_message(event: EventRecord, context_id: str) -> Message | None:
    """`status_said` as the SDK's message, if `event` says anything."""
    said = status_said(event)
    if not said:
        return None
    return Message(
        message_id=status_message_id(event),
        context_id=context_id,
        task_id=event.task.id,
        role=Role.ROLE_AGENT,
        parts=_parts(said),
    )


def status_of(event: EventRecord, context_id: str) -> TaskStatus:
    status = TaskStatus(state=state_of(event.task), message=status_message(event, context_id))
    status.timestamp.FromDatetime(event.at)
    return status


def baton_view(task: TaskRecord) -> dict[str, Any]:
    return {
        "state": task.state.value,
        "waitingOn": task.waiting_on.value if task.waiting_on is not None else None,
        "version": task.version,
        "project": task.project,
        "requester": task.requester,
        "assignee": task.assignee,
        "verification": task.verification.value,
    }


def task_of(
    task: TaskRecord,
    context_id: str,
    newest: Sequence[EventRecord],
    *,
    message_id: str | None = None,
    history: int = 0,
    artifacts: bool = True,
) -> Task:
    """`task` as A2A's Task. `newest` are its newest events, oldest first (at least the newest
    one: it gives the status); `history` the number of history messages wanted, newest kept
    (the hand-off's message first, then the events' status messages)."""
    if newest:
        status = status_of(newest[-1], context_id)
    else:  # no event read: the task's own state, at its last change
        status = TaskStatus(state=state_of(task))
        status.timestamp.FromDatetime(task.updated_at)
    out = Task(
        id=task.id,
        context_id=context_id,
        status=status,
        metadata={"baton": baton_view(task)},
    )
    if artifacts:
        out.artifacts.extend(artifacts_of(task.result))
    if history > 0:
        said = [m for m in (status_message(e, context_id) for e in newest) if m is not None]
        messages = [handoff_message(task, context_id, message_id), *said]
        out.history.extend(messages[-history:])
    return out


def update_metadata(event: EventRecord) -> dict[str, Any]:
    """What every update of `event` carries beside A2A's fields: the task's version as
    `generation` (A2A 1.1's proposal), the event id, and Baton's view of the task."""
    return {
        "generation": event.version,
        "eventId": str(event.id),
        "baton": {**baton_view(event.task), "move": event.move, "actor": event.actor},
    }


def updates_of(event: EventRecord, context_id: str) -> list[StreamResponse]:
    """The stream responses `event` makes, in order: a returned result's artifacts first, then
    one status update."""
    task = event.task
    metadata = update_metadata(event)
    out: list[StreamResponse] = []
    if event.move is MoveName.SUBMIT_RESULT:
        for artifact in artifacts_of(task.result):
            update = TaskArtifactUpdateEvent(
                task_id=task.id,
                context_id=context_id,
                artifact=artifact,
                last_chunk=True,
                metadata=metadata,
            )
            out.append(StreamResponse(artifact_update=update))
    status = TaskStatusUpdateEvent(
        task_id=task.id,
        context_id=context_id,
        status=status_of(event, context_id),
        metadata=metadata,
    )
    out.append(StreamResponse(status_update=status))
    return out


def is_final(state: A2AState) -> bool:
    return state in TERMINAL
