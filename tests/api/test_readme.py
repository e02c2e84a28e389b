"""The README as a newcomer uses it.

Its GraphQL documents are valid against the schema and select `... on Error` in every mutation;
its curl bodies are JSON holding valid documents; its Apollo `possibleTypes` list is the
schema's; and its two walks (a hand-off between two owners, a pipeline run) are executed in
order against a real `baton serve`, each document as the principal its `# as …` comment names,
and each answer holding what its `# → …` comment shows. So the README cannot drift from what
works.
"""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from graphql import InlineFragmentNode, OperationType, parse

from baton.access.principals import Principal
from baton.api.schema import schema
from tests.conftest import LiveServer
from tests.helpers import ENGINE
from tests.live.client import HTTPClient

README = (Path(__file__).resolve().parents[2] / "README.md").read_text()
GRAPHQL_BLOCKS = re.compile(r"```graphql\n(.*?)```", re.DOTALL)


def documents() -> list[str]:
    found = []
    for block in GRAPHQL_BLOCKS.findall(README):
        text = "\n".join(line for line in block.splitlines() if not line.startswith("#"))
        found += [d.strip() for d in re.split(r"\n\s*\n", text) if d.strip()]
    return found


def test_the_readme_shows_graphql_documents() -> None:
    assert len(documents()) >= 20


@pytest.mark.parametrize("document", documents())
def test_each_readme_document_is_valid(document: str) -> None:
    prepared = ENGINE.documents.get(document)
    assert not prepared.errors, [e.message for e in prepared.errors]


@pytest.mark.parametrize("document", documents())
def test_each_readme_mutation_selects_the_error_interface(document: str) -> None:
    """Without `... on Error { code message }` a refused move answers `{}`."""
    for operation in parse(document).definitions:
        if getattr(operation, "operation", None) is not OperationType.MUTATION:
            continue
        for selected in operation.selection_set.selections:  # type: ignore[attr-defined]
            conditions = {
                s.type_condition.name.value
                for s in selected.selection_set.selections
                if isinstance(s, InlineFragmentNode) and s.type_condition is not None
            }
            assert "Error" in conditions, f"{selected.name.value} selects no `... on Error`"


def curl_bodies() -> list[dict[str, Any]]:
    return [json.loads(body) for body in re.findall(r"-d '(\{.*?\})'", README)]


def test_each_curl_body_is_json_with_a_valid_document_and_its_variables() -> None:
    bodies = curl_bodies()
    assert any(body.get("variables") for body in bodies)
    for body in bodies:
        prepared = ENGINE.documents.get(body["query"])
        assert not prepared.errors, [e.message for e in prepared.errors]
        declared = set(re.findall(r"\$(\w+):", body["query"]))
        assert declared == set(body.get("variables", {})), body


def test_the_apollo_possible_types_are_the_schemas() -> None:
    listed = re.search(r"possibleTypes: \{\s*Error: \[(.*?)\]", README, re.DOTALL)
    assert listed, "the README shows no possibleTypes for Error"
    names = set(re.findall(r'"(\w+)"', listed[1]))
    error = schema._schema.get_type("Error")
    implementers = {t.name for t in schema._schema.get_possible_types(error)}  # type: ignore[arg-type]
    assert names == implementers
    # The interface's own description tells a frontend developer the same.
    assert "possibleTypes" in (error.description or "")  # type: ignore[union-attr]


# --- the walks ---------------------------------------------------------------------------


@dataclass
class Step:
    principal: str
    document: str
    expected: Any = None  # `# → JSON`: a part of the answer's data
    values: dict[str, list[str]] = field(default_factory=dict)  # `# $name: a, b`: one run each


def steps(text: str) -> list[Step]:
    """The README's documents in order, with the comments that say how to run them. `# → `
    JSON may go on over the comment lines after it that start with more spaces."""
    out: list[Step] = []
    principal = ""
    for block in GRAPHQL_BLOCKS.findall(text):
        lines: list[str] = []
        values: dict[str, list[str]] = {}
        shown: list[str] = []
        for line in [*block.splitlines(), ""]:
            stripped = line.strip()
            if shown and line.startswith("#  "):
                shown.append(line[1:])
                continue
            if shown:
                out[-1].expected = json.loads("".join(shown))
                shown = []
            if stripped and not stripped.startswith("#"):
                lines.append(line)
                continue
            if lines:
                out.append(Step(principal, "\n".join(lines), values=values))
                lines, values = [], {}
            if match := re.match(r"# as ([\w/-]+)", stripped):
                principal = match[1]
            elif match := re.match(r"# → (.*)", stripped):
                shown = [match[1]]
            elif match := re.match(r"# \$(\w+): (.*)", stripped):
                values[match[1]] = [v.strip() for v in match[2].split(",")]
    return out


