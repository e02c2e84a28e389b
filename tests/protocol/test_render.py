"""The docs pages are generated from the protocol tables, and must not go stale."""

from __future__ import annotations

from pathlib import Path

import pytest

from baton.protocol.handoff import HANDOFF
from baton.protocol.pipeline import PHASE, PIPELINE, RunCheckpoint, RunEvent, resting
from baton.protocol.render import (
    PAGES,
    REGENERATE,
    main,
    render_mermaid,
    render_pipeline_states_markdown,
    render_task_states_markdown,
)

DOCS_PAGE = Path(__file__).resolve().parents[2] / "docs" / "task-states.md"


def test_docs_page_is_current() -> None:
    on_disk = DOCS_PAGE.read_text(encoding="utf-8") if DOCS_PAGE.exists() else ""
    assert on_disk == render_task_states_markdown(), (
        f"{DOCS_PAGE} is stale. Regenerate it from the repository root with: {REGENERATE}"
    )


def test_page_summary_is_counted_from_the_table() -> None:
    page = render_task_states_markdown()
    terminal = sum(1 for info in HANDOFF.states if info.terminal)
    summary = f"{len(HANDOFF.states)} states · {len(HANDOFF.moves)} allowed moves · {terminal}"
    assert f"\n{summary} end a task\n" in page


def test_page_lists_every_state_and_move() -> None:
    page = render_task_states_markdown()
    for info in HANDOFF.states:
        assert f"\n### `{info.state.value}`\n{info.description}\n" in page
    for move in HANDOFF.moves:
        arrow = f"- `{move.source.value}` → `{move.target.value}` — `{move.mutation}`"
        assert arrow in page


def test_mermaid_has_every_state_and_move() -> None:
    lines = [line.strip() for line in render_mermaid().splitlines()]
    assert lines[0] == "stateDiagram-v2"
    assert f"[*] --> {HANDOFF.initial.value}" in lines
    for move in HANDOFF.moves:
        assert f"{move.source.value} --> {move.target.value} : {move.mutation}" in lines
    for info in HANDOFF.states:
        assert any(info.state.value in line.split() for line in lines[1:]), info.state
        if info.terminal:
            assert f"{info.state.value} --> [*]" in lines
    arrows = [line for line in lines if "-->" in line and "[*]" not in line]
    assert len(arrows) == len(HANDOFF.moves)


def test_page_embeds_the_diagram() -> None:
    assert f"```mermaid\n{render_mermaid()}```\n" in render_task_states_markdown()


def test_main_writes_the_page_to_stdout(capsysbinary: pytest.CaptureFixture[bytes]) -> None:
    main()
    assert capsysbinary.readouterr().out.decode("utf-8") == render_task_states_markdown()


# --- The pipeline page ------------------------------------------------------------------------

PIPELINE_PAGE = DOCS_PAGE.with_name("pipeline-states.md")


def test_pipeline_page_is_current() -> None:
    on_disk = PIPELINE_PAGE.read_text(encoding="utf-8") if PIPELINE_PAGE.exists() else ""
    regenerate = PAGES["pipeline"].regenerate
    assert on_disk == render_pipeline_states_markdown(), (
        f"{PIPELINE_PAGE} is stale. Regenerate it from the repository root with: {regenerate}"
    )


def test_each_page_names_its_regenerate_command_at_the_top() -> None:
    for page, text in (
        ("", render_task_states_markdown()),
        ("pipeline", render_pipeline_states_markdown()),
    ):
        first = text.splitlines()[0]
        assert first.startswith("<!--") and PAGES[page].regenerate in first
    assert PAGES["pipeline"].regenerate == (
        "python -m baton.protocol.render pipeline > docs/pipeline-states.md"
    )


def test_pipeline_page_has_every_status_phase_and_checkpoint() -> None:
    page = render_pipeline_states_markdown()
    for info in PIPELINE.states:
        assert f"| `{info.state.value}` | {info.label} | {info.description} |" in page
    for p in PHASE.values:
        assert f"| `{p.value.value}` | {p.label} |" in page
    order = "\n".join(c.value for c in RunCheckpoint)
    assert f"```text\n{order}\n```" in page
    for c in RunCheckpoint:
        assert f"| `{c.value}` | `{resting(c).value}` |" in page


def test_pipeline_page_has_every_event_with_its_mutation_sources_and_target() -> None:
    page = render_pipeline_states_markdown()
    for event in RunEvent:
        rows = PIPELINE.named(event)
        sources = ", ".join(f"`{m.source.value}`" for m in rows)
        cells = f"| `{event.value}` | `{rows[0].mutation}` | {sources} | `{rows[0].target.value}` |"
        assert cells in page
    for invariant in PIPELINE.invariants:
        assert f"\n- {invariant.text}\n" in page


def test_pipeline_mermaid_has_every_move() -> None:
    lines = [line.strip() for line in render_mermaid(PIPELINE).splitlines()]
    assert lines[:2] == ["stateDiagram-v2", "[*] --> backlog"]
    for move in PIPELINE.moves:
        assert f"{move.source.value} --> {move.target.value} : {move.mutation}" in lines
    assert "completed --> [*]" in lines
    assert "errored --> [*]" not in lines  # a failure keeps its exit: rerun
    assert f"```mermaid\n{render_mermaid(PIPELINE)}```\n" in render_pipeline_states_markdown()


def test_main_writes_the_pipeline_page(capsysbinary: pytest.CaptureFixture[bytes]) -> None:
    main(["pipeline"])
    assert capsysbinary.readouterr().out.decode("utf-8") == render_pipeline_states_markdown()


def test_main_refuses_an_unknown_page() -> None:
    with pytest.raises(SystemExit, match="usage"):
        main(["tasks"])
