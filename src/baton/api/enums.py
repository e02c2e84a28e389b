"""The Python enums of the layers below, exposed to GraphQL as they are (and the API's own)."""

from __future__ import annotations

from enum import Enum, StrEnum

import strawberry

from baton.access.gate import GateDecision
from baton.access.principals import PrincipalKind
from baton.protocol.handoff import MoveName, TaskState, Verification, WaitingOn
from baton.protocol.pipeline import RunCheckpoint, RunEvent, RunPhase, RunStatus
from baton.protocol.task_object import DeliverableType, EvidenceKind, Provenance
from baton.store.records import RunEventKind, TaskEventKind


class GraphDirection(StrEnum):
    UPSTREAM = "UPSTREAM"
    DOWNSTREAM = "DOWNSTREAM"
    BOTH = "BOTH"


_DESCRIPTIONS: dict[type[Enum], str] = {
    TaskState: "A task's state in the handoff protocol (the seed's snake_case names).",
    WaitingOn: "What a `waiting` task waits on; set exactly while the state is `waiting`.",
    MoveName: "A move of the handoff protocol; `protocol.handoff.moves` lists each with its "
    "mutation.",
    Verification: "How a returned result is verified. AUTO: evidence of the required shape "
    "completes the task at once. REVIEW: the task rests in `verifying` for the requester. "
    "SIGN_OFF: like AUTO, but the passing result waits in `approval` for the requester's owner.",
    DeliverableType: "What the assignee is asked to deliver.",
    EvidenceKind: "What a piece of evidence is.",
    Provenance: "Where a result's content comes from.",
    GateDecision: "What the assignee owner's permission gate does with a matching handoff. "
    "ALLOW routes it, ASK holds it for the owner's approval, DENY rejects it, EXTERNAL leaves it "
    "`requested` for the owner's own integration.",
    PrincipalKind: "The kind of caller a token acts as.",
    TaskEventKind: "What an event records.",
    GraphDirection: "Which edges `taskGraph` follows: UPSTREAM follows dependencies, "
    "DOWNSTREAM dependents.",
    RunStatus: "A run's status (the seed's snake_case names).",
    RunPhase: "What a run is doing (the seed's snake_case names).",
    RunCheckpoint: "A run's ordered resume barriers, first to last (the seed's snake_case names).",
    RunEvent: "An event of the pipeline lifecycle; `protocol.pipeline.moves` lists each with "
    "its mutation.",
    RunEventKind: "What a run event records.",
}

# GraphQL names where they differ from the Python class's.
_NAMES: dict[type[Enum], str] = {Verification: "VerificationMode", RunEvent: "RunEventName"}

for _enum, _description in _DESCRIPTIONS.items():
    strawberry.enum(_enum, name=_NAMES.get(_enum), description=_description)
