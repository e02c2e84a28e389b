"""What CI runs: every program a test needs is installed by `.ci/run`, and under CI a missing
one fails its test instead of skipping it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.tools import require

ROOT = Path(__file__).resolve().parents[1]
CI_PROGRAMS = {"chromium", "wrk", "npm", "redis-server", "pgbouncer"}


def test_without_ci_a_missing_program_skips(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="not-a-program-baton-needs"):
        require("not-a-program-baton-needs", "nowhere")


@pytest.mark.parametrize("value", ["true", "1"])
def test_under_ci_a_missing_program_fails(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("CI", value)
    with pytest.raises(pytest.fail.Exception, match=r"\.ci/run installs it"):
        require("not-a-program-baton-needs", "nowhere")


def test_ci_installs_every_program_a_test_requires() -> None:
    needed = set()
    for path in (ROOT / "tests").rglob("*.py"):
        if path.name not in ("tools.py", "test_tools.py"):
            needed |= set(re.findall(r'\b(?:require|missing)\(\s*"([\w-]+)"', path.read_text()))
    installed = re.search(r"^for program in ([\w -]+); do$", (ROOT / ".ci/run").read_text(), re.M)
    assert installed is not None
    assert needed == set(installed.group(1).split()) == CI_PROGRAMS


def test_ci_exports_only_variables_a_test_reads() -> None:
    script = (ROOT / ".ci/run").read_text()
    exported = set(re.findall(r"^\s*export (BATON_\w+)=", script, re.M))
    sources = "\n".join(p.read_text() for p in (ROOT / "tests").rglob("*.py"))
    assert exported == {"BATON_TEST_DATABASE_URL"}
    assert all(name in sources for name in exported)
