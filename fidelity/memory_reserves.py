"""Record what a real SGLang release reserves beside the KV pool, from its own functions
(tests/fixtures/memory_reserves/<version>.json; `tests/test_memory_reserves.py` replays it).

Runs inside a release venv ($HOME/.cache/meshsat-fidelity/<version>, see fidelity/README.md),
from the repository root, with meshsat importable (for the catalogue configs):

    PYTHONPATH=. ~/.cache/meshsat-fidelity/0.5.23/bin/python fidelity/memory_reserves.py 0.5.23

Two records, each the release's own code on CPU (and `multimodal_model_archs`, the
architectures it counts as multimodal by name, and the multimodal ones whose breakable /
piecewise prefill CUDA graphs it keeps):
- `multimodal`: for every catalogue model, `ModelConfig(...).is_multimodal` (with and
  without `--language-model-only`, and with and without `--enable-multimodal`) and
  `mm_runtime_reservation_gb` (mem_cache/kv_cache_configurator.py: the GB
  `_profile_available_bytes` takes off the KV budget after the `mem_fraction_static`
  slack) for the default and the CUDA feature transports, and
  `vlm_factor`: what `adjust_mem_fraction_for_vlm` makes of a default fraction of 1.
- `state_split`: `KVCacheConfigurator._handle_max_mamba_cache` called on a stand-in
  configurator (the release's unbound method; only its `self` and the runtime-context
  accessors are stand-ins) over a grid of the rest it is handed, the bytes one state slot
  costs, `--mamba-full-memory-ratio`, `--max-mamba-cache-size`, speculative draft tokens,
  `--max-running-requests` and the attention-DP width; the record is the slots it sets
  (`max_mamba_cache_size`) and the GB it returns for the KV pool.
0.4.6.post5 has neither function (no hybrid model class, no multimodal reserve): its file
records that.
"""

from __future__ import annotations

import importlib
import itertools
import json
import sys
import tempfile
import types
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "fidelity" / "weight_shapes"))
importlib.import_module("stubs")  # the stand-ins, before any sglang import

OUT = ROOT / "tests" / "fixtures" / "memory_reserves"

#: The grid `_handle_max_mamba_cache` is called over.
RESTS_GB = (0.5, 3.0, 37.25, 61.9)
PER_REQ = (3_015_168, 24_007_680, 50_331_648)
RATIOS = (0.9, 2.0)
EXPLICIT = (None, 1, 256, 1000)
DRAFT = (None, 4, 8)
RUNNING = (None, 48, 3)
ATTN_DP = (1, 4)


def _plain(o: Any) -> Any:
    if isinstance(o, dict | types.MappingProxyType):
        return {k: _plain(v) for k, v in o.items()}
    if isinstance(o, list | tuple):
        return [_plain(v) for v in o]
    return o


def multimodal(k: Any) -> list[dict[str, Any]]:
    from sglang.srt.configs.model_config import ModelConfig

    from meshsat.solver.memory.models import CATALOGUE, model_config

    out: list[dict[str, Any]] = []
    for name in sorted(CATALOGUE):
        with tempfile.TemporaryDirectory() as d:
            Path(d, "config.json").write_text(json.dumps(_plain(model_config(name))))
            for lm_only, enable in itertools.product((False, True), (False, True)):
                flags = {"language_model_only": lm_only, "enable_multimodal": enable}
                try:
                    # --enable-multimodal is store_true with a None default (unset).
                    config = ModelConfig(
                        d, language_model_only=lm_only, enable_multimodal=enable or None
                    )
                    mm = bool(config.is_multimodal)
                except Exception as e:  # a config this release cannot load
                    out.append({"model": name, **flags, "error": str(e)})
                    continue
                reserve = {
                    str(t): k.mm_runtime_reservation_gb(is_multimodal=mm, mm_feature_transport=t)
                    for t in (None, "cpu", "cuda_ipc", "cuda_vmm")
                }
                out.append(
                    {
                        "model": name,
                        **flags,
                        "is_multimodal": mm,
                        "reserve_gb": reserve,
                        "vlm_factor": vlm_factor(config),
                    }
                )
    return out


def vlm_factor(model_config: Any) -> float:
    """What the release's `adjust_mem_fraction_for_vlm` makes of a default fraction of 1
    (it multiplies; post-capture KV sizing, off by default, aside)."""
    try:
        h: Any = importlib.import_module("sglang.srt.arg_groups.memory_hook")
    except ImportError:  # 0.5.18: a ServerArgs method
        from sglang.srt.server_args import ServerArgs

        me = types.SimpleNamespace(mem_fraction_static=1.0)
        ServerArgs.adjust_mem_fraction_for_vlm(me, model_config)
        return float(me.mem_fraction_static)
    if "post_capture_kv_sizing" in h.adjust_mem_fraction_for_vlm.__code__.co_varnames:
        return float(h.adjust_mem_fraction_for_vlm(1.0, model_config, False, None))
    # 0.5.19: reads the resolving view and declares its result.
    args = types.SimpleNamespace(mem_fraction_static=1.0)
    saved = h.resolving_view, h.declare_resolution
    h.resolving_view = lambda sa: sa
    h.declare_resolution = lambda sa, _step, **kw: sa.__dict__.update(kw)
    try:
        h.adjust_mem_fraction_for_vlm(args, model_config)
    finally:
        h.resolving_view, h.declare_resolution = saved
    return float(args.mem_fraction_static)


