"""Pair rules and their repair: the decode allocation policy both roles must share
(0.5.23), and PD-PP's repair keeping the decode's GPU count, told truthfully in JSON."""

from __future__ import annotations

import pytest

from meshsat.solver.deployment.fix import fix_deployment
from meshsat.solver.deployment.validate import validate_deployment

_LLAMA = "--model-path meta-llama/Llama-3.1-8B-Instruct"
_ROUTER = (
    "python -m sglang_router.launch_router --pd-disaggregation "
    "--prefill http://10.0.0.1:30000 --decode http://10.0.0.2:30000\n"
)
_POLICY = " --disaggregation-decode-allocation-policy prefill_complete"


def _pd_script(model: str, prefill: str, decode: str) -> str:
    """A prefill server, a decode server (`model` and each side's own flags) and a router."""
    return (
        f"python -m sglang.launch_server {model} --disaggregation-mode prefill "
        f"--host 10.0.0.1 --port 30000{prefill}\n"
        f"python -m sglang.launch_server {model} --disaggregation-mode decode "
        f"--host 10.0.0.2 --port 30000{decode}\n" + _ROUTER
    )


def _policy_script(prefill: str, decode: str) -> str:
    return _pd_script(_LLAMA, f" --tp 1{prefill}", f" --tp 1{decode}")


@pytest.mark.parametrize(("prefill", "decode"), [("", _POLICY), (_POLICY, "")])
def test_allocation_policy_must_match_on_0_5_23(prefill: str, decode: str) -> None:
    """0.5.23's CommonKVReceiver.init fails every request when the decode's policy is not
    the one the prefill's bootstrap info carries (common/conn.py: "Disaggregation decode
    allocation policy mismatch: prefill=..., decode=... Set
    --disaggregation-decode-allocation-policy identically on both roles.")."""
    report = validate_deployment(_policy_script(prefill, decode), sglang_version="0.5.23")
    errors = [f for f in report.errors if f.rule == "PD-ALLOCATION-POLICY"]
    assert len(errors) == 1
    assert errors[0].message.startswith("Disaggregation decode allocation policy mismatch: ")
    assert errors[0].message.endswith(
        "Set --disaggregation-decode-allocation-policy identically on both roles."
    )
    assert validate_deployment(_policy_script(prefill, prefill), sglang_version="0.5.23").valid


@pytest.mark.parametrize("version", ["0.4.6.post5", "0.5.18", "0.5.19"])
def test_allocation_policy_pair_rule_is_0_5_23_only(version: str) -> None:
    """No earlier release has the flag (its FLAG-ABSENT rule refuses it) nor the check."""
    report = validate_deployment(_policy_script("", _POLICY), sglang_version=version)
    assert "PD-ALLOCATION-POLICY" not in {f.rule for f in report.findings}


@pytest.mark.parametrize(("prefill", "decode"), [("", _POLICY), (_POLICY, "")])
def test_fix_gives_the_decode_the_prefill_s_policy(prefill: str, decode: str) -> None:
    """The decode reads the prefill's policy from its bootstrap info and compares: the
    decode follows, as for every pair rule (the prefill is the fixed point)."""
    fixed = fix_deployment(_policy_script(prefill, decode), sglang_version="0.5.23")
    assert fixed.after is not None and fixed.after.valid
    decode_fix = fixed.servers[1]
    assert decode_fix.forced == (
        (
            "disaggregation_decode_allocation_policy",
            "prefill_complete" if decode else "early",
            "prefill_complete" if prefill else "early",
        ),
    )


_FX2 = (
    "python -m sglang.launch_server --model-path deepseek-ai/DeepSeek-V3 "
    "--disaggregation-mode prefill --host 10.0.0.1 --port 30000 --tp 8 --trust-remote-code\n"
    + "".join(
        "python -m sglang.launch_server --model-path deepseek-ai/DeepSeek-V3 "
        "--disaggregation-mode decode --host 10.0.0.2 --port 30000 --tp 8 --pp-size 2 "
        f"--nnodes 2 --node-rank {rank} --dist-init-addr 10.0.0.2:5000 --trust-remote-code\n"
        for rank in (0, 1)
    )
    + _ROUTER
)


