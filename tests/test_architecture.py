"""The import graph runs one way, from the CLI down to the language (docs/architecture.md).

Every import counts, including the lazy ones inside functions: a lazy import still ties two
modules together, it only hides the tie from a reader. Imports under `if TYPE_CHECKING:` are
left out: they name types for annotations and never run.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: Each subsystem may import only from subsystems of a strictly lower floor (or itself).
FLOORS: dict[str, int] = {
    "meshsat.solver.errors": 0,
    "meshsat.solver.lang": 1,
    "meshsat.solver.placement": 1,  # SGLang's launcher: which node and GPU runs each rank
    "meshsat.solver.catalogue": 2,
    "meshsat.solver.packs": 3,  # a pack is the catalogue plus one release's differences
    "meshsat.solver.packs.compare": 6,  # renders the rules it compares
    "meshsat.solver.backends": 4,  # `pyeval.compiled(pack)` compiles a pack
    "meshsat.solver.inputs": 5,
    "meshsat.solver.examples": 4,  # embedded layout files, which `meshsat.solver.inputs` reads
    "meshsat.solver.validation": 6,
    "meshsat.solver.groups": 7,
    "meshsat.solver.memory": 7,
    "meshsat.solver.repair": 8,
    "meshsat.solver.enumeration": 8,
    "meshsat.solver.perf": 8,  # estimates beside the memory model; AIC imported lazily
    "meshsat.solver": 9,  # the package's public API re-exports the subsystems (on first use)
    "meshsat.solver.tune": 9,
    # PD deployments: servers read, validated and fixed (floors 5-8) and judged as a whole
    "meshsat.solver.deployment": 9,  # autotuner spaces over enumeration and memory; not re-exported
    "meshsat.solver.integrations": 10,  # SGLang's start-up plugin and `meshsat launch`
    "meshsat.cp": 10,
    "meshsat.solver.cli": 11,
    # The web app is a second front end on the CLI's floor: `meshsat serve` starts it and it
    # answers with the CLI's documents and option parsing (see FRONT_ENDS).
    "meshsat.solver.web": 11,
}

#: The two front ends share floor 11 and may import one another (the CLI's `serve` command
#: starts the web app; the web app reuses the CLI's options and JSON documents); the cycle
#: test still refuses a module-level knot between them.
FRONT_ENDS = frozenset({"meshsat.solver.cli", "meshsat.solver.web"})


def _module_name(path: Path) -> str:
    parts = ["meshsat", *path.relative_to(ROOT).with_suffix("").parts]
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for package in ("solver", "cp"):
        for path in sorted((ROOT / package).rglob("*.py")):
            name = _module_name(path)
            is_pkg = path.name == "__init__.py"
            edges = graph.setdefault(name, set())
            tree = ast.parse(path.read_text(encoding="utf-8"))
            typing_only = {
                id(n)
                for block in ast.walk(tree)
                if isinstance(block, ast.If) and ast.unparse(block.test).endswith("TYPE_CHECKING")
                for n in ast.walk(block)
            }
            for node in ast.walk(tree):
                if id(node) in typing_only:
                    continue
                if isinstance(node, ast.Import):
                    edges.update(a.name for a in node.names)
                elif isinstance(node, ast.ImportFrom):
                    if node.level:
                        base = name.split(".")[: len(name.split(".")) - node.level + is_pkg]
                        target = ".".join([*base, node.module] if node.module else base)
                    else:
                        target = node.module or ""
                    edges.add(target)
                    edges.update(f"{target}.{a.name}" for a in node.names)
    return {m: {e for e in es if e in graph and e != m} for m, es in graph.items()}


def _subsystem(module: str) -> str:
    best = ""
    for prefix in FLOORS:
        if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > len(best):
            best = prefix
    return best


def test_every_module_belongs_to_a_floor() -> None:
    assert not [m for m in _graph() if not _subsystem(m)]


def test_no_import_cycle() -> None:
    graph = _graph()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def connect(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    assert cycles == []


def test_imports_run_down_the_floors() -> None:
    upward = []
    for module, targets in _graph().items():
        here = _subsystem(module)
        for target in targets:
            there = _subsystem(target)
            if {here, there} <= FRONT_ENDS:
                continue
            if there != here and FLOORS[there] >= FLOORS[here] and there != "meshsat.solver.errors":
                upward.append(f"{module} -> {target}")
    assert sorted(upward) == []


def test_runtime_never_imports_the_cli_or_torch_into_solver() -> None:
    graph = _graph()
    assert [
        m
        for m in graph
        if m.startswith("meshsat.cp") and any(t.startswith("meshsat.solver.cli") for t in graph[m])
    ] == []
    solver_files = (ROOT / "solver").rglob("*.py")
    assert [p.name for p in solver_files if "import torch" in p.read_text(encoding="utf-8")] == []
