"""One PD server's own checks: what SGLang refuses in a prefill or decode server alone.

The 0.5.23 table is SGLang 0.5.23's own argument resolution run by the oracle
(/work/shared/sglang_oracle/oracle.py --launch, Llama-3.1-8B, CPU), recorded here: each
row's `accepted` and error text are the oracle's, so meshsat must refuse exactly these, with
the same words. 0.4.6.post5's check is in its Mooncake KV manager (no ServerArgs path
runs it): its condition and text are read from the installed release where the fidelity
cache has it.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from meshsat.solver import validate
from meshsat.solver.packs import get_pack

_PC = {"disaggregation_decode_allocation_policy": "prefill_complete"}
_NOT_YET = "--disaggregation-decode-allocation-policy prefill_complete does not yet support "

#: (config, the oracle's error, None: accepted) on 0.5.23.
ORACLE_0_5_23: tuple[tuple[dict[str, Any], str | None], ...] = (
    (
        {"disaggregation_mode": "decode", "tp_size": 2, **_PC},
        _NOT_YET + "attention tensor parallelism greater than one",
    ),
    # handle_deprecated_dp_attention moves DP attention to attn_dp_size first, so the
    # policy's `dp_size if enable_dp_attention else 1` is 1: TP 2 is refused either way.
    (
        {"disaggregation_mode": "decode", "tp_size": 2, "attn_dp_size": 2, **_PC},
        _NOT_YET + "attention tensor parallelism greater than one",
    ),
    (
        {"disaggregation_decode_allocation_policy": "prefill_complete"},
        _NOT_YET + "aggregated serving",
    ),
    (
        {"disaggregation_mode": "prefill", "disaggregation_transfer_backend": "nixl", **_PC},
        _NOT_YET + "transfer backends other than Mooncake",
    ),
    (
        {
            "disaggregation_mode": "prefill",
            "disaggregation_transfer_backend": "mooncake_tcp",
            **_PC,
        },
        None,
    ),
    (
        {"disaggregation_mode": "decode", "pp_size": 2, **_PC},
        _NOT_YET + "pipeline or attention context parallelism",
    ),
    ({"disaggregation_mode": "decode", **_PC}, None),
    (
        {"disaggregation_mode": "prefill", "disaggregation_transfer_backend": "fake"},
        "Prefill server does not support 'fake' as the transfer backend",
    ),
    ({"disaggregation_mode": "decode", "disaggregation_transfer_backend": "fake"}, None),
    ({"disaggregation_mode": "decode", "dp_size": 2}, None),
)


@pytest.mark.parametrize(("config", "error"), ORACLE_0_5_23)
def test_pd_server_rules_agree_with_sglang_0_5_23(
    config: dict[str, Any], error: str | None
) -> None:
    report = validate(config, sglang_version="0.5.23", explain=False)
    errors = [v.message for v in report.violations if v.severity == "error"]
    if error is None:
        assert report.valid, errors
    else:
        assert errors == [error]


@pytest.mark.parametrize("version", ["0.5.18", "0.5.19", "0.5.23"])
def test_prefill_refuses_fake_backend_in_every_0_5_release(version: str) -> None:
    """0.5.18's __post_init__ and 0.5.19/0.5.23's PD hook assert it alike."""
    prefill = {"disaggregation_mode": "prefill", "disaggregation_transfer_backend": "fake"}
    assert [v.rule for v in validate(prefill, sglang_version=version).violations] == [
        "PD-PREFILL-FAKE-BACKEND"
    ]
    assert validate({**prefill, "disaggregation_mode": "decode"}, sglang_version=version).valid


@pytest.mark.parametrize("version", ["0.4.6.post5", "0.5.18", "0.5.19"])
def test_allocation_policy_is_a_0_5_23_flag(version: str) -> None:
    assert "disaggregation_decode_allocation_policy" in get_pack(version).absent_fields


_MOONCAKE_0_4 = (
    Path.home()
    / ".cache/meshsat-fidelity/0.4.6.post5/lib/python3.11/site-packages/sglang/srt"
    / "disaggregation/mooncake/conn.py"
)


@pytest.mark.parametrize(
    ("config", "refused"),
    [
        ({"disaggregation_mode": "decode", "dp_size": 2}, True),
        ({"disaggregation_mode": "prefill", "dp_size": 2}, True),
        (
            {
                "disaggregation_mode": "decode",
                "dp_size": 2,
                "tp_size": 2,
                "enable_dp_attention": True,
            },
            False,
        ),
        (
            {
                "disaggregation_mode": "decode",
                "dp_size": 2,
                "disaggregation_transfer_backend": "nixl",
            },
            False,
        ),
        ({"dp_size": 2}, False),
    ],
)
def test_0_4_mooncake_refuses_dp_replicas(config: dict[str, Any], refused: bool) -> None:
    """0.4.6.post5's MooncakeKVManager.__init__: `if not enable_dp_attention and dp_size
    != 1: raise ValueError(...)`, on every PD rank (NIXL's manager has no such check); an
    error at launch."""
    report = validate(config, sglang_version="0.4.6.post5")
    rules = [v.rule for v in report.violations]
    assert ("PD-MOONCAKE-DP-REPLICAS" in rules) is refused
    assert get_pack("0.4.6.post5").stage("PD-MOONCAKE-DP-REPLICAS") == "launch"


def test_0_4_mooncake_check_is_the_release_s() -> None:
    """The rule's words and condition are the release's own, and no 0.5 release has it."""
    if not _MOONCAKE_0_4.exists():
        pytest.skip("0.4.6.post5 is not installed in the fidelity cache")
    source = _MOONCAKE_0_4.read_text(encoding="utf-8")
    rule = get_pack("0.4.6.post5").by_id["PD-MOONCAKE-DP-REPLICAS"]
    assert f'"{rule.message}"' in source
    assert "if not server_args.enable_dp_attention and server_args.dp_size != 1:" in source
    assert not (_MOONCAKE_0_4.parent.parent / "nixl/conn.py").read_text().count(rule.message)
    for version in ("0.5.18", "0.5.19", "0.5.23"):
        assert "PD-MOONCAKE-DP-REPLICAS" not in get_pack(version).by_id
        root = Path(str(_MOONCAKE_0_4).replace("0.4.6.post5", version)).parent.parent
        if root.exists():
            assert not any(
                re.search(r"dp size must be 1 in disaggregation", p.read_text(errors="ignore"))
                for p in root.rglob("*.py")
            )


def test_0_4_plan_proposes_no_mooncake_dp_replicas(capsys: pytest.CaptureFixture[str]) -> None:
    """`plan --disagg` on 0.4.6.post5 offered PD servers of plain DP replicas
    (`--tp-size 4 --dp-size 2 --disaggregation-mode prefill`), which its Mooncake manager
    refuses at start-up; the pack's launch rule now keeps them out of the search."""
    from tests.cli_helpers import run_cli

    res = run_cli(
        capsys,
        *("plan", "--model", "meta-llama/Llama-3.1-70B-Instruct", "--gpu", "H100"),
        *("--gpus", "16", "--disagg", "--isl", "4096", "--osl", "1024", "-V", "0.4.6.post5"),
    )
    assert res.code == 0, res.err
    servers = [line for line in res.out.splitlines() if "--disaggregation-mode" in line]
    assert servers
    assert not [s for s in servers if "--dp-size" in s and "--enable-dp-attention" not in s]
