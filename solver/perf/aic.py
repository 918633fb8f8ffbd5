"""AIConfigurator's step latencies, loaded lazily, once per process, thread-safe.

Why lazily: `aiconfigurator-core` is an optional dependency (the `perf` extra) whose import
and kernel databases cost about a second; `validate` and `check` never reach this module
(tests/test_perf_imports.py proves it in a subprocess). Everything it is asked is in
meshsat's terms already translated by `engine_args` (the one mapping module).

The engine answers two questions meshsat schedules with (`schedule.py`): the latency of one
prefill forward pass over `requests x isl` tokens, and of one decode step of `batch`
requests at a context length. Compiled engines are cached per `EngineArgs`; the Rust
engine caches its database per system and version.
"""

from __future__ import annotations

import json
import re
import tempfile
import threading
from collections.abc import Mapping, Sequence
from functools import cache
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import yaml

from meshsat.solver.errors import MeshsatError
from meshsat.solver.perf.engine_args import EngineArgs

_LOCK = threading.RLock()
_ENGINES: dict[EngineArgs, Any] = {}
_FAILED: dict[EngineArgs, str] = {}
#: Each compiled engine's answers, per (engine, method, arguments): many layouts share one
#: engine (the engine does not read every width meshsat tells apart: 878 layout shapes of
#: DeepSeek-V3 on 64 GPUs compile 539 engines); the engine is a pure function of its
#: arguments. Its answers are cheap once its database is loaded (DeepSeek-V3 on H200: 5-8 µs
#: median a call, the first call to a database about a second), so the memo saves about 5 %
#: of a warm estimate (`benchmarks/bench_perf.py` measures both). Emptied when it reaches
#: `_MAX_ANSWERS` (a long-running `meshsat serve` asks of ever new workloads; one plan of
#: DeepSeek-V3 on 64 H200 with `--disagg` keeps 6,974 answers).
_ANSWERS: dict[tuple[EngineArgs, str, tuple[int, ...]], float] = {}
_MAX_ANSWERS = 200_000


def clear_answers() -> int:
    """Empty the memo of engine answers and return how many it held. Why: a benchmark of
    warm estimates must pay for the engine's answers, not read back those of its warm-up
    (`benchmarks/bench_perf.py` measures both); the compiled engines and databases stay."""
    with _LOCK:
        held = len(_ANSWERS)
        _ANSWERS.clear()
    return held


class EngineUnavailable(Exception):
    """The engine cannot estimate these arguments (not installed, no data, refused)."""


def _package_dir() -> Path | None:
    spec = find_spec("aiconfigurator_core")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def installed() -> bool:
    return _package_dir() is not None


@cache
def database_versions() -> Mapping[str, Sequence[str]]:
    """System -> the SGLang database versions the engine will answer for (its `current`
    and `previous` slots that have data), read from its files without importing it."""
    root = _package_dir()
    if root is None:
        return {}
    systems = root / "systems"
    slots = yaml.safe_load((systems / "query_versions.yaml").read_text())
    default = slots.get("defaults", {}).get("sglang", {})
    out: dict[str, tuple[str, ...]] = {}
    for data in sorted((systems / "data").iterdir()):
        have = data / "gemm" / "sglang"
        if not have.is_dir():
            continue
        slot = slots.get("overrides", {}).get(data.name, {}).get("sglang", default)
        wanted = [slot.get("current"), slot.get("previous")]
        versions = tuple(v for v in wanted if v and (have / v).is_dir())
        if versions:
            out[data.name] = versions
    return out


@cache
def bundled_models() -> frozenset[str]:
    """Model ids the engine resolves offline: those its `DefaultHFModels` lists, whose
    config it reads from its bundled files. Four more files are bundled (Kimi-K2-Instruct,
    Mixtral 8x7B and 8x22B, Qwen3.5-122B-A10B) that it does not read by id: asked by id,
    it downloads their config (no network: the layout fell back to the roofline), so
    `model_location` hands it a folder for them as for any model it does not bundle."""
    root = _package_dir()
    if root is None:
        return frozenset()
    from aiconfigurator_core.sdk.common import DefaultHFModels

    names = (p.name.removesuffix("_config.json") for p in (root / "model_configs").glob("*"))
    files = {n.replace("--", "/", 1) for n in names if not n.endswith("_quant")}
    return frozenset(files & set(DefaultHFModels))


_CONFIG_DIRS: dict[str, str] = {}


def model_location(model_id: str, config: Mapping[str, Any]) -> str:
    """What to pass the engine as `model_path`: a bundled id, or a directory holding
    `config` as config.json (written once per process for a model it does not bundle)."""
    if model_id in bundled_models():
        return model_id
    if Path(model_id).is_dir():
        return model_id
    with _LOCK:
        hit = _CONFIG_DIRS.get(model_id)
        if hit is None:
            d = Path(tempfile.mkdtemp(prefix="meshsat-model-"))
            (d / "config.json").write_text(json.dumps(dict(config)))
            hit = _CONFIG_DIRS[model_id] = str(d)
    return hit


