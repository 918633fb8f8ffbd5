"""Record which `--quantization` a real SGLang release accepts beside each checkpoint's own
quantization (tests/fixtures/quant_args/<version>.json; `tests/test_quant_args.py` replays
it against meshsat's `QUANT-CHECKPOINT-MISMATCH`).

Runs inside a release venv ($HOME/.cache/meshsat-fidelity/<version>, see fidelity/README.md),
from the repository root, with aiconfigurator-core's model configs at hand:

    MESHSAT_HF_CONFIGS=.venv/lib/python3.11/site-packages/aiconfigurator_core/model_configs \\
      ~/.cache/meshsat-fidelity/0.5.23/bin/python fidelity/quant_args.py 0.5.23

The checkpoint folders are `quant_sources.py`'s (every config aiconfigurator-core bundles,
and the written ones), plus the quantized checkpoints of meshsat's embedded catalogue; the
arguments are every choice of the release's own `--quantization` parser. The record is
what the release's `ModelConfig._verify_quantization` does, called on a `ModelConfig`
holding only what it reads (`hf_config`, `model_path`, `quantization`, the draft flags):
the quantization it settles on (`None`: unquantized), or `error N`, the N-th of the
messages it raised (`errors`). Where it settles on an online requantization method
(`quark_mxfp4`), the model loader's next step is recorded too, `get_quant_config`, which
builds that method's config from the checkpoint's and refuses sources it cannot
requantize (`solver/lang/requant_source.py`); its refusal is the pair's `error N`. The
platform is answered as a
CUDA Hopper GPU (`_as_hopper`). 0.4.6.post5 is not recorded: its FBGEMM FP8 comes from
vLLM, which its venv here does not hold.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import tempfile
import types
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "fidelity"))
sys.path.insert(0, str(ROOT / "fidelity" / "weight_shapes"))
stubs = importlib.import_module("stubs")  # the stand-ins, before any sglang import


def _same_each_time(owner: Any, name: str) -> Any:
    """A stand-in's attribute, made once: Marlin asks `quant_type in supported_types` of
    `sgl_kernel`'s scalar types, which a fresh class per lookup never passes."""
    if name.startswith("__"):
        raise AttributeError(name)
    made = stubs._make(name)
    (type.__setattr__ if isinstance(owner, type) else object.__setattr__)(owner, name, made)
    return made


stubs._Meta.__getattr__ = _same_each_time
stubs._StandIn.__getattr__ = _same_each_time

OUT = ROOT / "tests" / "fixtures" / "quant_args"

#: Checkpoints neither aiconfigurator-core's bundle nor the catalogue holds: GPTQ and AWQ
#: (Marlin's and MoE-WNA16's conversions), and an MXFP8 checkpoint of its own method.
WRITTEN: list[tuple[str, dict[str, Any]]] = [
    ("gptq-4bit", {"quantization_config": {"quant_method": "gptq", "bits": 4,
                                           "group_size": 128, "sym": True, "desc_act": False}}),
    ("gptq-8bit-desc-act", {"quantization_config": {"quant_method": "gptq", "bits": 8,
                                                    "group_size": 128, "sym": True,
                                                    "desc_act": True}}),
    ("awq-4bit", {"quantization_config": {"quant_method": "awq", "bits": 4, "group_size": 128,
                                          "zero_point": True, "version": "gemm"}}),
    ("mxfp8-native", {"quantization_config": {"quant_method": "mxfp8"}}),
    # The sources online MXFP4 requantization reads from config.json (requant_source.py).
    ("quark-nvfp4", {"quantization_config": {"quant_method": "quark", "global_quant_config": {
        "weight": [{"dtype": "fp4", "qscheme": "per_group", "group_size": 16,
                    "is_dynamic": False},
                   {"dtype": "fp8_e4m3", "qscheme": "per_tensor", "is_dynamic": False}]}}}),
    ("quark-fp8", {"quantization_config": {"quant_method": "quark", "global_quant_config": {
        "weight": {"dtype": "fp8_e4m3", "qscheme": "per_tensor", "is_dynamic": False}}}}),
    ("fp8-static", {"quantization_config": {"quant_method": "fp8",
                                            "activation_scheme": "static"}}),
    ("modelopt-mixed-stated", {"quantization_config": {
        "quant_method": "modelopt", "quant_algo": "MIXED_PRECISION",
        "kv_cache_quant_algo": None,
        "quantized_layers": {"model.layers.0.mlp.experts.0.down_proj": {"quant_algo": "NVFP4"},
                             "model.layers.0.self_attn.o_proj": {"quant_algo": "FP8"}}}}),
    ("modelopt-mixed-uneven", {"quantization_config": {
        "quant_method": "modelopt", "quant_algo": "MIXED_PRECISION",
        "kv_cache_quant_algo": None,
        "quantized_layers": {"model.layers.0.mlp.down_proj": {"quant_algo": "NVFP4"},
                             "model.layers.1.mlp.down_proj": {"quant_algo": "FP8"}}}}),
]  # fmt: skip


def release_choices() -> list[str]:
    """The release's own `--quantization` choices, from its argument parser."""
    from sglang.srt.server_args import ServerArgs

    parser = argparse.ArgumentParser()
    ServerArgs.add_cli_args(parser)
    action = next(a for a in parser._actions if "--quantization" in a.option_strings)
    return list(action.choices or ())


def catalogue_cases(tmp: Path) -> list[tuple[str, Path]]:
    """meshsat's embedded checkpoints that carry a `quantization_config` (one folder per
    distinct one)."""
    from meshsat.solver.memory.models import CATALOGUE, catalogue_config

    out, seen = [], set()
    for repo in sorted(CATALOGUE):
        cfg = dict(catalogue_config(repo))
        qc = cfg.get("quantization_config")
        if not qc:
            continue
        key = json.dumps(qc, sort_keys=True)
        if key in seen:
            continue
        seen.add(key)
        d = tmp / ("catalogue-" + repo.replace("/", "--"))
        d.mkdir()
        (d / "config.json").write_text(json.dumps({"quantization_config": qc}))
        out.append((f"catalogue:{repo}", d))
    return out


