"""`meshsat fields -V RELEASE` shows that release's parser: its choices, its defaults and
every spelling of a field's own option (`fidelity/flags/<version>.json` is the release's
argparse table as `fidelity/record.py` dumped it)."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from tests.cli_helpers import run_cli

FLAGS = Path(__file__).parent.parent / "fidelity" / "flags"
RELEASES = ("0.4.6.post5", "0.5.18", "0.5.19", "0.5.23")
#: The actions that set a field from its own option (not a deprecated spelling of another).
OWN_ACTIONS = ("_StoreAction", "_StoreTrueAction", "BooleanOptionalAction")


@cache
def parser(version: str) -> dict[str, list[dict[str, Any]]]:
    by_dest: dict[str, list[dict[str, Any]]] = {}
    for entry in json.loads((FLAGS / f"{version}.json").read_text())["flags"]:
        by_dest.setdefault(entry["dest"], []).append(entry)
    return by_dest


def fields(capsys: pytest.CaptureFixture[str], version: str) -> dict[str, dict[str, Any]]:
    run = run_cli(capsys, "fields", "-V", version, "--json")
    assert run.code == 0, run.err
    return {r["field"]: r for r in json.loads(run.out)["fields"]}


@pytest.mark.parametrize("version", RELEASES)
def test_fields_show_the_releases_parser(capsys: pytest.CaptureFixture[str], version: str) -> None:
    checked = 0
    for name, row in fields(capsys, version).items():
        own = [e for e in parser(version).get(name, []) if e["action"] in OWN_ACTIONS]
        if not row["in_release"] or row["tool_only"] or row["model_fact"] or not own:
            continue
        entry = own[0]
        for option in (f for e in own for f in e["flags"]):
            assert option in row["flags"], (version, name, option)
        if entry["choices"] is not None:
            shown = row["accepts"].removeprefix("one of ").removesuffix(" (or unset)")
            assert shown.split(", ") == [str(c) for c in entry["choices"]], (version, name)
        assert row["default"] == entry["default"], (version, name)
        checked += 1
    assert checked >= 20


def test_the_reported_fields(capsys: pytest.CaptureFixture[str]) -> None:
    old = fields(capsys, "0.4.6.post5")["load_balance_method"]
    assert (old["default"], old["accepts"]) == ("round_robin", "one of round_robin, shortest_queue")
    new = fields(capsys, "0.5.23")
    assert "tc_piecewise" not in new["cuda_graph_backend_decode"]["accepts"]
    assert "shortest_queue" not in new["load_balance_method"]["accepts"]
    assert new["elastic_ep_backend"]["accepts"] == "one of none, mooncake, nixl (or unset)"
    assert "--no-mm-enable-dp-encoder" in new["mm_enable_dp_encoder"]["flags"]
    seed = fields(capsys, "0.5.19")
    assert seed["dcp_comm_backend"]["default"] == "ag_rs"
    assert "--no-dcp-replicate-q-proj" in seed["dcp_replicate_q_proj"]["flags"]
    assert "--no-mm-enable-dp-encoder" not in seed["mm_enable_dp_encoder"]["flags"]
