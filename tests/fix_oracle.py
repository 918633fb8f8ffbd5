"""A brute-force nearest valid layout, written independently of `meshsat.solver.repair`.

It is the oracle of the optimality tests, so it stays simple: a depth-first walk over the
product of candidate values (sizes: every divisor of the bound; flags and choices: every
value), which skips a branch only when a lower bound of the objective of what is already
chosen cannot beat the limit any more. Every complete candidate that beats the limit is
checked with `meshsat.solver.validate`.

The objective is re-derived from its definition in the `meshsat.solver.repair.fix` docstring, a
tuple compared lexicographically:
1. 1 if the GPU count differs from the input's, else 0;
2. how many of the user's features the candidate does not keep: a feature off in the input
   and on in the candidate, or on in the input and, in the candidate, off or on at a width
   that does nothing (DP attention at dp 1, prefill CP at attention CP 1: the attention CP
   SGLang runs, which only an MLA or DSA model's resolution makes other than the typed
   one, and the oracle's layouts have no model, so it reads the typed one). Written here from
   the issue's list: DP attention, prefill CP, attention CP (on when attention CP > 1 or
   prefill CP is on, working at attention CP > 1), decode CP (dcp > 1), an all-to-all backend,
   EPLB, pipeline parallelism, and each other on/off flag (the DP LM head, aiter
   all-reduce fusion, two-batch overlap, ...; the others are never varied here, so never
   toggled).
   Prefill CP is on through its legacy aliases too. Which all-to-all backend was chosen
   is kept once chosen, but choosing one where none was is counted once, as "an
   all-to-all backend"; swapping the chosen one for another is two (it off, another on);
3. changed fields the user set; 4. other changed fields (every field counts one);
5. the size change: sum of |mbits(new) - mbits(old)| with mbits(x) = sum over prime factors
   p of x (with multiplicity) of round(1000*log2 p).
Objective "distance" moves 5 before 3 and 4. Each component only grows down the walk (the
GPU count and a feature are counted once all their fields are chosen), so the prefix's
tuple is a lower bound of every completion's, component by component, hence also
lexicographically.

The walk also skips a branch that is already invalid: a rule (or the GPU count) is
checked at the first depth where every field it can read is chosen, where it can read a
field when the rule's tree reads it or reads a field that a resolution step (whose tree
reads it, and so on) may set. The check is `meshsat.solver`'s own decision procedure run
earlier, on a prefix whose later fields cannot change its answer; every complete candidate
is still decided by the full procedure and `validate`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping
from functools import cache
from typing import Any

from meshsat.solver import validate
from meshsat.solver.backends.pyeval import compiled
from meshsat.solver.lang.config import A2A_BACKENDS, Config
from meshsat.solver.lang.derived import gpus_used as GPUS_USED
from meshsat.solver.lang.expr import Expr, fields_of
from meshsat.solver.lang.fields import SPECS
from meshsat.solver.lang.model_spec import ModelSpec
from meshsat.solver.packs import NEWEST, SEED, Pack
from meshsat.solver.validation.validate import environment

#: The rules the oracle is written for: the seed release's (it does not model 0.5.23's
#: second spelling of DP attention, `--attn-dp-size`); the tests run `fix` on the same pack.
PACK = SEED

#: The fields the oracle varies; the rest keep the input's values.
SIZES = ("tp_size", "pp_size", "dp_size", "attn_cp_size", "dcp_size", "ep_size", "moe_dp_size")
CHOICES: dict[str, tuple[Any, ...]] = {
    "enable_dp_attention": (False, True),
    "enable_dp_lm_head": (False, True),
    "enable_prefill_cp": (False, True),
    "cp_strategy": (None, "zigzag", "interleave"),
    "enable_aiter_allreduce_fusion": (False, True),
    "dcp_comm_backend": (None, "ag_rs", "a2a", "fi_a2a"),  # None: unset, SGLang picks
    "moe_a2a_backend": ("none", "deepep", "flashinfer"),
    "enable_eplb": (False, True),
}


#: Indices of the rules a proposed layout keeps: SGLang's errors and meshsat's advice.
KEPT = frozenset(
    i for i, r in enumerate(PACK.rules) if r.severity == "error" or r.id in PACK.advice
)


def divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def mbits(x: int) -> int:
    total, p = 0, 2
    while x > 1:
        while x % p == 0:
            total += round(1000 * math.log2(p))
            x //= p
        p += 1
    return total


def _chosen(backend: str, runner: str) -> str:
    """The all-to-all backend a user chose, through the runner alias."""
    return "megamoe" if runner == "megamoe" else backend


def _is(value: str) -> Callable[[Any], bool]:
    return lambda v: v == value


#: The legacy spellings of --enable-prefill-cp (R-LEGACY-CP).
_LEGACY_CP = ("enable_prefill_context_parallel", "enable_dsa_prefill_context_parallel")

#: Per feature: the oracle's fields it reads, "on" and "works" over those values.
FEATURES: dict[str, tuple[tuple[str, ...], Callable[..., bool], Callable[..., bool]]] = {
    "dp_attention": (
        ("enable_dp_attention", "dp_size"),
        lambda on, dp: bool(on),
        lambda on, dp: bool(on) and dp >= 2,
    ),
    "prefill_cp": (
        ("enable_prefill_cp", *_LEGACY_CP, "attn_cp_size"),
        lambda on, legacy, dsa, cp: bool(on or legacy or dsa),
        lambda on, legacy, dsa, cp: bool(on or legacy or dsa) and cp >= 2,
    ),
    "attention_cp": (
        ("attn_cp_size", "enable_prefill_cp", *_LEGACY_CP),
        lambda cp, on, legacy, dsa: cp >= 2 or bool(on or legacy or dsa),
        lambda cp, on, legacy, dsa: cp >= 2,
    ),
    "decode_cp": (("dcp_size",), lambda d: d > 1, lambda d: d > 1),
    # --moe-runner-backend megamoe is the MegaMoE all-to-all backend's alias (R-MEGAMOE-ALIAS).
    "a2a": (
        ("moe_a2a_backend", "moe_runner_backend"),
        lambda b, r: b != "none" or r == "megamoe",
        lambda b, r: b != "none" or r == "megamoe",
    ),
    "eplb": (("enable_eplb",), bool, bool),
    "pp": (("pp_size",), lambda p: p > 1, lambda p: p > 1),
    # Fields the walk never varies: counted when a fix from `meshsat.solver.repair` changes them.
    "dwdp": (("dwdp_size",), lambda d: d > 1, lambda d: d > 1),
    "elastic_ep": (("elastic_ep_backend",), lambda b: b is not None, lambda b: b is not None),
    **{
        legacy: ((legacy,), bool, bool)
        for legacy in (
            "enable_prefill_context_parallel",
            "enable_dsa_prefill_context_parallel",
            "elastic_ep_rejoin",
        )
    },
    # Issue 23: a multi-node launch, the PD role, and the chosen all-to-all backend (which
    # DWDP resets to none) are the user's too.
    "multi_node": (("nnodes",), lambda n: n != 1, lambda n: n != 1),
    "pd": (("disaggregation_mode",), lambda m: m != "null", lambda m: m != "null"),
    **{
        f"pd_{role}": (("disaggregation_mode",), _is(role), _is(role))
        for role in ("prefill", "decode")
    },
    **{
        f"a2a_{backend}": (
            ("moe_a2a_backend", "dwdp_size", "moe_runner_backend"),
            lambda b, d, r, backend=backend: _chosen(b, r) == backend,
            lambda b, d, r, backend=backend: _chosen(b, r) == backend and d == 1,
        )
        for backend in A2A_BACKENDS
        if backend != "none"
    },
}


#: Every other on/off flag of SGLang's (two-batch overlap, the DP LM head, aiter all-reduce
#: fusion, CUDA graphs off, ...) is the user's too, one feature each: from the
#: declarations, less the fields a feature above reads and the tool's own facts.
FEATURES.update(
    {
        name: ((name,), bool, bool)
        for name, spec in SPECS.items()
        if spec.kind == "bool"
        and not spec.tool_only
        and spec.flags
        and all(name not in fields for fields, _, _ in FEATURES.values())
    }
)


def not_kept(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """The features of `old` that `new` does not keep (see the module docstring)."""
    return [name for name in FEATURES if _not_kept(name, old, new)]


def _not_kept(name: str, old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    fields, on, works = FEATURES[name]
    was_on = on(*(old[f] for f in fields))
    if not was_on and name.startswith("a2a_"):  # which backend: bound once chosen
        a2a_fields, a2a_on, _ = FEATURES["a2a"]
        if not a2a_on(*(old[f] for f in a2a_fields)):  # a swap is two: theirs off, one on
            return False
    return bool((works if was_on else on)(*(new[f] for f in fields)) != was_on)


def gpus_used(values: Mapping[str, Any]) -> int:
    """From docs/rules.md §2: tp*pp with DP attention (after R-DP1), dp*tp*pp without (dwdp 1)."""
    dp_attention = values["enable_dp_attention"] and values["dp_size"] > 1
    tp_pp = int(values["tp_size"] * values["pp_size"])
    return tp_pp if dp_attention else int(values["dp_size"]) * tp_pp


def order(key: tuple[int, int, int, int, int], objective: str) -> tuple[int, ...]:
    """(gpus, features, user, other, size) in the order `objective` compares them."""
    g, f, u, o, d = key
    return (g, f, u, o, d) if objective == "changes" else (g, f, d, u, o)


#: The order the walk chooses fields in: the fields the GPU count can read first (DP
#: attention resolves through prefill CP and its strategy), then each feature's fields, so
#: that the count and most rules are decided high in the tree.
ORDER = (
    "enable_dp_attention",
    "tp_size",
    "pp_size",
    "dp_size",
    "enable_prefill_cp",
    "cp_strategy",
    "attn_cp_size",
    "dcp_size",
    "moe_a2a_backend",
    "enable_eplb",
    "ep_size",
    "moe_dp_size",
    "enable_dp_lm_head",
    "enable_aiter_allreduce_fusion",
    "dcp_comm_backend",
)
assert sorted(ORDER) == sorted((*SIZES, *CHOICES))


def _decided_at(exprs: tuple[Expr, ...], names: list[str]) -> int:
    """The first depth after which every field `exprs` can read is chosen (0 if none is)."""
    reach = PACK.reach  # resolution's reach, an over-approximation: safe for pruning
    read = {r for e in exprs for f in fields_of(e) for r in reach.get(f, {f})}
    return max((names.index(f) for f in read if f in names), default=0)


def nearest(
    config: Config,
    bound: int,
    gpus: int | None,
    objective: str,
    limit: tuple[int, ...],
    pins: tuple[str, ...] = (),
    *,
    early: bool = True,
) -> Iterator[tuple[tuple[int, ...], dict[str, Any]]]:
    """Every valid candidate whose objective (ordered by `objective`) is below `limit`.

    Sizes range over the divisors of `bound`; with `gpus`, candidates must use that many;
    pinned fields keep their values, as typed and, unless unset, as SGLang resolves them.
    Fields are chosen in `ORDER`. `early=False` turns the early rule checks off (only the
    objective prunes), to test that they drop nothing.
    """
    old = config.model_dump()
    user = config.user_set()
    before = int(validate(config, explain=False, sglang_version=PACK).derived["gpus_used"])
    names = list(ORDER)
    domains = [
        (old[n],) if n in pins else tuple(divisors(bound)) if n in SIZES else CHOICES[n]
        for n in names
    ]
    costs = [[_cost(n, v, old, user) for v in dom] for n, dom in zip(names, domains, strict=True)]
    #: The features complete once the field at each depth is chosen.
    done_at: list[list[str]] = [[] for _ in names]
    for feature, (fields, _, _) in FEATURES.items():
        # A field the walk never varies keeps the input's value in `chosen`.
        varied = [f for f in fields if f in names]
        if varied:
            done_at[max(names.index(f) for f in varied)].append(feature)
    #: The kept rules decided once the field at each depth is chosen, and the GPU count's depth.
    rules_at: list[set[int]] = [set() for _ in names]
    for k in KEPT:
        rules_at[_decided_at((PACK.rules[k].when, PACK.rules[k].holds), names)].add(k)
    count_at = _decided_at((GPUS_USED,), names)
    chosen = environment(config, None)
    checker = compiled(PACK)

    def walk(i: int, key: tuple[int, int, int, int, int]) -> Iterator[Any]:
        if order(key, objective) >= limit:
            return
        if i == len(names):
            resolved, _ = checker.resolve(chosen)
            used = checker.derived(resolved)["gpus_used"]
            if gpus is not None and used != gpus:
                return
            # A pin is the value the server runs with: SGLang's resolution must not rewrite
            # it (an unset pinned field only stays unset, which its domain already says).
            if any(old[p] is not None and resolved[p] != old[p] for p in pins):
                return
            final = (int(gpus is None and used != before), *key[1:])
            if order(final, objective) >= limit:
                return
            failed = checker.violations(resolved, chosen)
            # fix proposes layouts SGLang accepts *and* meshsat's advice keeps.
            if not any(k in KEPT for k in failed):
                values = {n: chosen[n] for n in old}
                assert validate(values, explain=False, sglang_version=PACK).valid
                yield order(final, objective), values
            return
        for v, (cu, co, cd) in zip(domains[i], costs[i], strict=True):
            chosen[names[i]] = v
            g, f, u, o, d = key
            if early and (rules_at[i] or i == count_at):
                resolved, _ = checker.resolve(chosen)
                if not rules_at[i].isdisjoint(checker.violations(resolved, chosen)):
                    continue
                if i == count_at:
                    used = checker.derived(resolved)["gpus_used"]
                    if gpus is not None and used != gpus:
                        continue
                    g = int(gpus is None and used != before)
            for feature in done_at[i]:
                f += _not_kept(feature, old, chosen)
            yield from walk(i + 1, (g, f, u + cu, o + co, d + cd))
        chosen[names[i]] = old[names[i]]

    yield from walk(0, (0, 0, 0, 0, 0))


def _cost(name: str, value: Any, old: Mapping[str, Any], user: frozenset[str]) -> tuple[int, ...]:
    """(user fields, other fields, size change) of giving `name` this value."""
    if value == old[name] and type(value) is type(old[name]):
        return (0, 0, 0)
    distance = abs(mbits(value) - mbits(old[name])) if SPECS[name].size else 0
    return (1, 0, distance) if name in user else (0, 1, distance)


@cache
def _plain_encoder(pack: Pack) -> Any:
    from meshsat.solver.backends.z3enc import Z3Encoder

    return Z3Encoder(pack.resolutions)


def z3_accepts(config: Config, model: ModelSpec | None, pack: Pack = NEWEST) -> bool:
    """The second back-end: the plain Z3 encoding, every field pinned, every error rule on."""
    import z3

    enc = _plain_encoder(pack)
    env = environment(config, model)
    s = z3.Solver()
    s.add(*enc.domain)
    s.add(*(enc.value_term(name, value) for name, value in env.items()))
    s.add(*(enc.rule_term(rule) for rule in pack.errors))
    return bool(s.check() == z3.sat)


def objective_between(
    old: Config, new: Config, objective: str, gpus: int | None
) -> tuple[int, ...]:
    """The documented objective of going from `old` to `new` (on `gpus` GPUs, if given)."""
    a, b = old.model_dump(), new.model_dump()
    user = old.user_set()
    mine = others = distance = 0
    for name in a:
        if a[name] == b[name] and type(a[name]) is type(b[name]):
            continue
        mine += name in user
        others += name not in user
        if SPECS[name].size:
            distance += abs(mbits(b[name]) - mbits(a[name]))
    used = [
        int(validate(c, explain=False, sglang_version=PACK).derived["gpus_used"])
        for c in (old, new)
    ]
    features = len(not_kept(a, b))
    moved = int(gpus is None and used[0] != used[1])
    return order((moved, features, mine, others, distance), objective)
