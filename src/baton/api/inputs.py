"""GraphQL input types, and their conversion to the seed's snake_case objects."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import strawberry

from baton.access.gate import GateDecision
from baton.protocol.handoff import TaskState, Verification, WaitingOn
from baton.protocol.task_object import DeliverableType, EvidenceKind, Provenance


@strawberry.input(description="The task request. Bounds are those of the seed's task schema.")
class PacketInput:
    task: str = strawberry.field(
        description="What to do: at least one visible character (Baton refuses a text of only "
        "whitespace, zero-width or format characters, beside the seed's bounds)."
    )
    deliverable_type: DeliverableType
    acceptance_criteria: list[str]
    context: str = ""
    files: list[str] = strawberry.field(default_factory=list)
    depends_on: list[str] = strawberry.field(
        default_factory=list, description="Ids of tasks this one depends on (or free text)."
    )

    def to_seed(self) -> dict[str, Any]:
        return {
            "task": self.task,
            "deliverable_type": self.deliverable_type.value,
            "acceptance_criteria": self.acceptance_criteria,
            "context": self.context,
            "files": self.files,
            "depends_on": self.depends_on,
        }


@strawberry.input
class EvidenceInput:
    kind: EvidenceKind
    summary: str
    url: str | None = strawberry.field(
        default=None,
        description="An http or https URL. The seed's schema admits any URI; Baton also "
        "refuses every other scheme (javascript:, data:, vbscript:, file:, …): InvalidInputError "
        "naming `result.evidence[i].url`.",
    )
    content: str | None = None

    def to_seed(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind.value, "summary": self.summary}
        if self.url is not None:
            out["url"] = self.url
        if self.content is not None:
            out["content"] = self.content
        return out


@strawberry.input(description="A result; Baton adds `returnedBy` and `returnedAt`.")
class ResultInput:
    summary: str
    evidence: list[EvidenceInput]
    provenance: Provenance = Provenance.agent_generated

    def to_seed(self) -> dict[str, Any]:
        return {
            "summary": self.summary,
            "evidence": [e.to_seed() for e in self.evidence],
            "provenance": self.provenance.value,
        }


@strawberry.input
class CheckpointInput:
    progress: str
    decisions: list[str] = strawberry.field(default_factory=list)
    files_touched: list[str] = strawberry.field(default_factory=list)
    next_steps: list[str] = strawberry.field(default_factory=list)
    open_questions: list[str] = strawberry.field(default_factory=list)

    def to_seed(self) -> dict[str, Any]:
        return {
            "progress": self.progress,
            "decisions": self.decisions,
            "files_touched": self.files_touched,
            "next_steps": self.next_steps,
            "open_questions": self.open_questions,
        }


@strawberry.input
class HandOffInput:
    project: str
    requester: str = strawberry.field(description="The handing-off agent, `owner/agent`.")
    assignee: str = strawberry.field(description="The receiving agent, `owner/agent`.")
    packet: PacketInput
    verification: Verification = Verification.AUTO
    id: strawberry.ID | None = strawberry.field(
        default=None,
        description="Optional client id, scoped to the requester's owner: the task's id is "
        '`<owner>_<id>` (e.g. `alice_build-42` for `id: "build-42"` with requester '
        "`alice/coder`), which a client can compute in advance to name it in another task's "
        "`dependsOn`. Within that owner it is the idempotency key: the same id and input "
        "return the existing task with no new events; different input is DuplicateTaskError. "
        "Other owners' ids neither collide with it nor can be probed with it. It matches "
        "`^[A-Za-z0-9_-]+$` and, with the prefix, fits the task id's 64 characters.",
    )


@strawberry.input
class SaveCheckpointInput:
    id: strawberry.ID
    checkpoint: CheckpointInput
    expected_version: int | None = None


@strawberry.input
class SetGateRuleInput:
    decision: GateDecision
    requester: str = strawberry.field(default="*/*", description="Glob over `owner/agent`.")
    project: str = strawberry.field(default="*", description="Glob over the project.")
    deliverable_types: list[DeliverableType] = strawberry.field(
        default_factory=list, description="Empty means any."
    )
    priority: int = strawberry.field(default=0, description="Higher priority is tried first.")
    owner: str | None = strawberry.field(
        default=None, description="Whose gate; required for admin, implied for an owner."
    )
    id: strawberry.ID | None = strawberry.field(
        default=None, description="Replace this existing rule instead of adding one."
    )


@strawberry.input
class DeleteGateRuleInput:
    id: strawberry.ID


@strawberry.input(description="All given conditions must hold.")
class TaskFilter:
    project: str | None = None
    states: list[TaskState] | None = None
    requester: str | None = None
    assignee: str | None = None
    waiting_on: WaitingOn | None = None
    deliverable_types: list[DeliverableType] | None = None
    updated_after: datetime | None = None
