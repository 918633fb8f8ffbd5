"""GPU catalogue: memory as SGLang sees it and the size of the intra-node fabric.

Why MiB as reported: SGLang's default `mem_fraction_static` reads the capacity from
`nvidia-smi --query-gpu=memory.total` (MiB) and picks its chunked-prefill and CUDA-graph
defaults by thresholds on that number, so the catalogue stores what the tool reports, not
the marketing GB. Values are the `memory.total` commonly shown by nvidia-smi / rocm-smi for
the SXM/OAM parts; `fabric` is how many GPUs one NVLink/NVSwitch (or Infinity Fabric)
domain joins in the usual server (72 for a GB200 NVL72 rack) and `host_gpus` how many one
host holds (the node of `--nnodes`: 4 in a GB200/GB300 tray, 8 elsewhere).

The speeds feed the roofline estimator (`meshsat.solver.perf.roofline`), never the memory
model: HBM bandwidth (TB/s), dense (no 2:4 sparsity) tensor-core peaks for BF16, FP8 and
FP4 (TFLOPS; 0 where the part has no such unit, which falls back to the next wider type),
per-direction scale-up bandwidth per GPU (NVLink / Infinity Fabric, GB/s; PCIe 5 x16 for
parts without one) and the scale-out NIC per GPU (GB/s; 400 Gb/s InfiniBand/RoCE = 50).
Sources: the vendors' datasheets (NVIDIA H100/H200, H20, H800, B200/B300 (HGX), GB200/GB300
NVL72, A100, L40S/L40, L4, A10, GeForce RTX 4090/5090; AMD Instinct MI300X, MI325X, MI355X).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from meshsat.solver.errors import InputError
from meshsat.solver.lang.config import IMPLIED_BY_GPU

GIB = 1 << 30
MIB = 1 << 20


@dataclass(frozen=True)
class Gpu:
    name: str
    #: Total device memory in MiB, as nvidia-smi / rocm-smi report it.
    memory_mib: float
    #: GPUs in one intra-node (scale-up) fabric domain.
    fabric: int
    vendor: str = "nvidia"
    #: Compute-capability major (`torch.cuda.get_device_capability()[0]`), which SGLang reads
    #: for device-dependent defaults (FP8 KV for DeepSeek DSA from 10, Blackwell); ROCm
    #: reports 9 for MI300/MI325 (gfx942) and MI355 (gfx950).
    sm: int = 9
    #: HBM bandwidth, TB/s.
    hbm_tbps: float = 0.0
    #: Dense tensor-core peaks, TFLOPS.
    bf16_tflops: float = 0.0
    fp8_tflops: float = 0.0
    fp4_tflops: float = 0.0
    #: Scale-up (NVLink / Infinity Fabric) bandwidth per GPU and direction, GB/s.
    scale_up_gbps: float = 0.0
    #: Scale-out (InfiniBand / RoCE) bandwidth per GPU and direction, GB/s.
    scale_out_gbps: float = 50.0
    #: Compute-capability minor (B300/GB300: 10.3, Ada: 8.9, A10: 8.6).
    sm_minor: int = 0
    #: False for a GPU known by its memory only (`--gpu-memory`): its class is a guess.
    catalogued: bool = True
    #: GPUs one host holds, the node SGLang's `--nnodes` counts and a pod requests: 8 in
    #: HGX/DGX/OAM and the usual PCIe servers, 4 in a GB200/GB300 compute tray (an NVL72
    #: rack is 18 such hosts in one NVLink domain, so `fabric` is not the node). Why apart
    #: from `fabric`: a launch is cut by hosts, communication by the fabric.
    host_gpus: int = 8

    @property
    def compute_capability(self) -> int:
        """Major x 10 + minor, as the layout rules' `gpu_sm` reads it (90: Hopper, 100 and
        103: Blackwell datacenter, 120: consumer Blackwell)."""
        return self.sm * 10 + self.sm_minor

    @property
    def gpu_sm(self) -> int | None:
        """The layout field `gpu_sm` this GPU sets: its compute capability, or None where
        the class is not known (another vendor's GPU, or one given by its memory only), so
        the rules that need it are not checked rather than checked against a guess."""
        return self.compute_capability if self.vendor == "nvidia" and self.catalogued else None

    @property
    def layout_fields(self) -> dict[str, Any]:
        """The layout fields this GPU sets on every layout of a listing (`IMPLIED_BY_GPU`):
        its class where known, and the platform SGLang runs it on: an AMD Instinct runs
        ROCm (`platform = hip`, which rules such as CP-HIP-DSV4 read; before, `--gpu
        MI300X` was judged as CUDA)."""
        if self.vendor == "amd" and self.catalogued:
            return {"platform": "hip"}
        return {} if self.gpu_sm is None else {"gpu_sm": self.gpu_sm}

    @property
    def has_speeds(self) -> bool:
        return self.hbm_tbps > 0 and self.bf16_tflops > 0

    @property
    def memory_gib(self) -> float:
        return self.memory_mib / 1024


GPUS: Mapping[str, Gpu] = MappingProxyType(
    {
        g.name: g
        for g in (
            Gpu("H100", 81559, 8, "nvidia", 9, 3.35, 989, 1979, 0, 450),
            Gpu("H100-NVL", 95830, 2, "nvidia", 9, 3.9, 835, 1671, 0, 300),
            Gpu("H200", 143771, 8, "nvidia", 9, 4.8, 989, 1979, 0, 450),
            Gpu("H20", 97871, 8, "nvidia", 9, 4.0, 148, 296, 0, 450),
            Gpu("H800", 81559, 8, "nvidia", 9, 3.35, 989, 1979, 0, 200),
            Gpu("B200", 183359, 8, "nvidia", 10, 8.0, 2250, 4500, 9000, 900),
            Gpu("B300", 275040, 8, "nvidia", 10, 8.0, 2250, 4500, 13500, 900, sm_minor=3),
            Gpu("GB200", 189471, 72, "nvidia", 10, 8.0, 2500, 5000, 10000, 900, host_gpus=4),
            Gpu(
                "GB300",
                284208,
                72,
                "nvidia",
                10,
                8.0,
                2500,
                5000,
                15000,
                900,
                sm_minor=3,
                host_gpus=4,
            ),
            Gpu("A100-40", 40960, 8, "nvidia", 8, 1.555, 312, 0, 0, 300),
            Gpu("A100-80", 81920, 8, "nvidia", 8, 2.039, 312, 0, 0, 300),
            Gpu("A800", 81920, 8, "nvidia", 8, 2.039, 312, 0, 0, 200),
            Gpu("L40S", 46068, 1, "nvidia", 8, 0.864, 362, 733, 0, 32, sm_minor=9),
            Gpu("L40", 46068, 1, "nvidia", 8, 0.864, 181, 362, 0, 32, sm_minor=9),
            Gpu("L4", 23034, 1, "nvidia", 8, 0.3, 121, 242, 0, 32, sm_minor=9),
            Gpu("A10", 23028, 1, "nvidia", 8, 0.6, 125, 0, 0, 32, sm_minor=6),
            Gpu("RTX4090", 24564, 1, "nvidia", 8, 1.008, 165, 330, 0, 32, sm_minor=9),
            Gpu("RTX5090", 32607, 1, "nvidia", 12, 1.792, 209, 419, 838, 64),
            Gpu("MI300X", 196592, 8, "amd", 9, 5.3, 1307, 2615, 0, 448),
            Gpu("MI325X", 262128, 8, "amd", 9, 6.0, 1307, 2615, 0, 448),
            Gpu("MI355X", 294896, 8, "amd", 9, 8.0, 2500, 5000, 10000, 538),
        )
    }
)

_SIZE = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*(GiB|GB|MiB|MB|G|M)?\s*$", re.IGNORECASE)


def parse_memory(text: str) -> float:
    """`80GiB`, `81559MiB`, `80GB` (decimal) -> MiB."""
    m = _SIZE.match(text)
    if not m:
        raise InputError(f"cannot read GPU memory {text!r}: write e.g. 80GiB or 81559MiB")
    value, unit = float(m.group(1)), (m.group(2) or "GiB").lower()
    factor = {"gib": 1024.0, "g": 1024.0, "mib": 1.0, "m": 1.0, "gb": 1e9 / MIB, "mb": 1e6 / MIB}
    mib = value * factor[unit]
    if mib <= 0:
        raise InputError(f"GPU memory must be positive, got {text!r}")
    return mib


def gpu(name: str) -> Gpu:
    """The catalogue entry for `name` (case and `-`/`_` insensitive; the SXM form is the
    catalogue's, so AIConfigurator's `h200_sxm` and `A100-80GB-SXM4` are read too); lists
    the known ones, and the memory sizes when the name leaves them open (`A100`)."""
    parts = [p for p in re.split(r"[-_\s]+", name.strip().upper()) if p]
    parts = [p.removesuffix("GB") if p[:-2].isdigit() else p for p in parts]
    key = "".join(p for p in parts if not re.fullmatch(r"SXM\d?", p))
    for g in GPUS.values():
        if g.name.upper().replace("-", "") == key:
            return g
    sizes = [g.name for g in GPUS.values() if g.name.upper().startswith(f"{key}-") and key]
    if sizes:
        raise InputError(f"GPU {name!r} comes in {' and '.join(sizes)}: name one")
    import difflib

    names = {g.upper().replace("-", ""): g for g in GPUS}
    close = difflib.get_close_matches(key, list(names), n=2)
    hint = f"did you mean {' or '.join(names[c] for c in close)}? " if close else ""
    raise InputError(f"unknown GPU {name!r}; {hint}known: {', '.join(GPUS)} (or give --gpu-memory)")


def typed_fields(fields: Mapping[str, Any]) -> dict[str, Any]:
    """Of the fields set on every layout of a listing, those its commands carry."""
    return {k: v for k, v in fields.items() if k not in IMPLIED_BY_GPU}


def custom_gpu(memory: str, fabric: int = 8) -> Gpu:
    return Gpu(f"custom-{memory}", parse_memory(memory), fabric, catalogued=False)
