"""Objects made a page at a time (`baton.api.wrap`) are the objects their constructors make."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from baton.api.runs import Run, RunEdge, RunEventEntry
from baton.api.types import TASK_TYPES, Task, TaskEdge, TaskEvent
from baton.api.wrap import edges_of, wrapped

RECORDS = [object(), object(), object()]


@pytest.mark.parametrize("cls", [Task, Run, TaskEvent, RunEventEntry])
def test_wrapped_nodes_equal_constructed_ones(cls: type) -> None:
    made = wrapped(cls, RECORDS)
    assert made == [cls(record=r) for r in RECORDS]
    assert all(type(m) is cls for m in made)


@pytest.mark.parametrize(
    ("edge", "node"), [(TaskEdge, Task), (RunEdge, Run), (TASK_TYPES.event_edge, TaskEvent)]
)
def test_edges_equal_constructed_ones(edge: type, node: type) -> None:
    made = edges_of(edge, node, RECORDS)
    assert made == [edge(node=node(record=r)) for r in RECORDS]
    assert all(type(m) is edge and type(m.node) is node for m in made)


def test_a_type_taking_more_than_its_record_is_refused() -> None:
    @dataclass
    class Labelled:
        record: object
        label: str = ""

    with pytest.raises(TypeError, match="construct it"):
        wrapped(Labelled, RECORDS)
