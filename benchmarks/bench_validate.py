"""How fast is validation? Prints a table; the README quotes it.

1. Warm in-process `validate` of a valid, fully specified layout (p50, p99), against the
   same catalogue walked node by node (`meshsat.solver.backends.interp`) and against Z3 deciding it.
2. Explaining invalid layouts (Z3 already imported): p50/p95 over a fixed corpus, against
   a plain assumption-based core (one Z3 solver, deletion over pinned fields).
3. `meshsat validate` as a whole process, against a bare `python -c pass`.

Run: .venv/bin/python benchmarks/bench_validate.py [--quick]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from timing import aligned, percentile, seconds, timed

from meshsat.solver import Config, ModelSpec, validate
from meshsat.solver.validation.validate import environment

FULL = Config(
    tp_size=16,
    pp_size=1,
    dp_size=4,
    nnodes=2,
    enable_dp_attention=True,
    enable_dp_lm_head=True,
    attn_cp_size=2,
    enable_prefill_cp=True,
    cp_strategy="zigzag",
    moe_dp_size=2,
    ep_size=8,
    dcp_size=1,  # decode CP with prefill CP is rejected from SGLang 0.5.23 on
    moe_a2a_backend="none",
    enable_eplb=True,
    chunked_prefill_size=8192,
    disaggregation_mode="prefill",
)
MODEL = ModelSpec(
    architecture="Qwen3MoeForCausalLM",
    num_attention_heads=64,
    num_key_value_heads=4,
    num_experts=128,
    num_hidden_layers=94,
)


def timings(fn: Callable[[], Any], n: int) -> list[float]:
    """Seconds per call, n calls timed one by one after min(n, 50) warm-up calls."""
    return timed(fn, n, warmup=min(n, 50)).seconds


def invalid_corpus(n: int, seed: int = 7) -> list[Config]:
    rng = random.Random(seed)
    sizes = (1, 2, 3, 4, 6, 8, 12, 16)
    out: list[Config] = []
    while len(out) < n:
        values: dict[str, Any] = {
            k: rng.choice(sizes) for k in ("tp_size", "dp_size", "attn_cp_size", "ep_size")
        }
        values["moe_dp_size"] = rng.choice((1, 1, 2, 4))
        values["pp_size"] = rng.choice((1, 1, 2))
        for flag in ("enable_dp_attention", "enable_prefill_cp", "enable_eplb"):
            values[flag] = rng.random() < 0.4
        if rng.random() < 0.5:
            values["cp_strategy"] = rng.choice(("zigzag", "interleave"))
        if rng.random() < 0.2:
            values["dcp_size"] = rng.choice((2, 3))
        config = Config(**values)
        if not validate(config, explain=False).valid:
            out.append(config)
    return out


def plain_core(config: Config) -> tuple[str, ...]:
    """Baseline: one persistent Z3 solver, pins as assumptions, deletion-minimised."""
    import z3

    from meshsat.solver.backends.z3enc import Z3Encoder
    from meshsat.solver.lang.fields import SPECS
    from meshsat.solver.packs import NEWEST

    global _PLAIN
    if _PLAIN is None:
        enc = Z3Encoder(NEWEST.resolutions)
        s = z3.Solver()
        s.add(*enc.domain, *(enc.rule_term(r) for r in NEWEST.errors))
        _PLAIN = (enc, s, {})
    enc, s, lits = _PLAIN

    def pin(name: str, value: Any) -> Any:
        key = (name, repr(value))
        if key not in lits:
            lit = z3.Bool(f"pin:{key}")
            s.add(z3.Implies(lit, enc.value_term(name, value)))
            lits[key] = lit
        return lits[key]

    raw = environment(config, None)
    user = config.user_set()
    fixed = [pin(n, raw[n]) for n in SPECS if n not in user]
    keep = [n for n in SPECS if n in user]
    i = 0
    while i < len(keep):
        trial = keep[:i] + keep[i + 1 :]
        if s.check(*fixed, *(pin(n, raw[n]) for n in trial)) == z3.unsat:
            keep = trial
        else:
            i += 1
    return tuple(keep)


_PLAIN: Any = None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true", help="fewer repetitions")
    ap.add_argument(
        "--packs-only", action="store_true", help="only section 1b (validate and choose per pack)"
    )
    args = ap.parse_args()
    n = 2000 if args.quick else 20000
    rows: list[tuple[str, str, str, str]] = []

    # 1. validate, warm
    fast = timings(lambda: validate(FULL, MODEL, explain=False), n)
    assert validate(FULL, MODEL).valid, "the benchmark layout must be valid"
    from tests.backends import interp, z3_eval

    raw = environment(FULL, MODEL)
    walk = timings(lambda: interp(raw), max(200, n // 20))
    z3_time = timings(lambda: z3_eval(raw), 100 if args.quick else 300)
    us = 1e6
    rows.append(
        (
            "validate, valid full layout (warm)",
            f"p50 {statistics.median(fast) * us:.1f} µs",
            f"p99 {percentile(fast, 0.99) * us:.1f} µs",
            "goal p50 ≤ 50 µs",
        )
    )
    rows.append(
        (
            "  baseline: tree-walking interpreter",
            f"p50 {statistics.median(walk) * us:.0f} µs",
            f"×{statistics.median(walk) / statistics.median(fast):.0f} slower",
            "",
        )
    )
    rows.append(
        (
            "  baseline: Z3 decides the same layout",
            f"p50 {statistics.median(z3_time) * 1e3:.2f} ms",
            f"×{statistics.median(z3_time) / statistics.median(fast):.0f} slower",
            "",
        )
    )

    # 1b. every pack: validate speed, and what choosing a pack costs once per process
    from meshsat.solver.packs import PACKS

    choose = (
        "import time; from meshsat import solver; "
        "from meshsat.solver.packs import get_pack, installed_pack; "
        "from meshsat.solver.backends.pyeval import compiled; t = time.perf_counter(); "
        "compiled(get_pack({v!r})); installed_pack(); print(time.perf_counter() - t)"
    )
    # "choose" runs with the compiled-code cache warm (every process after the first one
    # on a machine); the baseline, in the same run, compiles the catalogue (no cache).
    with tempfile.TemporaryDirectory(prefix="meshsat-bench-cache-") as folder:
        cached = {**os.environ, "MESHSAT_CACHE_DIR": folder}
        uncached = {**os.environ, "MESHSAT_NO_CACHE": "1"}

        def choose_ms(version: str, env: dict[str, str]) -> float:
            out = subprocess.run(
                [sys.executable, "-c", choose.format(v=version)],
                capture_output=True,
                text=True,
                check=True,
                env=env,
            ).stdout
            return float(out) * 1e3

        for pack in PACKS:
            # The full layout as a user of that release writes it: 0.4.6.post5 has no
            # prefill-CP or MoE-DP flags, so those fields keep their defaults there.
            own = FULL.model_copy(
                update={f: Config.model_fields[f].default for f in pack.absent_fields}
            )
            assert validate(own, MODEL, sglang_version=pack).valid, pack.version
            per_pack = timings(
                lambda p=pack, c=own: validate(c, MODEL, explain=False, sglang_version=p), n // 4
            )
            first = choose_ms(pack.version, cached)  # fills the cache
            warm = [choose_ms(pack.version, cached) for _ in range(7)]
            cold = [choose_ms(pack.version, uncached) for _ in range(7)]
            rows.append(
                (
                    f"  pack {pack.version}: validate (warm) · choose once",
                    f"p50 {statistics.median(per_pack) * us:.1f} µs",
                    f"choose {statistics.median(warm):.2f} ms",
                    "goal ≤ 50 µs · ≤ 5 ms",
                )
            )
            rows.append(
                (
                    "    baseline: choose, no code cache",
                    f"first {first:.2f} ms",
                    f"choose {statistics.median(cold):.2f} ms",
                    f"×{statistics.median(cold) / statistics.median(warm):.1f}",
                )
            )
        if args.packs_only:
            print(aligned(rows))
            return

    # 2. explanations
    corpus = invalid_corpus(60 if args.quick else 200)
    validate(corpus[0])  # imports z3 and builds the explainer
    explain = [timings(lambda c=c: validate(c), 3)[1] for c in corpus]
    base_n = corpus[: 30 if args.quick else 60]
    plain_core(base_n[0])
    plain = [timings(lambda c=c: plain_core(c), 1)[0] for c in base_n]
    same = sum(validate(c).conflict is not None for c in corpus)
    rows.append(
        (
            f"explain an invalid layout ({len(corpus)} configs, z3 imported)",
            f"p50 {statistics.median(explain) * 1e3:.2f} ms",
            f"p95 {percentile(explain, 0.95) * 1e3:.2f} ms",
            "goal p50 ≤ 10 ms",
        )
    )
    rows.append(
        (
            f"  baseline: plain assumption core ({len(base_n)} configs)",
            f"p50 {statistics.median(plain) * 1e3:.2f} ms",
            f"p95 {percentile(plain, 0.95) * 1e3:.2f} ms",
            f"×{statistics.median(plain) / statistics.median(explain):.1f} slower",
        )
    )
    assert same == len(corpus)

    # 3. whole process
    exe = str(Path(sys.executable).with_name("meshsat"))
    reps = 5 if args.quick else 11
    cli = [
        _wall([exe, "validate", "--set", "tp_size=8", "--set", "attn_cp_size=2"])
        for _ in range(reps)
    ]
    bare = [_wall([sys.executable, "-c", "pass"]) for _ in range(reps)]
    rows.append(
        (
            "`meshsat validate` whole process, valid layout",
            f"median {statistics.median(cli):.3f} s",
            f"max {max(cli):.3f} s",
            "goal ≤ 0.5 s",
        )
    )
    rows.append(
        (
            "  baseline: bare `python -c pass`",
            f"median {statistics.median(bare):.3f} s",
            f"meshsat adds {statistics.median(cli) - statistics.median(bare):.3f} s",
            "",
        )
    )

    print(f"bench_validate ({'quick' if args.quick else 'full'}; {n} warm validations)")
    print(aligned(rows))


def _wall(cmd: list[str]) -> float:
    return seconds(lambda: subprocess.run(cmd, check=False, capture_output=True))


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    main()
