"""What a launch says about its accelerators: the platform its `--device` names, the devices
one node gives SGLang, and the node size assumed when it says neither.

`gpus_per_node` is a tool-only fact (SGLang never reads it): meshsat needs it for
TOPO-NODE-GPUS and the rank groups. A CUDA launch keeps the Config default of 8 (an HGX
node); an Ascend launch states its node in two ways meshsat reads, and otherwise gets the
largest Ascend node with a note (docs/rules.md §1).
"""

from __future__ import annotations

import re
from collections.abc import MutableMapping
from typing import Any

#: SGLang's `--device` values meshsat checks as their own platform (`Config.platform`).
#: Only `npu` (Ascend) is read: `cuda` is also ROCm's device, and `xpu`, `hpu`, `cpu` are
#: platforms meshsat does not model as such.
DEVICE_PLATFORMS: dict[str, str] = {"npu": "npu"}

#: The Ascend runtime's (CANN) list of the devices a process sees. CANN reads logical
#: device IDs separated by commas up to the first character or ID it cannot read, and the
#: process then has exactly those devices, numbered from 0 (CANN environment variable
#: reference, ASCEND_RT_VISIBLE_DEVICES:
#: https://www.hiascend.com/document/detail/en/canncommercial/850/maintenref/envvar/envref_07_0028.html).
#: `CUDA_VISIBLE_DEVICES` is not read: it would change the verdict of CUDA launches that
#: set it per worker (srt-slurm's `CUDA_VISIBLE_DEVICES=0,1` for TP 2 on an 8-GPU node).
VISIBLE_DEVICES_ENV = "ASCEND_RT_VISIBLE_DEVICES"

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
