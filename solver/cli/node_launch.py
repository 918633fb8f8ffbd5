"""How a layout that `plan` ranks is launched on nodes, and which layouts survive that launch.

Why: `plan` enumerates layouts as one engine on `--gpus` GPUs, but more GPUs than one node
holds are launched as `--nnodes` pods (`--emit lws`), and SGLang judges the launch, not
the layout. Most rules do not care; some do: plain data parallelism (dp_size > 1 without
DP attention) is refused across nodes (TOPO-MULTINODE-DP, SGLang's check_server_args),
and other rules read --nnodes (DeepEP v2's NVLink-only direct mode, the per-node rank
count). So the launch form is decided here, once, and `plan` (both rankings) keeps only
the layouts whose launch validates, with the same pack; `--emit lws` writes that launch.

The launch form (docs/k8s.md):

- the layout fits one node: one pod, as printed (single-node behaviour is unchanged);
- plain DP replicas that together span nodes: one server per replica (`--dp-size`
  dropped), each an LWS group (`replicas:` = dp_size) of as few pods as hold it: this is
  how SGLang runs plain DP across nodes (independent servers behind a router, e.g.
  sglang-router with Kubernetes service discovery);
- anything else (dp 1, or DP attention): one engine over `nnodes` pods.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from meshsat.solver.lang.config import Config
from meshsat.solver.lang.model_spec import ModelSpec
from meshsat.solver.memory.gpus import Gpu
from meshsat.solver.validation.validate import validate

#: Fields the LeaderWorkerSet fills in per pod (`meshsat.solver.inputs.k8s.lws_manifest`,
#: with --dist-init-addr).
NODE_FIELDS = ("nnodes", "node_rank")


@dataclass(frozen=True)
class NodeLaunch:
    """`replicas` independent SGLang servers, each on `nodes` pods of `gpus_per_pod` GPUs."""

    replicas: int
    nodes: int
    gpus_per_pod: int

    @property
    def split(self) -> bool:
        """Each DP replica is its own server (its command runs with dp_size 1)."""
        return self.replicas > 1


def node_size(g: Gpu, gpus: int, gpus_per_node: int | None) -> int:
    """GPUs per node of a launch: `--gpus-per-node`, else one host's (`Gpu.host_gpus`: 4 on
    a GB200/GB300 tray, whose NVLink domain spans 72; 8 on a PCIe L40S server, whose
    fabric is one GPU), at most `gpus`."""
    return gpus_per_node or min(g.host_gpus, gpus) or 1


def fabric_size(g: Gpu, gpus: int, gpus_per_node: int | None) -> int:
    """GPUs one scale-up domain joins, for where traffic crosses it (`plan`'s
    `node_crossing_gpus`): `--gpus-per-node`, else the GPU's fabric, at most `gpus`."""
    return gpus_per_node or min(g.fabric, gpus) or 1


def node_launch(gpus: int, gpus_per_node: int, dp_size: int, dp_attention: bool) -> NodeLaunch:
    """The launch of a layout of `gpus` GPUs with SGLang's resolved dp_size and DP-attention
    flag on nodes of `gpus_per_node`: each server on the fewest pods of equal GPU count
    (whole nodes when it fills them)."""
    per_node = min(gpus_per_node, gpus)
    if gpus <= per_node:
        return NodeLaunch(1, 1, gpus)
    replicas = dp_size if dp_size > 1 and not dp_attention else 1
    world = gpus // replicas
    nodes = -(-world // per_node)
    while world % nodes:  # equal pods: SGLang gives every node tp·pp/nnodes ranks
        nodes += 1
    return NodeLaunch(replicas, nodes, world // nodes)


def packs(form: NodeLaunch, gpus: int, gpus_per_node: int) -> bool:
    """Whether the launch's pods fit the hosts `gpus` GPUs are, whole pods per host: two
    servers of two 3-GPU pods each need four GB200 trays, and 12 GPUs are three (one pod
    would stay Pending, and on bare metal the second server has no host of its own)."""
    hosts = -(-gpus // gpus_per_node)
    per_host = gpus_per_node // form.gpus_per_pod
    return form.replicas * form.nodes <= hosts * per_host


def launched_values(values: Mapping[str, Any], form: NodeLaunch) -> dict[str, Any]:
    """One server's fields as it will be launched: its own dp_size and --nnodes."""
    out = {k: v for k, v in values.items() if k not in NODE_FIELDS}
    if form.split:
        out["dp_size"] = 1
    if form.nodes > 1:
        out["nnodes"] = form.nodes
    return out


class _Layout(Protocol):
    @property
    def values(self) -> Mapping[str, Any]: ...
    @property
    def config(self) -> Mapping[str, Any]: ...
    @property
    def derived(self) -> Mapping[str, Any]: ...


L = TypeVar("L", bound=_Layout)


@dataclass
class LaunchCheck:
    """Whether a layout's launch (`node_launch`) is one SGLang accepts, judged by the same
    rules (`validate`, no Z3) as `meshsat validate` judges the emitted manifest; layouts
    within one node pass untouched. `gpus`: what every layout fills, or None for each
    layout's own `gpus_used` (`plan --disagg`'s roles, enumerated up to a count). About
    40 µs a layout that spans nodes, so `plan` asks only for its top rows (`--rank kv`) or
    one member of each estimated shape (`rank_layouts`' `keep`)."""

    gpus: int | None
    gpus_per_node: int
    model: ModelSpec
    given: Mapping[str, Any]
    sglang_version: str | None
    #: Refuse a layout whose launch splits into separate servers (plain DP replicas across
    #: nodes): `plan --disagg` counts servers as workers, so its `tp4 dp5` over five hosts
    #: is its `5 x tp4`, listed twice and launched as neither its command nor its router
    #: (one URL for five servers) say.
    whole: bool = False
    _verdicts: dict[tuple[Any, ...], bool] = field(default_factory=dict)

    def __call__(self, lay: _Layout) -> bool:
        return self.ok(lay.values, lay.config, lay.derived)

    def ok(
        self, values: Mapping[str, Any], config: Mapping[str, Any], derived: Mapping[str, Any]
    ) -> bool:
        """The same verdict from a layout's parts (`rank_layouts`' `keep`)."""
        n = self.gpus if self.gpus is not None else int(derived["gpus_used"])
        if n <= self.gpus_per_node:
            return True
        dp, dpa = int(config["dp_size"]), bool(config["enable_dp_attention"])
        form = node_launch(n, self.gpus_per_node, dp, dpa)
        if (self.whole and form.split) or not packs(form, n, self.gpus_per_node):
            return False
        values = launched_values({**self.given, **values}, form)
        key = (n, *sorted(values.items(), key=lambda kv: kv[0]))
        verdict = self._verdicts.get(key)
        if verdict is None:
            launched = Config.model_validate({**values, "gpus_per_node": form.gpus_per_pod})
            report = validate(
                launched, self.model, explain=False, sglang_version=self.sglang_version
            )
            verdict = self._verdicts[key] = report.valid
        return verdict


def launchable(
    layouts: Iterable[L],
    gpus: int | None,
    gpus_per_node: int,
    *,
    model: ModelSpec,
    given: Mapping[str, Any],
    sglang_version: str | None,
) -> Iterator[L]:
    """The layouts whose launch SGLang accepts (`LaunchCheck`)."""
    check = LaunchCheck(gpus, gpus_per_node, model, given, sglang_version)
    return (lay for lay in layouts if check(lay))
