"""Record where each SGLang release's launcher puts every rank under --nnodes.

    python -m fidelity.placement [0.5.23 ...]      # default: every release in the cache

SGLang decides a rank's node and local GPU inside the functions that start the scheduler
processes (`engine._launch_subprocesses` in 0.4.6.post5, `Engine._launch_scheduler_processes`
with `_calculate_rank_ranges` from 0.5.18 on, and `DataParallelController.
launch_tensor_parallel_group` / `launch_dp_schedulers` for DP replicas). They fork GPU
processes, so they cannot be called here. This script takes *their own statements* out of
the installed release's source instead: the assignments to the rank ranges before the
`for pp_rank ... for tp_rank` loop, the `gpu_id = ...` expression inside it and the
per-replica `base_gpu_id += ...`. It runs them, unchanged, on stand-ins for `server_args`
and `get_parallel()` / `get_device()` over a grid of (tp, pp, nnodes, replicas,
base_gpu_id, gpu_id_step) and every node rank. A stand-in raises on any attribute it was
not given, so a release that reads a new input stops the recording rather than being
guessed. The answers go to `tests/fixtures/placement/<version>.json.gz`;
`tests/test_placement.py` replays them against `meshsat.solver.placement.launches`.
"""

from __future__ import annotations

import ast
import copy
import gzip
import itertools
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fidelity.record import CACHE, ROOT, asked_versions

FIXTURES = ROOT / "tests" / "fixtures" / "placement"

#: Names the launcher's rank split assigns before its loop.
RANGE_NAMES = frozenset(
    {
        "nnodes_per_tp_group",
        "nnodes_per_pp_rank",
        "tp_size_per_node",
        "pp_size_per_node",
        "tp_rank_range",
        "pp_rank_range",
    }
)
#: (file under sglang/srt, function names that start the schedulers of one engine).
ENGINE = ("entrypoints/engine.py", ("_launch_scheduler_processes", "_launch_subprocesses"))
CONTROLLER = ("managers/data_parallel_controller.py", ("launch_tensor_parallel_group",))

GRID = {
    "tp": (1, 2, 3, 4, 6, 8, 16),
    "pp": (1, 2, 3, 4),
    "nnodes": (1, 2, 3, 4, 8),
    "replicas": (1, 2),
    "base_gpu_id": (0, 3),
    "gpu_id_step": (1, 2),
}


class Strict:
    """An object with exactly the given attributes; any other read is an error, so a
    release whose placement reads something new is noticed, not guessed."""

    def __init__(self, what: str, **values: Any) -> None:
        self.__dict__.update(values)
        self._what = what

    def __getattr__(self, name: str) -> Any:
        raise AttributeError(f"the placement code reads {self._what}.{name}, not stubbed")


def sglang_dir(version: str) -> Path:
    """The release's installed package folder, found by its own venv without importing it."""
    py = CACHE / version / "bin" / "python"
    code = "import importlib.util as u; print(u.find_spec('sglang').submodule_search_locations[0])"
    out = subprocess.run([str(py), "-c", code], check=True, capture_output=True, text=True)
    return Path(out.stdout.strip())


