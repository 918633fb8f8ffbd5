"""The user's features, for the second tier of `fix`'s objective, declared once.

A feature is something an operator switches on as a whole (DP attention, prefill CP, an
all-to-all backend, ...): turning one on or off changes what the server does, while a size
change only reshapes it. So `fix` keeps the user's feature set before it counts changed
fields: a feature the user did not turn on stays off, and one they turned on stays on with
a width that makes it do something (DP attention with dp >= 2, prefill CP with attention
CP >= 2; attention CP, which prefill CP implies). Each feature is two rule-language
expressions, so the Z3 search and the Python check read the same definition:

- `on`: the user turned it on (the flag, or a width above 1 for width-enabled features),
  over the user's raw values;
- `works`: it is on and does something. A width that makes it work is the one SGLang runs
  (resolved), not the one typed: without `--attn-cp-size`, SGLang runs DeepSeek V3.2's
  and MLA models' prefill CP over the whole attention-TP group (R-CP-DSA, R-CP-MLA), so
  `--cp-strategy interleave` alone keeps CP at 8 on tp 8. Read as typed (1), that fix
  turned prefill CP off, and the fix typed `--attn-cp-size 2` as well: CP 8 -> 2.

Legacy flags are read off the declarations (a boolean field whose help says "Legacy" or
"Deprecated"), so a legacy alias added to `Config` is a feature without an edit here; so is
every other on/off flag (`--enable-two-batch-overlap`, `--disable-cuda-graph`, ...) that no
feature above reads.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

from meshsat.solver.backends.pyeval import PyCompiler
from meshsat.solver.lang.config import A2A_BACKENDS
from meshsat.solver.lang.expr import Expr, fields_of, is_set
from meshsat.solver.lang.fields import CONFIG_SPECS, F


@dataclass(frozen=True)
class Feature:
    """One switch of the user's feature set (see the module docstring)."""

    name: str
    #: In words, for "no layout keeps ... on/off".
    label: str
    on: Expr
    works: Expr
    #: The width that makes it work, in words ("" when `works` is `on`).
    width: str = ""
    #: Whether an off feature must stay off. False for a choice among alternatives whose
    #: turning on a broader feature already counts (which all-to-all backend): once made
    #: it is kept, but making it costs nothing more, so picking a backend weighs one
    #: feature like DP attention or attention CP, not two.
    off_binds: bool = True
    #: With `off_binds` False: the feature whose being on in the input makes this one bind
    #: after all. Swapping the all-to-all backend the user chose for another turns theirs
    #: off and another on, two features, where switching DP attention on is one (pplx
    #: without DP attention: `--moe-runner-backend megamoe`, the alias that swaps pplx for
    #: MegaMoE, lost to DP attention only on the count of fields).
    binds_after: str = ""
    #: Off in the input stays off whatever it costs (a hard constraint, not a tier): it
    #: changes which job the server belongs to, so no layout of this job is bought with
    #: it; fix then gives up the GPU count, or finds no fix, rather than turn it on.
    hard: bool = False

    def kept_words(self, was_on: bool) -> str:
        """What keeping it means: "DP attention on with dp >= 2", "DWDP off"."""
        if not was_on:
            return f"{self.label} off"
        return f"{self.label} on" + (f" with {self.width}" if self.width else "")


def _legacy_flags() -> tuple[Feature, ...]:
    out = []
    for name, spec in CONFIG_SPECS.items():
        legacy = spec.help.startswith(("Legacy", "Deprecated"))
        if legacy and spec.kind == "bool" and not spec.tool_only:
            flag = getattr(F, name).as_raw
            out.append(Feature(name, f"the legacy flag {spec.flags[0]}", flag, flag))
    return tuple(out)


