"""The pair rules against the real releases: what each 0.5 release's decode side says of a
prefill (`CommonKVManager.try_ensure_parallel_info` and `_resolve_rank_mapping`, run on
a grid of pairs by fidelity/pd_pairs.py, recorded in tests/fixtures/pd_oracle/).

For every recorded pair: the release raises exactly when a pair rule that cites SGLang is
broken as an error in that release, with that rule's wording; it logs "Performance is NOT
guaranteed" exactly when PD-TP-NON-MLA-PERF is broken (and nothing raised before the rank
mapping). Rules whose source is meshsat's own are not SGLang's checks and are left out.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from meshsat.solver.catalogue.pd_pairs import PAIR_RULES, PairRule, Side

ORACLE = Path(__file__).parent / "fixtures" / "pd_oracle"
#: The checks that run before the rank mapping (a raise there logs no mapping warning).
_BEFORE_MAPPING = ("PD-PAGE-SIZE", "PD-KV-DTYPE", "PD-DCP-MLA", "PD-DCP-PREFILL-CP")


@cache
def recorded(release: str) -> list[dict[str, Any]]:
    data = json.loads((ORACLE / f"{release}.json").read_text())
    assert data["release"] == release
    cases: list[dict[str, Any]] = data["cases"]
    return cases


def _side(role: str, facts: dict[str, Any], *, mla: bool, dcp: int = 1) -> Side:
    return Side(
        role=role,
        model="m",
        backend="mooncake",
        bootstrap_port=8998,
        page_size=int(facts["page_size"]),
        kv_cache_dtype=facts["kv_cache_dtype"],
        tp=facts["attn_tp"],
        dp=1,
        dp_attention=False,
        attn_tp=facts["attn_tp"],
        attn_cp=facts.get("attn_cp", 1),
        pp=facts["pp"],
        dcp=dcp,
        mla=mla,
    )


def _sglang_rules(release: str) -> list[PairRule]:
    return [
        r
        for r in PAIR_RULES
        if r.severity(release) is not None and not r.source.startswith("meshsat")
    ]


@pytest.mark.parametrize("release", ["0.5.18", "0.5.19", "0.5.23"])  # CommonKVManager
def test_pair_rules_say_what_the_release_says(release: str) -> None:
    rules = _sglang_rules(release)
    assert {r.id for r in rules} >= {"PD-PAGE-SIZE", "PD-KV-DTYPE", "PD-PP", "PD-TP-NON-MLA-PERF"}
    cases = recorded(release)
    assert len(cases) > 400
    raised = 0
    for case in cases:
        d = case["decode"]
        p = _side("prefill", case["prefill"], mla=d["mla"])
        ds = _side("decode", d, mla=d["mla"], dcp=d["dcp"])
        broken = [r for r in rules if r.check(p, ds) is False]
        errors = [r for r in broken if r.severity(release) == "error"]
        if case["outcome"] == "error":
            raised += 1
            assert case["message"].strip() in {r.text(p, ds).strip() for r in errors}, case
        else:
            assert not errors, (case, [r.id for r in errors])
        warned = any("Performance is NOT guaranteed" in w for w in case["warnings"])
        early = any(r.id in _BEFORE_MAPPING for r in errors)
        expect = any(r.id == "PD-TP-NON-MLA-PERF" for r in broken) and not early
        assert warned == expect, case
    assert raised > 100  # the grid reaches every raise, not only the accepting pairs


def _side_046(role: str, facts: dict[str, Any], backend: str, mla: bool) -> Side:
    tp, dp = facts["tp"], facts["dp"]
    return Side(
        role=role, model="m", backend=backend, bootstrap_port=8998, page_size=1,
        kv_cache_dtype="auto", tp=tp, dp=dp, dp_attention=dp > 1, attn_tp=tp // dp,
        attn_cp=1, pp=1, dcp=1, mla=mla,
    )  # fmt: skip


def test_pair_rules_say_what_0_4_6_says() -> None:
    """0.4.6.post5's receivers (Mooncake's constructor, NIXL's bootstrap fetch), built for
    every decode rank against a prefill of each layout: the release fails exactly when a
    pair rule that cites it is broken, in its wording where it gives one (NIXL without DP
    attention fails on a prefill rank that does not exist, without a message)."""
    release = "0.4.6.post5"
    rules = _sglang_rules(release)
    assert {r.id for r in rules} >= {"PD-TP-NON-MLA", "PD-NIXL-PREFILL-TP"}
    cases = recorded(release)
    assert {c["backend"] for c in cases} == {"mooncake", "nixl"}
    for case in cases:
        d = case["decode"]
        p = _side_046("prefill", case["prefill"], case["backend"], d["mla"])
        ds = _side_046("decode", d, case["backend"], d["mla"])
        errors = [r for r in rules if r.severity(release) == "error" and r.check(p, ds) is False]
        assert (case["outcome"] == "error") == bool(errors), (case, [r.id for r in errors])
        if case["message"]:
            assert any(r.text(p, ds) in case["message"] for r in errors), case
    assert sum(c["outcome"] == "error" for c in cases) > 100