def holds(answer: Any, shown: Any) -> bool:
    """Whether `answer` has everything `shown` has (objects: those keys; lists: item by item)."""
    if isinstance(shown, dict):
        return isinstance(answer, dict) and all(
            key in answer and holds(answer[key], value) for key, value in shown.items()
        )
    if isinstance(shown, list):
        return (
            isinstance(answer, list)
            and len(answer) == len(shown)
            and all(holds(a, s) for a, s in zip(answer, shown, strict=True))
        )
    return bool(answer == shown)


def rename(text: str, names: dict[str, str]) -> str:
    """The README's owners renamed to ones unique to this run (the test database is shared):
    `alice`, `alice/planner` and `alice_release-notes` all follow."""
    for old, new in names.items():
        text = re.sub(rf"(?<![\w-]){old}(?![a-z0-9-])", new, text)
    return text


def answered_id(data: dict[str, Any]) -> str | None:
    """The task's or run's id in a mutation's answer, if it names one."""
    for answer in data.values():
        for key in ("task", "run"):
            if isinstance(answer, dict) and isinstance(answer.get(key), dict):
                found = answer[key].get("id")
                if found:
                    return str(found)
    return None


def answered_lease(data: dict[str, Any]) -> str | None:
    """The lease id a claim answered, if it did."""
    for answer in data.values():
        if isinstance(answer, dict) and isinstance(answer.get("lease"), dict):
            found = answer["lease"].get("id")
            if found:
                return str(found)
    return None


class Walk:
    """Runs steps against a server, each as its principal, carrying `$id` (and `$lease`) from
    answers."""

    def __init__(self, server: LiveServer) -> None:
        self.server = server
        self.clients: dict[str, HTTPClient] = {}
        self.id: str | None = None
        self.lease: str | None = None  # `$lease`: the lease id of the last claim

    async def client(self, principal: str) -> HTTPClient:
        if principal not in self.clients:
            token = await self.server.token(Principal.parse(principal))
            self.clients[principal] = HTTPClient(self.server.url, token)
        return self.clients[principal]

    async def run(self, step: Step) -> dict[str, Any]:
        assert step.principal, f"no `# as …` before:\n{step.document}"
        client = await self.client(step.principal)
        declared = set(re.findall(r"\$(\w+):", step.document))
        runs = [{name: value} for name, values in step.values.items() for value in values] or [{}]
        data: dict[str, Any] = {}
        for extra in runs:
            carried = {"id": self.id, "lease": self.lease}
            variables = {**{k: v for k, v in carried.items() if k in declared}, **extra}
            assert set(variables) == declared, (declared, step.document)
            data = await client(step.document, **variables)
            for answer in data.values():
                # A refusal the README does not show is a failure of the walk.
                if isinstance(answer, dict) and "code" in answer and not step.expected:
                    pytest.fail(f"{step.document}\nanswered {answer}")
            self.id = answered_id(data) or self.id
            self.lease = answered_lease(data) or self.lease
        if step.expected is not None:
            assert holds(data, step.expected), (step.document, data, step.expected)
        return data

    async def close(self) -> None:
        for client in self.clients.values():
            await client.aclose()


@pytest.fixture
async def walk(live_server: LiveServer) -> AsyncIterator[tuple[Walk, list[Step]]]:
    tag = secrets.token_hex(3)
    walk = Walk(live_server)
    yield walk, steps(rename(README, {"alice": f"alice-{tag}", "bob": f"bob-{tag}"}))
    await walk.close()


def section(found: list[Step], first: str, last: str) -> list[Step]:
    start = next(i for i, s in enumerate(found) if first in s.document)
    end = next(i for i, s in enumerate(found) if last in s.document and i >= start)
    return found[start : end + 1]


async def test_the_readme_hand_off_walk_runs_as_written(walk: tuple[Walk, list[Step]]) -> None:
    runner, found = walk
    walked = section(found, "handOff(input:", "setGateRule(input:")
    assert [re.sub(r"-[0-9a-f]{6}", "", s.principal) for s in walked] == [
        "alice/planner",
        "bob",
        "bob",
        *["bob/coder"] * 4,
        "alice/planner",
        "alice",
        "bob",
    ]
    assert all(s.expected is not None for s in walked)
    for step in walked:
        await runner.run(step)

    # "Alice's next hand-off … (another `id`) answers "state": "routed"": Bob's rule decides.
    again = walked[0]
    again = Step(again.principal, again.document.replace('"release-notes"', '"release-notes-2"'))
    answer = await runner.run(again)
    assert answer["handOff"]["task"]["state"] == "routed", answer


async def test_the_readme_run_loop_runs_as_written(walk: tuple[Walk, list[Step]]) -> None:
    runner, found = walk
    walked = section(found, "createRun(input:", "mergePullRequest(input:")
    assert len(walked) == 10
    for step in walked:
        await runner.run(step)
