"""The measured serving runs AIConfigurator ships (`systems/silicon_sample.csv`), in meshsat's
terms: what `benchmarks/perf_accuracy.py` scores the estimator on, and `make test` a slice of.

Each aggregated SGLang row names a model, a system, a quantization, ISL/OSL, the benchmark
concurrency and a layout in the engine's vocabulary, with measured TTFT and TPOT (ms).
Normalisations, each counted in the report: a row that stores tp_size N*N with moe_tp N and
moe_ep N (N >= 4; ids that name the layout say `tpN_epN`) is SGLang's `--tp N --ep N`, the
layout `tpN_0_epN_0` rows store as N/1/N; a blank attention_dp_size is 1; dense models leave
the MoE widths at 1.

Builds: 122 rows record no `backend_version`; their `silicon_data_source` still says when
they were measured (`measured=2025-11-10...`), which bounds the build they ran: no newer than
the newest release on PyPI by that date (`RELEASED`, `MeasuredRun.build`), e.g. `<=0.5.5.post1`
for the DeepSeek NVFP4 B200 runs of 10 November 2025, weeks before 0.5.6.
"""

from __future__ import annotations

import csv
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from meshsat.solver.memory.layout import Parallel
from meshsat.solver.perf.aic import _package_dir
from meshsat.solver.perf.engine_args import SYSTEMS

GPU_OF_SYSTEM: Mapping[str, str] = {v: k for k, v in SYSTEMS.items()}

#: SGLang releases and the day each reached PyPI (first upload), around the measured runs'
#: dates: what bounds the build of a run that records only when it was measured.
RELEASED: tuple[tuple[str, str], ...] = (
    ("0.5.3", "2025-10-06"),
    ("0.5.4", "2025-10-24"),
    ("0.5.4.post1", "2025-10-27"),
    ("0.5.4.post2", "2025-11-01"),
    ("0.5.4.post3", "2025-11-05"),
    ("0.5.5", "2025-11-06"),
    ("0.5.5.post1", "2025-11-10"),
    ("0.5.5.post2", "2025-11-12"),
    ("0.5.5.post3", "2025-11-17"),
    ("0.5.6", "2025-12-03"),
    ("0.5.6.post1", "2025-12-08"),
    ("0.5.6.post2", "2025-12-11"),
    ("0.5.7", "2026-01-01"),
    ("0.5.8", "2026-01-23"),
    ("0.5.8.post1", "2026-02-05"),
    ("0.5.9", "2026-02-23"),
    ("0.5.10", "2026-04-05"),
    ("0.5.10.post1", "2026-04-08"),
)

#: The row's GEMM quantization -> the quantization name meshsat's memory model uses.
_QUANT: Mapping[str, str] = {"": "bfloat16", "fp8": "fp8", "fp8_block": "fp8", "nvfp4": "nvfp4"}

#: Checkpoints of the measured models, by (model, quantization): AIC's bundled configs.
_CONFIGS: Mapping[tuple[str, str], str] = {
    ("zhipuai/GLM-5", "fp8"): "zai-org--GLM-5-FP8",
    ("zhipuai/GLM-5", "nvfp4"): "nvidia--GLM-5-NVFP4",
    ("Qwen/Qwen3.5-397B-A17B", "nvfp4"): "nvidia--Qwen3.5-397B-A17B-NVFP4",
    ("meta-llama/Llama-3.1-8B-Instruct", "fp8"): "meta-llama--Meta-Llama-3.1-8B",
}


@dataclass(frozen=True)
class MeasuredRow:
    """What every measured row has, aggregated or disaggregated: the checkpoint (model and
    quantization, what `checkpoint_config` reads), the GPU, the build and the workload."""

    id: str
    model: str
    gpu: str
    system: str
    sglang: str
    quant: str
    isl: int
    osl: int
    concurrency: int
    #: The engine's GEMM and MoE modes the row records (`gemm_quant_mode`,
    #: `moe_quant_mode`; 16-bit rows leave them blank: `bfloat16`). AIConfigurator labels
    #: block-FP8 checkpoints' GEMMs `fp8` there; `quant` is the checkpoint's name.
    gemm_mode: str = field(default="bfloat16", kw_only=True)
    moe_mode: str = field(default="bfloat16", kw_only=True)