def test_pp_repair_keeps_the_decode_s_gpus_and_says_so() -> None:
    """PD-PP on a decode of TP 8 x PP 2 (16 GPUs) against a prefill of PP 1: the decode
    takes TP 16 at PP 1 (still 16 GPUs, attention TP 16 a multiple of the prefill's 8)
    rather than PP 1 alone (8 GPUs), and its fix's tiers are counted from the user's
    layout (before: PP 2 -> 1 read as "GPU count kept", no field changed)."""
    fixed = fix_deployment(_FX2, sglang_version="0.5.23")
    assert fixed.after is not None and fixed.after.valid
    decode = fixed.servers[1]
    assert {(c.field, c.old, c.new) for c in decode.forced} == {
        ("tp_size", 8, 16),
        ("pp_size", 2, 1),
    }
    best = decode.report.best
    assert best.gpus_used == decode.report.gpus_before == 16
    told = best.to_dict()
    assert told["objective"]["gpus_changed"] is False
    assert told["objective"]["user_fields_changed"] == 2
    tiers = {t["tier"]: t for t in told["tiers"]}
    assert tiers["gpus"]["kept"] is True
    assert tiers["user_fields"]["kept"] is False and tiers["user_fields"]["cost"] == 2


def test_pp_repair_that_changes_the_gpus_says_so() -> None:
    """With the decode's TP pinned (`--pin tp_size`), the prefill's PP alone is taken: 8
    GPUs of 16, which the tiers now say (they read "GPU count kept" before)."""
    fixed = fix_deployment(_FX2, sglang_version="0.5.23", pins=("tp_size",))
    decode = fixed.servers[1]
    best = decode.report.best
    told = best.to_dict()
    assert best.gpus_used != decode.report.gpus_before
    assert told["objective"]["gpus_changed"] is True
    assert {t["tier"]: t for t in told["tiers"]}["gpus"]["kept"] is False


_DSV3 = "--model-path deepseek-ai/DeepSeek-V3 --trust-remote-code --tp 8"


def _page_script(prefill: str, decode: str) -> str:
    return _pd_script(_DSV3, prefill, decode)


@pytest.mark.parametrize("version", ["0.5.19", "0.5.23"])
@pytest.mark.parametrize("chunk", ["", " --chunked-prefill-size 1000"])
def test_a_decode_s_forced_page_moves_the_prefill(version: str, chunk: str) -> None:
    """flashmla runs pages of 64 whatever --page-size says (R-PAGE-SIZE, measured in
    tests/test_page_size.py): the decode cannot follow its prefill's page 1, so the
    prefill, whose back-end leaves the page free, takes --page-size 64 (its chunk of 1000,
    no longer a multiple, repaired by its own fix) and the decode keeps its flags. Was:
    --page-size 1 written on the decode, which still ran 64, the pair still broken."""
    script = _page_script(chunk, " --attention-backend flashmla")
    before = validate_deployment(script, sglang_version=version)
    assert "PD-PAGE-SIZE" in {f.rule for f in before.errors}
    fixed = fix_deployment(script, sglang_version=version)
    assert fixed.after is not None and fixed.after.valid, fixed.after
    prefill, decode = fixed.servers
    assert prefill.flags == (("--page-size", "64"),)
    assert decode.flags == () and decode.forced == ()
    if chunk:
        assert [(c.field, c.old) for c in prefill.report.best.changes] == [
            ("chunked_prefill_size", 1000)
        ]


def test_two_forced_pages_are_left_to_the_hint() -> None:
    """0.5.19's cutlass_mla runs 128 and flashmla 64: neither side can take the other's
    page, so fix writes no --page-size (one on the decode changed nothing) and the pair
    rule stays."""
    script = _page_script(" --attention-backend cutlass_mla", " --attention-backend flashmla")
    fixed = fix_deployment(script, sglang_version="0.5.19")
    assert all(s.flags == () for s in fixed.servers)
    assert fixed.after is not None
    assert "PD-PAGE-SIZE" in {f.rule for f in fixed.after.errors}
