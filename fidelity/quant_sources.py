"""Record which quantization a real SGLang release finds for a checkpoint folder
(tests/fixtures/quant_sources/<version>.json; `tests/test_checkpoint_files.py` replays it).

Runs inside a release venv ($HOME/.cache/meshsat-fidelity/<version>, see fidelity/README.md),
from the repository root, with aiconfigurator-core's model configs at hand:

    MESHSAT_HF_CONFIGS=.venv/lib/python3.11/site-packages/aiconfigurator_core/model_configs \\
      ~/.cache/meshsat-fidelity/0.5.23/bin/python fidelity/quant_sources.py 0.5.23

Each case is a folder with a config.json and, where the checkpoint ships one, its
`hf_quant_config.json`: every model config aiconfigurator-core bundles (its
`X_hf_quant_config.json` copied beside as SGLang's file name), and a few written here for
the branches those do not reach (`compression_config`, a `quantization_config` without
`quant_method`, MIXED_PRECISION without NVFP4 layers, MXFP8, an algorithm SGLang does not
know). The record is what the release's own `ModelConfig._parse_quant_hf_config` returns,
called unbound on a stand-in holding only what it reads (`hf_config`, `model_path`).

For each folder the release reads as ModelOpt MIXED_PRECISION, a second record: the
algorithm its `ModelOptMixedPrecisionConfig._resolve_quant_algo` gives each linear module
meshsat prices (`memory.modules.model_modules`), after the model class's own
`hf_to_sglang_mapper` (MiniMax-M3's `block_sparse_moe` -> `mlp`) as the loader applies it.
"""

from __future__ import annotations

import importlib
import json
import os
import shutil
import sys
import tempfile
import types
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "fidelity" / "weight_shapes"))
importlib.import_module("stubs")  # the stand-ins (torchvision), before any sglang import

OUT = ROOT / "tests" / "fixtures" / "quant_sources"

#: Folders the bundled configs do not cover: (name, config.json, hf_quant_config.json).
WRITTEN: list[tuple[str, dict[str, Any], dict[str, Any] | None]] = [
    ("compression-config", {"compression_config": {"quant_method": "compressed-tensors"}}, None),
    ("qc-without-method-fp8", {"quantization_config": {"quant_algo": "FP8"}}, None),
    ("qc-without-method-nvfp4", {"quantization_config": {"quant_algo": "NVFP4"}}, None),
    ("qc-without-algo", {"quantization_config": {"group_size": 16}}, None),
    ("qc-modelopt-fp8", {"quantization_config": {"quant_method": "modelopt", "quant_algo": "FP8"}},
     None),
    ("hfq-fp8", {}, {"quantization": {"quant_algo": "FP8", "kv_cache_quant_algo": "FP8"}}),
    ("hfq-nested", {}, {"quantization": {"quantization": {"quant_algo": "NVFP4"}}}),
    ("hfq-flat", {}, {"quant_algo": "NVFP4", "group_size": 16}),
    ("hfq-w4afp8", {}, {"quantization": {"quant_algo": "MIXED_PRECISION", "quantized_layers": {
        "model.layers.0.mlp.experts": {"quant_algo": "W4A8_AWQ"}}}}),
    ("hfq-mixed-nvfp4", {}, {"quantization": {"quant_algo": "MIXED_PRECISION", "quantized_layers": {
        "model.layers.0.mlp.experts": {"quant_algo": "NVFP4"}}}}),
    ("hfq-mxfp8", {}, {"quantization": {"quant_algo": "MXFP8", "exclude_modules": ["lm_head"]}}),
    ("hfq-unknown-algo", {}, {"quantization": {"quant_algo": "INT4_AWQ"}}),
    ("hfq-no-algo", {}, {"quantization": {"kv_cache_quant_algo": "FP8"}}),
    ("hfq-beside-qc", {"quantization_config": {"quant_method": "fp8"}},
     {"quantization": {"quant_algo": "NVFP4"}}),
]  # fmt: skip


def parse(model_config: Any, folder: Path) -> Any:
    """The release's `_parse_quant_hf_config` on `folder`'s config.json."""
    cfg = json.loads((folder / "config.json").read_text())
    stand_in = types.SimpleNamespace(
        hf_config=types.SimpleNamespace(**cfg), model_path=str(folder), revision=None
    )
    cls = model_config.ModelConfig
    stand_in._parse_modelopt_quant_config = lambda d: cls._parse_modelopt_quant_config(stand_in, d)
    return cls._parse_quant_hf_config(stand_in)


#: Where a wrapper class builds its text stack when meshsat's module names start at the
#: text model (`models/minimax_m3_vl.py`: `add_prefix("language_model.model", prefix)`;
#: `models/kimi_k25.py`: `self.language_model = DeepseekV3ForCausalLM(..., "language_model")`).
RUNTIME_PREFIX = {
    "MiniMaxM3SparseForConditionalGeneration": "language_model.",
    "KimiK25ForConditionalGeneration": "language_model.",
}


def mixed_algos(folder: Path) -> dict[str, str | None] | None:
    """The release's MIXED_PRECISION algorithm for each module meshsat prices (None: a
    model meshsat refuses to size, `facts.UNMODELLED_LAYERS`)."""
    from sglang.srt.layers.quantization.modelopt_quant import ModelOptMixedPrecisionConfig

    found = _modules(folder)
    if found is None:
        return None
    (cls, arch), modules = found
    config = _release_quant_config(folder, ModelOptMixedPrecisionConfig, cls, modelopt=True)
    runtime = RUNTIME_PREFIX.get(arch, "")
    return {m.name: config._resolve_quant_algo(runtime + m.name) for m in modules}