def _features() -> tuple[Feature, ...]:
    # Two spellings of one feature: the flag, or SGLang 0.5.23's width `--attn-dp-size`.
    attn_dp_size = F.attn_dp_size.as_raw
    dp_attention = F.enable_dp_attention.as_raw | (attn_dp_size > 1)
    # Three spellings: --enable-prefill-cp and its legacy aliases (R-LEGACY-CP), which turn
    # it on too; read as one flag each, a legacy alias let a fix switch prefill CP (and
    # what SGLang sets with it) on for the price of one odd feature.
    prefill_cp = (
        F.enable_prefill_cp.as_raw
        | F.enable_prefill_context_parallel.as_raw
        | F.enable_dsa_prefill_context_parallel.as_raw
    )
    # Joining a running elastic-EP job: the mode, or the deprecated rejoin flag.
    join = is_set(F.ep_join_mode.as_raw) | F.elastic_ep_rejoin.as_raw
    # Two spellings again: --moe-runner-backend megamoe is an alias of the MegaMoE
    # all-to-all backend (R-MEGAMOE-ALIAS).
    a2a = (F.moe_a2a_backend.as_raw != "none") | (F.moe_runner_backend.as_raw == "megamoe")
    chunk = F.chunked_prefill_size.as_raw
    chunked = ~is_set(chunk) | (chunk > 0)
    speculative = is_set(F.speculative_algorithm.as_raw)
    return (
        Feature(
            "dp_attention",
            "DP attention",
            dp_attention,
            dp_attention & ((F.dp_size.as_raw != 1) | (attn_dp_size > 1)),
            "dp >= 2",
        ),
        # Works at the attention CP SGLang runs (the module docstring).
        Feature(
            "prefill_cp",
            "prefill CP",
            prefill_cp,
            prefill_cp & (F.attn_cp_size != 1),
            "attention CP >= 2",
        ),
        # Attention CP carves CP groups out of attention TP whether or not prefill CP is
        # on; prefill CP needs it, so the user's prefill CP also asks for it.
        Feature(
            "attention_cp",
            "attention CP",
            (F.attn_cp_size.as_raw != 1) | prefill_cp,
            F.attn_cp_size != 1,
            "attention CP >= 2",
        ),
        Feature("decode_cp", "decode CP", F.dcp_size.as_raw != 1, F.dcp_size.as_raw != 1),
        Feature(
            "a2a_backend",
            "an MoE all-to-all backend",
            a2a,
            a2a,
        ),
        Feature("eplb", "EPLB", F.enable_eplb.as_raw, F.enable_eplb.as_raw),
        Feature("dwdp", "DWDP", F.dwdp_size.as_raw != 1, F.dwdp_size.as_raw != 1),
        Feature(
            "elastic_ep",
            "elastic EP",
            is_set(F.elastic_ep_backend.as_raw),
            is_set(F.elastic_ep_backend.as_raw),
        ),
        # Joining a running elastic-EP job is what a node is started for, not a width: a
        # fix that made a server a joiner (its nodes then escape TOPO-NNODES) would fit a
        # layout onto nodes it does not divide. As a soft tier it still won over the GPU
        # count (tp 3 on two pinned nodes became a joiner of 3 GPUs, not tp 2 or 4), so it
        # binds (`Feature.hard`).
        Feature(
            "ep_join",
            "an elastic-EP join",
            join,
            join,
            hard=True,
        ),
        Feature("pp", "pipeline parallelism", F.pp_size.as_raw != 1, F.pp_size.as_raw != 1),
        # Chunked prefill is on unless --chunked-prefill-size is 0 or below: a fix that
        # repaired A2A-PPLX-DISPATCH by switching it off said "features kept".
        Feature("chunked_prefill", "chunked prefill", chunked, chunked),
        # Speculative decoding: switching it off repaired TOPO-PP-SPEC as "features kept".
        Feature("speculative", "speculative decoding", speculative, speculative),
        # A multi-node launch stays one: the nodes are the machines the user has.
        Feature("multi_node", "a multi-node launch", F.nnodes.as_raw != 1, F.nnodes.as_raw != 1),
        *_roles(),
        *_chosen_backends(),
        *_legacy_flags(),
    )


def _switches(features: tuple[Feature, ...]) -> tuple[Feature, ...]:
    """Every other on/off flag of SGLang's an operator turns on as a whole (two-batch
    overlap, the LM head across DP, LoRA, CUDA graphs off, ...), one feature each: a fix
    that repaired TOPO-TBO-DP-ATTN by turning `--enable-two-batch-overlap` off said
    "features kept". Read off the declarations, as the legacy flags are, so a switch added
    to `Config` is kept without an edit here; a field one of `features` reads already
    (`--enable-dp-attention`) is that feature's, and a tool fact is no flag of SGLang's."""
    covered = {name for f in features for name in (*fields_of(f.on), *fields_of(f.works))}
    out = []
    for name, spec in CONFIG_SPECS.items():
        if spec.kind == "bool" and not spec.tool_only and spec.flags and name not in covered:
            flag = getattr(F, name).as_raw
            out.append(Feature(name, spec.flags[0], flag, flag))
    return tuple(out)


def _roles() -> tuple[Feature, ...]:
    """A PD-disaggregation role is the server's job in its deployment: a fix keeps it. Being
    in a PD deployment and the role in it are two features, so leaving it (or swapping the
    role) weighs more than dropping a feature of the server itself (DWDP, EPLB)."""
    role = F.disaggregation_mode.as_raw
    pd = Feature("pd", "PD disaggregation", role != "null", role != "null")
    return (
        pd,
        *(
            Feature(f"pd_{mode}", f"the PD {mode} role", role == mode, role == mode)
            for mode in ("prefill", "decode")
        ),
    )


