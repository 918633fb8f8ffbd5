"""What a release's parser refuses in a pasted command, as `validate` reports it
(CMD-UNKNOWN-FLAG), held to what the real releases do: their recorded flag tables
(`fidelity/flags/<release>.json`, dumped from each release's own argparse by
`fidelity/runner.py flags`) and the refusals read from their source."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from meshsat.solver.lang.fields import CONFIG_SPECS
from tests.cli_helpers import run_cli

FLAG_DUMPS = Path(__file__).resolve().parent.parent / "fidelity" / "flags"
LAUNCH = "python -m sglang.launch_server --model-path x --tp 8"


def _validate(
    capsys: pytest.CaptureFixture[str], release: str, flags: str, *extra: str
) -> tuple[int, dict[str, Any], str]:
    """(exit status, the --json report, stderr) of `validate --strict` on a launch."""
    args = ["validate", "--sglang", f"{LAUNCH} {flags}", "-V", release, "--json", *extra]
    run = run_cli(capsys, *args)
    return run.code, json.loads(run.out), run.err


def _refusal(report: dict[str, Any]) -> str:
    """The one CMD-UNKNOWN-FLAG entry's message (an error or a warning)."""
    found = [
        v["message"]
        for v in report["violations"] + report["warnings"]
        if v["rule"] == "CMD-UNKNOWN-FLAG"
    ]
    assert len(found) == 1, found
    return str(found[0])


# --- deprecated options whose own action refuses them on sight ------------------------------
# SGLang's words, as each release's parser raises them (0.4.6.post5's DeprecatedAction raises
# ValueError(help); 0.5.18/0.5.19's calls parser.error(error_message)).
RAISING = [
    (
        "0.4.6.post5",
        "--enable-flashmla",
        "--enable-flashmla is deprecated. Please use '--attention-backend flashmla' instead.",
    ),
    (
        "0.4.6.post5",
        "--enable-flashinfer-mla",
        "--enable-flashinfer-mla is deprecated. Please use '--attention-backend flashinfer' "
        "instead.",
    ),
    (
        "0.5.18",
        "--enable-expert-distribution-metrics",
        "--enable-expert-distribution-metrics is no longer supported. Use "
        "--expert-balancedness-report-mode with one of: off, server_log, prometheus, both.",
    ),
    ("0.5.19", "--enable-expert-distribution-metrics", "is no longer supported"),
]


@pytest.mark.parametrize(("release", "flag", "said"), RAISING)
def test_an_option_whose_action_raises_is_refused_with_sglangs_words(
    capsys: pytest.CaptureFixture[str], release: str, flag: str, said: str
) -> None:
    """The parser lists these options, yet the launch stops on them: an error with
    --strict, SGLang's message in it, and not "not checked by meshsat"."""
    code, report, err = _validate(capsys, release, flag, "--strict")
    assert code == 1 and not report["valid"]
    assert said in _refusal(report)
    assert "not checked by meshsat" not in err


