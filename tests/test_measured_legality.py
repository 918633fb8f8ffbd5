"""How the accuracy scripts judge a measured server (benchmarks/perf_accuracy.py `judge`):
refused as recorded, legal with flags the row does not record, or legal. The oracle is
`validate` on the recorded layout plus the flags `judge` names."""

from __future__ import annotations

import math
import shlex
from typing import Any

import pytest

from benchmarks.perf_accuracy import RECORDED_FIELDS, Verdict, campaign_offsets, judge
from meshsat.solver import fix, validate
from meshsat.solver.lang.config import Config
from meshsat.solver.lang.model_spec import ModelSpec
from meshsat.solver.memory.models import model_config
from meshsat.solver.repair.features import toggled

PACK = "0.5.18"


def _spec(model: str) -> ModelSpec:
    return ModelSpec.from_hf_config(model_config(model))


def _decode(tp: int, dp: int, ep: int) -> dict[str, Any]:
    return {
        "tp_size": tp,
        "dp_size": dp,
        "enable_dp_attention": dp > 1,
        "ep_size": ep,
        "disaggregation_mode": "decode",
    }


def _flags(text: str) -> dict[str, Any]:
    words = shlex.split(text)
    pairs = zip(words[::2], words[1::2], strict=True)
    return {k.removeprefix("--").replace("-", "_"): _value(v) for k, v in pairs}


def _value(v: str) -> Any:
    return int(v) if v.isdigit() else v


def test_large_ep_decode_is_legal_with_the_recipes_flags() -> None:
    """DeepSeek-V3 decode at tp 32, attention DP 32, EP 32 (measured in silicon_sample.csv):
    the FP8 dense MLP split 32 ways is refused; replicated, with an all-to-all backend for
    the shared expert, SGLang runs it."""
    spec, cfg = _spec("deepseek-ai/DeepSeek-V3"), _decode(32, 32, 32)
    v = judge(cfg, spec, PACK)
    assert v.rule == "QUANT-BLOCK-DENSE-MLP" and v.unrecorded is not None
    added = _flags(v.unrecorded)
    assert added["moe_dense_tp_size"] == 1 and added["moe_a2a_backend"] != "none"
    assert not set(added) & set(RECORDED_FIELDS)
    assert validate({**cfg, **added}, spec, sglang_version=PACK).valid
    assert not validate(cfg, spec, sglang_version=PACK).valid


def test_heads_that_do_not_split_stay_refused() -> None:
    """tp 72 without attention DP splits 128 heads 72 ways: only attention CP (a width the
    row records as absent) would repair it, so the row stays judged illegal."""
    v = judge(_decode(72, 1, 1), _spec("deepseek-ai/DeepSeek-R1"), PACK)
    assert v == Verdict("MODEL-HEADS", None)


def test_legal_row() -> None:
    assert judge(_decode(8, 8, 8), _spec("deepseek-ai/DeepSeek-V3"), PACK) == Verdict()


def test_fix_of_large_ep_decode_is_the_recipe() -> None:
    """The legacy aliases of --enable-prefill-cp turn prefill CP on (R-LEGACY-CP): a fix
    that types one toggles prefill CP, so it no longer wins a tie over the all-to-all
    backend the decode server needs (it used to propose the DSA alias on DeepSeek-V3)."""
    off = Config().model_dump()
    for alias in ("enable_prefill_context_parallel", "enable_dsa_prefill_context_parallel"):
        names = {f.name for f in toggled(off, {**off, alias: True})}
        assert {"prefill_cp", "attention_cp", alias} <= names
    cfg, spec = _decode(32, 32, 32), _spec("deepseek-ai/DeepSeek-V3")
    best = fix(cfg, spec, pins=list(cfg), sglang_version=PACK).fixes[0]
    changed = {c.field for c in best.changes}
    assert "moe_dense_tp_size" in changed
    assert not changed & {"enable_prefill_context_parallel", "enable_dsa_prefill_context_parallel"}
    # Among the equals (any all-to-all backend), the canonical flag: SGLang runs every
    # changed value as typed (not `--moe-runner-backend megamoe`, its alias).
    ran = validate(best.config, spec, sglang_version=PACK).resolved_env
    assert all(ran[c.field] == c.new for c in best.changes), best.changes


def test_campaign_offsets_divide_out_one_factor_per_campaign() -> None:
    """Two campaigns, each off by its own factor (0.5x and 2x) with a little spread: as
    estimated every row is 50 % or 100 % off; with each campaign's median ratio divided out
    only the spread is left."""
    rows = [("a", 0.5 * m * s, m) for m, s in ((100, 1.0), (200, 1.1), (300, 0.9))]
    rows += [("b", 2.0 * m * s, m) for m, s in ((10, 1.0), (20, 1.2), (30, 0.8))]
    c = campaign_offsets(rows)
    assert c.campaigns == 2
    assert math.isclose(c.lowest, 0.5) and math.isclose(c.highest, 2.0)
    # |error| as estimated: 0.45, 0.5, 0.55 and 0.6, 1.0, 1.4; with the factor out: 0, 0.1,
    # 0.1 and 0, 0.2, 0.2.
    assert c.as_is == pytest.approx(0.575)
    assert c.within == pytest.approx(0.1, rel=0.05)
