"""A change statement's text is kept by shape: a kept text is the one that would be built."""

from __future__ import annotations

from baton.access.principals import Principal, PrincipalKind
from baton.protocol.handoff import MoveName
from baton.services.tasks import SAVE_CHECKPOINT, MoveArgs, change_for
from baton.store import lifecycle
from baton.store.sql import Params
from baton.store.tasks import TASKS


def statement(p: Params, version: int | None, pairs: object = SAVE_CHECKPOINT) -> str:
    key = p("bench_1")
    return lifecycle.change_statement(
        TASKS,
        p,
        pairs=pairs,  # type: ignore[arg-type]
        select=f"id = {key}",
        subject=f"{key}::text",
        sets=[f"latest_checkpoint = {p({'progress': 'x'})}::jsonb"],
        expected_version=version,
        actor=p("bench/worker"),
    )


def test_a_kept_text_is_the_built_one_and_values_still_follow() -> None:
    lifecycle._STATEMENTS.clear()
    first, second = Params(), Params()
    built = statement(first, 4)
    kept = statement(second, 7)
    assert kept is built
    assert "old.version = $4" in built
    assert first.values[-1] == 4 and second.values[-1] == 7

    lifecycle._STATEMENTS.clear()
    assert statement(Params(), 7) == built

    later = Params(start=2)  # the version's placeholder moves with what came before
    assert "old.version = $6" in statement(later, 7)
    assert "old.version" not in statement(Params(), None)


def test_other_pairs_make_another_text() -> None:
    accept = change_for(MoveName.ACCEPT, MoveArgs()).pairs
    checkpoint = statement(Params(), None)
    moved = statement(Params(), None, accept)
    assert moved != checkpoint
    assert statement(Params(), None, accept) is moved


def test_principal_kinds_share_nothing_by_accident() -> None:
    # The caller's SQL is part of the shape: an owner's text is never an agent's.
    from baton.store.tasks import visible_sql

    texts = set()
    for kind, handle in ((PrincipalKind.OWNER, "o"), (PrincipalKind.AGENT, "o/a")):
        p = Params()
        key = p("bench_1")
        select = f"id = {key} AND ({visible_sql(Principal(kind, handle), p, 'tasks')})"
        texts.add(
            lifecycle.change_statement(
                TASKS, p, pairs=SAVE_CHECKPOINT, select=select, subject=f"{key}::text"
            )
        )
    assert len(texts) == 2