def test_an_abbreviation_of_a_raising_option_is_refused_too(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """argparse expands a unique prefix before it calls the action."""
    _, report, _ = _validate(capsys, "0.4.6.post5", "--enable-flashm")
    assert "--enable-flashm (refused on sight: --enable-flashmla is deprecated" in _refusal(report)


def test_a_deprecated_option_that_only_warns_is_not_refused(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """0.5.18's --prefill-round-robin-balance is a DeprecatedAction without an error
    message: it warns and the launch goes on."""
    code, report, _ = _validate(capsys, "0.5.18", "--prefill-round-robin-balance", "--strict")
    assert code == 0 and report["valid"]


def test_the_shipped_table_holds_every_recorded_refusal() -> None:
    """`sglang_flags.json` is exported from the recorded dumps (`fidelity.export_flags`):
    every option a release's action refuses on sight is there with the same message."""
    from meshsat.solver.inputs.sglang_cmdline import release_raises

    for dump in sorted(FLAG_DUMPS.glob("*.json")):
        table = json.loads(dump.read_text(encoding="utf-8"))
        recorded = {
            option: entry["raises"]
            for entry in table["flags"]
            if entry.get("raises")
            for option in entry["flags"]
            if option.startswith("--")
        }
        assert release_raises(dump.stem) == recorded, dump.stem
    assert release_raises("0.4.6.post5")  # the dumps were taken with the probe


# --- a refused flag is said once, as refused ------------------------------------------------
@pytest.mark.parametrize(
    ("release", "flags", "refused"),
    [
        # 0.5.23 splits --cuda-graph-max-bs into -decode and -prefill: an ambiguous prefix.
        ("0.5.23", "--cuda-graph-max-bs 8", "--cuda-graph-max-bs"),
        ("0.4.6.post5", "--tokenizer-mode fast", "--tokenizer-mode"),  # a refused choice
        ("0.5.23", "--disable-radix-cache=true", "--disable-radix-cache"),  # takes no value
    ],
)
def test_a_refused_flag_is_not_also_not_checked(
    capsys: pytest.CaptureFixture[str], release: str, flags: str, refused: str
) -> None:
    """ "Not checked by meshsat ... SGLang still reads them" contradicts "the parser would
    refuse": a refused flag is in the refusal only; the release's other flags stay noted."""
    _, report, err = _validate(capsys, release, f"{flags} --trust-remote-code")
    assert refused in _refusal(report)
    note = next(line for line in err.splitlines() if "not checked by meshsat" in line)
    assert note.endswith(": --trust-remote-code")


# --- --json carries the whole refusal -------------------------------------------------------
def test_json_carries_an_ambiguous_flags_candidates(capsys: pytest.CaptureFixture[str]) -> None:
    """0.5.23's argparse: "ambiguous option: --cuda-graph-max-bs could match
    --cuda-graph-max-bs-decode, --cuda-graph-max-bs-prefill"; the releases before it had
    the one option, so the command was written for one of them: said, with the release to
    pass, and an error (QA r23: it was a warning, "valid" with exit 0, though 0.5.23 exits)."""
    code, report, _ = _validate(capsys, "0.5.23", "--cuda-graph-max-bs 8")
    assert _refusal(report).endswith(
        "--cuda-graph-max-bs (ambiguous: it abbreviates --cuda-graph-max-bs-decode, "
        "--cuda-graph-max-bs-prefill; 0.4.6.post5, 0.5.18, 0.5.19 take it)"
    )
    assert code == 1 and not report["valid"] and report["first"] == "CMD-UNKNOWN-FLAG"
    (flag,) = [v for v in report["violations"] if v["rule"] == "CMD-UNKNOWN-FLAG"]
    assert flag["hint"].endswith("pass -V 0.5.19") and not report["warnings"]


def test_json_carries_every_accepted_choice(capsys: pytest.CaptureFixture[str]) -> None:
    """The choices of 0.5.23's --kv-cache-dtype, all of them (its recorded flag table)."""
    from meshsat.solver.inputs.sglang_cmdline import release_choices

    _, report, _ = _validate(capsys, "0.5.23", "--kv-cache-dtype fp8_e5m3")
    accepted = ", ".join(release_choices("0.5.23")["--kv-cache-dtype"])
    assert f"--kv-cache-dtype fp8_e5m3 (invalid choice: it accepts {accepted})" in _refusal(report)


def test_a_huge_typed_flag_is_still_clipped(capsys: pytest.CaptureFixture[str]) -> None:
    """The user's text is bounded; only meshsat's and SGLang's own words are whole."""
    _, report, _ = _validate(capsys, "0.5.23", "--x" + "y" * 5000)
    assert len(_refusal(report)) < 300


# --- a layout field's value outside its choices ---------------------------------------------
@pytest.mark.parametrize(
    "flags",
    [
        "--quantization per_token_nvfp4",
        "--quantization=w4a8_machete",
        "--load-balance-method bogus",
    ],
)
def test_a_layout_value_outside_the_choices_is_a_finding_not_an_exit(
    capsys: pytest.CaptureFixture[str], flags: str
) -> None:
    """0.5.23's parser: "argument --quantization: invalid choice: 'per_token_nvfp4' (choose
    from 'awq', ...)". A full report, the field left unset, an error with or without
    --strict: no recorded release takes these values, so the launch starts on none."""
    typed = flags.replace("=", " ")
    for strict in ((), ("--strict",)):
        code, report, _ = _validate(capsys, "0.5.23", flags, *strict)
        assert f"{typed} (invalid choice: it accepts awq, fp8" in _refusal(report) or (
            f"{typed} (invalid choice: it accepts auto, round_robin" in _refusal(report)
        )
        assert report["resolved"]["quantization"] is None
        assert code == 1 and [v["rule"] for v in report["violations"]] == ["CMD-UNKNOWN-FLAG"]


def _layout_choice_flags() -> list[tuple[str, str]]:
    """(release, option) for every layout field's option with choices that each recorded
    release has."""
    from meshsat.solver.inputs.sglang_cmdline import FLAGS, _on_off, release_flags

    out = []
    for dump in sorted(FLAG_DUMPS.glob("*.json")):
        options = release_flags(dump.stem) or {}
        for flag, name in FLAGS.items():
            if flag in options and CONFIG_SPECS[name].choices and not _on_off(name):
                out.append((dump.stem, flag))
    return out


@pytest.mark.parametrize(("release", "flag"), _layout_choice_flags())
def test_a_value_outside_the_choices_is_refused_as_the_release_refuses_it(
    release: str, flag: str
) -> None:
    """Against each release's argparse, rebuilt from its recorded flag table: refused
    (CMD-UNKNOWN-FLAG) where it lists choices; where it takes any string (0.4.6.post5's
    --ep-dispatch-algorithm) a note that meshsat leaves the field unset."""
    from meshsat.solver.inputs.layout_input import LayoutSources, load_layout
    from tests.test_launch import _release_parser

    parser, refused_error, _ = _release_parser(release)
    try:
        parser.parse_args([flag, "bogus_value"])
        expected = False
    except refused_error:
        expected = True
    text = f"{LAUNCH} {flag} bogus_value"
    layout = load_layout(LayoutSources(sglang=text), release=release)
    said = [item for item, _ in layout.missing_flags]
    assert (f"{flag} bogus_value" in said) == expected
    assert any(n.startswith(f"{flag} bogus_value: not a value") for n in layout.notes) != expected
    name = next(n for n, s in CONFIG_SPECS.items() if flag in s.flags)
    assert getattr(layout.config, name) == CONFIG_SPECS[name].default


# --- a refusal no recorded release takes: the launch starts on none ------------------------
TYPOS = ["--moe-a2a-backend deepepp", "--cp-strategy ring", "--quantization fp9", "--tp-sizee 2"]


def test_each_refusal_names_the_releases_that_take_it() -> None:
    """A flag, an abbreviation, a choice, a glued value and a --config key, each judged by
    every other recorded release's own table: the releases that take it, or none (a typo,
    which starts on no release)."""
    from meshsat.solver.inputs.sglang_cmdline import (
        parse_sglang_command,
        release_refusals,
        taken_elsewhere,
    )

    text = (
        f"{LAUNCH} {' '.join(TYPOS)} --enable-ep-moe --cuda-graph-max-bs 8 "
        "--enable-dp-attention=true --load-balance-method auto --dp 2"
    )
    parsed = parse_sglang_command(text)
    refused = release_refusals(parsed, "0.5.23")
    assert [item for item, _ in refused] == [
        "--tp-sizee",
        "--enable-ep-moe",
        "--cuda-graph-max-bs",
        "--moe-a2a-backend deepepp",
        "--cp-strategy ring",
        "--quantization fp9",
        "--enable-dp-attention=true",
    ]
    assert taken_elsewhere(parsed, refused, "0.5.23") == {
        "--enable-ep-moe": ("0.4.6.post5",),  # removed after it
        "--cuda-graph-max-bs": ("0.4.6.post5", "0.5.18", "0.5.19"),  # one option there
    }
    # 0.4.6.post5 lists no `auto` for --load-balance-method; every later release does.
    old = release_refusals(parsed, "0.4.6.post5")
    assert taken_elsewhere(parsed, old, "0.4.6.post5")["--load-balance-method auto"] == (
        "0.5.18",
        "0.5.19",
        "0.5.23",
    )


def test_a_config_key_is_taken_where_the_merger_takes_it(tmp_path: Path) -> None:
    """0.5.23's merger refuses `enable-dp-attention`, which 0.5.18's and 0.5.19's take;
    `prefill-cp-mode` is refused by theirs and is no 0.5.23 flag: read from a --config,
    no release takes it, though 0.5.19's command line would."""
    from meshsat.solver.inputs.sglang_cmdline import (
        parse_sglang_command,
        release_refusals,
        taken_elsewhere,
    )

    (tmp_path / "sgl.yaml").write_text("enable-dp-attention: true\nprefill-cp-mode: in-seq-split\n")
    parsed = parse_sglang_command(f"{LAUNCH} --dp 8 --config sgl.yaml", (tmp_path,))
    refused = release_refusals(parsed, "0.5.23")
    assert sorted(item for item, _ in refused) == [
        "--prefill-cp-mode",
        "enable_dp_attention (--config)",
    ]
    assert taken_elsewhere(parsed, refused, "0.5.23") == {
        "enable_dp_attention (--config)": ("0.5.18", "0.5.19")
    }


@pytest.mark.parametrize("typo", TYPOS)
def test_a_typo_is_an_error_without_strict(capsys: pytest.CaptureFixture[str], typo: str) -> None:
    """The repro: `--moe-a2a-backend deepepp` read "✓ valid" (exit 0) with a warning, as a
    flag of another release does; no recorded release takes it, so no SGLang starts."""
    code, report, _ = _validate(capsys, "0.5.23", typo)
    assert code == 1 and not report["valid"] and not report["warnings"]
    assert _refusal(report).startswith("SGLang's parser refuses --")
    assert "on every recorded release (0.4.6.post5, 0.5.18, 0.5.19, 0.5.23)" in _refusal(report)


def test_a_typo_beside_another_releases_flag_is_two_entries(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """One error: the typo, then the 0.4.6.post5 flag naming that release; no -V takes
    both, so the hint names none."""
    code, report, _ = _validate(capsys, "0.5.23", "--cp-strategy ring --enable-ep-moe")
    assert code == 1 and not report["warnings"]
    (error,) = [v for v in report["violations"] if v["rule"] == "CMD-UNKNOWN-FLAG"]
    typo, _, older = error["message"].partition("; 1 flag(s) SGLang 0.5.23's")
    assert "--cp-strategy ring" in typo and "--enable-ep-moe" not in typo
    assert "--enable-ep-moe (removed; it meant ep_size = tp_size; 0.4.6.post5 takes it)" in older
    assert "-V" not in error["hint"]


DSV3 = "python -m sglang.launch_server --model-path deepseek-ai/DeepSeek-V3 --tp 8"


def test_fix_does_not_call_a_command_with_a_typo_valid(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """It read "✓ already valid ... nothing to change" (exit 0) and printed the typo back:
    the fix edits only the layout, so it says the parser refuses the flag (exit 1, as for
    any launch it leaves wrong)."""
    run = run_cli(capsys, "fix", "--sglang", f"{DSV3} --moe-a2a-backend deepepp")
    assert run.code == 1 and "already valid" not in run.out
    line = next(x for x in run.out.splitlines() if x.startswith("✗ not fixed"))
    assert "CMD-UNKNOWN-FLAG: SGLang's parser refuses --moe-a2a-backend deepepp" in line
    doc = json.loads(run_cli(capsys, "fix", "--sglang", f"{DSV3} --tp-sizee 8", "--json").out)
    assert not doc["valid_input"]
    assert "--tp-sizee (did you mean --tp-size?)" in doc["unfixed"][0]["message"]


def test_fix_fixes_the_layout_but_not_another_releases_flag(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A flag only 0.5.19 takes stops 0.5.23's parser: the layout is fixed, the flag kept,
    and the launch is not (exit 1), with the release that takes it."""
    run = run_cli(capsys, "fix", "--sglang", f"{DSV3} --attn-dp-size 3 --cuda-graph-max-bs 8")
    assert run.code == 1 and "--attn-dp-size 4 --cuda-graph-max-bs 8" in run.out
    said = " ".join(run.out.split())  # the table wraps lines
    assert "✗ not fixed: CMD-UNKNOWN-FLAG" in said and "pass -V 0.5.19" in said


def test_rewrite_does_not_print_a_script_with_a_typo(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """It fixed --attn-dp-size and printed the script with --cp-strategy ring kept
    (exit 0): no script now, and why, in one note."""
    text = f"{DSV3} --attn-dp-size 3 --cp-strategy ring"
    run = run_cli(capsys, "validate", "--sglang", text, "--rewrite")
    assert run.code == 1 and run.out == ""
    assert "the script is not rewritten: SGLang's parser refuses --cp-strategy ring" in run.err
    doc = json.loads(run_cli(capsys, "validate", "--sglang", text, "--rewrite", "--json").out)
    assert doc["script"] is None
    ok = run_cli(capsys, "validate", "--sglang", f"{DSV3} --attn-dp-size 3", "--rewrite")
    assert ok.code == 0 and "--attn-dp-size 4" in ok.out


def test_a_deployment_with_a_typo_is_neither_fixed_nor_rewritten(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Each server's fix and rewrite edit only layouts: a prefill whose parser exits
    leaves the deployment invalid (exit 1), not "✓ valid deployment"."""
    script = tmp_path / "pd.sh"
    script.write_text(
        f"{DSV3} --cp-strategy ring --disaggregation-mode prefill --host 10.0.0.1 --port 30000 &\n"
        f"{DSV3} --disaggregation-mode decode --host 10.0.0.2 --port 30000 &\n"
        "python -m sglang_router.launch_router --pd-disaggregation "
        "--prefill http://10.0.0.1:30000 --decode http://10.0.0.2:30000\n"
    )
    fixed = run_cli(capsys, "fix", "--sglang-file", str(script), "--json")
    doc = json.loads(fixed.out)
    assert fixed.code == 1 and doc["deployment"]["fixed"] is False
    assert not doc["deployment"]["after"]["valid"]
    rewrite = run_cli(capsys, "validate", "--sglang-file", str(script), "--rewrite")
    assert rewrite.code == 1 and rewrite.out == ""
    assert "prefill@1: SGLang's parser refuses --cp-strategy ring" in rewrite.err