def _memoise_version_slots() -> None:
    """The engine re-reads and re-parses its YAML files on every compile (version slots,
    system spec, database view: most of a 50-130 ms compile); the answers depend only on
    their arguments and on files that do not change while a process runs, so they are
    memoised (slots as copies, since callers may mutate them)."""
    from aiconfigurator_core.sdk import perf_database as pdb

    original = pdb.get_version_slots
    if getattr(original, "_meshsat_memo", False):
        return
    memo: dict[tuple[Any, ...], dict[str, str] | None] = {}

    def slots(
        system: str, backend: str, systems_paths: str | list[str] | None = None
    ) -> dict[str, str] | None:
        paths = tuple(systems_paths) if isinstance(systems_paths, list) else systems_paths
        key = (system, backend, paths)
        if key not in memo:
            memo[key] = original(system, backend, systems_paths)
        hit = memo[key]
        return None if hit is None else dict(hit)

    slots._meshsat_memo = True  # type: ignore[attr-defined]
    pdb.get_version_slots = slots

    # The same for the database view a compile reads its policy flags from (one per
    # system and version; the Rust engine keeps its own tables).
    from aiconfigurator_core.sdk import engine as eng

    load = eng._maybe_load_database
    views: dict[tuple[Any, ...], Any] = {}

    def database(
        system: str, backend: str, backend_version: str | None, systems_path: str | None
    ) -> Any:
        key = (system, backend, backend_version, systems_path)
        if key not in views:
            views[key] = load(system, backend, backend_version, systems_path)
        return views[key]

    eng._maybe_load_database = database


def _handle(args: EngineArgs) -> Any:
    with _LOCK:
        h = _ENGINES.get(args)
        if h is not None:
            return h
        if args in _FAILED:
            raise EngineUnavailable(_FAILED[args])
        try:
            import logging

            from aiconfigurator_core.sdk.engine import EngineHandle

            logging.getLogger("aiconfigurator_core").setLevel(logging.ERROR)
            _memoise_version_slots()
            h = EngineHandle.compile(args.model_path, args.system, "sglang", **args.kwargs())
        except ImportError as exc:
            _FAILED[args] = f"aiconfigurator-core is not installed ({exc})"
            raise EngineUnavailable(_FAILED[args]) from None
        except MeshsatError:  # --timeout's signal (TimedOut) lands here: the run's, not
            raise  # the engine's failure, and never remembered as one
        except Exception as exc:  # the engine raises many types; each is "no estimate"
            _FAILED[args] = engine_error(exc)
            raise EngineUnavailable(_FAILED[args]) from None
        _ENGINES[args] = h
        return h


#: The engine's refusal of an architecture, which goes on to list every one it supports.
_UNSUPPORTED = re.compile(r"The model's architecture (\S+) is not supported")
#: The most of an engine message a source label carries.
MESSAGE_CHARS = 160


def engine_error(exc: BaseException) -> str:
    """The engine's failure as a row's source label says it: its type and first line, cut
    at a word (with an ellipsis) rather than mid-name, and an unsupported architecture
    without the list of the supported ones that follows it."""
    text = str(exc).splitlines()[0] if str(exc) else ""
    m = _UNSUPPORTED.search(text)
    if m:
        return f"{type(exc).__name__}: architecture {m.group(1)} not supported by the engine"
    if len(text) > MESSAGE_CHARS:
        text = text[:MESSAGE_CHARS].rsplit(" ", 1)[0].rstrip(",;:") + " ..."
    return f"{type(exc).__name__}: {text}"


class AicSteps:
    """Step latencies (ms) of one compiled engine."""

    def __init__(self, args: EngineArgs) -> None:
        self.args = args
        self._h = _handle(args)
        self.label = args.label

    def _call(self, name: str, *a: int) -> float:
        key = (self.args, name, a)
        try:
            with _LOCK:  # one engine object is not documented as re-entrant
                v = _ANSWERS.get(key)
                if v is None:
                    if len(_ANSWERS) >= _MAX_ANSWERS:
                        _ANSWERS.clear()
                    v = _ANSWERS[key] = float(getattr(self._h, name)(*a))
        except MeshsatError:
            raise
        except Exception as exc:
            raise EngineUnavailable(engine_error(exc)) from None
        if not v == v or v < 0:  # NaN or negative: no answer
            raise EngineUnavailable(f"{name}{a} returned {v}")
        return v

    def prefill_ms(self, requests: int, isl: int, prefix: int = 0) -> float:
        """One prefill pass over `requests` prompts of `isl` tokens on one attention-DP rank,
        the first `prefix` of each cached (the engine's own `prefix` argument)."""
        return self._call("predict_prefill_latency", requests, isl, prefix)

    def decode_ms(self, batch: int, isl: int, osl: int) -> float:
        """One decode step of `batch` requests per attention-DP rank (contexts from isl to
        isl + osl)."""
        return self._call("decode_step_latency", batch, isl, osl)
