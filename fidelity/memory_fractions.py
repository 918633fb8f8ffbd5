"""Record the default `mem_fraction_static` a release resolves for multimodal and text
models on CUDA GPUs of several sizes (tests/fixtures/memory_reserves/fractions-<version>.json;
`tests/test_memory_reserves.py` replays it against `MemoryModel.default_fraction`).

Runs inside a release venv that can be told it runs on CUDA (0.5.23: `override_platform`,
as `runner.py` does for its CUDA records), from the repository root, with meshsat
importable for the catalogue configs and GPU sizes:

    PYTHONPATH=. ~/.cache/meshsat-fidelity/0.5.23/bin/python fidelity/memory_fractions.py 0.5.23

Each record is the release's whole argument resolution (`runner.Resolver`, an SM90 CUDA
platform) of `--tp-size N` (and `--language-only` where the release accepts it) for one
catalogue model, with the GPU's memory answered by replacing `get_device_memory_capacity`
in the module that sizes the fraction; the record is the resolved `mem_fraction_static`
(or the error): the multimodal vision factor (`adjust_mem_fraction_for_vlm`) inside the
release's whole default. The prefill backend's default asks `torch.cuda.is_available()`
itself, which this platform does not answer on CPU, so prefill CUDA graphs resolve off here
for every model and their reserve is not in these records.
"""

from __future__ import annotations

import importlib
import json
import sys
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "fidelity"))
#: The recorder's own resolver (stdlib and the release only).
runner: Any = importlib.import_module("runner")

OUT = ROOT / "tests" / "fixtures" / "memory_reserves"
MODELS = (
    "Qwen/Qwen3.5-397B-A17B",
    "Qwen/Qwen3.5-27B",
    "meta-llama/Llama-4-Scout-17B-16E-Instruct",
    "google/gemma-3-27b-it",
    "google/gemma-3-4b-it",
    "Qwen/Qwen3-8B",
)
GPUS = ("H200", "H100", "L40S", "A100-40", "RTX4090")
TPS = (1, 2, 4, 8)
EXTRAS: tuple[dict[str, Any], ...] = ({}, {"language_only": True})


def _plain(o: Any) -> Any:
    if isinstance(o, dict) or hasattr(o, "items"):
        return {k: _plain(v) for k, v in o.items()}
    if isinstance(o, list | tuple):
        return [_plain(v) for v in o]
    return o


def record(
    version: str,
    models: Iterable[str],
    gpus: Iterable[str],
    launches: Callable[[str], Iterable[dict[str, Any]]],
    name: str,
    prepare: Callable[[], None] = lambda: None,
    platform: dict[str, Any] | None = None,
    fields: tuple[str, ...] = (),
) -> Path:
    """Resolve each model's `launches(model)` on each GPU (its memory answered through
    `get_device_memory_capacity`) and write what the release's default fraction is, or its
    error, to OUT/`name`-<version>.json. `prepare` runs once the release is importable (a
    default the CPU platform cannot answer, set as a CUDA machine answers it); `platform`:
    the CUDA platform's facts that differ from the resolver's SM90 (an SM100 machine);
    `fields`: resolved fields recorded beside the fraction. One loop for this recorder and
    `memory_launch_fractions.py`."""
    from meshsat.solver.memory.gpus import gpu
    from meshsat.solver.memory.models import model_config

    runner.RESOLVED_FIELDS = (*runner.RESOLVED_FIELDS, "mem_fraction_static", *fields)
    runner._prepare()
    r = runner.Resolver()
    if r.platform is None:
        raise SystemExit(f"{version} cannot be told it runs on CUDA")
    r.cuda_facts.update({k: v for k, v in (platform or {}).items() if k in r.cuda_facts})
    hook: Any = importlib.import_module("sglang.srt.arg_groups.memory_hook")
    prepare()
    records = []
    with tempfile.TemporaryDirectory() as tmp:
        for model in models:
            d = Path(tmp, model.replace("/", "--"))
            d.mkdir()
            (d / "config.json").write_text(json.dumps(_plain(model_config(model))))
            for gpu_name in gpus:
                mib = gpu(gpu_name).memory_mib
                hook.get_device_memory_capacity = lambda device=None, mib=mib: float(mib)
                for args in launches(model):
                    out = r.resolve({"id": 0, "model": str(d), "platform": "cuda", "args": args})
                    rec: dict[str, Any] = {"model": model, "gpu": gpu_name, "args": args}
                    if out["accepted"]:
                        resolved = out["resolved"]
                        rec["mem_fraction_static"] = resolved["mem_fraction_static"]
                        rec.update({f: resolved.get(f) for f in fields})
                    else:
                        rec["error"] = (out["error"] or "")[:120]
                    records.append(rec)
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / f"{name}-{version}.json"
    path.write_text(json.dumps({"version": version, "records": records}, indent=0) + "\n")
    print(f"{path}: {len(records)} records")
    return path


def main(version: str) -> None:
    record(
        version,
        MODELS,
        GPUS,
        lambda _model: [{"tp_size": tp, **extra} for tp in TPS for extra in EXTRAS],
        "fractions",
    )


if __name__ == "__main__":
    main(sys.argv[1])