@dataclass(frozen=True)
class MeasuredRun(MeasuredRow):
    #: SGLang's flags for the layout.
    tp_size: int
    pp_size: int
    dp_size: int
    ep_size: int
    ttft_ms: float
    tpot_ms: float
    normalised: bool
    #: Day the run was measured (`YYYY-MM-DD`), where its source says.
    measured: str = ""

    @property
    def build(self) -> str:
        """The SGLang build: the recorded version, else `<=X` with X the newest release
        published by the day it was measured, else `unknown`."""
        if self.sglang != "unknown" or not self.measured:
            return self.sglang
        out = [v for v, day in RELEASED if day <= self.measured]
        return f"<={out[-1]}" if out else "unknown"

    @property
    def gpus(self) -> int:
        return self.tp_size * self.pp_size

    def config(self) -> dict[str, Any]:
        """The layout as meshsat config fields (what `validate` reads)."""
        return {
            "tp_size": self.tp_size,
            "pp_size": self.pp_size,
            "dp_size": self.dp_size,
            "enable_dp_attention": self.dp_size > 1,
            "ep_size": self.ep_size,
        }

    @property
    def layout_key(self) -> tuple[int, int, int, int]:
        return (self.tp_size, self.pp_size, self.dp_size, self.ep_size)

    @property
    def group_key(self) -> tuple[str, str, str, str, int, int, int]:
        """Rows that differ only in layout share this key."""
        return (self.model, self.system, self.quant, self.sglang, self.isl, self.osl,
                self.concurrency)  # fmt: skip


def sample_path() -> Path | None:
    root = _package_dir()
    return None if root is None else root / "systems" / "silicon_sample.csv"


def _int(text: str, default: int = 1) -> int:
    return int(text) if text.strip() else default


def _common(r: Mapping[str, str]) -> dict[str, Any]:
    """The fields every measured row has, aggregated or disaggregated."""
    return {
        "id": r["id"],
        "model": r["model_path"],
        "gpu": GPU_OF_SYSTEM.get(r["system"], r["system"]),
        "system": r["system"],
        "sglang": r["backend_version"] or "unknown",
        "quant": _QUANT.get(r["gemm_quant_mode"], r["gemm_quant_mode"]),
        "gemm_mode": r["gemm_quant_mode"] or "bfloat16",
        "moe_mode": r["moe_quant_mode"] or "bfloat16",
        "isl": int(r["isl"]),
        "osl": int(r["osl"]),
        "ttft_ms": float(r["silicon_ttft_ms"]),
        "tpot_ms": float(r["silicon_tpot_ms"]),
    }


def load_runs(path: Path | None = None) -> list[MeasuredRun]:
    """Every aggregated SGLang row of the sample, in file order."""
    path = path or sample_path()
    if path is None:
        return []
    runs = []
    with path.open(newline="") as fh:
        for r in csv.DictReader(fh):
            if r["backend"] != "sglang" or r["mode"] != "agg":
                continue
            tp, dp = _int(r["tp_size"]), _int(r["attention_dp_size"])
            moe_tp, moe_ep = _int(r["moe_tp_size"]), _int(r["moe_ep_size"])
            normalised = False
            m = re.search(r"_tp(\d+)_ep(\d+)_\d+$", r["id"])
            if tp == moe_tp * moe_ep and moe_tp == moe_ep >= 4:
                # `tpN_epN` stored as the product (ids that name it say so; the rest of
                # that dump's rows share the pattern).
                tp, moe_tp, normalised = moe_tp, 1, True
            elif m is not None and (tp, moe_ep) != (int(m.group(1)), int(m.group(2))):
                tp, moe_ep, normalised = int(m.group(1)), int(m.group(2)), True
            if moe_tp * moe_ep == 1:  # dense models leave the MoE widths at 1
                moe_ep = 1
            elif tp * dp != moe_tp * moe_ep:
                continue
            runs.append(
                MeasuredRun(
                    **_common(r),
                    concurrency=int(r["batch_size"]),
                    tp_size=tp * dp,
                    pp_size=_int(r["pp_size"]),
                    dp_size=dp,
                    ep_size=moe_ep,
                    normalised=normalised,
                    measured=_measured_day(r.get("silicon_data_source", "")),
                )
            )
    return runs


