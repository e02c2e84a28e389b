"""The GraphQL documents the README shows are valid against the schema."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.helpers import ENGINE

README = (Path(__file__).resolve().parents[2] / "README.md").read_text()


def documents() -> list[str]:
    blocks = re.findall(r"```graphql\n(.*?)```", README, re.DOTALL)
    found = []
    for block in blocks:
        text = "\n".join(line for line in block.splitlines() if not line.startswith("#"))
        found += [d.strip() for d in re.split(r"\n\s*\n", text) if d.strip()]
    return found


def test_the_readme_shows_graphql_documents() -> None:
    assert len(documents()) >= 6


@pytest.mark.parametrize("document", documents())
def test_each_readme_document_is_valid(document: str) -> None:
    prepared = ENGINE.documents.get(document)
    assert not prepared.errors, [e.message for e in prepared.errors]