#: Schemes whose config says per module "quantized or not", and how the release asks it:
#: `Fp8Config.get_quant_method` -> `is_layer_skipped(prefix, ignored_layers,
#: fused_mapping=packed_modules_mapping)`; ModelOpt's -> `is_layer_excluded(prefix)`.
SKIP_READERS = {"fp8": "is_layer_skipped", "modelopt_fp8": "is_layer_excluded",
                "modelopt_fp4": "is_layer_excluded"}  # fmt: skip


def _modules(folder: Path) -> tuple[Any, list[Any]] | None:
    """The model class the release builds for `folder` and the modules meshsat prices
    (None: a model meshsat refuses to size)."""
    from sglang.srt.models.registry import ModelRegistry

    from meshsat.solver.errors import InputError
    from meshsat.solver.memory import load_facts
    from meshsat.solver.memory.facts import _text_config
    from meshsat.solver.memory.models import model_config
    from meshsat.solver.memory.modules import model_modules

    try:
        facts = load_facts(str(folder))
    except InputError:
        return None
    hf = json.loads((folder / "config.json").read_text())
    text = _text_config(model_config(str(folder)))
    cls, arch = ModelRegistry.resolve_model_cls(hf["architectures"])
    return (cls, arch), model_modules(facts, str(text.get("model_type", "")))


def _release_quant_config(folder: Path, quant_cls: Any, cls: Any, modelopt: bool) -> Any:
    """The release's quantization config object for `folder`, as its loader builds it:
    ModelOpt's from hf_quant_config.json where there is one (what `get_quant_config` reads),
    else config.json's `quantization_config`; with the model class's fused modules
    (`loader._get_quantization_config`) and its `hf_to_sglang_mapper` applied."""
    hf = json.loads((folder / "config.json").read_text())
    hfq = folder / "hf_quant_config.json"
    if modelopt and hfq.is_file():
        source = json.loads(hfq.read_text())
    else:
        source = hf.get("quantization_config") or hf["text_config"]["quantization_config"]
    packed = dict(getattr(cls, "packed_modules_mapping", {}) or {})
    config = quant_cls.from_config({**source, "packed_modules_mapping": packed})
    mapper = getattr(cls, "hf_to_sglang_mapper", None)
    if mapper is not None and hasattr(config, "apply_weight_name_mapper"):
        config.apply_weight_name_mapper(mapper)
    return config


def skipped_modules(folder: Path, method: str) -> list[str] | None:
    """The modules meshsat prices that the release leaves unquantized (sorted)."""
    from sglang.srt.layers.quantization import get_quantization_config
    from sglang.srt.layers.quantization.utils import is_layer_skipped

    found = _modules(folder)
    if found is None:
        return None
    (cls, arch), modules = found
    modelopt = method.startswith("modelopt")
    config = _release_quant_config(folder, get_quantization_config(method), cls, modelopt)
    runtime = RUNTIME_PREFIX.get(arch, "")
    out = []
    for m in modules:
        prefix = runtime + m.name
        if SKIP_READERS[method] == "is_layer_skipped":
            skipped = is_layer_skipped(
                prefix, config.ignored_layers or [], fused_mapping=config.packed_modules_mapping
            )
        else:
            skipped = config.is_layer_excluded(prefix)
        if skipped:
            out.append(m.name)
    return sorted(out)


def cases(tmp: Path) -> list[tuple[str, Path]]:
    out = []
    bundled = Path(os.environ["MESHSAT_HF_CONFIGS"])
    for cfg in sorted(bundled.glob("*_config.json")):
        if cfg.name.endswith("_hf_quant_config.json"):
            continue
        stem = cfg.name.removesuffix("_config.json")
        d = tmp / stem
        d.mkdir()
        shutil.copy(cfg, d / "config.json")
        hfq = bundled / f"{stem}_hf_quant_config.json"
        if hfq.is_file():
            shutil.copy(hfq, d / "hf_quant_config.json")
        out.append((f"bundled:{stem}", d))
    for name, cfg_data, hfq_data in WRITTEN:
        d = tmp / name
        d.mkdir()
        (d / "config.json").write_text(json.dumps(cfg_data))
        if hfq_data is not None:
            (d / "hf_quant_config.json").write_text(json.dumps(hfq_data))
        out.append((f"written:{name}", d))
    return out


def main() -> int:
    version = sys.argv[1]
    import sglang
    from sglang.srt.configs import model_config

    assert sglang.__version__ == version, (sglang.__version__, version)
    records: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, folder in cases(Path(tmp)):
            try:
                got = parse(model_config, folder)
            except Exception as exc:  # what the release raises is the record
                records[name] = {"error": f"{type(exc).__name__}: {exc}"[:200]}
                continue
            q = got if isinstance(got, dict) else None
            records[name] = {
                "quant_method": None if q is None else q.get("quant_method"),
                "quant_algo": None if q is None else q.get("quant_algo"),
            }
            method = q.get("quant_method") if q else None
            algos = mixed_algos(folder) if method == "modelopt_mixed" else None
            if algos is not None:
                records[name]["module_algos"] = algos
            skipped = skipped_modules(folder, method) if method in SKIP_READERS else None
            if skipped is not None:
                records[name]["unquantized_modules"] = skipped
    OUT.mkdir(parents=True, exist_ok=True)
    written = {"sglang": version, "written": {n: [c, h] for n, c, h in WRITTEN}, "cases": records}
    (OUT / f"{version}.json").write_text(json.dumps(written, indent=1, sort_keys=True) + "\n")
    print(f"{len(records)} cases -> {OUT / f'{version}.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