def _chosen_backends() -> tuple[Feature, ...]:
    """Each all-to-all backend the user chose is kept: swapping it for another (also through
    an alias, `--moe-runner-backend megamoe`) changes what the server runs."""
    a2a, alias = F.moe_a2a_backend.as_raw, F.moe_runner_backend.as_raw == "megamoe"
    out = []
    for backend in A2A_BACKENDS:
        if backend == "none":
            continue
        chosen = (a2a == backend) | alias if backend == "megamoe" else (a2a == backend) & ~alias
        # DWDP resets the all-to-all backend to none (R-DWDP): the chosen one no longer runs.
        works = chosen & (F.dwdp_size.as_raw == 1)
        out.append(
            Feature(
                f"a2a_{backend}",
                f"the {backend} all-to-all backend",
                chosen,
                works,
                off_binds=False,
                binds_after="a2a_backend",
            )
        )
    return tuple(out)


def _chosen_kernels() -> tuple[Feature, ...]:
    """The weight quantization and the MoE runner are what the server computes with, not a
    layout: a fix that repaired MOE-CUTLASS-EP by adding `--quantization mxfp8` to a 16-bit
    Qwen3-30B-A3B said "features kept" where the operator sets `--ep 8`. Each quantization
    is a feature (switching one on where the input had none is one, swapping it two); the
    MoE runner you chose is kept once chosen (`off_binds` False: picking one where the
    input left `auto` is a field change, as before; megamoe is the all-to-all backend's),
    and kept running: `--quantization mxfp8` swaps most runners for flashinfer_trtllm
    (R-MXFP8-RUNNER), which repaired every LoRA runner check by dropping the runner."""
    quant, runner = F.quantization.as_raw, F.moe_runner_backend.as_raw
    out = [
        Feature(f"quantization_{q}", f"--quantization {q}", quant == q, quant == q)
        for q in CONFIG_SPECS["quantization"].choices
        if q is not None
    ]
    out += [
        Feature(
            f"moe_runner_{r}",
            f"the {r} MoE runner",
            runner == r,
            (runner == r) & (F.moe_runner_backend == r),
            off_binds=False,
        )
        for r in CONFIG_SPECS["moe_runner_backend"].choices
        if r not in ("auto", "megamoe")
    ]
    return tuple(out)


#: Every feature, in a fixed order.
FEATURES: tuple[Feature, ...] = (*_features(), *_switches(_features()), *_chosen_kernels())


Values = Mapping[str, Any]


@cache
def _compiled(index: int, which: str) -> Callable[[Values, Values], bool]:
    """`feature(raw, resolved)`: the feature's `on` or `works` over both environments."""
    c = PyCompiler()
    code = c.code(getattr(FEATURES[index], which))
    lines = [f"    u_{n} = u[{n!r}]" for n in c.raw_reads]
    lines += [f"    v_{n} = v[{n!r}]" for n in c.reads]
    src = "\n".join(["def feature(u, v):", *lines, f"    return bool({code})"])
    scope: dict[str, Any] = {}
    exec(compile(src, f"<feature {FEATURES[index].name}>", "exec"), scope)
    fn: Callable[[Values, Values], bool] = scope["feature"]
    return fn


def _on_reads_raw_only() -> None:
    """`on` is what the user typed: `turned_on` has raw values only."""
    for f in FEATURES:
        resolved = fields_of(f.on, raw=False)
        if resolved:
            raise AssertionError(f"feature {f.name}: `on` reads resolved {resolved}")


_on_reads_raw_only()


def turned_on(values: Values) -> tuple[bool, ...]:
    """Per feature: did the user turn it on in these raw values."""
    return tuple(_compiled(i, "on")(values, values) for i in range(len(FEATURES)))


def binding(was_on: tuple[bool, ...]) -> tuple[bool, ...]:
    """Per feature, given which the input has on: does keeping it count (on ones always;
    off ones that bind, `Feature.off_binds` and `Feature.binds_after`)."""
    on = dict(zip((f.name for f in FEATURES), was_on, strict=True))
    return tuple(
        w or f.off_binds or bool(f.binds_after and on[f.binds_after])
        for f, w in zip(FEATURES, was_on, strict=True)
    )


def toggled(old: Values, new: Values, resolved: Values | None = None) -> tuple[Feature, ...]:
    """The features `new` does not keep: off ones turned on, on ones off or doing nothing.
    `resolved`: `new` as SGLang runs it (a `Report`'s `resolved_env`), which `works`
    reads; without it, the typed values stand in (exact only where SGLang changes none of
    the widths `works` reads)."""
    out = []
    was = turned_on(old)
    binds = binding(was)
    ran = new if resolved is None else resolved
    for i, (feature, was_on) in enumerate(zip(FEATURES, was, strict=True)):
        if not binds[i]:
            continue
        if was_on != _compiled(i, "works" if was_on else "on")(new, ran):
            out.append(feature)
    return tuple(out)


def states(values: Values, resolved: Values | None = None) -> tuple[tuple[bool, bool], ...]:
    """Per feature: (on, works) in these raw values (`works` over `resolved`, as in
    `toggled`), for callers that compare in bulk."""
    ran = values if resolved is None else resolved
    return tuple(
        (_compiled(i, "on")(values, ran), _compiled(i, "works")(values, ran))
        for i in range(len(FEATURES))
    )
