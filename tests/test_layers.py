"""The layers: a door sits above the services and beside the other doors; nothing below imports
it, and no door imports another.

Every module under `src/baton` is read with `ast`, and every import in it counts: at the top,
inside a function, under `if TYPE_CHECKING:`. A door is one folder over the same services: a
new one goes into `DOORS` here, and the test holds it to the same rules.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"

# Below the doors: what every door calls.
CORE = (
    "baton",  # the package itself
    "baton.protocol",
    "baton.store",
    "baton.access",
    "baton.services",
    "baton.live",
    "baton.engine",
    "baton.errors",
    "baton.storable",
    "baton.inputs",
    "baton.sending",
    "baton.budget",
    "baton.deadlines",
    "baton.numbers",
    "baton.metrics",
    "baton.settings",
    "baton.telemetry",
)
# Each door, by name, and the packages it is made of. GraphQL is two: the schema (`api`) and
# its transports (`web`), which may import the schema; the schema imports no transport.
DOORS = {
    "graphql": ("baton.api", "baton.web"),
    "mcp": ("baton.mcp",),
    "webhooks": ("baton.webhooks",),
    "board": ("baton.board",),
    "a2a": ("baton.a2a",),
}
# The edge: wiring everything together, so it may import anything.
WIRING = ("baton.app", "baton.cli", "baton.reference", "baton.workers")


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def layer(module: str) -> str:
    """`core`, `wiring`, or the door's name `module` belongs to (`unplaced` if none)."""
    for door, packages in DOORS.items():
        if any(_within(module, p) for p in packages):
            return door
    if any(_within(module, p) for p in WIRING):
        return "wiring"
    if any(_within(module, p) for p in CORE[1:]) or module == "baton":
        return "core"
    return "unplaced"


def imported(module: str, source: str, *, package: bool = False) -> list[tuple[int, str]]:
    """Every module of Baton's that `source` (the module `module`, a package's `__init__` when
    `package`) imports, with its line: `from baton.x import y` counts as importing
    `baton.x.y`, which is in the layer of `baton.x` unless it is a module of its own."""
    found: list[tuple[int, str]] = []
    here = module if package else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = here.split(".")
                anchor = ".".join(parts[: len(parts) - (node.level - 1)])
                base = f"{anchor}.{base}" if base else anchor
            found += [(node.lineno, f"{base}.{alias.name}") for alias in node.names]
    return [(line, name) for line, name in found if _within(name, "baton")]


@dataclass(frozen=True)
class Violation:
    module: str
    line: int
    imports: str
    rule: str

    def __str__(self) -> str:
        return f"{self.module}:{self.line} imports {self.imports}: {self.rule}"


def violations(module: str, source: str, *, package: bool = False) -> list[Violation]:
    """What in `source` (the module `module`) breaks the layering."""
    own = layer(module)
    out = []
    for line, name in imported(module, source, package=package):
        theirs = layer(name)
        rule = None
        if own == "core" and theirs not in ("core", "unplaced"):
            rule = f"a module below the doors imports {theirs}"
        elif own in DOORS and theirs in DOORS and theirs != own:
            rule = f"the {own} door imports the {theirs} door"
        elif own in DOORS and theirs == "wiring":
            rule = f"the {own} door imports the wiring"
        elif _within(module, "baton.api") and _within(name, "baton.web"):
            rule = "the GraphQL schema imports its transports"
        if rule is not None:
            out.append(Violation(module, line, name, rule))
    return out


def modules() -> list[tuple[str, Path, bool]]:
    found = []
    for path in sorted((SRC / "baton").rglob("*.py")):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        package = parts[-1] == "__init__"
        if package:
            parts.pop()
        found.append((".".join(parts), path, package))
    return found


def test_every_module_is_in_a_layer() -> None:
    unplaced = [name for name, _, _ in modules() if layer(name) == "unplaced"]
    assert not unplaced, f"put these in CORE, DOORS or WIRING: {unplaced}"


def test_nothing_below_a_door_imports_it_and_no_door_imports_another() -> None:
    found = [
        str(v)
        for name, path, package in modules()
        for v in violations(name, path.read_text(), package=package)
    ]
    assert not found, "\n".join(found)


def test_the_walk_reads_every_module_and_its_imports() -> None:
    names = {name for name, _, _ in modules()}
    assert {"baton", "baton.services.webhooks", "baton.webhooks.worker", "baton.mcp"} <= names
    imports = {
        target
        for name, path, package in modules()
        for _, target in imported(name, path.read_text(), package=package)
    }
    # The doors do call the services, so the check has something to look at.
    assert "baton.services.context.Context" in imports


BAD = [
    ("baton.services.fake", "from baton.api.schema import schema\n", "below the doors"),
    ("baton.store.fake", "import baton.mcp.tools\n", "below the doors"),
    ("baton.live.fake", "from baton import webhooks\n", "below the doors"),
    ("baton.errors", "from baton.app import create_app\n", "below the doors"),
    (
        "baton.services.fake",
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from baton.web.auth import x\n",
        "below the doors",
    ),
    ("baton.engine.fake", "def f():\n    from baton.board import routes\n", "below the doors"),
    ("baton.mcp.fake", "from baton.api.errors import to_error\n", "mcp door imports the graphql"),
    ("baton.webhooks.fake", "from baton.web.outbound import Ledger\n", "imports the graphql"),
    ("baton.api.fake", "from baton.webhooks.render import body\n", "imports the webhooks door"),
    ("baton.web.fake", "from baton.mcp.http import MCPDoor\n", "imports the mcp door"),
    ("baton.web.fake", "from baton.cli import main\n", "imports the wiring"),
    ("baton.api.fake", "from baton.web.graphql_http import GraphQLHTTP\n", "its transports"),
    ("baton.api.fake", "from ..web import outbound\n", "its transports"),
]


@pytest.mark.parametrize(("module", "source", "rule"), BAD)
def test_the_check_names_a_bad_import(module: str, source: str, rule: str) -> None:
    (found,) = violations(module, source)
    assert rule in found.rule
    assert found.module == module and found.line == source.count("\n")


GOOD = [
    ("baton.api.fake", "from baton.services.context import Context\n"),
    ("baton.web.fake", "from baton.api.schema import schema\n"),
    ("baton.mcp.fake", "from baton.access.grants import TokenCache\nfrom . import shapes\n"),
    ("baton.app", "from baton.mcp.http import MCPDoor\nfrom baton.web import outbound\n"),
    ("baton.services.fake", "from baton.store import webhooks\nimport json\n"),
]


@pytest.mark.parametrize(("module", "source"), GOOD)
def test_the_check_lets_the_layers_own_imports_be(module: str, source: str) -> None:
    assert violations(module, source) == []
