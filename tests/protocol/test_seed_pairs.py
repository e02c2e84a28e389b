"""Both lifecycles' tables against the seed pages and API.md, stated here by hand.

Everything below is copied from the documents (the repo never reads them at run time): the seed
states the handoff's pairs twice (the "Allowed moves" list and each state's "Moves to" and
"Reached from" lines) and counts them in its header, so the copies check each other before
the table is checked against them. Nothing here is derived from `HANDOFF` or `PIPELINE`: other
tests that walk the tables (tests/api/test_moves.py, tests/api/test_runs.py) use them as their
oracle, and this file is what pins those tables to the documents.
"""

from __future__ import annotations

import re

from baton.protocol.handoff import HANDOFF
from baton.protocol.pipeline import PIPELINE
from tests.protocol.seeds import (
    SEED_HEADER,
    api_handoff_rows,
    api_pipeline_rows,
    seed_list_pairs,
    seed_pipeline_targets,
    seed_state_sections,
)

# --- the seed's statements agree with each other -----------------------------------------


def test_the_seeds_two_statements_of_the_handoff_pairs_agree_with_its_header() -> None:
    states, moves, ending = (int(n) for n in re.findall(r"\d+", SEED_HEADER))
    sections = seed_state_sections()
    listed = seed_list_pairs()
    moves_to = {(s, t) for s, (targets, _, _) in sections.items() for t in targets}
    reached_from = {(s, t) for t, (_, sources, _) in sections.items() for s in sources}
    assert listed == moves_to == reached_from
    assert (len(sections), len(listed), sum(end for *_, end in sections.values())) == (
        states,
        moves,
        ending,
    )


def test_api_md_gives_each_seed_pair_exactly_one_mutation() -> None:
    rows = api_handoff_rows()
    assert {(s, t) for s, t, _, _ in rows} == seed_list_pairs()
    assert len(rows) == len(seed_list_pairs())


def test_api_md_and_the_seed_agree_on_where_each_run_event_goes() -> None:
    seed = seed_pipeline_targets()
    api = {event: target for event, _, target, _ in api_pipeline_rows()}
    assert {event: api[event] for event in seed} == seed
    assert len(seed) == 9 and len(api) == 12  # the seed names nine; API.md adds three


# --- the product's tables against them ---------------------------------------------------


def test_the_handoff_table_is_the_seeds_pairs_with_api_mds_mutations_and_actors() -> None:
    table = {(m.source.value, m.target.value, m.mutation, m.actor.value) for m in HANDOFF.moves}
    assert table == api_handoff_rows()
    assert {(s.value, t.value) for s, t in HANDOFF.pairs()} == seed_list_pairs()
    assert len(HANDOFF.moves) == len(seed_list_pairs())


def test_the_handoff_states_and_their_ends_are_the_seeds() -> None:
    sections = seed_state_sections()
    assert [i.state.value for i in HANDOFF.states] == list(sections)
    assert {i.state.value for i in HANDOFF.states if i.terminal} == {
        s for s, (*_, end) in sections.items() if end
    }
    assert [i.state.value for i in HANDOFF.states if i.initial] == [
        s for s, (_, sources, _) in sections.items() if not sources
    ]


def test_the_pipeline_table_is_api_mds_events_sources_and_targets() -> None:
    table = {(m.name.value, m.source.value, m.target.value, m.mutation) for m in PIPELINE.moves}
    assert table == api_pipeline_rows()
    assert {(s.value, t.value) for s, t in PIPELINE.pairs()} == {
        (s, t) for _, s, t, _ in api_pipeline_rows()
    }
