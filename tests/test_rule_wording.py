"""Each release's own words for a rule whose condition is unchanged across releases,
held to the errors the releases raised (the recorded fidelity fixtures)."""

from __future__ import annotations

import json
from itertools import islice
from pathlib import Path
from typing import Any

import pytest

from fidelity.compare import iter_records, judge, model, release_config
from meshsat.solver import validate
from meshsat.solver.lang.config import Config
from meshsat.solver.packs import get_pack
from meshsat.solver.validation.report import Report

ROOT = Path(__file__).resolve().parents[1]

#: How each release words FlashInfer all-to-all's topology check (handle_a2a_moe).
FLASHINFER_TOPOLOGY = (
    "Flashinfer MoE A2A is only supported with dp_size",
    "Flashinfer MoE A2A requires",
)


@pytest.mark.parametrize("release", ["0.5.18", "0.5.19", "0.5.23"])
def test_flashinfer_a2a_topology_is_said_in_the_releases_words(release: str) -> None:
    """0.5.23 says "Flashinfer MoE A2A requires --attn-dp-size equal to --tp-size, except for
    Muse Spark ..."; 0.5.18 and 0.5.19 "... only supported with dp_size == tp_size and
    --enable-dp-attention". meshsat's first violation is the rule, in those words."""
    recorded = (
        r for r in iter_records(release) if (r.get("error") or "").startswith(FLASHINFER_TOPOLOGY)
    )
    records = list(islice(recorded, 4))
    assert records, release
    for rec in records:
        outcome = judge(rec, release)
        assert outcome.errors[0] == "TOPO-A2A-FLASHINFER"
        assert outcome.first_message == rec["error"]


def _launch_report(rec: dict[str, Any], release: str) -> Report:
    """meshsat's report on a recorded config, as `judge` builds it (which keeps only ids)."""
    cfg = release_config(rec)
    cfg["platform"] = rec.get("platform", "cpu")
    return validate(Config(**cfg), model(rec["model"]), explain=False, sglang_version=release)


#: check_server_args()'s own words (validation_hook.py; 0.4.6.post5 and 0.5.18 inline in
#: server_args.py), which meshsat had paraphrased ("tp_size * pp_size must be divisible by
#: nnodes: ...", "moe_dense_tp_size must be unset, 1 or tp_size") or kept from 0.5.19 on
#: 0.5.23 ("--enable-dp-attention is required", where 0.5.23 says "attention DP
#: (--attn-dp-size)").
LAUNCH_WORDS = (
    ("TOPO-NNODES", "tp_size must be divisible by number of nodes"),
    ("TOPO-MOE-DENSE-TP", "moe_dense_tp_size only supports"),
    ("TOPO-TBO-DP-ATTN", "When enabling two batch overlap without an EP a2a backend"),
)


@pytest.mark.parametrize(
    ("release", "rule", "words"),
    [
        ("0.4.6.post5", *LAUNCH_WORDS[0]),
        *((release, *w) for release in ("0.5.18", "0.5.19", "0.5.23") for w in LAUNCH_WORDS),
    ],
)
def test_launch_checks_are_said_in_the_releases_words(release: str, rule: str, words: str) -> None:
    recorded = (
        r
        for r in iter_records(release)
        if r["accepted"] and (r.get("launch_error") or "").startswith(words)
    )
    records = list(islice(recorded, 4))
    assert records, release
    for rec in records:
        (violation,) = [v for v in _launch_report(rec, release).violations if v.rule == rule]
        assert violation.message == rec["launch_error"]
        if release == "0.5.23":
            assert "--enable-dp-attention" not in violation.message + violation.hint


def test_no_0_5_23_rule_asks_for_its_deprecated_dp_attention_flag() -> None:
    """0.5.23 deprecates --enable-dp-attention (its flag table: "Use --attn-dp-size
    <dp-size> instead of --dp-size <dp-size> --enable-dp-attention"), and its own checks ask
    for "attention DP (--attn-dp-size)" (check_two_batch_overlap, handle_elastic_ep's
    scale-up) or assert on attn_dp_size (handle_data_parallelism)."""
    table = json.loads((ROOT / "fidelity/flags/0.5.23.json").read_text("utf-8"))
    (flag,) = [f for f in table["flags"] if f["flags"] == ["--enable-dp-attention"]]
    assert flag["deprecated"] and "--attn-dp-size" in flag["help"]
    pack = get_pack("0.5.23")
    assert [r.id for r in pack.rules if "--enable-dp-attention" in r.message + r.hint] == []


@pytest.mark.parametrize(
    ("release", "width"),
    [("0.5.18", "dp_size"), ("0.5.19", "dp_size"), ("0.5.23", "attn_dp_size")],
)
def test_dp_attention_divisibility_is_marked_as_the_bare_assert_of_its_release(
    release: str, width: str
) -> None:
    """handle_data_parallelism's `assert tp_size % dp_size == 0` (0.5.18, 0.5.19) became
    `assert cfg.tp_size % cfg.attn_dp_size == 0` (0.5.23, parallel_hook.py), with no text:
    SGLang says only "AssertionError". meshsat's words are marked as such and name the
    release's field; on 0.5.23 they said "With --enable-dp-attention, tp_size must be
    divisible by dp_size", fields a 0.5.23 user does not set."""
    recorded = (
        r
        for r in iter_records(release)
        if (r.get("error") or "") == "AssertionError"
        and (r.get("site") or "").endswith("handle_data_parallelism")
    )
    records = list(islice(recorded, 4))
    assert records, release
    for rec in records:
        outcome = judge(rec, release)
        assert outcome.errors[0] == "DPATTN-TP-DIV"
        assert outcome.first_message.startswith(
            f"AssertionError (a bare assert: tp_size % {width} == 0)"
        )
        assert ("--enable-dp-attention" in outcome.first_message) is (width == "dp_size")