def _measured_day(source: str) -> str:
    m = re.search(r"measured=(\d{4}-\d{2}-\d{2})", source)
    return m.group(1) if m else ""


def checkpoint_config(run: MeasuredRow) -> dict[str, Any] | None:
    """The config.json of the measured checkpoint (AIC's bundled copy), its quantization
    set to the run's; None when the engine bundles no config for the model."""
    root = _package_dir()
    if root is None:
        return None
    stem = _CONFIGS.get((run.model, run.quant), run.model.replace("/", "--", 1))
    p = root / "model_configs" / f"{stem}_config.json"
    if not p.is_file():
        return None
    cfg: dict[str, Any] = json.loads(p.read_text())
    if run.quant == "bfloat16":
        cfg.pop("quantization_config", None)
    elif run.quant == "fp8" and "quantization_config" not in cfg:
        cfg["quantization_config"] = {"quant_method": "fp8", "weight_block_size": [128, 128]}
        if _has_linear_attention(cfg):
            # Published FP8 hybrids leave the fused in_proj_ba in 16 bits (its 2·heads
            # outputs are never whole 128-blocks; QUANT-BLOCK-LINEAR-ATTN-BA), as NVIDIA's
            # NVFP4 Qwen3.5 leaves every linear_attn module: mirror them, or the run that
            # SGLang served would read as a checkpoint that cannot load.
            cfg["quantization_config"]["modules_to_not_convert"] = [
                "lm_head",
                "linear_attn.in_proj_ba",
            ]
    elif run.quant == "nvfp4":
        cfg["quantization_config"] = {"quant_method": "modelopt", "quant_algo": "NVFP4"}
    return cfg


def _has_linear_attention(cfg: Mapping[str, Any]) -> bool:
    """Qwen3-Next / Qwen3.5-style hybrids: GatedDeltaNet layers beside full attention."""
    text = cfg.get("text_config")
    for c in (cfg, text if isinstance(text, Mapping) else {}):
        if "full_attention_interval" in c or "linear_attention" in (c.get("layer_types") or ()):
            return True
    return False


@dataclass(frozen=True)
class MeasuredRole:
    """One role's server widths in SGLang's flags (the row's engine vocabulary read back:
    `--tp` = attention TP x attention DP), its server count and its recorded batch."""

    tp_size: int
    pp_size: int
    dp_size: int
    ep_size: int
    #: The engine vocabulary's attention TP and MoE TP (what the row stores).
    attn_tp: int
    moe_tp: int
    #: Servers of this role; None where the row does not record it.
    workers: int | None
    #: Requests per attention-DP rank the run's configuration set (None: not recorded).
    batch: int | None

    @property
    def gpus(self) -> int:
        return self.tp_size * self.pp_size

    def config(self, mode: str) -> dict[str, Any]:
        """The server's config fields (what `validate` reads), its role set."""
        return {
            "tp_size": self.tp_size,
            "pp_size": self.pp_size,
            "dp_size": self.dp_size,
            "enable_dp_attention": self.dp_size > 1,
            "ep_size": self.ep_size,
            "disaggregation_mode": mode,
        }

    @property
    def key(self) -> tuple[int, int, int, int, int]:
        return (self.tp_size, self.pp_size, self.dp_size, self.ep_size, self.moe_tp)

    def parallel(self, moe: bool) -> Parallel:
        """The widths the estimate reads (a dense model's MLP over all of `--tp`)."""
        return Parallel(
            tp=self.tp_size, pp=self.pp_size, attn_tp=self.attn_tp, attn_dp=self.dp_size,
            ep=self.ep_size if moe else 1, moe_tp=self.moe_tp if moe else self.tp_size,
            dp_attention=self.dp_size > 1,
        )  # fmt: skip


