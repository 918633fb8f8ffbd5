"""Record what a real SGLang release does when it builds a *whole model class* for a
checkpoint under a layout (tests/fixtures/weight_shapes/models/<version>.json).

Runs inside a release venv ($HOME/.cache/meshsat-fidelity/<version>, see fidelity/README.md),
from the repository root:

    ~/.cache/meshsat-fidelity/0.5.23/bin/python fidelity/weight_shapes/models.py 0.5.23

For each (checkpoint, layout) it does what the release's model loader does before it reads
a single weight file, on the meta device (no memory, no GPU):
1. `ServerArgs(**layout)` with the checkpoint's `config.json` (its own argument resolution);
2. the parallel world of those resolved widths: 0.5.23 publishes the server args
   (`runtime_context.publish`, which derives every rank and width) and states the process
   groups; older releases get their `parallel_state` / `dp_attention` globals and global
   server args set as `initialize_model_parallel` / `initialize_dp_attention` would;
3. `ModelConfig.from_server_args`, the loader's `_get_quantization_config` (the checkpoint's
   `quantization_config` read by the release), then `_initialize_model` under
   `torch.device("meta")`: the model class's own constructor, every layer, with the
   release's quantization methods' `create_weights` checks.
The record is the exception the constructor raised (type, message, innermost SGLang
frame, the module prefix being built), or null: the model builds, with the bytes of its
parameters (`param_bytes`, built in the served dtype as the loader does; the DP-attention
flags set as `initialize_dp_attention` sets them), which tests/test_weight_bytes.py holds
meshsat's weights to, on the cut configs it writes (tests/fixtures/weight_bytes). Configs are the
published `config.json` copies aiconfigurator-core bundles (`CHECKPOINTS`; meshsat's
catalogue, imported for its data only, where there is no copy), with the decoder cut to
the few layers that hold every distinct layer kind (dense, MoE, linear attention), so that
a model builds in seconds; `tests/test_weight_shapes_models.py` replays every record
against meshsat's verdict on the catalogue's facts. What the CPU build cannot be told
otherwise is answered as the Hopper GPU the layouts are for (`_patch_cpu_paths`); nothing
that decides a weight's shape is patched.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import json
import logging
import os
import sys
import tempfile
import traceback
import warnings
from pathlib import Path
from typing import Any

ROOT = Path(__file__).parents[2]
sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(ROOT))
importlib.import_module("stubs")  # the stand-ins, before any sglang import
import torch  # noqa: E402  (after the stand-ins)

OUT = ROOT / "tests" / "fixtures" / "weight_shapes" / "models"
#: The cut config.json (and ModelOpt file) of every checkpoint the builds read, for
#: tests/test_weight_bytes.py to size the same models (one file: the configs do not
#: depend on the release).
CONFIGS = ROOT / "tests" / "fixtures" / "weight_bytes" / "model_configs.json"

#: Not built: NVFP4 and MXFP4 checkpoints (their MoE methods ask the platform for a
#: Blackwell GPU / register MXFP4 only on CUDA, which a CPU build cannot pretend to be),
#: fbgemm FP8 (Llama-4-Maverick-FP8: CUDA-only registration too) and MiniMax-M2 (no bundled
#: copy, and the catalogue's subset lacks fields its model file reads); their rules keep the
#: cited source (docs/weight-shapes.md).
#: checkpoint -> the file stem of its published `config.json` in aiconfigurator-core's
#: bundle (`<stem>_config.json`, and `<stem>_hf_quant_config.json` where ModelOpt wrote one),
#: or None where the bundle has no copy and the catalogue's config is built (the release's
#: config class fills the keys the catalogue leaves out).
CHECKPOINTS: dict[str, str | None] = {
    "deepseek-ai/DeepSeek-R1": "deepseek-ai--DeepSeek-R1",
    "deepseek-ai/DeepSeek-V3.2": "deepseek-ai--DeepSeek-V3.2",
    "moonshotai/Kimi-K2-Instruct": "moonshotai--Kimi-K2-Instruct",
    "Qwen/Qwen3-235B-A22B-FP8": "Qwen--Qwen3-235B-A22B-FP8",
    "Qwen/Qwen3-30B-A3B-FP8": "Qwen--Qwen3-30B-A3B-FP8",
    "Qwen/Qwen3-32B-FP8": "Qwen--Qwen3-32B-FP8",
    "Qwen/Qwen3.5-397B-A17B-FP8": "Qwen--Qwen3.5-397B-A17B",
    "Qwen/Qwen3.5-35B-A3B-FP8": "Qwen--Qwen3.5-35B-A3B",
    "Qwen/Qwen3.5-397B-A17B": "Qwen--Qwen3.5-397B-A17B",
    "zai-org/GLM-4.5-FP8": None,
    "zai-org/GLM-4.6-FP8": None,
    # The catalogue's Qwen3-Next FP8 entry written out (tests/test_weight_shapes.py keeps
    # the two equal); the recorded fixtures name it by this path.
    "tests/fixtures/weight_shapes/configs/Qwen3-Next-80B-A3B-Instruct-FP8.json": None,
    "zai-org/GLM-5-FP8": "zai-org--GLM-5-FP8",
    "stepfun-ai/Step-3.5-Flash-FP8": None,
    "meta-llama/Llama-4-Scout-17B-16E-Instruct": "meta-llama--Llama-4-Scout-17B-16E-Instruct",
    "nvidia/Llama-3.1-70B-Instruct-FP8": "nvidia--Llama-3.1-70B-Instruct-FP8",
    # Classes that predate DP attention (`model_spec.ATTENTION_OVER_TP_ARCHITECTURES`).
    "Qwen/Qwen2.5-72B-Instruct": None,
    "mistralai/Mixtral-8x7B-Instruct-v0.1": "mistralai--Mixtral-8x7B-v0.1",
    "mistralai/Mistral-Small-24B-Instruct-2501": None,
    "google/gemma-3-1b-it": None,
    "google/gemma-3-27b-it": None,
    # Kimi-K2.5 (not in meshsat's catalogue): aiconfigurator-core's bundled config.json,
    # written out so that the replay reads the same facts (INT4 compressed-tensors experts
    # and the MoonViT tower). Under DeepEP its build raises "Runner backend
    # MoeRunnerBackend.MARLIN requires a fused func for a2a backend deepep" on the Marlin
    # path the CPU build takes as Hopper: not a shape check, not compared.
    "tests/fixtures/weight_shapes/configs/Kimi-K2.5.json": None,
}


def bundle_dir() -> Path:
    """aiconfigurator-core's `model_configs/` (a project dependency, not in the release
    venvs): `$MESHSAT_HF_CONFIGS`, else the repository's own .venv."""
    env = os.environ.get("MESHSAT_HF_CONFIGS")
    if env:
        return Path(env)
    site = next((ROOT / ".venv" / "lib").glob("python3*/site-packages"))
    return site / "aiconfigurator_core" / "model_configs"


