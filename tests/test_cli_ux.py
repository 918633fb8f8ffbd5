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