def _assigns_ranges(stmt: ast.stmt) -> bool:
    """A statement of the rank split: an assignment to the range names, or an `if` whose
    branches hold only such assignments (0.5.23's scale-joiner branch)."""
    if isinstance(stmt, ast.Assign):
        names = {n.id for t in stmt.targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        return bool(names) and names <= RANGE_NAMES
    if isinstance(stmt, ast.If):
        return all(_assigns_ranges(s) for s in (*stmt.body, *stmt.orelse))
    return False


def _is_rank_loop(stmt: ast.stmt) -> bool:
    return (
        isinstance(stmt, ast.For)
        and isinstance(stmt.target, ast.Name)
        and stmt.target.id == "pp_rank"
        and _gpu_id_assign(stmt) is not None
    )


def _gpu_id_assign(loop: ast.For) -> ast.Assign | None:
    """The `gpu_id = <arithmetic>` inside the tp loop, if this loop has one."""
    for inner in loop.body:
        if isinstance(inner, ast.For) and ast.unparse(inner.target) == "tp_rank":
            for s in inner.body:
                if (
                    isinstance(s, ast.Assign)
                    and ast.unparse(s.targets[0]) == "gpu_id"
                    and isinstance(s.value, ast.BinOp)
                ):
                    return s
    return None


def _blocks(node: ast.AST) -> list[list[ast.stmt]]:
    out = []
    for child in ast.walk(node):
        for name in ("body", "orelse"):
            block = getattr(child, name, None)
            if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
                out.append(block)
    return out


def extract(source: str, functions: tuple[str, ...]) -> tuple[str, int]:
    """The placement of the first named function that has one, as the source of a function
    `placement(base_gpu_id)` returning [(pp_rank, tp_rank, gpu_id)], and its line."""
    tree = ast.parse(source)
    for fn in ast.walk(tree):
        if not (isinstance(fn, ast.FunctionDef) and fn.name in functions):
            continue
        for block in _blocks(fn):
            for i, stmt in enumerate(block):
                if not _is_rank_loop(stmt):
                    continue
                assert isinstance(stmt, ast.For)
                split = [s for s in block[:i] if _assigns_ranges(s)]
                gpu = _gpu_id_assign(stmt)
                assert gpu is not None
                loop = copy.deepcopy(stmt)
                inner = next(s for s in loop.body if isinstance(s, ast.For))
                record = ast.parse("_out.append((pp_rank, tp_rank, gpu_id))").body
                inner.body = [copy.deepcopy(gpu), *record]
                loop.body = [inner]
                body = [*split, *ast.parse("_out = []").body, loop, ast.Return(ast.Name("_out"))]
                wrapper = ast.parse("def placement(base_gpu_id):\n    pass").body[0]
                assert isinstance(wrapper, ast.FunctionDef)
                wrapper.body = body
                return ast.unparse(ast.fix_missing_locations(wrapper)), stmt.lineno
    raise LookupError(f"no pp/tp launch loop with a gpu_id in {functions}")


def replica_offset(source: str) -> tuple[str, int]:
    """The `base_gpu_id += <expr>` of `launch_dp_schedulers`: where replica d+1 starts."""
    for fn in ast.walk(ast.parse(source)):
        if isinstance(fn, ast.FunctionDef) and fn.name == "launch_dp_schedulers":
            for s in ast.walk(fn):
                if isinstance(s, ast.AugAssign) and ast.unparse(s.target) == "base_gpu_id":
                    return ast.unparse(s.value), s.lineno
    raise LookupError("no base_gpu_id += in launch_dp_schedulers")


def rank_ranges_def(source: str) -> str | None:
    """`_calculate_rank_ranges` (0.5.18 on), which the launch loops call."""
    for fn in ast.parse(source).body:
        if isinstance(fn, ast.FunctionDef) and fn.name == "_calculate_rank_ranges":
            return ast.unparse(fn)
    return None


def namespace(point: dict[str, Any], node_rank: int, helpers: str | None) -> dict[str, Any]:
    tp, pp, nnodes = point["tp"], point["pp"], point["nnodes"]
    common = {"tp_size": tp, "pp_size": pp, "nnodes": nnodes, "node_rank": node_rank}
    common |= {"dp_size": point["replicas"], "is_ep_scale_joiner": point["scale_joiner"]}
    device = {"base_gpu_id": point["base_gpu_id"], "gpu_id_step": point["gpu_id_step"]}
    parallel = Strict("get_parallel()", **common)
    moe = Strict("moe", is_ep_scale_joiner=point["scale_joiner"])
    ns: dict[str, Any] = {
        "server_args": Strict("server_args", **common, **device),
        "get_parallel": lambda: parallel,
        "get_device": lambda: Strict("get_device()", **device),
        "get_exec": lambda: Strict("get_exec()", moe=moe),
        "configured_pp_size": lambda: pp,
    }
    if helpers:
        exec(helpers, ns)
    return ns


def compile_placement(code: str) -> Callable[[dict[str, Any]], Any]:
    def run(ns: dict[str, Any]) -> Any:
        local = dict(ns)
        exec(code, local)
        return local["placement"]

    return run


def record(version: str) -> dict[str, Any]:
    root = sglang_dir(version) / "srt"
    engine_src = (root / ENGINE[0]).read_text()
    ctrl_src = (root / CONTROLLER[0]).read_text()
    engine_code, engine_line = extract(engine_src, ENGINE[1])
    ctrl_code, ctrl_line = extract(ctrl_src, CONTROLLER[1])
    offset_expr, offset_line = replica_offset(ctrl_src)
    helpers = rank_ranges_def(engine_src)
    engine_fn, ctrl_fn = compile_placement(engine_code), compile_placement(ctrl_code)
    # Elastic EP's scale joiners (0.5.18 on) start every TP rank of their stages.
    joiners = (False, True) if "is_ep_scale_joiner" in ctrl_src else (False,)
    points = []
    for *values, joiner in itertools.product(*GRID.values(), joiners):
        point = {**dict(zip(GRID, values, strict=True)), "scale_joiner": joiner}
        launches: list[list[int]] = []
        for node in range(point["nnodes"]):
            ns = namespace(point, node, helpers)
            offset = eval(offset_expr, ns)  # the release's own expression
            for replica in range(point["replicas"]):
                got = ctrl_fn(ns)(replica * offset)
                if point["replicas"] == 1 and not joiner:
                    # One engine without a DP controller: the engine's own loop must agree
                    # with the controller's (DP attention goes through the controller).
                    assert engine_fn(ns)(0) == got, (version, point, node)
                launches.extend([node, replica, p, t, g] for p, t, g in got)
        points.append({**point, "launches": launches})
    return {
        "sglang": version,
        "source": {
            "engine": f"sglang/srt/{ENGINE[0]}:{engine_line}",
            "controller": f"sglang/srt/{CONTROLLER[0]}:{ctrl_line}",
            "replica_offset": f"sglang/srt/{CONTROLLER[0]}:{offset_line}: {offset_expr}",
            # What ran, as extracted, for a reader checking the extraction.
            "engine_code": engine_code,
            "controller_code": ctrl_code,
        },
        "grid": GRID,
        "points": points,
    }


def main(argv: list[str] | None = None) -> int:
    FIXTURES.mkdir(parents=True, exist_ok=True)
    for version in asked_versions(__doc__ or "", argv):
        data = record(version)
        path = FIXTURES / f"{version}.json.gz"
        with gzip.open(path, "wt", encoding="utf-8") as fh:
            json.dump(data, fh, separators=(",", ":"))
        n = sum(len(p["launches"]) for p in data["points"])
        print(f"{version}: {len(data['points'])} points, {n} launches -> {path.name}")
        print(f"  {data['source']['replica_offset']}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
