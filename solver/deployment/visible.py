"""A launch whose visible-devices list is shorter than the GPU ids its ranks take.

Why: SGLang numbers a node's GPUs from `--base-gpu-id` with `--gpu-id-step`
(`meshsat.solver.placement`) and each scheduler calls `torch.cuda.set_device(gpu_id)`
(`torch.npu.set_device` on Ascend). Inside the process the GPUs are the ones
`CUDA_VISIBLE_DEVICES` (`ASCEND_RT_VISIBLE_DEVICES`) lists, renumbered from 0, so a rank
whose id is past the list's end has no device: `CUDA_VISIBLE_DEVICES=0,1` with `--tp 4`
starts two schedulers and the other two fail with "invalid device ordinal". Each server's
own rules cannot see this (the list is the launch's environment, not a flag), and the
deployment's machine rules (`hosts`) only read the ids that exist, so it is its own check,
on every launch of a single-server script and of every server of a deployment.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from meshsat.solver.deployment.hosts import ranges, visible_ids, visible_list
from meshsat.solver.deployment.reader import flag_text
from meshsat.solver.groups import Widths
from meshsat.solver.inputs.launch import LaunchCommand
from meshsat.solver.lang.config import Config
from meshsat.solver.placement import node_gpus
from meshsat.solver.validation.report import Violation

RULE = "JOB-VISIBLE-DEVICES"
_FAILS = {
    "npu": "torch.npu.set_device fails: no such device",
    "cuda": "CUDA error: invalid device ordinal",
}


def _node(command: LaunchCommand) -> int:
    """The node a launch is (its `--node-rank`; 0 when it gives none or a shell value)."""
    text = flag_text(command, "--node-rank")
    return int(text) if text is not None and text.isdigit() else 0


@dataclass(frozen=True)
class ShortList:
    """A launch whose visible-devices list misses GPU ids its node's ranks take."""

    command: LaunchCommand
    #: The variable and the ids it lists.
    name: str
    ids: tuple[int, ...]
    #: The local GPU ids the node's ranks take.
    local: tuple[int, ...]
    platform: str

    @property
    def beyond(self) -> tuple[int, ...]:
        """The local ids past the list's end."""
        return tuple(g for g in self.local if g >= len(self.ids))

    def violation(self) -> Violation:
        line, name = self.command.line, self.name
        seen = f"{len(self.ids)} device(s)" if self.ids else "no device"
        return Violation(
            RULE,
            f"the node launched on line {line} sees {seen} ({name}="
            f"{','.join(map(str, self.ids))}) but its ranks take local GPU(s) "
            f"{ranges(self.local)}: the rank(s) on GPU {ranges(self.beyond)} fail at start-up "
            f"({_FAILS.get(self.platform, _FAILS['cuda'])})",
            ("tp_size", "pp_size", "nnodes", "base_gpu_id", "gpu_id_step"),
            f"line {line}",
            f"list at least {max(self.local) + 1} devices in {name}, or give the node fewer "
            "ranks (tp_size x pp_size / nnodes) or a lower --base-gpu-id/--gpu-id-step",
            "sglang/srt/managers/scheduler.py: each rank calls set_device(gpu_id); the "
            f"runtime numbers the devices {name} lists from 0",
        )


def short_lists(
    commands: Iterable[LaunchCommand], resolved: Mapping[str, Any], release: str | None
) -> list[ShortList]:
    """The launches (nodes of the job `resolved` describes) whose visible-devices list
    does not reach every local GPU id their ranks take. None listed when the list is a
    shell expansion or names devices by UUID (not known here), or when the layout is one
    SGLang refuses before it places ranks."""
    platform = str(resolved.get("platform") or "cuda")
    listed = []
    for command in commands:
        name, given = visible_list(command, platform)
        ids = visible_ids(given) if given is not None else None
        if ids is not None:
            listed.append((command, name, ids))
    if not listed:  # most launches: no placement is computed (a million ranks cost seconds)
        return []
    try:
        widths = Widths.of(resolved, release)
    except ValueError:
        return []
    out: list[ShortList] = []
    for command, name, ids in listed:
        short = ShortList(
            command, name, ids, tuple(sorted(node_gpus(widths.job, _node(command)))), platform
        )
        if short.beyond:
            out.append(short)
    return out


def visible_violations(
    commands: Iterable[LaunchCommand], resolved: Mapping[str, Any], release: str | None
) -> list[Violation]:
    """One error per launch `short_lists` finds."""
    return [s.violation() for s in short_lists(commands, resolved, release)]


def fit_to_list(
    config: Config, commands: Iterable[LaunchCommand], release: str | None
) -> tuple[Config, int, ShortList] | None:
    """The layout and GPU count `fix` searches for a job whose launch lists too few devices
    (None when every list holds its ranks, or the list is empty: nothing to fit to). The
    list is where the operator placed the server, the widths are what does not fit it:
    the list's length becomes the node's size (a fact, not a flag to print), which
    TOPO-GPU-ID-RANGE holds a `--base-gpu-id`/`--gpu-id-step` to, and each node gets as
    many GPUs as the list holds or the ranks it had, whichever is fewer, so that any
    placement of that many the rules accept lies within the list."""
    short = short_lists(commands, config.model_dump(), release)
    if not short or not short[0].ids:
        return None
    listed = len(short[0].ids)
    fitted = config.model_copy(update={"gpus_per_node": listed})
    fitted.model_fields_set.discard("gpus_per_node")  # read from the list, not given
    return fitted, min(len(short[0].local), listed) * fitted.nnodes, short[0]
