"""The mutation list stays in step with the code: a mutation whose text no longer occurs
leaves its rule unguarded by `scripts/mutation-check`, so the suite fails as soon as one goes
stale (the check itself runs outside the suite: it takes a quarter of an hour)."""

from __future__ import annotations

import pytest

from tests.mutations import MUTATIONS, ROOT, Mutation


@pytest.mark.parametrize("mutation", MUTATIONS, ids=[m.name for m in MUTATIONS])
def test_each_mutation_applies_once_and_compiles(mutation: Mutation) -> None:
    path = ROOT / mutation.path
    source = path.read_text()
    assert source.count(mutation.before) == 1, (
        f"{mutation.name} is stale: its text occurs {source.count(mutation.before)} times in "
        f"{mutation.path}; keep it in step with the code"
    )
    compile(source.replace(mutation.before, mutation.after), str(path), "exec")


@pytest.mark.parametrize("mutation", MUTATIONS, ids=[m.name for m in MUTATIONS])
def test_each_mutation_names_tests_that_exist(mutation: Mutation) -> None:
    for args in mutation.tests:
        files = [a.split("::")[0] for a in args if a.startswith("tests/")]
        assert files, f"{mutation.name}: {args} names no test file"
        for name in files:
            assert (ROOT / name).exists(), f"{mutation.name}: no {name}"


def test_mutation_names_are_unique() -> None:
    names = [m.name for m in MUTATIONS]
    assert len(names) == len(set(names))
