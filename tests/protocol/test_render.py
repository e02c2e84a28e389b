"""The docs page is generated from the protocol table, and must not go stale."""

from __future__ import annotations

from pathlib import Path

import pytest

from baton.protocol.handoff import HANDOFF
from baton.protocol.render import REGENERATE, main, render_mermaid, render_task_states_markdown

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
