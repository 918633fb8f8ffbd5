"""fix: answers, pins and their conflicts, top K, determinism, timeouts, output, CLI."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from meshsat import solver
from meshsat.solver.cli import main
from meshsat.solver.errors import InputError
from meshsat.solver.inputs import parse_sglang_command
from meshsat.solver.lang.config import Config
from meshsat.solver.lang.fields import CONFIG_SPECS
from meshsat.solver.lang.model_spec import ModelSpec
from meshsat.solver.memory.models import catalogue_config
from meshsat.solver.packs import NEWEST, SEED
from meshsat.solver.repair import problem as fix_problem
from meshsat.solver.repair import search as fix_search
from meshsat.solver.repair.fix import command_line, fix
from meshsat.solver.repair.objective import Objective
from meshsat.solver.repair.results import Change, FixSelfCheckError
from meshsat.solver.validation.validate import validate
from tests.fix_oracle import CHOICES, PACK, SIZES, divisors, nearest, objective_between, z3_accepts

DP_CP = {
    "tp_size": 8,
    "dp_size": 3,
    "attn_cp_size": 2,
    "enable_dp_attention": True,
    "enable_prefill_cp": True,
    "cp_strategy": "zigzag",
}
DEEPSEEK_V3 = ModelSpec.model_validate(
    {
        "architecture": "DeepseekV3ForCausalLM",
        "num_attention_heads": 128,
        "num_key_value_heads": 128,
        "num_experts": 256,
        "num_hidden_layers": 61,
    }
)


def invalid_layout(rng: random.Random, n: int) -> Config:
    while True:
        values: dict[str, Any] = {"tp_size": rng.choice(divisors(n))}
        for name in SIZES[1:]:
            if rng.random() < 0.4:
                values[name] = rng.choice(divisors(n))
        for name, choices in CHOICES.items():
            if rng.random() < 0.25:
                values[name] = rng.choice(choices)
        if not solver.validate(values, explain=False, sglang_version=PACK).valid:
            return Config.model_validate(values)


# --- answers ------------------------------------------------------------------------------------
def test_exported_from_the_package() -> None:
    assert solver.fix is fix
    assert {"fix", "FixReport", "FixResult"} <= set(solver.__all__)


def test_dp_cp_conflict_needs_one_size_change() -> None:
    report = fix(DP_CP, gpus=8)
    # In SGLang's handler order: data parallelism runs before context parallelism.
    assert report.violations == ("DPATTN-TP-DIV", "CP-DPCP-DIV", "TOPO-ATTN-TP")
    best = report.best
    assert best.changes == (Change("dp_size", 3, 4),)
    assert best.optimal and best.gpus_used == 8
    assert best.objective == Objective(gpus=0, features=0, user_fields=1, other_fields=0, size=415)
    assert [t["tier"] for t in best.tiers() if t["kept"]] == ["gpus", "features", "other_fields"]
    assert best.repairs == report.violations and report.relaxed == ()
    assert best.command_line == (  # the newest release's spelling of DP attention
        "python -m sglang.launch_server --tp-size 8 --attn-dp-size 4 "
        "--attn-cp-size 2 --enable-prefill-cp --cp-strategy zigzag"
    )
    assert [n.resolution for n in best.notes] == ["R-DPATTN"]
    assert best.config.user_set() == frozenset(DP_CP)


def test_a_valid_layout_is_returned_unchanged() -> None:
    cfg = Config(tp_size=8, dp_size=2, enable_dp_attention=True)
    report = fix(cfg, top=3)
    assert report.valid_input and len(report.fixes) == 1
    assert report.best.config is cfg and report.best.changes == () and report.best.optimal
    assert fix(cfg, gpus=8).valid_input


def test_gpus_sets_the_gpu_count_of_a_valid_layout() -> None:
    report = fix({"tp_size": 8}, gpus=32)
    assert not report.valid_input and report.violations == ()
    assert report.best.gpus_used == 32
    assert report.best.changes == (Change("dp_size", 1, 4),)


def test_without_gpus_the_gpu_count_may_change_and_is_reported() -> None:
    report = fix({"tp_size": 16, "ep_size": 4, "moe_dp_size": 2, "pp_size": 2})
    assert report.gpus is None and report.gpus_before == 32 and report.size_bound == 32
    assert all(f.gpus_used in (1, 2, 4, 8, 16, 32) for f in report.fixes)


def test_model_facts_and_resolution_are_respected() -> None:
    cfg = {"tp_size": 8, "attn_cp_size": 2, "enable_prefill_cp": True, "cp_strategy": "zigzag"}
    cfg |= {"dp_size": 2, "enable_dp_attention": True, "moe_dp_size": 2}
    report = fix(cfg, DEEPSEEK_V3, gpus=8, top=3)
    assert report.fixes
    for result in report.fixes:
        assert solver.validate(result.config, DEEPSEEK_V3, explain=False).valid
        assert z3_accepts(result.config, DEEPSEEK_V3)


def test_plain_integers_elastic_ep() -> None:
    cfg = {"tp_size": 8, "elastic_ep_backend": "mooncake", "ep_join_mode": "scale"}
    cfg |= {"ep_join_rank_offset": 8, "node_rank": 1, "max_ep_size": 12}
    report = fix(cfg, gpus=8, top=3)
    assert report.best.changes == (Change("max_ep_size", 12, None),)
    for result in report.fixes:
        assert z3_accepts(result.config, None)


@pytest.mark.parametrize("pinned", [("nnodes",), ("nnodes", "tp_size")])
def test_fix_never_makes_a_server_join_an_elastic_ep_job(pinned: tuple[str, ...]) -> None:
    """tp 3 on two pinned nodes: keeping 3 GPUs needs the server to join a running
    elastic-EP job (the join escapes TOPO-NNODES), which used to win as one toggled
    feature over the GPU count. Joining is a constraint, not a tier: the GPU count goes
    (tp 2), and with tp pinned too a second pipeline stage (a feature, but of this job)."""
    cfg = {"tp_size": 3, "nnodes": 2}
    report = fix(cfg, pins=pinned)
    joining = ("ep_join_mode", "elastic_ep_rejoin", "ep_join_rank_offset")
    for result in report.fixes:
        assert not {c.field for c in result.changes} & set(joining), result.changes
        assert solver.validate(result.config, explain=False).valid
    expected = Change("pp_size", 1, 2) if "tp_size" in pinned else Change("tp_size", 3, 2)
    assert report.best.changes == (expected,)
    assert fix({**cfg, "ep_join_mode": "scale"}, pins=pinned).fixes  # a joiner stays one


def test_every_fix_validates_in_both_back_ends() -> None:
    rng = random.Random(7)
    for _ in range(20):
        n = rng.choice((8, 12, 48, 512, 4096))
        for result in fix(invalid_layout(rng, n), gpus=n, top=2).fixes:
            assert solver.validate(result.config, explain=False).valid
            assert z3_accepts(result.config, None)
            assert result.gpus_used == n


def test_the_self_check_rejects_an_invalid_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    def bogus(
        self: fix_search.Search, objective: str, pins: Any, top: int, *, why: bool = True
    ) -> Any:
        values = {n: self.old[n] for n in self.fields}
        return fix_search.Outcome(found=[fix_search.Found(values, True)])

    monkeypatch.setattr(fix_search.Search, "run", bogus)
    with pytest.raises(FixSelfCheckError, match="CP-DPCP-DIV"):
        fix(DP_CP, gpus=8)


# --- pins ----------------------------------------------------------------------------------------
def test_pins_are_kept_and_the_fix_is_optimal_under_them() -> None:
    rng = random.Random(11)
    fixed = 0
    for _ in range(40):
        n = rng.choice((4, 8, 12, 16))
        cfg = invalid_layout(rng, n)
        pins = tuple(rng.sample(sorted(cfg.user_set()), min(2, len(cfg.user_set()))))
        report = fix(cfg, gpus=n, pins=pins, sglang_version=PACK)
        if report.conflict is not None:
            assert {f for f, _ in report.conflict.pins} <= set(pins) and report.conflict.rules
            continue
        fixed += 1
        best = report.best
        ran = solver.validate(best.config, explain=False, sglang_version=PACK).resolved
        assert all(getattr(best.config, p) == getattr(cfg, p) for p in pins)
        assert all(ran[p] == getattr(cfg, p) for p in pins if getattr(cfg, p) is not None)
        key = objective_between(cfg, best.config, "changes", n)
        assert next(nearest(cfg, n, n, "changes", key, pins), None) is None
    assert fixed > 20


def test_a_pin_outside_the_gpu_count_names_the_divisibility_rule() -> None:
    report = fix(DP_CP, gpus=4096, pins=["dp_size"])
    assert report.fixes == () and report.conflict is not None
    assert report.conflict.pins == (("dp_size", 3),)
    assert [r.id for r in report.conflict.rules] == ["FIX-GPUS-DIVIDE"]


@pytest.mark.parametrize(
    ("cfg", "pins", "gpus", "rules"),
    [
        # DWDP, which resolves dp to its own size, no longer escapes: the server would not
        # run the pinned dp 3 (before pins held the resolved value, DWDP-EQ-TP was in the core).
        (DP_CP, ("tp_size", "dp_size", "attn_cp_size"), None, {"CP-DPCP-DIV"}),
        (
            {"tp_size": 4, "dcp_size": 2, "dcp_comm_backend": "fi_a2a", "platform": "hip"},
            ("dcp_comm_backend",),
            None,
            {"DCP-FI-A2A-CUDA"},
        ),
        ({"tp_size": 8, "pp_size": 2}, ("tp_size", "pp_size"), 8, {"FIX-GPUS"}),
        (
            {"tp_size": 8, "moe_dp_size": 2, "pp_size": 2},
            ("moe_dp_size", "pp_size"),
            16,
            {"MOEDP-NO-PP"},  # dwdp > 1 would run moe_dp_size 1: no escape from the pin
        ),
    ],
)
def test_impossible_pins_are_explained(
    cfg: dict[str, Any], pins: tuple[str, ...], gpus: int | None, rules: set[str]
) -> None:
    # The seed's rules: on 0.5.23 DP attention off (three replicas) resolves the first case.
    report = fix(cfg, pins=pins, gpus=gpus, sglang_version=SEED)
    assert report.fixes == () and report.conflict is not None
    assert {r.id for r in report.conflict.rules} == rules
    assert all(r.condition and r.message for r in report.conflict.rules)
    conflict_pins = tuple(f for f, _ in report.conflict.pins)
    assert set(conflict_pins) <= set(pins)
    # The conflict stands on its own pins, and each of them is needed.
    assert fix(cfg, pins=conflict_pins, gpus=gpus, sglang_version=SEED).conflict == report.conflict
    for pin in conflict_pins:
        fewer = fix(cfg, pins=[p for p in conflict_pins if p != pin], gpus=gpus)
        assert fewer.conflict != report.conflict


def test_a_pin_sglang_would_rewrite_is_a_conflict() -> None:
    """tp 2 with ep 3 breaks TOPO-MOE-TP. On 12 GPUs a layout typing both exists (the
    megamoe alias), but SGLang runs it with ep 2: it does not keep the pin, so the pins
    conflict, and the brute force finds no layout that keeps them either."""
    cfg, pins = {"tp_size": 2, "ep_size": 3}, ("tp_size", "ep_size")
    escape = solver.validate(
        {**cfg, "dp_size": 6, "moe_runner_backend": "megamoe"}, explain=False, sglang_version=SEED
    )
    assert escape.valid and escape.derived["gpus_used"] == 12 and escape.resolved["ep_size"] == 2
    report = fix(cfg, pins=pins, gpus=12, sglang_version=SEED)
    assert report.fixes == () and report.conflict is not None
    assert report.conflict.pins == (("tp_size", 2), ("ep_size", 3))
    assert [r.id for r in report.conflict.rules] == ["TOPO-MOE-TP"]
    start = Config.model_validate(cfg)
    assert next(nearest(start, 12, 12, "changes", (10**9,), pins), None) is None


# --- top K and determinism -----------------------------------------------------------------------
def test_top_k_fixes_are_distinct_ordered_and_alternatives() -> None:
    rng = random.Random(3)
    for objective in ("changes", "distance"):
        for _ in range(8):
            n = rng.choice((8, 16, 64))
            cfg = invalid_layout(rng, n)
            report = fix(cfg, gpus=n, objective=objective, top=4)
            assert 1 <= len(report.fixes) <= 4
            keys = [f.objective.key(objective) for f in report.fixes]
            assert keys == sorted(keys)
            configs = [f.config.model_dump() for f in report.fixes]
            assert all(a != b for i, a in enumerate(configs) for b in configs[i + 1 :])
            # A real alternative keeps a field that each earlier fix changes.
            for i, later in enumerate(report.fixes):
                for earlier in report.fixes[:i]:
                    assert {c.field for c in earlier.changes} - {c.field for c in later.changes}
            assert report.fixes[0] == fix(cfg, gpus=n, objective=objective).best


def test_an_alternative_is_no_alias_of_an_earlier_fix() -> None:
    """DeepSeek-R1 at TP 32 on 4 nodes: after `--moe-a2a-backend deepep`, the second fix was
    `--moe-runner-backend megamoe`, which SGLang runs as `--moe-a2a-backend megamoe`
    (R-MEGAMOE-ALIAS): the same field changed again, spelled as "another field". No fix
    types a value SGLang then runs as another (its notes name no field the fix changed)."""
    r1 = ModelSpec.from_hf_config(catalogue_config("deepseek-ai/DeepSeek-R1"))
    report = fix({"tp_size": 32, "nnodes": 4}, r1, top=3)
    assert len(report.fixes) == 3
    for f in report.fixes:
        changed = {c.field for c in f.changes}
        rewritten = {n.field for n in solver.validate(f.config, r1).notes} & changed
        assert not rewritten and f.config.moe_runner_backend != "megamoe", f.changes
    assert {c.field for c in report.fixes[0].changes} == {"moe_dense_tp_size", "moe_a2a_backend"}


def test_same_input_same_answer() -> None:
    rng = random.Random(5)
    layouts = [invalid_layout(rng, 64) for _ in range(6)]
    first = [fix(c, gpus=64).best.config for c in layouts]
    fix_problem.problem.cache_clear()
    again = [fix(c, gpus=64).best.config for c in reversed(layouts)]
    assert first == list(reversed(again))


def test_a_tiny_timeout_returns_quickly_without_a_wrong_claim() -> None:
    fix_problem.problem.cache_clear()
    fix(DP_CP, gpus=4096, timeout_s=30)  # builds the problem
    report = fix(DP_CP, gpus=4096, timeout_s=1e-6)
    assert report.timed_out and report.fixes == () and report.conflict is None


def test_a_stalled_shared_problem_is_asked_again_fresh(monkeypatch: pytest.MonkeyPatch) -> None:
    """The shared solver's first check on a problem that has served before gets a slice of
    the time; when it runs out (here: made to), the question goes to a fresh problem, which
    answers it, rather than the whole timeout going to one stuck check."""
    fix_problem.problem.cache_clear()
    first = fix(DP_CP, gpus=64)
    real = fix_search.Search.check
    slices: list[int | None] = []

    def stuck(self: fix_search.Search, assumptions: Any, cap_ms: int | None = None) -> Any:
        slices.append(cap_ms)
        return fix_search.z3.unknown if cap_ms is not None else real(self, assumptions)

    monkeypatch.setattr(fix_search.Search, "check", stuck)
    shared = fix_problem.problem.cache_info().currsize
    again = fix(DP_CP, gpus=64)
    assert shared >= 1 and slices[0] is not None and slices[0] >= fix_problem.STALE_CHECK_MS
    assert not again.timed_out and again.best.config == first.best.config


# --- bad input ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"pins": ["tp"]}, "unknown field"),
        ({"pins": ["num_experts"]}, "unknown field"),
        ({"gpus": 0}, "--gpus"),
        ({"top": 0}, "--top"),
        ({"objective": "foo"}, "--objective"),
        ({"timeout_s": 0}, "--timeout"),
    ],
)
def test_bad_arguments_are_input_errors(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(InputError, match=match):
        fix(DP_CP, **kwargs)


# --- output -------------------------------------------------------------------------------------
def test_command_line_round_trips_and_keeps_tool_facts_apart() -> None:
    cfg = Config(
        tp_size=8,
        dp_size=2,
        enable_dp_attention=True,
        moe_a2a_backend="deepep",
        cp_strategy="interleave",
        env_enable_cp_v2=False,
        gpus_per_node=4,
        platform="hip",
    )
    line = command_line(cfg, SEED)
    assert line.startswith("SGLANG_ENABLE_CP_V2=0 python -m sglang.launch_server --tp-size 8 ")
    # The platform is the machine's (`--gpu MI300X` says it again): no command carries it.
    assert line.endswith("  # not SGLang flags: gpus_per_node=4")
    parsed = parse_sglang_command(line).values  # the reader skips the trailing comment
    expected = cfg.model_dump(exclude_defaults=True)
    del expected["gpus_per_node"], expected["platform"]
    assert parsed == expected
    # 0.5.23 spells DP attention --attn-dp-size; read back, it is the same layout there.
    newest = command_line(cfg)
    assert "--attn-dp-size 2" in newest and "--enable-dp-attention" not in newest
    reread = solver.validate({**parse_sglang_command(newest).values, "platform": "hip"})
    assert reread.derived == solver.validate(cfg).derived


def run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        main(args)
    captured = capsys.readouterr()
    return int(exc.value.code or 0), captured.out, captured.err


def test_cli_fixes_the_example(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["fix", "--example", "dp-cp-conflict", "--gpus", "8"], capsys)
    assert code == 0 and err == ""
    assert "proven optimal tier by tier" in out and "dp_size" in out
    assert "repairs DPATTN-TP-DIV, CP-DPCP-DIV, TOPO-ATTN-TP" in out
    assert "tiers: GPU count kept; features kept" in out
    assert "command: python -m sglang.launch_server --tp-size 8 --attn-dp-size 4" in out
    # The only alternative typing dp_size 3 on 8 GPUs turns a feature on: DWDP (which runs
    # dp 8, so a pin refuses it: test_a_pin_is_the_value_sglang_runs_with).
    args = ["--set", "tp_size=8", "--set", "dp_size=3", "--set", "enable_dp_attention=true"]
    code, out, err = run(["fix", *args, "--top", "2"], capsys)
    assert code == 0 and "fix 1 of 2" in out and "1 feature(s) toggled" in out


def test_cli_json(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["fix", "--set", "tp_size=8", "--set", "dp_size=3", "--set", "attn_cp_size=2"]
    seed = ["--sglang-version", SEED.version]  # on 0.5.23 these are three valid replicas
    code, out, _ = run([*args, "--json", *seed], capsys)
    data = json.loads(out)
    assert code == 0 and data["valid_input"] is False and data["conflict"] is None
    fix0 = data["fixes"][0]
    assert set(fix0) >= {"config", "changes", "notes", "optimal", "objective", "command_line"}
    # Without DP attention dp 3 means 24 GPUs (3 replicas of 8). Keeping the 24 GPUs and
    # the attention CP the user asked for takes two sizes; dropping CP would be one change
    # but toggles a feature, which ranks behind (tier 2 before tier 3).
    assert fix0["changes"] == [
        {"field": "tp_size", "old": 8, "new": 12},
        {"field": "dp_size", "old": 3, "new": 2},
    ]
    assert fix0["gpus_used"] == data["gpus_before"] == 24
    assert [t["tier"] for t in fix0["tiers"]][:2] == ["gpus", "features"]
    assert fix0["repairs"] == data["violations"] and data["relaxed"] == []
    code, out, _ = run([*args, "--pin", "dp_size", "--gpus", "64", "--json", *seed], capsys)
    data = json.loads(out)
    assert code == 1 and data["fixes"] == []
    assert data["conflict"]["pins"] == [{"field": "dp_size", "value": 3}]
    assert [r["id"] for r in data["conflict"]["rules"]] == ["FIX-GPUS-DIVIDE"]


def test_cli_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["fix", "--set", "tp_size=8"], capsys)
    assert code == 0 and "already valid" in out
    args = ["fix", "--example", "dp-cp-conflict", "--pin", "dp_size", "--pin", "tp_size"]
    code, out, _ = run([*args, "--pin", "attn_cp_size", "--sglang-version", SEED.version], capsys)
    assert code == 1 and "cannot all hold" in out and "CP-DPCP-DIV" in out
    for bad in (["--gpus", "0"], ["--top", "0"], ["--objective", "foo"], ["--pin", "nope"]):
        code, out, err = run(["fix", "--set", "tp_size=8", *bad], capsys)
        assert code == 2 and out == ""
        assert err.startswith("meshsat: error: ") and err.count("\n") == 1


def test_cli_says_when_time_ran_out(capsys: pytest.CaptureFixture[str]) -> None:
    fix(DP_CP, gpus=4096)
    args = ["fix", "--example", "dp-cp-conflict", "--gpus", "4096", "--timeout", "0.000001"]
    code, out, _ = run(args, capsys)
    assert code == 1 and "timeout" in out


def test_cli_surface() -> None:
    import typer.main

    from meshsat.solver.cli import app

    command = typer.main.get_command(app).commands["fix"]  # type: ignore[attr-defined]
    options = {opt for p in command.params for opt in p.opts}
    assert options >= {
        "--config",
        "--set",
        "--sglang",
        "--model",
        "--example",
        "--pin",
        "--gpus",
        "--top",
        "--objective",
        "--timeout",
        "--json",
    }


def test_importing_the_package_loads_no_solver() -> None:
    import subprocess
    import sys

    code = (
        "import sys; from meshsat import solver; "
        "assert 'z3' not in sys.modules and 'torch' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# --- tiers and why ---------------------------------------------------------------------------
def test_a_pin_is_the_value_sglang_runs_with() -> None:
    """Pinning dp 3 with DP attention on 8 GPUs: the only 8-GPU layout typing dp 3 turns
    DWDP on, which SGLang resolves to dp 8, not the pin. So the GPU count gives way
    (tp 6, attention DP 3), and the core names the pin and the rule."""
    cfg = {"tp_size": 8, "dp_size": 3, "enable_dp_attention": True}
    dwdp = solver.validate({**cfg, "dwdp_size": 8}, explain=False, sglang_version=PACK)
    assert dwdp.valid and dwdp.resolved["dp_size"] == 8  # the answer when pins held the input
    report = fix(cfg, pins=["dp_size"], sglang_version=PACK)
    best = report.best
    assert best.changes == (Change("tp_size", 8, 6),) and best.gpus_used == 6
    ran = solver.validate(best.config, explain=False, sglang_version=PACK)
    assert ran.resolved["dp_size"] == 3 and ran.derived["attn_dp"] == 3
    # The brute force: no 8-GPU layout runs dp 3, and none on the sizes searched (divisors
    # of 24) is nearer.
    start = Config.model_validate(cfg)
    assert next(nearest(start, 8, 8, "changes", (10**9,), ("dp_size",)), None) is None
    key = objective_between(start, best.config, "changes", None)
    assert next(nearest(start, 24, None, "changes", key, ("dp_size",)), None) is None
    (relaxed,) = report.relaxed
    assert relaxed.tier == "gpus" and relaxed.pins == ("dp_size",) and relaxed.features == ()
    # The core is one rule, and a minimal core is not unique: DPATTN-TP-DIV (resolution) and
    # TOPO-ATTN-TP (launch) each forbid dp 3 with DP attention on 8 GPUs alone. Either must
    # be a rule `validate` reports for the pinned layout on 8 GPUs.
    (rule,) = (r.id for r in relaxed.rules)
    reported = {v.rule for v in solver.validate(cfg, sglang_version=PACK).violations}
    assert reported == {"DPATTN-TP-DIV", "TOPO-ATTN-TP"} and rule in reported
    words = f"no layout on 8 GPUs with dp_size 3 satisfies {rule}; the GPU count changes"
    assert relaxed.text == words
    # Without the pin every tier holds, and nothing is relaxed.
    free = fix(cfg, sglang_version=PACK)
    assert free.relaxed == () and free.best.objective.features == 0


def test_a_relaxed_feature_tier_names_the_pins_and_the_feature() -> None:
    """tp 8 and dp 3 pinned on 24 GPUs: DP attention cannot hold (3 does not divide 8), so
    the layout runs three replicas, and the feature tier gives way."""
    cfg = {"tp_size": 8, "dp_size": 3, "enable_dp_attention": True}
    report = fix(cfg, pins=["tp_size", "dp_size"], gpus=24, sglang_version=PACK)
    best = report.best
    assert best.changes == (Change("enable_dp_attention", True, False),)
    assert best.objective.features == 1
    # The brute force: no layout on 24 GPUs that keeps both pins keeps DP attention.
    start = Config.model_validate(cfg)
    assert next(nearest(start, 24, 24, "changes", (0, 1), ("tp_size", "dp_size")), None) is None
    (relaxed,) = report.relaxed
    assert relaxed.tier == "features" and relaxed.pins == ("tp_size", "dp_size")
    assert relaxed.features == ("dp_attention",) and "DPATTN-TP-DIV" in relaxed.text
    assert relaxed.text.startswith(
        "no layout on 24 GPUs with tp_size 8 and dp_size 3 keeps DP attention on with dp >= 2 ("
    )


def test_top_k_alternatives_report_their_tier_costs(capsys: pytest.CaptureFixture[str]) -> None:
    cfg = {"tp_size": 8, "dp_size": 3, "enable_dp_attention": True}
    report = fix(cfg, pins=["dp_size"], top=2, sglang_version=PACK)
    first, second = report.fixes
    # Both give up the GPU count (no 8-GPU layout runs dp 3); the second, three replicas
    # on 24 GPUs, gives up DP attention too: tier 2 ranks it behind.
    assert (first.objective.gpus, first.objective.features) == (1, 0)
    assert (second.objective.gpus, second.objective.features) == (1, 1)
    assert second.changes == (Change("enable_dp_attention", True, False),)
    assert (first.gpus_used, second.gpus_used) == (6, 24) and report.gpus_before == 8
    sets = [f"--set={k}={str(v).lower()}" for k, v in cfg.items()]
    seed = ["--sglang-version", PACK.version]
    code, out, _ = run(["fix", *sets, "--pin", "dp_size", "--top", "2", "--json", *seed], capsys)
    data = json.loads(out)
    assert code == 0 and data["relaxed"][0]["tier"] == "gpus"
    assert [t["cost"] for t in data["fixes"][1]["tiers"]][:2] == [1, 1]


def test_a_reset_sglang_resolves_to_the_users_value_is_no_change() -> None:
    """Issue 23: putting --ep-dispatch-algorithm back to unset where SGLang resolves it to
    the value the user wrote (EPLB without an all-to-all backend resolves it to dynamic) is
    not a change: neither listed nor counted."""
    from meshsat.solver.lang.config import Config
    from meshsat.solver.packs import NEWEST
    from meshsat.solver.repair.fix import _result

    cfg = Config(tp_size=8, ep_size=3, enable_eplb=True, ep_dispatch_algorithm="dynamic")
    values = {"ep_size": 4, "ep_dispatch_algorithm": None}
    result = _result(NEWEST, cfg, None, values, True, None, 8, (), {}, {})
    assert [c.field for c in result.changes] == ["ep_size"]
    assert result.objective.fields_changed == 1
    values["ep_dispatch_algorithm"] = "static"  # a real change stays one (a2a none: refused)
    with pytest.raises(Exception, match="invalid layout"):
        _result(NEWEST, cfg, None, values, True, None, 8, (), {}, {})


def test_explanations_name_catalogue_rules() -> None:
    """A relaxed tier's reason names the rules `validate` reports, never fix's own
    exactness constraint (FIX-EXACT-DIV restates them; which core the solver found first
    used to depend on what earlier calls left in the cached problem)."""
    rng = random.Random(11)
    seen = 0
    for _ in range(30):
        n = rng.choice((8, 12, 16))
        cfg = invalid_layout(rng, n)
        pins = [f for f in ("dp_size", "tp_size", "attn_cp_size") if f in cfg.user_set()][:1]
        report = fix(cfg, pins=pins, gpus=n if rng.random() < 0.5 else None)
        checked = [
            solver.validate(c, explain=False) for c in (cfg, *(f.config for f in report.fixes[:1]))
        ]
        for relaxed in report.relaxed:
            seen += 1
            assert fix_problem.EXACT_RULE not in {r.id for r in relaxed.rules}, relaxed.text
            # ... and only rules that bind: each one's condition holds in the input or the fix.
            for rule in (r for r in relaxed.rules if r.id in NEWEST.by_id):
                assert _binds(rule.id, relaxed, *checked), (rule.id, relaxed.text)
    assert seen  # the walk met relaxed tiers


#: Every on/off flag of SGLang's: each the user's feature, its own or part of one.
SWITCHES = sorted(
    name
    for name, spec in CONFIG_SPECS.items()
    if spec.kind == "bool" and not spec.tool_only and spec.flags
)


@pytest.mark.parametrize("name", SWITCHES)
def test_every_switch_the_user_turns_on_is_a_feature(name: str) -> None:
    """`fix --help` promises nothing you turned on is turned off: two-batch overlap, the
    DP LM head, LoRA, CUDA graphs off, ... were no feature, so a fix turned them off for
    free and said "features kept"."""
    from meshsat.solver.repair.features import toggled

    off = Config().model_dump()
    on = {**off, name: True}
    assert toggled(on, off) and toggled(off, on)


def test_two_batch_overlap_is_kept_as_a_feature(capsys: pytest.CaptureFixture[str]) -> None:
    """Qwen3-235B FP8 at tp 8 with two-batch overlap breaks TOPO-TBO-DP-ATTN: the fix
    turned the overlap off (with --moe-runner-backend flashinfer_trtllm) and said
    "features kept". Keeping it needs DP attention or an all-to-all backend, one feature
    turned on: the tiers say so, and the fix validates."""
    launch = (
        "python -m sglang.launch_server --model-path Qwen/Qwen3-235B-A22B-FP8 --tp 8 "
        "--enable-two-batch-overlap"
    )
    code, out, _ = run(["fix", "--sglang", launch, "--json"], capsys)
    best = json.loads(out)["fixes"][0]
    assert code == 0 and best["config"]["enable_two_batch_overlap"] is True
    assert best["objective"]["features_toggled"] == 1
    assert "--enable-two-batch-overlap" in best["command_line"]
    code, out, _ = run(["validate", "--sglang", best["command_line"], "--json"], capsys)
    assert code == 0 and json.loads(out)["valid"]
    code, out, _ = run(["fix", "--sglang", launch], capsys)
    assert "1 feature(s) toggled" in out and "features kept" not in out
    assert "--enable-two-batch-overlap on" in out  # the relaxed tier names it


def test_quantization_and_the_chosen_moe_runner_are_features(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """MOE-CUTLASS-EP on a 16-bit Qwen3-30B-A3B: `--quantization mxfp8` repaired it as
    "features kept", a new weight format an operator never reaches for to fix a layout;
    the fix is `--ep 8` (SGLang 0.5.23 accepts `--tp 8 --ep 8 --moe-runner-backend
    flashinfer_cutlass`), and quantization switched on counts as a feature."""
    cmd = (
        "python -m sglang.launch_server --model-path Qwen/Qwen3-30B-A3B --tp 8 --ep 4 "
        "--moe-runner-backend flashinfer_cutlass"
    )
    with pytest.raises(SystemExit) as exc:
        main(["fix", "--sglang", cmd, "--top", "3", "--json"])
    data = json.loads(capsys.readouterr().out)
    assert exc.value.code == 0
    best = data["fixes"][0]
    assert best["command_line"] == cmd.replace("--ep 4", "--ep 8")
    assert best["objective"]["features_toggled"] == 0
    for f in data["fixes"]:
        quantized = "--quantization" in f["command_line"]
        assert not quantized or f["objective"]["features_toggled"] >= 1
    ran = solver.validate(best["config"], explain=False, sglang_version="0.5.23")
    assert ran.valid and not ran.notes


def test_pplx_is_kept_by_dp_attention_with_chunked_prefill_on(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """pplx without DP attention on DeepSeek-V3: `--moe-runner-backend megamoe` repaired it
    while SGLang ran megamoe for the pplx the command still said. Swapping the chosen
    all-to-all backend is two features (pplx off, megamoe on), so the fix is attention DP,
    as SGLang's message asks; and A2A-PPLX-DISPATCH is met by a chunk within the budget
    (256 over 2 groups: 128 a group), not by switching chunked prefill off (0)."""
    cmd = (
        "python -m sglang.launch_server --model-path deepseek-ai/DeepSeek-V3 "
        "--trust-remote-code --tp 8 --moe-a2a-backend pplx"
    )
    for pins in ([], ["--pin", "moe_a2a_backend"]):
        with pytest.raises(SystemExit) as exc:
            main(["fix", "--sglang", cmd, *pins, "--json"])
        data = json.loads(capsys.readouterr().out)
        assert exc.value.code == 0
        best = data["fixes"][0]
        assert best["command_line"] == f"{cmd} --chunked-prefill-size 256 --attn-dp-size 2"
        assert best["objective"]["features_toggled"] == 1  # DP attention on
    swap = {"tp_size": 8, "moe_a2a_backend": "pplx", "moe_runner_backend": "megamoe"}
    from meshsat.solver.repair.features import toggled

    old = Config.model_validate({"tp_size": 8, "moe_a2a_backend": "pplx"}).model_dump()
    names = {f.name for f in toggled(old, Config.model_validate(swap).model_dump())}
    assert names == {"a2a_pplx", "a2a_megamoe"}
    off = Config.model_validate({"tp_size": 8, "chunked_prefill_size": 0}).model_dump()
    assert "chunked_prefill" in {f.name for f in toggled(old, off)}


def test_speculative_decoding_switched_off_is_a_feature_and_its_flags_go(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """TOPO-PP-SPEC (speculative decoding with PP on a server that is no PD prefill): a fix
    that drops `--speculative-algorithm` turns a feature off (it said "features kept") and
    leaves `--speculative-num-steps` and the rest doing nothing: they go with it."""
    cmd = (
        "python -m sglang.launch_server --model-path deepseek-ai/DeepSeek-V3 --tp 8 "
        "--pp-size 2 --speculative-algorithm EAGLE --speculative-num-steps 3 "
        "--speculative-eagle-topk 1 --speculative-num-draft-tokens 4 "
        "--speculative-draft-model-path some/draft --port 30010"
    )
    with pytest.raises(SystemExit) as exc:
        main(["fix", "--sglang", cmd, "--top", "2", "--json"])
    data = json.loads(capsys.readouterr().out)
    assert exc.value.code == 0
    for f in data["fixes"]:
        assert f["objective"]["features_toggled"] == 1
        line = f["command_line"]
        assert ("--speculative-algorithm" in line) == ("--speculative-num-steps" in line)
        assert ("--speculative-algorithm" in line) == ("some/draft" in line)
        assert line.endswith("--port 30010") or "--port 30010 " in line
        back = parse_sglang_command(line).values
        model = ModelSpec.from_hf_config(catalogue_config("deepseek-ai/DeepSeek-V3"))
        ran = solver.validate(back, model, explain=False, sglang_version="0.5.23")
        assert ran.valid, line
    off = [f for f in data["fixes"] if "--speculative-algorithm" not in f["command_line"]]
    assert off and off[0]["config"].get("speculative_num_draft_tokens") is None


# --- known gaps: the width SGLang runs, a stray flag, the cited rules, duplicates -----------
DSV32 = ModelSpec.from_hf_config(catalogue_config("deepseek-ai/DeepSeek-V3.2"))


@pytest.mark.parametrize("strategy", [None, "zigzag"])
def test_dsv32_prefill_cp_keeps_the_width_sglang_derives(strategy: str | None) -> None:
    """DeepSeek V3.2 with prefill CP and no --attn-cp-size: SGLang 0.5.23 runs CP over the
    whole attention-TP group (attention CP 8 at tp 8; its own resolution, recorded with
    /work/shared/sglang_oracle: `tp_size 8, enable_prefill_cp, cp_strategy interleave`
    is accepted with attn_cp_size 8). The feature tier read the typed width (1) as
    "prefill CP does nothing", so the fix typed --attn-cp-size 2 with the strategy: two
    changes, and CP shrunk from the 8 SGLang would run to 2. The strategy alone keeps it."""
    cfg = {"tp_size": 8, "enable_prefill_cp": True}
    if strategy is not None:
        cfg["cp_strategy"] = strategy
    best = fix(cfg, DSV32, sglang_version="0.5.23").best
    assert best.changes == (Change("cp_strategy", strategy, "interleave"),)
    assert best.objective.features == 0 and best.objective.fields_changed == 1
    ran = solver.validate(best.config, DSV32, explain=False, sglang_version="0.5.23")
    assert ran.valid and ran.resolved["attn_cp_size"] == 8
    # The typed width that SGLang overrides is no width that works: MLA prefill CP with
    # attention DP 8 on tp 8 runs attention CP 1, whatever --attn-cp-size says.
    from meshsat.solver.repair.features import toggled

    old = Config.model_validate(cfg).model_dump()
    alone = Config.model_validate({**cfg, "cp_strategy": "interleave"}).model_dump()
    assert toggled(old, alone, ran.resolved) == ()
    assert {f.name for f in toggled(old, alone)} >= {"prefill_cp"}  # typed width 1: no CP


def test_a_dcp_backend_without_decode_cp_is_dropped(capsys: pytest.CaptureFixture[str]) -> None:
    """--dcp-comm-backend without decode CP (DCP-BACKEND-NEEDS-DCP; SGLang 0.5.23 refuses
    `tp 8 --dcp-comm-backend a2a`: "only affects the decode context-parallel attention
    reduction"). The fix typed `--dcp-comm-backend ag_rs`, a flag that still does nothing:
    unsetting it was ranked "a value SGLang rewrites" (unset resolves to ag_rs), but
    dropping a flag types no value. The flag goes."""
    cmd = "python -m sglang.launch_server --model-path deepseek-ai/DeepSeek-V3 --tp 8"
    for version in ("0.5.19", "0.5.23"):
        with pytest.raises(SystemExit) as exc:
            main(["fix", "--sglang", f"{cmd} --dcp-comm-backend a2a", "-V", version, "--json"])
        data = json.loads(capsys.readouterr().out)
        assert exc.value.code == 0
        best = data["fixes"][0]
        assert best["changes"] == [{"field": "dcp_comm_backend", "old": "a2a", "new": None}]
        assert best["command_line"] == cmd


def _binds(rule_id: str, relaxed: Any, *reports: Any) -> bool:
    """Whether a rule a relaxation cites bears on it: its condition holds in the input or
    in the fix (these validation reports; by the tree-walking interpreter), or it reads a
    field of what the relaxation is about (a feature it names, a pin). A rule that does
    neither applies only where a feature the fix keeps would be toggled (DWDP-NO-TBO with
    DWDP off in both): that feature, not the rule, is the reason."""
    from meshsat.solver.backends.interp import evaluate
    from meshsat.solver.lang.expr import fields_of
    from meshsat.solver.repair.features import FEATURES

    rule = NEWEST.by_id[rule_id]
    if any(bool(evaluate(rule.when, r.resolved_env, environment_of(r))) for r in reports):
        return True
    named = [f for f in FEATURES if f.name in relaxed.features]
    about = {*relaxed.pins, *(n for f in named for n in (*fields_of(f.on), *fields_of(f.works)))}
    return not about.isdisjoint(fields_of(rule.when))


def environment_of(report: Any) -> Any:
    from meshsat.solver.validation.validate import environment

    return environment(report.config, report.model)


DEEPSEEK_V3_HF = ModelSpec.from_hf_config(catalogue_config("deepseek-ai/DeepSeek-V3"))


@pytest.mark.parametrize(
    ("cfg", "model"),
    [
        ({"tp_size": 8, "enable_two_batch_overlap": True}, DEEPSEEK_V3_HF),
        ({"tp_size": 8, "moe_a2a_backend": "pplx"}, DEEPSEEK_V3_HF),
        ({"tp_size": 16, "attn_cp_size": 8, "enable_prefill_cp": True}, DSV32),
    ],
)
def test_a_relaxed_tier_cites_only_rules_that_bind(cfg: dict[str, Any], model: ModelSpec) -> None:
    """tp 8 with two-batch overlap on DeepSeek-V3: the relaxed line read "(DWDP-NO-TBO,
    TOPO-TBO-DP-ATTN)" with DWDP off in the input and in the fix: the core held the rule
    where the feature "DWDP off" said the same. Each rule a relaxation names has its
    condition hold in the input or in the fix."""
    report = fix(cfg, model)
    assert report.relaxed
    before = solver.validate(cfg, model, explain=False)
    after = solver.validate(report.best.config, model, explain=False)
    for relaxed in report.relaxed:
        assert relaxed.rules
        for rule in relaxed.rules:
            assert _binds(rule.id, relaxed, before, after), (rule.id, relaxed.text)
        assert "DWDP-NO-TBO" not in relaxed.text


def test_top_k_lists_each_command_once(capsys: pytest.CaptureFixture[str]) -> None:
    """pplx on DeepSeek-V3 with --top 8: `--dp-size 2 --enable-dp-attention` and
    `--attn-dp-size 2` are two layouts to the search but one command on 0.5.23, which the
    list printed twice. A later fix whose command an earlier one already prints goes."""
    cmd = (
        "python -m sglang.launch_server --model-path deepseek-ai/DeepSeek-V3 "
        "--trust-remote-code --tp 8 --moe-a2a-backend pplx"
    )
    with pytest.raises(SystemExit) as exc:
        main(["fix", "--sglang", cmd, "--top", "8", "--json"])
    data = json.loads(capsys.readouterr().out)
    assert exc.value.code == 0
    lines = [f["command_line"] for f in data["fixes"]]
    assert len(lines) >= 3 and len(set(lines)) == len(lines), lines
    report = fix({"tp_size": 8, "moe_a2a_backend": "pplx"}, DEEPSEEK_V3_HF, top=8)
    rendered = [f.command_line for f in report.fixes]
    assert len(set(rendered)) == len(rendered), rendered


#: The chunk 0.5.18 to 0.5.23 give an unset --chunked-prefill-size by the GPU's memory
#: (`_handle_gpu_memory_settings`, read from their source; 4096 where none is known), before
#: `_handle_data_parallelism` divides it by the DP-attention width.
_SGLANG_DEFAULT_CHUNKS = (2048, 4096, 8192, 16384)


def _chunk_check_holds(resolved: dict[str, Any]) -> bool:
    """check_server_args's chunk assert on every GPU: the resolved chunk, or each default
    divided as DP attention divides it, a multiple of the resolved page."""
    page = resolved["page_size"]
    chunk = resolved["chunked_prefill_size"]
    if chunk is not None:
        return chunk <= 0 or chunk % page == 0
    dp = resolved["dp_size"] if resolved["enable_dp_attention"] else 1
    return all((d // dp) % page == 0 for d in _SGLANG_DEFAULT_CHUNKS)


@pytest.mark.parametrize(
    "config",
    [
        # 0.5.23 measured: with no chunk it runs 4096 // 3 = 1365 and refuses it at launch
        # ("chunked_prefill_size must be divisible by page_size").
        {"tp_size": 3, "dp_size": 3, "enable_dp_attention": True, "page_size": 64},
        {"tp_size": 3, "dp_size": 3, "enable_dp_attention": True, "attention_backend": "flashmla"},
        {
            "tp_size": 3,
            "dp_size": 3,
            "enable_dp_attention": True,
            "attention_backend": "flashmla",
            "chunked_prefill_size": 1000,
        },
    ],
)
def test_fix_never_leaves_the_chunk_to_a_default_that_breaks_the_page(
    config: dict[str, Any],
) -> None:
    """Unsetting --chunked-prefill-size was fix's repair of KV-CHUNK-PAGE, though SGLang's
    own chunk over DP attention 3 is a multiple of 64 on no GPU: every fix now holds on
    every GPU, as the check is written above (not through meshsat's rules)."""
    report = fix(config, sglang_version="0.5.23")
    assert report.fixes
    for found in report.fixes:
        assert _chunk_check_holds(dict(found.resolved)), found.changes


def test_the_default_chunk_is_an_error_where_certain_and_advice_where_not() -> None:
    """dp 3 with pages of 64 fails on every GPU (0.5.23 measured: 4096 // 3 = 1365,
    refused at launch): SGLang's error. Pages of 4096 fail only the smallest GPUs' 2048:
    advice, unless `gpu_sm` names the GPU (an H100's 8192 passes). dp 2 (0.5.23 measured:
    2048 // 2 = 1024, accepted) and a chunk typed to fit (576 // 3 = 192) pass."""
    base = {"tp_size": 3, "dp_size": 3, "enable_dp_attention": True, "page_size": 64}
    report = validate(base, explain=False, sglang_version="0.5.23")
    assert not report.valid
    assert [v.rule for v in report.violations] == ["KV-CHUNK-DEFAULT-PAGE-CERTAIN"]
    assert report.violations[0].message.startswith(
        "chunked_prefill_size must be divisible by page_size"
    )
    some = validate({"page_size": 4096}, explain=False, sglang_version="0.5.23")
    assert some.valid and [w.rule for w in some.warnings] == ["KV-CHUNK-DEFAULT-PAGE"]
    h100 = {"page_size": 4096, "platform": "cuda", "gpu_sm": 90}
    assert not validate(h100, explain=False, sglang_version="0.5.23").warnings
    for fine in ({**base, "tp_size": 2, "dp_size": 2}, {**base, "chunked_prefill_size": 576}):
        fine_report = validate(fine, explain=False, sglang_version="0.5.23")
        assert fine_report.valid and not fine_report.warnings
