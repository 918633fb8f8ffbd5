"""GPU catalogue: memory as SGLang sees it and the size of the intra-node fabric.

Why MiB as reported: SGLang's default `mem_fraction_static` reads the capacity from
`nvidia-smi --query-gpu=memory.total` (MiB) and picks its chunked-prefill and CUDA-graph
defaults by thresholds on that number, so the catalogue stores what the tool reports, not
the marketing GB. Values are the `memory.total` commonly shown by nvidia-smi / rocm-smi for
the SXM/OAM parts; `fabric` is how many GPUs one NVLink/NVSwitch (or Infinity Fabric)
domain joins in the usual server (72 for a GB200 NVL72 rack).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from meshsat.solver.errors import InputError

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

    @property
    def memory_gib(self) -> float:
        return self.memory_mib / 1024


GPUS: Mapping[str, Gpu] = MappingProxyType(
    {
        g.name: g
        for g in (
            Gpu("H100", 81559, 8),
            Gpu("H100-NVL", 95830, 2),
            Gpu("H200", 143771, 8),
            Gpu("H20", 97871, 8),
            Gpu("H800", 81559, 8),
            Gpu("B200", 183359, 8, sm=10),
            Gpu("B300", 275040, 8, sm=10),
            Gpu("GB200", 189471, 72, sm=10),
            Gpu("GB300", 284208, 72, sm=10),
            Gpu("A100-40", 40960, 8, sm=8),
            Gpu("A100-80", 81920, 8, sm=8),
            Gpu("A800", 81920, 8, sm=8),
            Gpu("L40S", 46068, 1, sm=8),
            Gpu("L40", 46068, 1, sm=8),
            Gpu("L4", 23034, 1, sm=8),
            Gpu("A10", 23028, 1, sm=8),
            Gpu("RTX4090", 24564, 1, sm=8),
            Gpu("RTX5090", 32607, 1, sm=12),
            Gpu("MI300X", 196592, 8, "amd"),
            Gpu("MI325X", 262128, 8, "amd"),
            Gpu("MI355X", 294896, 8, "amd"),
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
    """The catalogue entry for `name` (case and `-`/`_` insensitive); lists the known ones."""
    key = name.replace("_", "-").upper()
    for g in GPUS.values():
        if g.name.upper() == key or g.name.upper().replace("-", "") == key.replace("-", ""):
            return g
    raise InputError(f"unknown GPU {name!r}; known: {', '.join(GPUS)} (or give --gpu-memory)")


def custom_gpu(memory: str, fabric: int = 8) -> Gpu:
    return Gpu(f"custom-{memory}", parse_memory(memory), fabric)