def _split(k: Any, case: dict[str, Any]) -> dict[str, Any]:
    """One call of the release's `_handle_max_mamba_cache` on a stand-in configurator."""
    schedule = types.SimpleNamespace(
        max_mamba_cache_size=case["max_mamba_cache_size"],
        max_running_requests=case["max_running_requests"],
        mamba_full_memory_ratio=case["ratio"],
        disable_overlap_schedule=False,
    )
    spec = types.SimpleNamespace(speculative_num_draft_tokens=case["draft_tokens"])

    def override(_name: str, **kw: Any) -> None:
        for key, value in kw.items():
            setattr(schedule, key, value)

    mamba = types.SimpleNamespace(
        enable_linear_replayssm_spec=False,
        linear_replayssm_cache_len=0,
        enable_mamba_extra_buffer=True,
        enable_mamba_extra_buffer_lazy=False,
    )
    patches = {
        "get_schedule": lambda: schedule,
        "get_spec": lambda: spec,
        "get_context": lambda: types.SimpleNamespace(override=override),
        "get_memory": lambda: types.SimpleNamespace(
            disable_radix_cache=False, enable_unified_memory=False
        ),
        "get_exec": lambda: types.SimpleNamespace(mamba=mamba),
        "get_disagg": lambda: types.SimpleNamespace(
            disaggregation_mode="null", enable_pd_role_switch=False
        ),
        "kimi_linear_config": lambda _cfg: None,
        # The `auto` strategy's pick for these models with the overlap scheduler on.
        "mamba_extra_buffer_enabled": lambda: True,
        "mamba_extra_buffer_lazy_enabled": lambda: False,
    }
    saved = {n: getattr(k, n) for n in patches if hasattr(k, n)}
    for n, f in patches.items():
        if n in saved:
            setattr(k, n, f)
    cls = k.KVCacheConfigurator
    dp = case["attn_dp"]
    algorithm = types.SimpleNamespace(is_none=lambda: case["draft_tokens"] is None)
    me = types.SimpleNamespace(
        mambaish_config=types.SimpleNamespace(
            mamba2_cache_params=types.SimpleNamespace(
                layers=list(range(45)), mamba_cache_per_req=case["per_req"]
            )
        ),
        ps=types.SimpleNamespace(pp_size=1, attn_dp_size=dp),
        pp_size=1,
        attn_dp_size=dp,
        model_config=types.SimpleNamespace(num_hidden_layers=60),
        spec_algorithm=algorithm,
        hybrid_gdn_config=object(),
        hybrid_kda_config=None,
        extra_mamba_cache_bytes_per_req=0,
        fused_entry_bytes=lambda _name: None,
    )
    me._calculate_mamba_ratio = lambda: cls._calculate_mamba_ratio(me)
    try:
        kv_gb = cls._handle_max_mamba_cache(me, case["rest_gb"])
        return {**case, "slots": schedule.max_mamba_cache_size, "kv_gb": kv_gb}
    except Exception as e:  # the release refuses (no slot left)
        return {**case, "slots": schedule.max_mamba_cache_size, "error": str(e)[:120]}
    finally:
        for n, f in saved.items():
            setattr(k, n, f)


def state_split(k: Any) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    grid = itertools.product(RESTS_GB, PER_REQ, RATIOS, EXPLICIT, DRAFT, RUNNING, ATTN_DP)
    for rest, per, ratio, explicit, draft, running, dp in grid:
        if draft is not None and running is None:
            continue  # SGLang sets --max-running-requests (48) for speculative decoding
        if draft is None and running is not None:
            continue  # read only with speculative decoding (the radix cache stays on)
        case = {
            "rest_gb": rest,
            "per_req": per,
            "ratio": ratio,
            "max_mamba_cache_size": explicit,
            "draft_tokens": draft,
            "max_running_requests": running,
            "attn_dp": dp,
        }
        out.append(_split(k, case))
    return out


def main(version: str) -> None:
    import sglang

    assert sglang.__version__ == version, (sglang.__version__, version)
    try:
        k = importlib.import_module("sglang.srt.mem_cache.kv_cache_configurator")
    except ImportError:
        k = None
    record: dict[str, Any] = {"version": version}
    if k is None or not hasattr(k, "mm_runtime_reservation_gb"):
        record["absent"] = "no mm_runtime_reservation_gb / _handle_max_mamba_cache"
    else:
        record["multimodal"] = multimodal(k)
        mc = importlib.import_module("sglang.srt.configs.model_config")
        record["multimodal_model_archs"] = sorted(mc.multimodal_model_archs)
        for name in ("breakable", "piecewise"):
            archs = getattr(mc, f"multimodal_{name}_cuda_graph_supported_model_archs")
            record[f"multimodal_{name}_graph_archs"] = sorted(archs)
        record["state_split"] = state_split(k)
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / f"{version}.json"
    path.write_text(json.dumps(record, indent=0, sort_keys=True) + "\n")
    print(f"{path}: {len(record.get('state_split', []))} splits")


if __name__ == "__main__":
    main(sys.argv[1])