@dataclass(frozen=True)
class MeasuredDisaggRun(MeasuredRow):
    """One measured disaggregated SGLang run: a prefill pool, a decode pool, a concurrency."""

    prefill: MeasuredRole
    decode: MeasuredRole
    ttft_ms: float
    tpot_ms: float

    @property
    def complete(self) -> bool:
        """Both worker counts recorded (the db-dump rows); the rest record the widths only."""
        return self.prefill.workers is not None and self.decode.workers is not None

    @property
    def prefill_workers(self) -> int:
        return self.prefill.workers or 1

    @property
    def decode_workers(self) -> int:
        return self.decode.workers or 1

    @property
    def gpus(self) -> int:
        return self.prefill_workers * self.prefill.gpus + self.decode_workers * self.decode.gpus

    @property
    def config_key(self) -> tuple[Any, ...]:
        """What one measured configuration is: both pools and the concurrency."""
        return (self.prefill.key, self.prefill_workers, self.decode.key, self.decode_workers,
                self.concurrency)  # fmt: skip

    @property
    def group_key(self) -> tuple[str, str, str, int, int]:
        """Configurations compared with one another: one model, GPU, quantization, ISL/OSL."""
        return (self.model, self.system, self.quant, self.isl, self.osl)


def _role(r: Mapping[str, str], side: str) -> MeasuredRole:
    tp, dp = _int(r[f"{side}_tp_size"]), _int(r[f"{side}_attention_dp_size"])
    moe_tp, moe_ep = _int(r[f"{side}_moe_tp_size"]), _int(r[f"{side}_moe_ep_size"])
    workers = r[f"{side}_num_workers"].strip()
    batch = r[f"{side}_batch_size"].strip()
    return MeasuredRole(
        tp_size=tp * dp,
        pp_size=_int(r[f"{side}_pp_size"]),
        dp_size=dp,
        ep_size=moe_ep,
        attn_tp=tp,
        moe_tp=moe_tp,
        workers=int(workers) if workers else None,
        batch=int(batch) if batch else None,
    )


def load_disagg_runs(path: Path | None = None) -> list[MeasuredDisaggRun]:
    """Every disaggregated SGLang row of the sample, in file order. The concurrency is the
    run's `silicon_concurrency` (else the `_c<N>_` of its id, else decode batch x decode
    attention-DP ranks x decode workers)."""
    path = path or sample_path()
    if path is None:
        return []
    runs = []
    with path.open(newline="") as fh:
        for r in csv.DictReader(fh):
            if r["backend"] != "sglang" or r["mode"] != "disagg":
                continue
            pre, dec = _role(r, "prefill"), _role(r, "decode")
            m = re.search(r"silicon_concurrency=(\d+)", r["silicon_data_source"]) or re.search(
                r"_c(\d+)_", r["id"]
            )
            if m is not None:
                conc = int(m.group(1))
            else:
                conc = (dec.batch or 1) * dec.dp_size * (dec.workers or 1)
            runs.append(MeasuredDisaggRun(**_common(r), concurrency=conc, prefill=pre, decode=dec))
    return runs


def family(model: str) -> str:
    """Models held out together: 125 DeepSeek-V3 rows repeat DeepSeek-R1 rows exactly (one
    architecture), so leaving one out while training on the other would leak."""
    return "DeepSeek-V3/R1" if model.startswith("deepseek-ai/DeepSeek-") else model