#: The message's head: its cause and the values it names (the list of known methods that
#: follows "Must be one of" is the release's registry, recorded once as `choices`).
ERROR_CHARS = 160


def written_cases(tmp: Path) -> list[tuple[str, Path]]:
    out = []
    for name, cfg in WRITTEN:
        d = tmp / f"args-{name}"
        d.mkdir()
        (d / "config.json").write_text(json.dumps(cfg))
        out.append((f"args:{name}", d))
    return out


def verify(model_config: Any, folder: Path, quantization: str | None) -> dict[str, Any]:
    """The release's `_verify_quantization` for `folder` with `--quantization`
    (`unquant` is None by then: the argument handlers resolve it first)."""
    cfg = json.loads((folder / "config.json").read_text())
    text = cfg.get("text_config")
    if (
        "quantization_config" not in cfg
        and isinstance(text, dict)
        and text.get("quantization_config")
    ):
        # A wrapper's config class reads its text model's (Kimi-K2.5: the releases' own
        # builds refuse --quantization mxfp8 on it); the stand-in holds config.json only.
        cfg["quantization_config"] = text["quantization_config"]
    mc = object.__new__(model_config.ModelConfig)
    mc.hf_config = types.SimpleNamespace(**cfg)
    mc.model_path = str(folder)
    mc.revision = None
    mc.quantization = None if quantization == "unquant" else quantization
    mc.is_draft_model = False
    mc.is_draft_quantization_explicit = False
    try:
        mc._verify_quantization()
        if mc.quantization in REQUANTIZATION:
            _loader_config(mc.quantization, json.loads((folder / "config.json").read_text()),
                           folder)  # fmt: skip
    except ValueError as exc:  # SGLang's own refusals
        return {"error": str(exc)[:ERROR_CHARS]}
    except Exception as exc:  # what else the release raises is the record too
        return {"error": f"{type(exc).__name__}: {exc}"[:ERROR_CHARS]}
    return {"quantization": mc.quantization}


#: The releases' REQUANTIZATION_METHODS (configs/model_config.py).
REQUANTIZATION = ("quark_mxfp4",)


def _loader_config(quantization: str, cfg: dict[str, Any], folder: Path) -> None:
    """The release's `get_quant_config` for the settled method, as the model loader calls
    it: the config as `AutoConfig` gives it (a wrapper's `text_config` an object too:
    0.5.18 reads it with `getattr`)."""
    from sglang.srt.model_loader.weight_utils import get_quant_config
    from transformers import PretrainedConfig

    if isinstance(cfg.get("text_config"), dict):
        cfg = {**cfg, "text_config": PretrainedConfig(**cfg["text_config"])}
    mc = types.SimpleNamespace(
        quantization=quantization,
        hf_config=PretrainedConfig(**cfg),
        model_path=str(folder),
        revision=None,
        is_draft_model=False,
        is_draft_quantization_explicit=False,
    )
    get_quant_config(mc, types.SimpleNamespace(download_dir=None), {})


def _as_hopper() -> None:
    """Answer as a CUDA Hopper GPU: Marlin's and MoE-WNA16's checks ask the device's
    compute capability (AWQ's the platform first), and the registry adds MXFP4 on CUDA
    (`is_cuda()`; on this CPU build with no platform neither branch that adds it runs)."""
    import sglang.srt.layers.quantization as registry
    import sglang.srt.utils as utils

    if "mxfp4" not in registry.QUANTIZATION_METHODS and hasattr(registry, "Mxfp4Config"):
        registry.QUANTIZATION_METHODS["mxfp4"] = registry.Mxfp4Config

    def hopper(device_id: int = 0) -> tuple[int, int]:
        return (9, 0)

    utils.get_device_capability = hopper
    for name, module in list(sys.modules.items()):
        if not name.startswith("sglang.srt.layers.quantization"):
            continue
        if hasattr(module, "get_device_capability"):
            setattr(module, "get_device_capability", hopper)  # noqa: B010
        if hasattr(module, "_is_cuda"):  # AWQ's Marlin check asks it first
            setattr(module, "_is_cuda", True)  # noqa: B010


def main() -> int:
    version = sys.argv[1]
    quant_sources = importlib.import_module("quant_sources")
    import sglang
    from sglang.srt.configs import model_config

    assert sglang.__version__ == version, (sglang.__version__, version)
    _as_hopper()
    choices = release_choices()
    records: dict[str, dict[str, str]] = {}
    messages: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        folders = [
            *quant_sources.cases(Path(tmp)),
            *catalogue_cases(Path(tmp)),
            *written_cases(Path(tmp)),
        ]
        for name, folder in folders:
            records[name] = {}
            for q in [None, *choices]:
                got = verify(model_config, folder, q)
                if "error" in got:
                    if got["error"] not in messages:
                        messages.append(got["error"])
                    records[name][str(q)] = f"error {messages.index(got['error'])}"
                else:
                    records[name][str(q)] = str(got["quantization"])
    OUT.mkdir(parents=True, exist_ok=True)
    written = {
        "sglang": version,
        "choices": choices,
        "written": dict(WRITTEN),
        "errors": messages,
        "cases": records,
    }
    (OUT / f"{version}.json").write_text(json.dumps(written, sort_keys=True, indent=0) + "\n")
    print(f"{len(records)} checkpoints x {len(choices) + 1} arguments -> {OUT / f'{version}.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
