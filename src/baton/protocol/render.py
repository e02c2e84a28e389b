"""The task-states docs page and its Mermaid diagram, rendered from `HANDOFF`.

Every state, move, mutation and rule on the page comes from `baton.protocol.handoff`; only the
prose around them lives here. Pure: the functions return strings. Regenerate the page with

    python -m baton.protocol.render > docs/task-states.md
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from enum import Enum

from baton.errors import InvalidMove
from baton.protocol.handoff import (
    CHECKPOINT_STATES,
    HANDOFF,
    REQUIRES_REASON,
    REQUIRES_WAITING_ON,
    SETS_WAITING_ON,
    WAITING_ON_DESCRIPTIONS,
    Actor,
    MoveName,
    TaskState,
    WaitingOn,
)
from baton.protocol.machine import Move

REGENERATE = "python -m baton.protocol.render > docs/task-states.md"

_INTRO = (
    "Every state a task can be in, and the moves the server allows between them. This page is "
    "built from the protocol, so it changes when the protocol does."
)

# The seed page's rules, as prose. The rules the table cannot express follow them, rendered
# from the constants beside the table. The apostrophes are the seed's typography, as in the
# descriptions in handoff.py, hence the RUF001 waivers.
_RULES = (
    "The server checks every move against this table. A move it doesn’t list fails with "
    f"{InvalidMove.code}, and the task stays where it was.",
    "Some moves need more than the table. A task waiting on its owner’s approval leaves only "
    "when the owner decides: approval routes it, denial rejects it.",
    "The table is the protocol’s full set of allowed moves. Some of them belong to features "
    "that are still planned, as the notes on each state say.",
)

_NO_TARGETS = "nothing. This state ends the task."
_NO_SOURCES = "nothing. A handoff creates the task here."

_HandoffMove = Move[TaskState, MoveName, Actor]


def _code(value: Enum | str) -> str:
    return f"`{value.value if isinstance(value, Enum) else value}`"


def _codes(values: Iterable[Enum | str]) -> str:
    return ", ".join(_code(v) for v in values)


def _alternatives(values: Iterable[Enum | str]) -> str:
    """`a`, `b` or `c`."""
    words = [_code(v) for v in values]
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} or {words[-1]}"


def _in_order(values: Iterable[WaitingOn]) -> list[WaitingOn]:
    chosen = set(values)
    return [w for w in WaitingOn if w in chosen]


def _moves_in_page_order() -> list[_HandoffMove]:
    """The table grouped by source state, in state order; table order within a source."""
    return [m for info in HANDOFF.states for m in HANDOFF.moves_from(info.state)]


def _moves_named(name: MoveName) -> list[_HandoffMove]:
    return [m for m in _moves_in_page_order() if m.name == name]


def _who(actor: Actor) -> str:
    return actor.value.replace("_", " ")


def _arrow(move: _HandoffMove) -> str:
    return f"{_code(move.source)} → {_code(move.target)}"


def _summary() -> str:
    states = len(HANDOFF.states)
    moves = len(HANDOFF.moves)
    ends = sum(1 for info in HANDOFF.states if info.terminal)
    return f"{states} states · {moves} allowed moves · {ends} end a task"


def _states_section() -> list[str]:
    lines = ["## States"]
    for info in HANDOFF.states:
        targets = HANDOFF.targets(info.state)
        sources = HANDOFF.sources(info.state)
        lines += ["", f"### {_code(info.state)}", info.description]
        lines.append(f"- **Moves to:** {_codes(targets) if targets else _NO_TARGETS}")
        if sources:
            lines.append(f"- **Reached from:** {_codes(sources)}")
        elif info.initial:
            lines.append(f"- **Reached from:** {_NO_SOURCES}")
        if info.note:
            lines.append(f"- **Today:** {info.note}")
    return lines


def _moves_section() -> list[str]:
    lines = [
        "## Allowed moves",
        "",
        "Each move names the GraphQL mutation that makes it and, in brackets, who may make it.",
        "",
    ]
    for move in _moves_in_page_order():
        line = f"- {_arrow(move)} — {_code(move.mutation)} ({_who(move.actor)})"
        if move.note:
            line += f". {move.note}"
        lines.append(line)
    return lines


def _waiting_on_section() -> list[str]:
    lines = ["## Waiting on", ""]
    for reason in WaitingOn:
        lines.append(f"- {_code(reason)}: {WAITING_ON_DESCRIPTIONS[reason]}")
    return lines


def _rules_section() -> list[str]:
    lines = ["## Rules"]
    for paragraph in _RULES:
        lines += ["", paragraph]
    lines += ["", "The rules beside the table:", ""]
    for name, required in REQUIRES_WAITING_ON.items():
        for move in _moves_named(name):
            lines.append(
                f"- {_code(move.mutation)} ({_arrow(move)}) is allowed only while the task "
                f"waits on {_alternatives(_in_order(required))}."
            )
    for name, sets in SETS_WAITING_ON.items():
        for move in _moves_named(name):
            reasons = _in_order(sets)
            how = "sets" if len(reasons) == 1 else "takes from its input"
            lines.append(
                f"- {_code(move.mutation)} ({_arrow(move)}) {how} what the task waits on: "
                f"{_alternatives(reasons)}."
            )
    for name in (n for n in MoveName if n in REQUIRES_REASON):
        for move in _moves_named(name):
            lines.append(f"- {_code(move.mutation)} ({_arrow(move)}) must give a reason.")
    checkpoint_states = [info.state for info in HANDOFF.states if info.state in CHECKPOINT_STATES]
    lines.append(
        f"- A checkpoint can be saved only while the task is {_alternatives(checkpoint_states)}."
    )
    return lines


def render_mermaid() -> str:
    """A Mermaid `stateDiagram-v2` of the table, without the code fence."""
    lines = ["stateDiagram-v2", f"    [*] --> {HANDOFF.initial.value}"]
    for move in _moves_in_page_order():
        lines.append(f"    {move.source.value} --> {move.target.value} : {move.mutation}")
    for info in HANDOFF.states:
        if info.terminal:
            lines.append(f"    {info.state.value} --> [*]")
    return "\n".join(lines) + "\n"


def render_task_states_markdown() -> str:
    """The whole `docs/task-states.md` page."""
    sections = [
        [
            f"<!-- Generated from the protocol table. Do not edit; run: {REGENERATE} -->",
            "",
            "# Task states",
            "",
            _INTRO,
            "",
            _summary(),
        ],
        _states_section(),
        _moves_section(),
        _waiting_on_section(),
        _rules_section(),
        ["## Diagram", "", "```mermaid", render_mermaid().rstrip("\n"), "```"],
    ]
    return "\n\n".join("\n".join(section) for section in sections) + "\n"


def main() -> None:
    # Bytes, so the page's typography survives a non-UTF-8 locale.
    sys.stdout.buffer.write(render_task_states_markdown().encode("utf-8"))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
