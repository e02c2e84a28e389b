"""Input checks against the seed's task schema.

The bounds are read from the schema dicts, not restated, so these tests follow the schema: for
every length and item-count bound, a value just inside passes and one just outside raises
`InvalidInput` naming the camelCase path of the field.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import pytest

from baton.errors import InvalidInput
from baton.protocol.task_object import (
    CHECKPOINT_SCHEMA,
    PACKET_SCHEMA,
    PROJECT_PATTERN,
    RESULT_SCHEMA,
    TASK_SCHEMA,
    check,
    check_handle,
    check_project,
    check_task_id,
)

EVIDENCE = {
    "kind": "link",
    "summary": "The passing run.",
    "url": "https://example.com/runs/1",
    "content": "42 passed",
}

# Valid objects with at least one item in every array, so each item bound has an item to bend.
VALID: dict[str, dict[str, Any]] = {
    "packet": {
        "task": "Add a login page.",
        "deliverable_type": "code",
        "acceptance_criteria": ["The page renders."],
        "context": "See the design doc.",
        "files": ["src/app/login.py"],
        "depends_on": ["task-1"],
    },
    "result": {
        "summary": "Done.",
        "evidence": [EVIDENCE],
        "provenance": "agent_generated",
        "returned_by": "acme/builder",
        "returned_at": "2025-01-31T12:00:00Z",
    },
    "checkpoint": {
        "progress": "Half way.",
        "decisions": ["Use sessions."],
        "files_touched": ["src/app/login.py"],
        "next_steps": ["Write tests."],
        "open_questions": ["Which font?"],
    },
}

SCHEMAS: dict[str, Mapping[str, Any]] = {
    "packet": PACKET_SCHEMA,
    "result": RESULT_SCHEMA,
    "checkpoint": CHECKPOINT_SCHEMA,
}

Path = tuple[str | int, ...]


def _camel_path(root: str, path: Path) -> str:
    """Written apart from `task_object.field_path`, so the test does not check it against itself."""
    out = root
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += "." + re.sub(r"_([a-z0-9])", lambda m: m.group(1).upper(), part)
    return out


def _get(obj: Any, path: Path) -> Any:
    for part in path:
        obj = obj[part]
    return obj


def _replaced(obj: dict[str, Any], path: Path, value: Any) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    *parents, last = path
    _get(out, tuple(parents))[last] = value
    return out


@dataclass(frozen=True)
class Bound:
    root: str  # "packet", "result" or "checkpoint"
    path: Path  # where the value goes inside the valid object
    keyword: str  # the schema keyword under test
    inside: Any
    outside: Any

    @property
    def field(self) -> str:
        return _camel_path(self.root, self.path)

    @property
    def id(self) -> str:
        return f"{self.field}:{self.keyword}"


def _text(length: int) -> str:
    return "x" * length


def _bounds(root: str, schema: Mapping[str, Any], path: Path, valid: Any) -> Iterator[Bound]:
    """Every length and item-count bound under `schema`, with values on either side of it."""
    if "maxLength" in schema:
        n = schema["maxLength"]
        yield Bound(root, path, "maxLength", _text(n), _text(n + 1))
    if schema.get("minLength", 0) > 0:
        n = schema["minLength"]
        yield Bound(root, path, "minLength", _text(n), _text(n - 1))
    if schema.get("type") == "array":
        item = valid[0]
        if "maxItems" in schema:
            n = schema["maxItems"]
            yield Bound(root, path, "maxItems", [item] * n, [item] * (n + 1))
        if schema.get("minItems", 0) > 0:
            n = schema["minItems"]
            yield Bound(root, path, "minItems", [item] * n, [item] * (n - 1))
        yield from _bounds(root, schema["items"], (*path, 0), item)
    if schema.get("type") == "object":
        for key, prop in schema["properties"].items():
            yield from _bounds(root, prop, (*path, key), valid[key])


BOUNDS = [b for root, schema in SCHEMAS.items() for b in _bounds(root, schema, (), VALID[root])]


def test_valid_objects_pass() -> None:
    for root, valid in VALID.items():
        check(root, valid, root)


def test_bounds_cover_the_schema() -> None:
    # Guards the walker: the bounds named in the brief are all found in the schema.
    found = {b.id for b in BOUNDS}
    expected = {
        "packet.task:maxLength",
        "packet.task:minLength",
        "packet.acceptanceCriteria:minItems",
        "packet.acceptanceCriteria:maxItems",
        "packet.acceptanceCriteria[0]:minLength",
        "packet.acceptanceCriteria[0]:maxLength",
        "packet.context:maxLength",
        "packet.files:maxItems",
        "packet.files[0]:maxLength",
        "packet.dependsOn:maxItems",
        "packet.dependsOn[0]:maxLength",
        "result.summary:minLength",
        "result.summary:maxLength",
        "result.evidence:minItems",
        "result.evidence:maxItems",
        "result.evidence[0].summary:maxLength",
        "result.evidence[0].content:maxLength",
        "checkpoint.progress:minLength",
        "checkpoint.progress:maxLength",
        "checkpoint.decisions:maxItems",
        "checkpoint.decisions[0]:maxLength",
        "checkpoint.filesTouched:maxItems",
        "checkpoint.filesTouched[0]:maxLength",
        "checkpoint.nextSteps:maxItems",
        "checkpoint.openQuestions[0]:maxLength",
    }
    assert expected <= found, expected - found


@pytest.mark.parametrize("bound", BOUNDS, ids=lambda b: b.id)
def test_just_inside_the_bound_passes(bound: Bound) -> None:
    check(bound.root, _replaced(VALID[bound.root], bound.path, bound.inside), bound.root)


@pytest.mark.parametrize("bound", BOUNDS, ids=lambda b: b.id)
def test_just_outside_the_bound_names_the_field(bound: Bound) -> None:
    bad = _replaced(VALID[bound.root], bound.path, bound.outside)
    with pytest.raises(InvalidInput) as refused:
        check(bound.root, bad, bound.root)
    assert refused.value.field == bound.field
    assert refused.value.code == "invalid_input"


# --- Shapes other than lengths --------------------------------------------------------------


@pytest.mark.parametrize(
    ("root", "path", "value", "field"),
    [
        ("result", ("evidence", 0, "url"), "not a uri", "result.evidence[0].url"),
        ("result", ("evidence", 0, "url"), "https://exa mple.com", "result.evidence[0].url"),
        ("result", ("evidence", 0, "url"), "//example.com/no-scheme", "result.evidence[0].url"),
        ("result", ("evidence", 0, "kind"), "video", "result.evidence[0].kind"),
        ("result", ("provenance",), "made_up", "result.provenance"),
        ("result", ("returned_by",), "acme", "result.returnedBy"),
        ("result", ("returned_at",), "2025-02-30T12:00:00Z", "result.returnedAt"),
        ("packet", ("deliverable_type",), "poem", "packet.deliverableType"),
        ("packet", ("files",), "src/app.py", "packet.files"),
        ("checkpoint", ("files_touched",), [7], "checkpoint.filesTouched[0]"),
    ],
)
def test_wrong_shape_names_the_field(root: str, path: Path, value: Any, field: str) -> None:
    with pytest.raises(InvalidInput) as refused:
        check(root, _replaced(VALID[root], path, value), root)
    assert refused.value.field == field


@pytest.mark.parametrize(
    "url", ["https://example.com/pr/1", "mailto:owner@example.com", "urn:isbn:0451450523"]
)
def test_evidence_url_accepts_uris(url: str) -> None:
    check("result", _replaced(VALID["result"], ("evidence", 0, "url"), url), "result")


@pytest.mark.parametrize("root", list(VALID))
def test_missing_required_field_is_named(root: str) -> None:
    for key in SCHEMAS[root]["required"]:
        partial = {k: v for k, v in VALID[root].items() if k != key}
        with pytest.raises(InvalidInput) as refused:
            check(root, partial, root)
        assert refused.value.field == _camel_path(root, (key,))


@pytest.mark.parametrize("root", list(VALID))
def test_unknown_field_is_refused(root: str) -> None:
    with pytest.raises(InvalidInput) as refused:
        check(root, {**VALID[root], "surprise": 1}, root)
    assert refused.value.field == root


def test_field_prefix_is_the_callers() -> None:
    with pytest.raises(InvalidInput) as refused:
        check("packet", {**VALID["packet"], "task": ""}, "input.packet")
    assert refused.value.field == "input.packet.task"


# --- Handles, projects and task ids ---------------------------------------------------------

ID_MAX = TASK_SCHEMA["properties"]["id"]["maxLength"]
# `[a-z0-9](?:...){0,N}`: one leading character and up to N more.
NAME_MAX = 1 + int(re.findall(r"\{0,(\d+)\}", PROJECT_PATTERN.pattern)[-1])

GOOD_PROJECTS = ["a", "baton", "my-project", "a1-b2-c3", "x" * NAME_MAX]
BAD_PROJECTS = ["", "Baton", "-lead", "trail-", "dou--ble", "under_score", "x" * (NAME_MAX + 1)]


def _refused(checker: Callable[[str, str], None], value: str, field: str) -> InvalidInput:
    with pytest.raises(InvalidInput) as refused:
        checker(value, field)
    return refused.value


@pytest.mark.parametrize("value", GOOD_PROJECTS)
def test_check_project_accepts(value: str) -> None:
    check_project(value)
    check_project(value, "input.project")


@pytest.mark.parametrize("value", BAD_PROJECTS)
def test_check_project_refuses(value: str) -> None:
    with pytest.raises(InvalidInput) as refused:
        check_project(value)
    assert refused.value.field == "project"
    assert _refused(check_project, value, "input.project").field == "input.project"


@pytest.mark.parametrize(
    "value", [f"{p}/{a}" for p, a in zip(GOOD_PROJECTS, GOOD_PROJECTS[::-1], strict=True)]
)
def test_check_handle_accepts(value: str) -> None:
    check_handle(value, "assignee")


@pytest.mark.parametrize(
    "value",
    [
        "acme",
        "acme/",
        "/builder",
        "acme/builder/x",
        "Acme/builder",
        *(f"acme/{b}" for b in BAD_PROJECTS),
    ],
)
def test_check_handle_refuses(value: str) -> None:
    assert _refused(check_handle, value, "input.assignee").field == "input.assignee"


@pytest.mark.parametrize("value", ["t", "task-1", "A_b-9", "x" * ID_MAX])
def test_check_task_id_accepts(value: str) -> None:
    check_task_id(value)


@pytest.mark.parametrize("value", ["", "a b", "a/b", "é", "x" * (ID_MAX + 1)])
def test_check_task_id_refuses(value: str) -> None:
    with pytest.raises(InvalidInput) as refused:
        check_task_id(value)
    assert refused.value.field == "id"
    assert _refused(check_task_id, value, "input.taskId").field == "input.taskId"
