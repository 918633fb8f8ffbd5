"""What a launch says about its accelerators: the platform its `--device` names (or, without
`--device`, the Ascend-only values and variables it holds), the devices one node gives
SGLang, and the node size assumed when it says neither.

`gpus_per_node` is a tool-only fact (SGLang never reads it): meshsat needs it for
TOPO-NODE-GPUS and the rank groups. A CUDA launch keeps the Config default of 8 (an HGX
node); an Ascend launch states its node in two ways meshsat reads, and otherwise gets the
largest Ascend node with a note (docs/rules.md §1).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, MutableMapping, Sequence
from typing import Any

from meshsat.solver.lang.limits import listed

#: SGLang's `--device` values meshsat checks as their own platform (`Config.platform`).
#: Only `npu` (Ascend) is read: `cuda` is also ROCm's device, and `xpu`, `hpu`, `cpu` are
#: platforms meshsat does not model as such.
DEVICE_PLATFORMS: dict[str, str] = {"npu": "npu"}

#: The Ascend runtime's (CANN) list of the devices a process sees. CANN reads logical
#: device IDs separated by commas up to the first character or ID it cannot read, and the
#: process then has exactly those devices, numbered from 0 (CANN environment variable
#: reference, ASCEND_RT_VISIBLE_DEVICES:
#: https://www.hiascend.com/document/detail/en/canncommercial/850/maintenref/envvar/envref_07_0028.html).
#: `CUDA_VISIBLE_DEVICES` is not read as the node's size: it would change the verdict of
#: CUDA launches that set it per worker (srt-slurm's `CUDA_VISIBLE_DEVICES=0,1` for TP 2 on
#: an 8-GPU node).
VISIBLE_DEVICES_ENV = "ASCEND_RT_VISIBLE_DEVICES"
#: CUDA's list of the GPUs a process sees, read only against the GPU ids a launch's ranks
#: take (JOB-VISIBLE-DEVICES, `meshsat.solver.deployment.visible`) and between the servers
#: of one machine (HOST-GPU-OVERLAP, `meshsat.solver.deployment.hosts`).
CUDA_VISIBLE_DEVICES_ENV = "CUDA_VISIBLE_DEVICES"

#: Devices per node assumed for a platform when no source states it. Ascend: an Atlas
#: 800I/800T A3 node holds 8 cards of 2 dies, 16 devices (ranks), an Atlas 800I A2 node 8
#: (SGLang's "Ascend NPU Reference",
#: https://docs.sglang.io/docs/hardware-platforms/ascend-npus/ascend_npu_reference; Huawei
#: MindCluster, A3 SuperPoD servers: eight HiAM modules of two processors,
#: https://www.hiascend.com/document/detail/en/mindcluster/730/clustersched/schedulingug/dl_affinity_0040.html).
#: The larger one, so that TOPO-NODE-GPUS refuses only what no Ascend node can hold; each
#: with the note that names the assumption and how to override it.
DEFAULT_NODE_DEVICES: dict[str, tuple[int, str]] = {
    "npu": (
        16,
        "an Atlas A3 node: 8 cards of 2 NPU dies; on an Atlas A2 node (8 NPUs) give --set "
        f"gpus_per_node=8, or list the node's NPUs in {VISIBLE_DEVICES_ENV}",
    )
}

#: Option values only an Ascend NPU serves: every value of a recorded release's choices list
#: (`sglang_flags.json`: 0.5.18, 0.5.19, 0.5.23; 0.4.6.post5 has none) that runs Ascend
#: kernels (`ascend`, `ascend_attn`, `ascend_fuseep`, `ascend_tp`, `kernel_ascend`, the
#: `npu_memcache` store). SGLang itself picks the NPU when `torch_npu` is installed
#: (`is_npu()`: `torch.npu` exists), which a command does not show; these values are what
#: it does show. tests/test_accelerator.py checks this table against the recorded choices.
ASCEND_ONLY_VALUES: dict[str, frozenset[str]] = {
    "--attention-backend": frozenset({"ascend"}),
    "--prefill-attention-backend": frozenset({"ascend"}),
    "--decode-attention-backend": frozenset({"ascend"}),
    "--disaggregation-transfer-backend": frozenset({"ascend"}),
    "--sampling-backend": frozenset({"ascend"}),
    "--lora-backend": frozenset({"ascend"}),
    "--mm-attention-backend": frozenset({"ascend_attn"}),
    "--moe-a2a-backend": frozenset({"ascend_fuseep", "ascend_tp"}),
    "--speculative-moe-a2a-backend": frozenset({"ascend_fuseep", "ascend_tp"}),
    "--hicache-io-backend": frozenset({"kernel_ascend"}),
    "--hicache-storage-backend": frozenset({"npu_memcache"}),
}

#: Environment variables only the Ascend stack reads: CANN's `ASCEND_*` (its device list,
#: toolkit paths, SGLang's `ASCEND_MF_STORE_URL`), torch_npu's allocator setting, and the
#: HCCL (CANN's collective library) settings SGLang's Ascend docs and code set. Not every
#: `HCCL_*`: Intel Gaudi's collective library is also HCCL (`HCCL_COMM_ID`,
#: `HCCL_SOCKET_IFNAME`), and a Gaudi launch is not an Ascend one.
ASCEND_ENV_PREFIX = "ASCEND_"
ASCEND_ENV: frozenset[str] = frozenset(
    {
        "PYTORCH_NPU_ALLOC_CONF",
        "HCCL_BUFFSIZE",
        "HCCL_OP_EXPANSION_MODE",
        "HCCL_EXEC_TIMEOUT",
        "HCCL_HOST_SOCKET_PORT_RANGE",
        "HCCL_NPU_SOCKET_PORT_RANGE",
        "HCCL_INTRA_ROCE_ENABLE",
        "HCCL_INTRA_PCIE_ENABLE",
    }
)

_DEVICE_ID = re.compile(r"[0-9]+")


def visible_devices(text: str) -> int:
    """How many devices a process sees for this ASCEND_RT_VISIBLE_DEVICES value: the IDs
    before the first one CANN cannot read (`1, 2,3` is one device, `1,2,-1,3` two)."""
    count = 0
    for part in text.split(","):
        if _DEVICE_ID.fullmatch(part) is None:
            break
        count += 1
    return count


def node_devices_from_env(text: str) -> tuple[int | None, str]:
    """`gpus_per_node` as the visible-devices list states it (None when it lists none), and
    the note that says where it came from."""
    count = visible_devices(text)
    if count == 0:
        return None, f"{VISIBLE_DEVICES_ENV}={text!r}: no device ID read; gpus_per_node not from it"
    return count, f"{VISIBLE_DEVICES_ENV} lists {count} device(s): gpus_per_node = {count}"


def assume_node_size(values: MutableMapping[str, Any]) -> str | None:
    """Give `values` the platform's assumed node size when no source set `gpus_per_node`;
    the note naming the assumption and its override, or None when nothing was assumed."""
    platform = values.get("platform")
    if "gpus_per_node" in values or platform not in DEFAULT_NODE_DEVICES:
        return None
    size, why = DEFAULT_NODE_DEVICES[platform]
    values["gpus_per_node"] = size
    return f"platform {platform}: gpus_per_node = {size} assumed ({why})"


def is_ascend_env(var: str) -> bool:
    """Whether only the Ascend stack reads this environment variable (`ASCEND_ENV`)."""
    return var.startswith(ASCEND_ENV_PREFIX) or var in ASCEND_ENV


def ascend_signs(given: Iterable[tuple[str, str]], env: Iterable[str]) -> list[str]:
    """What in one launch names Ascend and nothing else: its Ascend-only option values
    (`given`: (flag, value) as written) and environment variables, as they are written."""
    said = [f"{flag} {value}" for flag, value in given if value in ASCEND_ONLY_VALUES.get(flag, ())]
    return said + [var for var in env if is_ascend_env(var)]


def infer_platform(values: MutableMapping[str, Any], signs: Sequence[str]) -> str | None:
    """Give `values` platform npu when no source set a platform and the launch holds an
    Ascend-only value or variable (`ascend_signs`, read only from launches with no
    `--device`); the note naming what it was inferred from, or None when nothing was."""
    if "platform" in values or not signs:
        return None
    values["platform"] = "npu"
    shown = listed(list(dict.fromkeys(signs)), ", ")
    return (
        f"platform npu inferred from {shown} (Ascend-only; the command names no --device); "
        "give --set platform=cuda to judge it otherwise"
    )