def checkpoint_files(name: str) -> dict[str, dict[str, Any]]:
    """The files the build reads: `config.json` (the published copy, with the catalogue's
    `quantization_config` where the copy is the BF16 base of a quantized release), and
    ModelOpt's `hf_quant_config.json` where published."""
    from meshsat.solver.memory.models import model_config

    catalogue = dict(model_config(name))
    stem = CHECKPOINTS[name]
    if stem is None:
        return {"config.json": catalogue}
    folder = bundle_dir()
    hf = json.loads((folder / f"{stem}_config.json").read_text())
    text = _text(hf)
    files = {"config.json": hf}
    quant = folder / f"{stem}_hf_quant_config.json"
    if quant.is_file():  # ModelOpt's own file, which the release reads beside config.json
        files["hf_quant_config.json"] = json.loads(quant.read_text())
    elif not {"quantization_config"} & (set(hf) | set(text)) and "quantization_config" in catalogue:
        hf["quantization_config"] = catalogue["quantization_config"]
    return files


def layouts() -> list[dict[str, Any]]:
    """TP 4 to 32, with EP 1 and EP = TP; DP attention with the dense MLP replicated, with
    and without DeepEP (which replicates the shared experts); at TP 8 and 16 also DP
    attention over half of TP (attention TP 2: what a class splits over attention TP and
    what over TP tell apart only there); and TP 8 with attention CP 2."""
    out: list[dict[str, Any]] = []
    for tp in (4, 8, 16, 32):
        base = {"tp_size": tp, "nnodes": max(1, tp // 8)}
        out.append(base)
        out.append({**base, "ep_size": tp})
        dpa = {**base, "ep_size": tp, "dp_size": tp, "enable_dp_attention": True,
               "moe_dense_tp_size": 1}  # fmt: skip
        out += [dpa, {**dpa, "moe_a2a_backend": "deepep"}]
        if tp in (8, 16):
            out.append({**dpa, "dp_size": tp // 2})
    # Attention CP over two ranks (prefill CP, zigzag): what narrows attention TP without
    # DP attention (a vision tower that all-reduces over TP refuses it in 0.5.23).
    out.append({"tp_size": 8, "nnodes": 1, "attn_cp_size": 2, "enable_prefill_cp": True,
                "cp_strategy": "zigzag"})  # fmt: skip
    return out


def _text(hf: dict[str, Any]) -> dict[str, Any]:
    """The text model's keys: `text_config` of a multimodal wrapper, else the config."""
    text = hf.get("text_config")
    return text if isinstance(text, dict) else hf


def _cut(hf: dict[str, Any]) -> dict[str, Any]:
    """The config with the decoder cut to the layers that hold every distinct layer kind:
    the dense prefix plus one MoE layer, and one full group of a hybrid's pattern."""
    hf = json.loads(json.dumps(hf))
    hf.pop("auto_map", None)  # remote code: SGLang's own model class, transformers' config
    text = _text(hf)
    n = int(text.get("num_hidden_layers", 1))
    dense = int(text.get("first_k_dense_replace", 0) or 0)
    keep = min(n, max(dense + 1, int(text.get("full_attention_interval", 1) or 1), 4))
    text["num_hidden_layers"] = keep
    for key in ("layer_types", "mlp_layer_types"):
        if isinstance(text.get(key), list):
            text[key] = text[key][:keep]
    if isinstance(text.get("moe_layers_enum"), str):  # Step-3.5
        ids = [i for i in text["moe_layers_enum"].split(",") if i and int(i) < keep]
        text["moe_layers_enum"] = ",".join(ids)
    if text.get("model_type") == "step3p5":
        # step3p5.py reads fields the catalogue leaves out; no linear's shape depends on
        # any of them (activation clamps, router scaling, rotary fractions, attention
        # pattern), so they take neutral values.
        neutral = {
            "layer_types": ["full_attention"] * keep, "swiglu_limits": [0] * keep,
            "swiglu_limits_shared": [0] * keep, "partial_rotary_factors": [1.0] * keep,
            "need_fp32_gate": False, "moe_router_scaling_factor": 1.0,
            "use_moe_router_bias": True, "use_head_wise_attn_gate": False,
            "yarn_only_types": [], "rope_theta": [10000.0] * keep,
        }  # fmt: skip
        for key, value in neutral.items():
            text.setdefault(key, value)
    for key in ("num_nextn_predict_layers", "mtp_num_hidden_layers"):
        if key in text:
            text[key] = 0
    return hf


# --- the parallel world -------------------------------------------------------------------


GPUS_PER_NODE = 8


class _ProcessGroup:
    """What `in_the_same_node_as` is asked about: a group of `size` ranks, 8 to a node."""

    def __init__(self, size: int) -> None:
        self.size_ = size


def _same_node(pg: Any, source_rank: int = 0) -> list[bool]:
    """`parallel_state.in_the_same_node_as` without a collective: ranks fill nodes of 8."""
    size = getattr(pg, "size_", GPUS_PER_NODE)
    return [r // GPUS_PER_NODE == source_rank // GPUS_PER_NODE for r in range(size)]


def _hopper(*args: Any, **kwargs: Any) -> tuple[int, int]:
    return (9, 0)


class _NoStream:
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass


def _no_rope(*args: Any, **kwargs: Any) -> Any:
    return torch.nn.Module()


def _patch_cpu_paths(version: str) -> None:
    """CPU-only detours the GPU build never takes, on every loaded sglang module. DeepEP's
    MoE asks for DeepGEMM, which every Hopper build has (`ENABLE_JIT_DEEPGEMM`). And:
    `in_the_same_node_as` (a gloo collective) answers from the layout, and `get_rope_cpu`
    (which takes only DeepSeek's YaRN) is the platform-neutral `get_rope` (a rotary
    embedding holds no weight). Modules imported later take the patched functions."""
    for name, module in list(sys.modules.items()):
        if not name.startswith("sglang") or module is None:
            continue
        found = vars(module)
        if version.startswith("0.4"):
            if "get_device_capability" in found:
                # 0.4.6's own helper answers None off CUDA, which its MoE reader multiplies.
                module.get_device_capability = _hopper  # type: ignore[attr-defined]
            for rope in ("get_rope", "get_rope_wrapper"):
                if rope in found:
                    # 0.4.6 computes DeepSeek's YaRN tables on a CUDA device; a rotary
                    # embedding holds no weight, so an empty module stands in.
                    setattr(module, rope, _no_rope)
        if name.startswith("sglang.srt.models.") and "_is_cuda" in found:
            # Model files decide shared-expert fusion for CUDA only (deepseek_v2.py
            # determine_n_share_experts_fusion, qwen2_moe.py `_is_cuda and
            # enable_cuda_shared_expert_fusion`): answer as the Hopper the layouts are for;
            # such a model then opens a side stream, which holds no weight.
            module._is_cuda = True  # type: ignore[attr-defined]
            torch.cuda.Stream = _NoStream  # type: ignore[misc,assignment]
        if "ENABLE_JIT_DEEPGEMM" in found:
            module.ENABLE_JIT_DEEPGEMM = True  # type: ignore[attr-defined]
        if "in_the_same_node_as" in found:
            module.in_the_same_node_as = _same_node  # type: ignore[attr-defined]
        cpu_rope = found.get("get_rope_cpu")
        if cpu_rope is not None and "get_rope" in found and not hasattr(cpu_rope, "neutral"):
            get_rope = found["get_rope"]

            def neutral(*args: Any, _gpu: Any = get_rope, _cpu: Any = cpu_rope, **kw: Any) -> Any:
                scaling = args[5] if len(args) > 5 else kw.get("rope_scaling")
                if scaling and scaling.get("rope_type", scaling.get("type")) == "deepseek_yarn":
                    return _cpu(*args, **kw)
                kw.pop("device", None)
                return _gpu(*args[:8], **kw)  # the 9th is the device

            neutral.neutral = True  # type: ignore[attr-defined]
            module.get_rope_cpu = neutral  # type: ignore[attr-defined]


class _Group:
    """A process group of the given width, seen from rank 0 (what the layers read)."""

    def __init__(self, size: int, name: str) -> None:
        self.world_size = size
        self.rank_in_group = 0
        self.rank = 0
        self.local_rank = 0
        self.ranks = list(range(size))
        self.unique_name = name
        self.device_group = _ProcessGroup(size)
        self.cpu_group = _ProcessGroup(size)
        self.device = torch.device("cpu")
        self.is_first_rank = True
        self.is_last_rank = size == 1
        self.first_rank = 0
        self.last_rank = size - 1
        self.next_rank = 1 % size
        self.prev_rank = (size - 1) % size
        self.use_pynccl = False
        self.pynccl_comm = None


def _widths(sa: Any) -> dict[str, Any]:
    tp, pp = int(sa.tp_size), int(getattr(sa, "pp_size", 1) or 1)
    ep = int(getattr(sa, "ep_size", 1) or 1)
    dpa = (
        bool(getattr(sa, "enable_dp_attention", False))
        or int(getattr(sa, "attn_dp_size", 1) or 1) > 1
    )
    dp = int(getattr(sa, "dp_size", 1) or 1)
    cp = int(getattr(sa, "attn_cp_size", 1) or 1)
    attn_dp = (int(getattr(sa, "attn_dp_size", 0) or 0) or dp) if dpa else 1
    moe_dp = int(getattr(sa, "moe_dp_size", 1) or 1)
    return {
        "tp": tp,
        "pp": pp,
        "ep": ep,
        "attn_tp": tp // (attn_dp * cp),
        "attn_dp": attn_dp,
        "cp": cp,
        "moe_dp": moe_dp,
        "moe_tp": tp // (ep * moe_dp),
        "dpa": int(dpa),
    }


def _world_0_5_23(sa: Any) -> dict[str, Any]:
    from sglang.srt import runtime_context as rc

    rc.get_parallel().clear_stamp()  # the previous build's groups
    rc.publish(sa, role="scheduler", ranks=rc.SpawnRanks(world_rank=0))
    p = rc.get_parallel()
    widths = {
        "tp": p.tp_size, "pp": p.pp_size, "ep": p.moe_ep_size, "attn_tp": p.attn_tp_size,
        "attn_dp": p.attn_dp_size, "cp": p.attn_cp_size, "moe_dp": p.moe_dp_size,
        "moe_tp": p.moe_tp_size, "dpa": int(p.attn_dp_size > 1),
    }  # fmt: skip
    p.override_permanently(
        world_group=_Group(p.tp_size * p.pp_size, "world"),
        tp_group=_Group(p.tp_size, "tp"),
        pp_group=_Group(p.pp_size, "pp"),
        moe_ep_group=_Group(p.moe_ep_size, "moe_ep"),
        moe_dp_group=_Group(p.moe_dp_size, "moe_dp"),
        moe_tp_group=_Group(p.moe_tp_size, "moe_tp"),
        attn_tp_group=_Group(p.attn_tp_size, "attn_tp"),
        attn_cp_group=_Group(p.attn_cp_size, "attn_cp"),
        shared_experts_tp_group=_Group(p.tp_size, "shared_experts_tp"),
    )
    # The DP-attention flags the scheduler sets before it builds the model
    # (`initialize_dp_attention`): what `is_dp_attention_enabled()` answers, which decides
    # the embedding's vocab-parallel group under DP attention (`get_embedding_tp_kwargs`).
    importlib.import_module("sglang.srt.layers.dp_attention").initialize_dp_attention_flags(sa)
    return widths


def _world_globals(sa: Any) -> dict[str, Any]:
    """0.4.6.post5 to 0.5.19: the module globals `initialize_model_parallel` and
    `initialize_dp_attention` set, and the global server args."""
    w = _widths(sa)
    from sglang.srt.distributed import parallel_state as ps
    from sglang.srt.layers import dp_attention as dpa

    groups = {
        "_WORLD": ("world", w["tp"] * w["pp"]), "_TP": ("tp", w["tp"]), "_PP": ("pp", w["pp"]),
        "_MOE_EP": ("moe_ep", w["ep"]), "_MOE_TP": ("moe_tp", w["moe_tp"]),
        "_MOE_DP": ("moe_dp", w["moe_dp"]), "_ATTN_TP": ("attn_tp", w["attn_tp"]),
        "_ATTN_CP": ("attn_cp", w["cp"]), "_SHARED_EXPERTS_TP": ("sh", w["tp"]),
    }  # fmt: skip
    for attr, (name, size) in groups.items():
        if hasattr(ps, attr):
            setattr(ps, attr, _Group(size, name))
    values = {
        "_ATTN_TP_SIZE": w["attn_tp"], "_ATTN_TP_RANK": 0, "_ATTN_DP_SIZE": w["attn_dp"],
        "_ATTN_DP_RANK": 0, "_LOCAL_ATTN_DP_SIZE": w["attn_dp"], "_LOCAL_ATTN_DP_RANK": 0,
        "_ENABLE_DP_ATTENTION_FLAG": bool(w["dpa"]), "_ATTN_CP_SIZE": w["cp"],
        "_ATTN_CP_RANK": 0,
    }  # fmt: skip
    for attr, value in values.items():
        if hasattr(dpa, attr):
            setattr(dpa, attr, value)
    if hasattr(dpa, "_ATTN_TP_GROUP"):
        dpa._ATTN_TP_GROUP = _Group(w["attn_tp"], "attn_tp")
    if hasattr(dpa, "get_flags"):  # 0.5.19: `initialize_dp_attention` sets a flags object
        dpa.get_flags().dp.enabled = bool(w["dpa"])
    server_args = importlib.import_module("sglang.srt.server_args")
    if hasattr(server_args, "set_global_server_args_for_scheduler"):
        server_args.set_global_server_args_for_scheduler(sa)
    else:  # 0.4.6.post5
        sb = importlib.import_module("sglang.srt.managers.schedule_batch")
        for key in list(sb.global_server_args_dict):
            if hasattr(sa, key):
                sb.global_server_args_dict[key] = getattr(sa, key)
        # `ModelRunner.__init__` adds this one (vision attention reads it).
        sb.global_server_args_dict["mm_attention_backend"] = sa.mm_attention_backend
    return w


# --- one build --------------------------------------------------------------------------------


def _site(tb: Any) -> str | None:
    site = None
    for frame, _ in traceback.walk_tb(tb):
        name = frame.f_code.co_filename
        if "/sglang/" in name:
            site = f"{name.split('/sglang/')[-1]}:{frame.f_code.co_name}"
    return site


def build(version: str, files: dict[str, dict[str, Any]], layout: dict[str, Any]) -> dict[str, Any]:
    from sglang.srt.configs.load_config import LoadConfig
    from sglang.srt.configs.model_config import ModelConfig
    from sglang.srt.model_loader import loader
    from sglang.srt.server_args import ServerArgs

    with tempfile.TemporaryDirectory() as d:
        for fname, content in files.items():
            cut = _cut(content) if fname == "config.json" else content
            Path(d, fname).write_text(json.dumps(cut))
        kw = {"model_path": d, "skip_tokenizer_init": True, "device": "cpu",
              "trust_remote_code": True, **release_args(version, layout)}  # fmt: skip
        if _hybrid(files["config.json"]):
            # 0.5.23 snapshots Mamba state into an extra buffer only on GPU platforms.
            kw.update(mamba_radix_cache_strategy="no_buffer", disable_overlap_schedule=True)
        try:
            try:
                sa = ServerArgs(**kw)
            except TypeError:  # a release without that field
                kw.pop("mamba_radix_cache_strategy", None)
                sa = ServerArgs(**kw)
            if hasattr(sa, "resolve_once"):
                sa.resolve_once()
        except Exception as exc:  # the layout itself is refused: not a build
            return {"stage": "arguments", "error": _error(exc)}
        world = _world_0_5_23(sa) if version == "0.5.23" else _world_globals(sa)
        world["a2a"] = str(getattr(sa, "moe_a2a_backend", None))
        _init_moe(sa)
        _patch_cpu_paths(version)
        # 0.4.6.post5's `_initialize_model(model_config, load_config)` reads the
        # quantization config itself; later releases take it as an argument.
        own_quant = len(inspect.signature(loader._initialize_model).parameters) == 2
        try:
            mc = ModelConfig.from_server_args(sa)
            lc = LoadConfig()
            args = (mc, lc) if own_quant else (mc, lc, loader._get_quantization_config(mc, lc))
        except Exception as exc:
            return {"stage": "config", "world": world, "error": _error(exc)}
        try:
            # As `DefaultModelLoader.load_model` builds it: parameters the checkpoint does
            # not quantize are created in the served dtype, not torch's float32 default.
            with _default_dtype(mc.dtype), torch.device("meta"):
                model = loader._initialize_model(*args)
        except Exception as exc:
            return {"stage": "build", "world": world, "error": _error(exc)}
        return {"stage": "build", "world": world, "error": None, "param_bytes": _bytes(model)}


def _default_dtype(dtype: Any) -> Any:
    """The release's `set_default_torch_dtype` (vLLM's, in every release recorded)."""
    utils = importlib.import_module("sglang.srt.model_loader.utils")
    return utils.set_default_torch_dtype(dtype)


def _bytes(model: Any) -> int:
    """Bytes of every parameter of one rank's model, as built (buffers such as the rotary
    caches are not parameters: meshsat counts those as overhead)."""
    return int(sum(t.numel() * t.element_size() for t in model.parameters()))


def _init_moe(sa: Any) -> None:
    """The MoE globals the scheduler sets before it builds the model (all-to-all backend,
    runner backend): `initialize_moe_config`, which takes the server args up to 0.5.18."""
    try:
        utils = importlib.import_module("sglang.srt.layers.moe.utils")
    except ImportError:  # 0.4.6.post5 reads the global server args instead
        return
    init = getattr(utils, "initialize_moe_config", None)
    if init is not None:
        init(sa) if inspect.signature(init).parameters else init()


def release_args(version: str, layout: dict[str, Any]) -> dict[str, Any]:
    """The layout in the release's own flags: 0.4.6.post5 spells EP `--enable-ep-moe` and
    DeepEP `--enable-deepep-moe` (meshsat's vocabulary is the 0.5 one)."""
    if not version.startswith("0.4"):
        return dict(layout)
    out = {k: v for k, v in layout.items() if k != "moe_a2a_backend"}
    if layout.get("moe_a2a_backend") == "deepep":
        # `auto` is refused with DP attention there; `normal` is what recipes of that era set.
        out.update(enable_deepep_moe=True, deepep_mode="normal")
    elif layout.get("ep_size", 1) > 1:
        out["enable_ep_moe"] = True
    return out


def _hybrid(hf: dict[str, Any]) -> bool:
    text = _text(hf)
    return "linear_num_key_heads" in text


def _layer(tb: Any) -> str | None:
    """The innermost module prefix on the stack (`model.layers.3.mlp.gate_up_proj`): which
    layer the release was building when it raised."""
    found = None
    for frame, _ in traceback.walk_tb(tb):
        prefix = frame.f_locals.get("prefix")
        if isinstance(prefix, str) and prefix:
            found = prefix
    return found


def _error(exc: BaseException) -> dict[str, Any]:
    tb = exc.__traceback__
    return {"type": type(exc).__name__, "message": str(exc)[:400], "site": _site(tb),
            "layer": _layer(tb)}  # fmt: skip


def main(version: str, only: str | None = None) -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    records = []
    for name in CHECKPOINTS:
        if only and only not in name:
            continue
        files = checkpoint_files(name)
        for layout in layouts():
            with contextlib.redirect_stdout(sys.stderr):
                rec = build(version, files, layout)
            records.append({"model": name, "layout": layout, **rec})
            err = rec["error"]
            print(name, layout, rec["stage"], err and (err["message"][:100], err["layer"]),
                  rec.get("world", {}).get("a2a"), file=sys.stderr)  # fmt: skip
    OUT.mkdir(parents=True, exist_ok=True)
    if not only:  # the files each build read, for meshsat to size the same cut model
        cut = {
            name: {
                f: _cut(c) if f == "config.json" else c for f, c in checkpoint_files(name).items()
            }
            for name in CHECKPOINTS
        }
        CONFIGS.write_text(json.dumps(cut, sort_keys=True, separators=(",", ":")) + "\n")
    lines = ",\n".join(json.dumps(r, sort_keys=True) for r in records)
    out = OUT / f"{version}.json"
    if not only:
        out.write_text(f'{{"version": {json.dumps(version)}, "records": [\n{lines}\n]}}\n')
    built = sum(r["error"] is None for r in records)
    print(f"{version}: {len(records)} builds, {built} built -> {out}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None)
