"""Imports only go down: ablations -> lightning_modules -> datamodules -> core, and no module imports
another in a cycle. Read from the source with `ast` (every import, also those inside functions), so a
cycle hidden in a function body is caught too."""

from __future__ import annotations

import ast
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
LAYERS = ["bioablate_core", "datamodules", "lightning_modules", "ablations"]  # bottom to top


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO_ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _import_graph() -> dict[str, set[str]]:
    modules = {_module_name(p): p for layer in LAYERS for p in (REPO_ROOT / layer).rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                candidates = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                candidates = [a.name for a in node.names]
            else:
                continue
            for candidate in candidates:
                # the longest project module the import names (a module, or a name inside one)
                while candidate and candidate not in modules:
                    candidate = candidate.rpartition(".")[0]
                if candidate and candidate != name:
                    targets.add(candidate)
        graph[name] = targets
    return graph


def _layer(module: str) -> int:
    return LAYERS.index(module.split(".")[0])


def test_imports_only_go_down_the_layers():
    upward = sorted(f"{source} imports {target}" for source, targets in _import_graph().items()
                    for target in targets if _layer(target) > _layer(source))
    assert upward == []


def test_core_imports_nothing_else_of_the_project():
    graph = _import_graph()
    assert {t for s, ts in graph.items() if s.startswith("bioablate_core")
            for t in ts if not t.startswith("bioablate_core")} == set()


def test_no_import_cycles():
    """Every import counts, a package's __init__ importing its own submodules too: a loop through a
    package (cli -> launch -> launch/jobs -> cli, when SLURM jobs re-entered the CLI) is a loop."""
    graph = _import_graph()

    def edges(source: str) -> set[str]:
        return graph[source]

    cycles: list[list[str]] = []
    state: dict[str, int] = {}  # 1 on the stack, 2 done
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for target in sorted(edges(node)):
            if state.get(target) == 1:
                cycles.append(stack[stack.index(target):] + [target])
            elif target not in state:
                visit(target)
        stack.pop()
        state[node] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module)
    assert cycles == []


def test_the_command_line_goes_through_the_front_door_only():
    """ablations/cli/ parses arguments and prints: everything it does goes through `ablations.api`, so
    nothing the CLI can do is missing from the Python API (the benchmarks' and the notebook's door). Of
    the project it imports its own modules, `ablations.api` (the package, not its parts; `from ablations
    import api` names the empty `ablations` package on the way) and `bioablate_core`."""
    side_doors = sorted(f"{source} imports {target}" for source, targets in _import_graph().items()
                        if source.startswith("ablations.cli") for target in targets
                        if not (target.startswith(("ablations.cli", "bioablate_core"))
                                or target in ("ablations", "ablations.api")))
    assert side_doors == []
