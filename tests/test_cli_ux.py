"""Regressions found by using the commands as a new user would (one test per defect)."""

from __future__ import annotations

import pytest

from tests.cli_helpers import run_cli

#: Valid on 0.5.23 (CP-DPCP-DIV reads attn_dp there), invalid on 0.5.19 (README's diff).
_DIFFERS = ("--set", "tp_size=8", "--set", "dp_size=3", "--set", "attn_cp_size=2")


def test_groups_defaults_to_the_newest_pack_as_its_help_says(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`groups --help` says "Default: the newest", as every other command's option does; it
    judged by the installed SGLang instead, so with 0.5.19 installed it refused a layout
    `validate` (newest) accepts."""
    import meshsat.solver.validation.validate as validate_module
    from meshsat.solver.packs import get_pack

    monkeypatch.setattr(validate_module, "installed_pack", lambda: get_pack("0.5.19"))
    assert run_cli(capsys, "validate", *_DIFFERS).code == 0
    run = run_cli(capsys, "groups", *_DIFFERS)
    assert run.code == 0, run.out
    assert run_cli(capsys, "groups", *_DIFFERS, "--sglang-version", "0.5.19").code == 1


def test_enumerate_limit_zero_is_bad_input_not_no_layout(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`--limit 0` listed nothing and answered exit 1 with "no layout satisfies the rules",
    which is false (8 GPUs have hundreds); it is a limit that asks for nothing: exit 2."""
    for extra in ((), ("--count",)):
        run = run_cli(capsys, "enumerate", "--gpus", "8", "--limit", "0", *extra)
        assert run.code == 2, run
        assert "no layout satisfies" not in run.err
        assert run.err.startswith("meshsat: error:") and "--limit" in run.err
    assert run_cli(capsys, "enumerate", "--gpus", "8", "--limit", "1", "--count").out == "1\n"


def test_diff_shows_what_changed_in_every_changed_rule(capsys: pytest.CaptureFixture[str]) -> None:
    """A rule whose condition reads the same in both releases but names a width that a
    release redefines (`shared_tp` lost 0.5.19's Step3p5 exception) was printed as
    "now error at launch (was error at launch)": a change that showed none. Every changed
    rule must show a difference: its condition, kind, message or a redefined name."""
    import itertools
    import json

    from meshsat.solver.packs import known_versions

    seen_definitions = False
    for a, b in itertools.permutations(known_versions(), 2):
        text = run_cli(capsys, "diff", a, b).out
        assert not any(
            f"now {kind} (was {kind})" in text
            for kind in ("error", "warning", "error at launch", "advice")
        )
        doc = json.loads(run_cli(capsys, "diff", a, b, "--json").out)
        for r in doc["rules"]["changed"]:
            was, now = r["from"], r["to"]
            same = all(was[k] == now[k] for k in ("condition", "kind", "message"))
            assert not same or r["definitions"], (a, b, r["id"])
            for d in r["definitions"]:
                assert d["from"] != d["to"] and f"{d['name']} now: " in text
                seen_definitions = True
    assert seen_definitions  # 0.5.19 -> 0.5.23 redefines shared_tp
