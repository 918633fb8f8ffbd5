"""Decode-CP widths against each release's own `initialize_model_parallel`.

`fidelity/dcp_groups.py` ran the function of 0.5.18, 0.5.19 and 0.5.23 on a stand-in
`torch.distributed` over a grid of (tp, pp, attention DP, dcp) and recorded its groups or
its error (`tests/fixtures/dcp_groups/<version>.json`). SGLang's error is meshsat's
DCP-TP-DIV, in its words, at launch; every layout it accepts gets SGLang's groups from
`groups`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from meshsat.solver import InvalidLayoutError, validate
from meshsat.solver.groups import groups
from meshsat.solver.packs import get_pack

FIXTURES = Path(__file__).parent / "fixtures" / "dcp_groups"
RELEASES = ("0.5.18", "0.5.19", "0.5.23")


def _records(version: str) -> list[dict[str, Any]]:
    return list(json.loads((FIXTURES / f"{version}.json").read_text())["records"])


def _config(widths: list[int]) -> dict[str, Any]:
    tp, pp, adp, dcp = widths
    config: dict[str, Any] = {"tp_size": tp, "pp_size": pp, "dcp_size": dcp}
    if adp > 1:
        config |= {"enable_dp_attention": True, "dp_size": adp}
    return config


@pytest.mark.parametrize("version", RELEASES)
def test_sglang_refuses_exactly_what_dcp_tp_div_refuses(version: str) -> None:
    records = _records(version)
    assert any("error" in r for r in records) and any("groups" in r for r in records)
    for rec in records:
        report = validate(_config(rec["widths"]), sglang_version=version)
        hit = [v for v in report.violations if v.rule == "DCP-TP-DIV"]
        if "error" in rec:
            assert [v.message for v in hit] == [rec["error"]], rec
        else:
            assert not hit, rec


def test_dcp_tp_div_is_a_launch_error_in_every_0_5_pack() -> None:
    for version in RELEASES:
        assert get_pack(version).stage("DCP-TP-DIV") == "launch"
    assert "DCP-TP-DIV" not in get_pack("0.4.6.post5").by_id  # no decode CP there


@pytest.mark.parametrize("version", RELEASES)
def test_groups_of_accepted_layouts_are_sglangs(version: str) -> None:
    compared = 0
    for rec in _records(version):
        config = _config(rec["widths"])
        if "error" in rec:
            with pytest.raises(InvalidLayoutError, match=r"\[DCP-TP-DIV\]"):
                groups(config, sglang_version=version)
            continue
        if not validate(config, sglang_version=version).valid:
            continue
        m = groups(config, sglang_version=version)
        for kind in ("tp", "attn_tp", "dcp"):
            want = sorted(tuple(g) for g in rec["groups"][kind])
            assert sorted(m.groups[kind]) == want, (rec["widths"], kind)
        compared += 1
    assert compared >= 30
