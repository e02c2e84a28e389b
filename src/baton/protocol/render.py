"""The lifecycle docs pages and their Mermaid diagrams, rendered from the protocol tables.

One renderer serves every lifecycle: each state, value, move, guard, effect, parameter, actor and
invariant on a page comes from the table; only the prose around them lives here, in a `Page`.
A page has the shape of its seed page: sections per state (the handoff's task-states page) or
tables per axis (the pipeline's page). Pure: the functions return strings. Regenerate with

    python -m baton.protocol.render > docs/task-states.md
    python -m baton.protocol.render pipeline > docs/pipeline-states.md
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from enum import Enum, StrEnum
from typing import Any

from baton.errors import InvalidInput, InvalidMove
from baton.protocol.handoff import CHECKPOINT_STATES, HANDOFF
from baton.protocol.logic import Arg, Const, Expr, Keep, alternatives, code
from baton.protocol.machine import Axis, Machine, Move, StateInfo
from baton.protocol.params import Kind, Param
from baton.protocol.pipeline import ACTORS, PIPELINE

AnyMachine = Machine[Any, Any, Any]
AnyMove = Move[Any, Any, Any]


class Layout(StrEnum):
    SECTIONS = "sections"  # a section per state, a list of moves (seed page 000)
    TABLES = "tables"  # a table per axis, a table of events (seed page 003)


@dataclass(frozen=True)
class Page:
    machine: AnyMachine
    path: str
    argument: str  # what `python -m baton.protocol.render` takes to print this page
    title: str
    intro: str
    subject: str  # "task": what a terminal state ends
    state_noun: str  # "states"
    moves_noun: str  # "allowed moves"
    layout: Layout
    rules: tuple[str, ...]
    extra_rules: Callable[[], list[str]] = list
    actors: dict[Any, str] = field(default_factory=dict)

    @property
    def regenerate(self) -> str:
        argument = f" {self.argument}" if self.argument else ""
        return f"python -m baton.protocol.render{argument} > {self.path}"


def _code(value: Enum | str) -> str:
    return f"`{value.value if isinstance(value, Enum) else value}`"


def _codes(values: Iterable[Enum | str]) -> str:
    return ", ".join(_code(v) for v in values)


def _plural(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def _who(actor: Enum) -> str:
    return str(actor.value).replace("_", " ")


def _arrow(move: AnyMove) -> str:
    return f"{_code(move.source)} → {_code(move.target)}"


def _moves_in_page_order(machine: AnyMachine) -> list[AnyMove]:
    """The table grouped by source state, in state order; table order within a source."""
    return [m for info in machine.states for m in machine.moves_from(info.state)]


def _summary(page: Page) -> str:
    m = page.machine
    parts = [f"{len(m.states)} {page.state_noun}"]
    if page.layout is Layout.TABLES:
        parts += [f"{len(a.values)} {a.title.lower()}s" for a in m.attributes]
        parts.append(f"{len(m.names())} {page.moves_noun}")
    else:
        parts.append(f"{len(m.moves)} {page.moves_noun}")
    ends = sum(1 for info in m.states if info.terminal)
    parts.append(f"{ends} {'ends' if ends == 1 else 'end'} a {page.subject}")
    return " · ".join(parts)


def _notes(note: str | None, in_baton: str | None, indent: str = "") -> list[str]:
    """The seed's "today" note, quoted as the seed's, then what Baton does."""
    lines = [f"{indent}- **Today, says the seed page:** “{note}”"] if note else []
    return lines + ([f"{indent}- **In Baton:** {in_baton}"] if in_baton else [])


# --- sections layout (the task-states page) --------------------------------------------------


def _state_sections(page: Page) -> list[str]:
    m = page.machine
    lines = ["## States"]
    for info in m.states:
        targets, sources = m.targets(info.state), m.sources(info.state)
        lines += ["", f"### {_code(info.state)}", info.description]
        ends = f"nothing. This state ends the {page.subject}."
        lines.append(f"- **Moves to:** {_codes(targets) if targets else ends}")
        if sources:
            lines.append(f"- **Reached from:** {_codes(sources)}")
        elif info.initial:
            lines.append(f"- **Reached from:** nothing. A handoff creates the {page.subject} here.")
        lines += _notes(info.note, info.in_baton)
    return lines


def _move_list(page: Page) -> list[str]:
    lines = [
        "## Allowed moves",
        "",
        "Each move names the GraphQL mutation that makes it and, in brackets, who may make it.",
        "",
    ]
    for move in _moves_in_page_order(page.machine):
        line = f"- {_arrow(move)} — {_code(move.mutation)} ({_who(move.actor)})"
        lines.append(line + (f". {move.note}" if move.note else ""))
    return lines


def _value_list(axis: Axis) -> list[str]:
    lines = [f"## {axis.title}", ""]
    for info in axis.values:
        lines.append(f"- {_code(info.value)}: {info.description}")
        lines += _notes(info.note, info.in_baton, indent="  ")
    return lines


def _rules_beside_the_table(m: AnyMachine) -> list[str]:
    """Guards, effects that set something, and required parameters, one line each."""
    ordered = [move for name in type(m.names()[0]) for move in m.named(name)]
    lines = []
    for move in ordered:
        if move.guard.axes() or move.guard.params():
            need = move.guard.prose(m.phrase)
            lines.append(f"- {_code(move.mutation)} ({_arrow(move)}) is allowed only while {need}.")
    for move in ordered:
        for axis_name, effect in move.effects:
            said = _effect_rule(m.axis(axis_name), move, effect)
            if said:
                lines.append(f"- {_code(move.mutation)} ({_arrow(move)}) {said}.")
    for move in ordered:
        steering = {p for _, e in move.effects if isinstance(e, Expr) for p in e.params()}
        for param in move.params:
            if param.required and param.name not in steering:
                lines.append(f"- {_code(move.mutation)} ({_arrow(move)}) must give a {param.name}.")
    return lines


def _effect_rule(axis: Axis, move: AnyMove, effect: Keep | Expr) -> str | None:
    if isinstance(effect, Const) and effect.constant is not None:
        return f"sets {axis.noun}: {code(effect.constant)}"
    if isinstance(effect, Arg):
        param = move.param(effect.param)
        assert param is not None
        return f"takes from its input {axis.noun}: {alternatives([code(c) for c in param.choices])}"
    return None


def _rules(page: Page) -> list[str]:
    lines = ["## Rules"]
    for paragraph in page.rules:
        lines += ["", paragraph]
    # The tables layout shows guards, effects and parameters in the events table instead.
    beside = _rules_beside_the_table(page.machine) if page.layout is Layout.SECTIONS else []
    beside += page.extra_rules()
    if beside:
        lines += ["", "The rules beside the table:", "", *beside]
    return lines


# --- tables layout (the pipeline page) -------------------------------------------------------


def _table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    lines = [f"| {' | '.join(header)} |", f"| {' | '.join('---' for _ in header)} |"]
    return lines + [f"| {' | '.join(row)} |" for row in rows]


def _state_table(page: Page) -> list[str]:
    m = page.machine
    lines = [f"## {m.primary.title()}", ""]
    lines += _table(
        ["Canonical", "Friendly", "Meaning"],
        ([_code(i.state), i.label or "", i.description] for i in m.states),
    )
    noted: list[StateInfo[Any]] = [i for i in m.states if i.note or i.in_baton]
    if noted:
        lines += ["", "The meanings are the seed page’s. What Baton adds:", ""]
        for info in noted:
            seed = f"Today, says the seed page: “{info.note}”" if info.note else None
            said = " ".join(filter(None, (seed, info.in_baton)))
            lines.append(f"- {_code(info.state)}: {said}")
    return lines


def _axis_table(axis: Axis) -> list[str]:
    lines = [f"## {axis.title}", ""]
    if axis.ordered:
        lines += ["Ordered resume barriers:", "", "```text"]
        lines += [str(info.value.value) for info in axis.values] + ["```", ""]
    labelled = any(info.label for info in axis.values)
    functions = [f for f in axis.functions if f.label]
    header = ["Canonical" if labelled else axis.title]
    header += ["Friendly"] if labelled else []
    header += [f.label for f in functions]
    rows = []
    for info in axis.values:
        row = [_code(info.value)] + ([info.label or ""] if labelled else [])
        rows.append(row + [_code(f(info.value)) for f in functions])
    lines += _table(header, rows)
    for f in axis.functions:
        if f.description:
            lines += ["", f.description]
    return lines


def _param(param: Param) -> str:
    if param.kind is Kind.CHOICE:
        kind = f"one of {_codes(param.choices)}"
    else:
        kind = {Kind.TEXT: "text", Kind.TEXT_LIST: "a list of texts", Kind.URL: "a URL"}.get(
            param.kind, "an object"
        )
    return f"{_code(param.field)}: {kind}" + ("" if param.required else " (optional)")


def _event_table(page: Page) -> list[str]:
    m = page.machine
    header = ["Event", "Mutation", "From", "To", "Guard"]
    header += [a.title for a in m.attributes] + ["Takes", "Who"]
    rows = []
    for name in m.names():
        rows_of = m.named(name)
        first = rows_of[0]
        guard = first.guard.prose(m.phrase) if (first.guard.axes() or first.guard.params()) else "—"
        row = [
            _code(name),
            _code(first.mutation),
            _codes(r.source for r in rows_of),
            _codes(dict.fromkeys(r.target for r in rows_of)),
            guard,
        ]
        row += [first.effect(a.name).prose() for a in m.attributes]
        row += ["; ".join(_param(p) for p in first.params) or "—", _who(first.actor)]
        rows.append(row)
    lines = ["## Events", "", *_table(header, rows)]
    notes = [(m.named(n)[0].mutation, m.named(n)[0].note) for n in m.names() if m.named(n)[0].note]
    if notes:
        lines += ["", "Notes on the events:", ""]
        lines += [f"- {_code(mutation)}: {note}" for mutation, note in notes]
    return lines


def _who_section(page: Page) -> list[str]:
    lines = ["## Who", ""]
    lines += [f"- **{_who(actor)}**: {text}" for actor, text in page.actors.items()]
    return [*lines, "", f"Admin may make every {page.moves_noun[:-1]}."]


def _invariants(page: Page) -> list[str]:
    m = page.machine
    lines = ["## Invariants", ""]
    seed = [i for i in m.invariants if i.seed]
    own = [i for i in m.invariants if not i.seed]
    if seed:
        lines += [f"- {i.text}" for i in seed]
    if own or m.forward_only:
        if seed:
            lines += ["", "Baton adds:", ""]
        lines += [f"- {i.text}" for i in own] + [f"- {r.text}" for r in m.forward_only]
    lines += ["", "Every move keeps them: the table is checked for it when it is declared."]
    return lines


# --- the page -----------------------------------------------------------------------------


def render_mermaid(machine: AnyMachine = HANDOFF) -> str:
    """A Mermaid `stateDiagram-v2` of the table, without the code fence."""
    lines = ["stateDiagram-v2", f"    [*] --> {machine.initial.value}"]
    for move in _moves_in_page_order(machine):
        lines.append(f"    {move.source.value} --> {move.target.value} : {move.mutation}")
    for info in machine.states:
        if info.terminal:
            lines.append(f"    {info.state.value} --> [*]")
    return "\n".join(lines) + "\n"


def render_page(page: Page) -> str:
    m = page.machine
    head = [
        f"<!-- Generated from the protocol table. Do not edit; run: {page.regenerate} -->",
        "",
        f"# {page.title}",
        "",
        page.intro,
        "",
        _summary(page),
    ]
    if page.layout is Layout.SECTIONS:
        body = [_state_sections(page), _move_list(page), *map(_value_list, m.attributes)]
        body += [_rules(page), _invariants(page)]
    else:
        body = [_state_table(page), *map(_axis_table, m.attributes), _event_table(page)]
        body += [_who_section(page), _invariants(page), _rules(page)]
    diagram = ["## Diagram", "", "```mermaid", render_mermaid(m).rstrip("\n"), "```"]
    return "\n\n".join("\n".join(section) for section in [head, *body, diagram]) + "\n"


# --- the two pages ------------------------------------------------------------------------


def _checkpoint_rule() -> list[str]:
    states = [info.state for info in HANDOFF.states if info.state in CHECKPOINT_STATES]
    return [
        "- A checkpoint can be saved only while the task is "
        f"{alternatives([_code(s) for s in states])}."
    ]


# The seed page's rules, as prose. The apostrophes are the seed's typography, as in the
# descriptions in handoff.py.
TASK_PAGE = Page(
    machine=HANDOFF,
    path="docs/task-states.md",
    argument="",
    title="Task states",
    intro="Every state a task can be in, and the moves the server allows between them. This "
    "page is built from the protocol, so it changes when the protocol does.",
    subject="task",
    state_noun="states",
    moves_noun="allowed moves",
    layout=Layout.SECTIONS,
    rules=(
        "The server checks every move against this table. A move it doesn’t list fails with "
        f"{InvalidMove.code}, and the task stays where it was.",
        "Some moves need more than the table. A task waiting on its owner’s approval leaves only "
        "when the owner decides: approval routes it, denial rejects it.",
        "The table is the protocol’s full set of allowed moves. The seed page marks some of them "
        "as belonging to features that were still planned; in Baton every move in the table is "
        "built, as the “In Baton” notes say.",
    ),
    extra_rules=_checkpoint_rule,
)

PIPELINE_PAGE = Page(
    machine=PIPELINE,
    path="docs/pipeline-states.md",
    argument="pipeline",
    title="Pipeline run states",
    intro="Canonical run status, phase, and checkpoint values, and the events that move a run. "
    "Canonical names are snake_case on the wire; the app shows friendly labels. This page is "
    "built from the protocol, so it changes when the protocol does.",
    subject="run",
    state_noun="statuses",
    moves_noun="events",
    layout=Layout.TABLES,
    rules=(
        "The server checks every event against this table: its status, its guard and its "
        f"arguments. An event the table does not allow fails with {InvalidMove.code}, arguments "
        f"that do not fit fail with {InvalidInput.code}, and the run stays where it was.",
        "In the Phase and Checkpoint columns, “kept” means unchanged and “given checkpoint” is "
        "the event’s `checkpoint` argument.",
    ),
    actors=dict(ACTORS),
)

PAGES: dict[str, Page] = {page.argument: page for page in (TASK_PAGE, PIPELINE_PAGE)}
REGENERATE = TASK_PAGE.regenerate


def render_task_states_markdown() -> str:
    """The whole `docs/task-states.md` page."""
    return render_page(TASK_PAGE)


def render_pipeline_states_markdown() -> str:
    """The whole `docs/pipeline-states.md` page."""
    return render_page(PIPELINE_PAGE)


def main(argv: Sequence[str] = ()) -> None:
    """Print the page named by `argv` (none: the task page, `pipeline`: the pipeline page)."""
    name = argv[0] if argv else ""
    if name not in PAGES or len(argv) > 1:
        sys.exit(f"usage: python -m baton.protocol.render [{' | '.join(filter(None, PAGES))}]")
    # Bytes, so the page's typography survives a non-UTF-8 locale.
    sys.stdout.buffer.write(render_page(PAGES[name]).encode("utf-8"))
    sys.stdout.flush()


if __name__ == "__main__":
    main(sys.argv[1:])
