"""The layouts an autotuner may try: every legal layout of a model on N GPUs that fits.

Autotuners sample from a search space. A space of independent sizes (tp, dp, ep, ... each
over its own range) samples mostly layouts SGLang rejects; a space whose choices change from
trial to trial makes Optuna's TPE fall back to independent sampling. So the space is the
enumerated set itself (`enumerate` under the pack's rules, then the memory model's fit), in
a fixed order, with two views samplers can use without ever proposing an illegal layout:

- `keys`: one categorical over whole layouts (its choices never change);
- `choices(prefix)`: a tree over the varied fields in `order`: the values the next field
  takes among the layouts that share the prefix, with `leaves_under(prefix)` the layouts
  below it. A define-by-run sampler walks it one field at a time, choosing in proportion to
  those counts (`optuna_space`'s `coordinates`; a choice uniform per level would make the
  layouts under crowded prefixes rare).

Each layout carries a score for ranking today (the memory model's KV-cache tokens of the
whole deployment, what `meshsat plan` ranks by) and a `prior`, None until an estimator is
attached with `with_prior` (the performance estimator's throughput, when it exists). The
optuna and Ray views live in `meshsat.solver.tune.optuna_space` / `ray_space`; this module
imports neither.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from types import MappingProxyType
from typing import Any, Protocol

from meshsat.solver.enumeration.layouts import Layout, enumerate_layouts
from meshsat.solver.errors import InputError
from meshsat.solver.inputs.command import launch_command, model_path_of
from meshsat.solver.lang.config import Config
from meshsat.solver.lang.model_spec import ModelSpec
from meshsat.solver.memory import MemoryModel
from meshsat.solver.memory.gpus import Gpu, custom_gpu, gpu, typed_fields
from meshsat.solver.memory.models import model_config
from meshsat.solver.packs import get_pack

#: Order of the tree's levels (the `coordinates` view's parameters): the widths that decide
#: the most first, so that an early choice prunes the most and TPE learns the most from it.
TREE_ORDER: tuple[str, ...] = (
    "tp_size",
    "enable_dp_attention",
    "dp_size",
    "ep_size",
    "pp_size",
    "attn_cp_size",
    "moe_dp_size",
    "dcp_size",
    "enable_prefill_cp",
    "cp_strategy",
)
#: What a layout's key shows for a field (short, as the command line spells the idea).
_SHORT = {
    "tp_size": "tp",
    "pp_size": "pp",
    "dp_size": "dp",
    "attn_cp_size": "cp",
    "moe_dp_size": "moe_dp",
    "ep_size": "ep",
    "dcp_size": "dcp",
    "enable_dp_attention": "dpa",
    "enable_prefill_cp": "pcp",
    "cp_strategy": "cp_strategy",
}


class _Estimate(Protocol):
    @property
    def tokens_per_s_gpu(self) -> float: ...
    @property
    def meets_sla(self) -> bool: ...


class Estimator(Protocol):
    """What `with_estimates` reads from an estimator (`PerfModel` has it); a protocol, so
    this module does not import the estimator."""

    def of(self, resolved: Mapping[str, Any], derived: Mapping[str, Any]) -> _Estimate: ...


@dataclass(frozen=True)
class Candidate:
    """One legal layout that fits: its launch values, its key, its score and prior."""

    key: str
    #: The varied fields as SGLang is launched with them (resolution leaves them unchanged).
    values: Mapping[str, Any]
    #: Derived widths (attn_tp, attn_dp, moe_tp, gpus_used, ...).
    derived: Mapping[str, Any]
    #: Every config field after SGLang's resolution (what estimators read).
    config: Mapping[str, Any]
    #: Today's ranking: KV-cache tokens of the whole deployment (all pools).
    kv_tokens: int
    weights_gib: float
    #: The SGLang command that launches it, in the release's spelling: the model path and
    #: the enumerated values, not SGLang's resolution of them (no flag at its default),
    #: as `plan` prints it.
    command: str
    #: An estimator's figure for this layout (higher is better), once attached.
    prior: float | None = None

    @property
    def score(self) -> float:
        """What a study maximises by default: the prior when attached, else KV tokens."""
        return float(self.kv_tokens if self.prior is None else self.prior)


def layout_key(values: Mapping[str, Any], order: Iterable[str] = TREE_ORDER) -> str:
    """A stable, readable name for one layout: `tp=8 dpa=1 dp=4 ep=8 ...`."""
    parts = []
    for name in order:
        if name not in values:
            continue
        v = values[name]
        text = str(int(v)) if isinstance(v, bool) else str(v)
        parts.append(f"{_SHORT.get(name, name)}={text}")
    return " ".join(parts)


@dataclass(frozen=True)
class LayoutSpace:
    """Every legal, fitting layout of one (model, GPU, N, filters, release), in a fixed
    order (best score first, then key: the prior once attached, else KV tokens), with the
    tree (`choices`, `leaves_under`); `optuna_space` adds the sampler views."""

    gpus: int
    model: str
    gpu: str
    where: tuple[str, ...]
    sglang_version: str
    #: The tree's order: the varied fields that take more than one value in the space.
    order: tuple[str, ...]
    candidates: tuple[Candidate, ...]
    _index: Mapping[str, int] = field(repr=False, compare=False)

    @property
    def keys(self) -> tuple[str, ...]:
        return tuple(c.key for c in self.candidates)

    def __len__(self) -> int:
        return len(self.candidates)

    def get(self, key: str) -> Candidate | None:
        i = self._index.get(key)
        return None if i is None else self.candidates[i]

    def find(self, values: Mapping[str, Any]) -> Candidate | None:
        """The candidate with these launch values, or None (illegal, does not fit, or
        filtered out)."""
        hit = self.get(layout_key(values, self.order))
        if hit is None or any(hit.values.get(k, v) != v for k, v in values.items()):
            return None
        return hit

    @property
    def best(self) -> Candidate:
        """The layout with the highest score (the first: candidates are in score order)."""
        return self.candidates[0]

    @cached_property
    def _tree(self) -> Mapping[tuple[Any, ...], tuple[Any, ...]]:
        tree: dict[tuple[Any, ...], dict[Any, None]] = {}
        for c in self.candidates:
            path = tuple(c.values[n] for n in self.order)
            for depth in range(len(path)):
                tree.setdefault(path[:depth], {})[path[depth]] = None
        return MappingProxyType({k: tuple(sorted(v, key=_order_key)) for k, v in tree.items()})

    @cached_property
    def _leaves(self) -> Mapping[tuple[Any, ...], int]:
        counts: dict[tuple[Any, ...], int] = {}
        for c in self.candidates:
            path = tuple(c.values[n] for n in self.order)
            for depth in range(len(path) + 1):
                counts[path[:depth]] = counts.get(path[:depth], 0) + 1
        return MappingProxyType(counts)

    def leaves_under(self, prefix: tuple[Any, ...]) -> int:
        """How many layouts start with `prefix`."""
        return self._leaves.get(prefix, 0)

    def choices(self, prefix: tuple[Any, ...]) -> tuple[Any, ...]:
        """The values `order[len(prefix)]` takes among the layouts that start with
        `prefix` (values of `order[:len(prefix)]`); empty past the last field."""
        return self._tree.get(prefix, ())

    def leaf(self, path: tuple[Any, ...]) -> Candidate:
        """The candidate at the end of a full path through the tree."""
        hit = self.find(dict(zip(self.order, path, strict=True)))
        if hit is None:
            raise InputError(f"no layout at {dict(zip(self.order, path, strict=False))}")
        return hit

    def with_prior(self, estimate: Callable[[Candidate], float]) -> LayoutSpace:
        """The same space with each layout's `prior` set by `estimate`; studies then
        maximise the prior."""
        return _ordered(self, [replace(c, prior=float(estimate(c))) for c in self.candidates])

    def with_estimates(self, perf: Estimator) -> LayoutSpace:
        """The prior from a performance estimator (`meshsat.solver.perf.PerfModel` for this
        space's model, GPU and release): output tokens/s per GPU at the best concurrency
        under its workload's SLA, 0 where the SLA cannot be met."""

        def per_gpu(c: Candidate) -> float:
            e = perf.of(c.config, c.derived)
            return float(e.tokens_per_s_gpu) if e.meets_sla else 0.0

        return self.with_prior(per_gpu)


def _order_key(value: Any) -> tuple[int, Any]:
    """Sort choices: None first, then by value (bools and ints numerically, text)."""
    if value is None:
        return (0, 0)
    if isinstance(value, bool | int):
        return (1, int(value))
    return (2, str(value))


def layout_space(
    gpus: int,
    model: str,
    gpu_name: str | None = None,
    *,
    gpu_memory: str | None = None,
    where: Iterable[str] = (),
    sglang_version: str | None = None,
    context_length: int = 4096,
) -> LayoutSpace:
    """Every legal layout of `model` (a config.json path or an embedded repo id) on exactly
    `gpus` GPUs of one type (`gpu_name`, or `gpu_memory` such as "80GiB") that loads the
    weights with SGLang's reserve and satisfies every `where` filter (as `meshsat
    enumerate --where`)."""
    if (gpu_name is None) == (gpu_memory is None):
        raise InputError("give exactly one of gpu_name or gpu_memory")
    g: Gpu = gpu(gpu_name) if gpu_name is not None else custom_gpu(str(gpu_memory))
    pack = get_pack(sglang_version)
    config = model_config(model)
    spec = ModelSpec.from_hf_config(config)
    mm = MemoryModel(config, g, context_length=context_length)
    filters = tuple(where)
    found: list[tuple[Layout, int, float]] = []
    # The GPU class the rules read, as `validate --gpu` sets it.
    base = g.layout_fields
    for lay in enumerate_layouts(gpus, base=base, model=spec, where=filters, sglang_version=pack):
        m = mm.of_layout(lay.config, lay.derived, {**base, **lay.values})
        if m.fits:
            found.append((lay, m.max_total_num_tokens * m.pools, m.weights_gib))
    if not found:
        raise InputError(f"no legal layout of {model} on {gpus} x {g.name} fits")
    varied = found[0][0].vary
    order = tuple(
        n for n in TREE_ORDER if n in varied and len({lay.values[n] for lay, _, _ in found}) > 1
    )
    candidates = [
        Candidate(
            key=layout_key(lay.values, order),
            values=MappingProxyType(lay.values),
            derived=MappingProxyType(dict(lay.derived)),
            config=MappingProxyType(dict(lay.config)),
            kv_tokens=kv,
            weights_gib=round(w, 3),
            command=launch_command(
                Config.model_validate(typed_fields({**base, **lay.values})),
                pack,
                model_path=model_path_of(model),
            ),
        )
        for lay, kv, w in found
    ]
    space = LayoutSpace(
        gpus=gpus,
        model=model,
        gpu=g.name,
        where=filters,
        sglang_version=pack.version,
        order=order,
        candidates=(),
        _index=MappingProxyType({}),
    )
    return _ordered(space, candidates)


def _ordered(space: LayoutSpace, candidates: list[Candidate]) -> LayoutSpace:
    """The space holding `candidates`, best score first (ties by key): the order the
    `ranked` view's index follows."""
    candidates = sorted(candidates, key=lambda c: (-c.score, c.key))
    return replace(
        space,
        candidates=tuple(candidates),
        _index=MappingProxyType({c.key: i for i, c in enumerate(candidates)}),
    )
