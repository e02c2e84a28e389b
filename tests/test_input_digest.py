"""A hand-off's input digest (what makes a retried hand-off idempotent) is the one stored
digests were made with: SHA-256 of `json.dumps(..., sort_keys=True, separators=(",", ":"))`,
whatever text the hand-off holds."""

from __future__ import annotations

import hashlib
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from baton.protocol.handoff import Verification
from baton.services.tasks import HandOff, _digest

TEXT = st.text(st.characters(), max_size=12)  # every code point, surrogates and controls too
PACKETS = st.fixed_dictionaries(
    {
        "task": TEXT,
        "deliverable_type": st.sampled_from(["code", "doc"]),
        "acceptance_criteria": st.lists(TEXT, max_size=3),
        "context": TEXT,
        "files": st.lists(TEXT, max_size=2),
        "depends_on": st.lists(TEXT, max_size=2),
    }
)


def reference(h: HandOff) -> str:
    canonical = json.dumps(
        [h.project, h.requester, h.assignee, h.packet, h.verification.value],
        sort_keys=True,
        separators=(",", ":"),
    )
    return hashlib.sha256(canonical.encode()).hexdigest()


@given(project=TEXT, requester=TEXT, packet=PACKETS, verification=st.sampled_from(Verification))
def test_the_digest_is_json_dumps_canonical_form_for_any_text(
    project: str, requester: str, packet: dict[str, object], verification: Verification
) -> None:
    h = HandOff(
        id=None,
        project=project,
        requester=requester,
        assignee="bob/a1",
        packet=packet,
        verification=verification,
    )
    assert _digest(h) == reference(h)


@pytest.mark.parametrize(
    ("task", "digest"),
    [
        ("plain", "b2f7d7304e2725ba8147cc5b57a5876aae514b178588875b4764d57911c22324"),
        ("ünï\x7f", "d5397df380943af248f5614cf8360abd1b654d2bba13f340c6c08555bda33013"),
    ],
)
def test_the_digests_of_known_hand_offs_are_the_stored_ones(task: str, digest: str) -> None:
    packet = {
        "task": task,
        "deliverable_type": "doc",
        "acceptance_criteria": ["x"],
        "context": "",
        "files": [],
        "depends_on": [],
    }
    h = HandOff(project="p", requester="alice/a0", assignee="bob/a1", packet=packet)
    assert _digest(h) == digest