def measurement_key(run: MeasuredRun | MeasuredDisaggRun) -> tuple[Any, ...]:
    """What identifies one measurement: the GPU, quantization, ISL/OSL, concurrency and the
    measured TTFT and TPOT to two decimals of a millisecond. The CSV prints most rows with
    17 significant digits and 146 aggregated ones with two decimals (a copy of the same
    run from another source: 2178.39 for 2178.391830824694), so two decimals is the finest
    precision every copy holds. The model is left out: the sample names DeepSeek-V3 what
    copies of the same runs name DeepSeek-R1, one architecture, in the aggregated rows as
    in the disaggregated ones."""
    return (run.system, run.quant, run.isl, run.osl, run.concurrency,
            f"{run.ttft_ms:.2f}", f"{run.tpot_ms:.2f}")  # fmt: skip


def distinct_runs(runs: Sequence[MeasuredRun]) -> list[MeasuredRun]:
    """Each aggregated measurement once, the first in file order: 384 of the sample's 953
    aggregated SGLang rows repeat another (one campaign under several source files,
    DeepSeek-R1 rows again as DeepSeek-V3), which weighs a campaign by how often it was
    copied, not by what it measured."""
    seen: set[tuple[Any, ...]] = set()
    kept = []
    for r in runs:
        key = measurement_key(r)
        if key not in seen:
            seen.add(key)
            kept.append(r)
    return kept


def distinct_disagg_runs(
    runs: Sequence[MeasuredDisaggRun],
) -> tuple[list[MeasuredDisaggRun], list[MeasuredDisaggRun]]:
    """(kept, dropped): each measurement once. The sample lists some runs twice: widths-only
    copies of db-dump rows (the same TTFT and TPOT to two decimals of a millisecond, no worker
    counts, often no attention-DP width either: `tp 1` for a server of 8 attention-DP
    ranks) and the same widths-only run from two source files. A copy of a row with worker counts
    gives way to that row; otherwise the first in file order stays."""
    complete = {measurement_key(r) for r in runs if r.complete}
    seen: set[tuple[Any, ...]] = set()
    kept, dropped = [], []
    for r in runs:
        key = measurement_key(r)
        if not r.complete and (key in complete or key in seen):
            dropped.append(r)
            continue
        seen.add(key)
        kept.append(r)
    return kept, dropped


@dataclass(frozen=True)
class Repeats:
    """Configurations the sample measured more than once with different results: the same
    model family, GPU, quantization, layout, ISL/OSL and concurrency, another TTFT or TPOT
    (another day or build). An estimate from the configuration gives each group one value,
    so these groups bound what any such estimate can score on them."""

    groups: tuple[tuple[MeasuredRun, ...], ...]

    def spreads(self, which: str) -> list[float]:
        """Largest over smallest measurement of each group (`ttft_ms` or `tpot_ms`)."""
        return [max(getattr(r, which) for r in g) / min(getattr(r, which) for r in g)
                for g in self.groups]  # fmt: skip

    def floor(self, which: str) -> list[float]:
        """Per group, the least error the worse-served measurement can have when one value
        stands for the group: (r - 1) / (r + 1) for a spread r, at the harmonic mean of the
        extremes."""
        return [(r - 1) / (r + 1) for r in self.spreads(which)]


def repeated_configurations(runs: Sequence[MeasuredRun]) -> Repeats:
    """Distinct measurements (`distinct_runs`) grouped by configuration, groups of two or
    more, in file order."""
    by: dict[tuple[Any, ...], list[MeasuredRun]] = {}
    for r in distinct_runs(runs):
        key = (family(r.model), r.system, r.quant, r.layout_key, r.isl, r.osl, r.concurrency)
        by.setdefault(key, []).append(r)
    return Repeats(tuple(tuple(g) for g in by.values() if len(g) > 1))
