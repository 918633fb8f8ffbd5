"""A brute-force nearest valid layout, written independently of `solver.fix`.

It is the oracle of the optimality tests, so it stays simple: a depth-first walk over the
product of candidate values (sizes: every divisor of the GPU count; flags and choices: every
value), which skips a branch only when the objective of what is already chosen cannot beat
the bound any more (each field adds a non-negative amount, so nothing below can either).
Every complete candidate that beats the bound is checked with `solver.validate`.

The objective is re-derived from its definition in the `solver.fix` docstring: a changed
field weighs 2 if it is a size else 1, doubled if the user set it; a size change costs
|mbits(new) - mbits(old)| with mbits(x) = sum over prime factors p of x (with
multiplicity) of round(1000*log2 p).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from functools import cache
from typing import Any

from solver import validate
from solver.backends.pyeval import compiled
from solver.lang.config import Config
from solver.lang.fields import SPECS
from solver.lang.model_spec import ModelSpec
from solver.packs import NEWEST
from solver.validation.validate import environment

#: The fields the oracle varies; the rest keep the input's values.
SIZES = ("tp_size", "pp_size", "dp_size", "attn_cp_size", "dcp_size", "ep_size", "moe_dp_size")
CHOICES: dict[str, tuple[Any, ...]] = {
    "enable_dp_attention": (False, True),
    "enable_dp_lm_head": (False, True),
    "enable_prefill_cp": (False, True),
    "cp_strategy": (None, "zigzag", "interleave"),
    "enable_aiter_allreduce_fusion": (False, True),
    "dcp_comm_backend": ("ag_rs", "a2a", "fi_a2a"),
    "moe_a2a_backend": ("none", "deepep", "flashinfer"),
    "enable_eplb": (False, True),
}


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


def weight(name: str, user_set: frozenset[str]) -> int:
    return (2 if SPECS[name].size else 1) * (2 if name in user_set else 1)


def gpus_used(values: Mapping[str, Any]) -> int:
    """From docs/rules.md §2: tp*pp with DP attention (after R-DP1), dp*tp*pp without (dwdp 1)."""
    dp_attention = values["enable_dp_attention"] and values["dp_size"] > 1
    tp_pp = int(values["tp_size"] * values["pp_size"])
    return tp_pp if dp_attention else int(values["dp_size"]) * tp_pp


def nearest(
    config: Config,
    bound: int,
    gpus: int | None,
    objective: str,
    limit: tuple[int, int],
    pins: tuple[str, ...] = (),
) -> Iterator[tuple[tuple[int, int], dict[str, Any]]]:
    """Every valid candidate whose (primary, secondary) objective is below `limit`.

    Sizes range over the divisors of `bound`; with `gpus`, candidates must use that many;
    pinned fields keep their values.
    The four fields that set the GPU count come first, so that the count prunes early.
    """
    old = config.model_dump()
    user = config.user_set()
    first = ("enable_dp_attention", "tp_size", "pp_size", "dp_size")
    names = [*first, *(n for n in (*SIZES, *CHOICES) if n not in first)]
    domains = [
        (old[n],) if n in pins else tuple(divisors(bound)) if n in SIZES else CHOICES[n]
        for n in names
    ]
    costs = [
        [_cost(n, v, old, user, objective) for v in dom]
        for n, dom in zip(names, domains, strict=True)
    ]
    chosen = environment(config, None)
    checker = compiled()
    prune = old["dwdp_size"] == 1  # R-DWDP would rewrite dp_size and DP attention

    def walk(i: int, a: int, b: int) -> Iterator[tuple[tuple[int, int], dict[str, Any]]]:
        if a > limit[0] or (a == limit[0] and b >= limit[1]):
            return
        if i == len(first) and gpus is not None and prune and gpus_used(chosen) != gpus:
            return
        if i == len(names):
            resolved, _ = checker.resolve(chosen)
            if gpus is not None and checker.derived(resolved)["gpus_used"] != gpus:
                return
            failed = checker.violations(resolved, chosen)
            if all(NEWEST.rules[k].severity != "error" for k in failed):
                values = {n: chosen[n] for n in old}
                assert validate(values, explain=False).valid
                yield (a, b), values
            return
        for v, (ca, cb) in zip(domains[i], costs[i], strict=True):
            chosen[names[i]] = v
            yield from walk(i + 1, a + ca, b + cb)
        chosen[names[i]] = old[names[i]]

    yield from walk(0, 0, 0)


def _cost(
    name: str, value: Any, old: Mapping[str, Any], user: frozenset[str], objective: str
) -> tuple[int, int]:
    if value == old[name] and type(value) is type(old[name]):
        return (0, 0)
    changes = weight(name, user)
    distance = abs(mbits(value) - mbits(old[name])) if SPECS[name].size else 0
    return (changes, distance) if objective == "changes" else (distance, changes)


@cache
def _plain_encoder() -> Any:
    from solver.backends.z3enc import Z3Encoder

    return Z3Encoder(NEWEST.resolutions)


def z3_accepts(config: Config, model: ModelSpec | None) -> bool:
    """The second back-end: the plain Z3 encoding, every field pinned, every error rule on."""
    import z3

    enc = _plain_encoder()
    env = environment(config, model)
    s = z3.Solver()
    s.add(*enc.domain)
    s.add(*(enc.value_term(name, value) for name, value in env.items()))
    s.add(*(enc.rule_term(rule) for rule in NEWEST.errors))
    return bool(s.check() == z3.sat)


def objective_between(old: Config, new: Config, objective: str) -> tuple[int, int]:
    """The documented objective of going from `old` to `new`."""
    a, b = old.model_dump(), new.model_dump()
    user = old.user_set()
    changes = distance = 0
    for name in a:
        if a[name] == b[name] and type(a[name]) is type(b[name]):
            continue
        changes += weight(name, user)
        if SPECS[name].size:
            distance += abs(mbits(b[name]) - mbits(a[name]))
    return (changes, distance) if objective == "changes" else (distance, changes)
