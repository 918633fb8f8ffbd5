"""Launch commands as pasted: a corpus with the layout each must read, a round trip over
generated layouts in every shape the reader supports, and bad input as one line."""

from __future__ import annotations

import json
import shlex
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from meshsat.solver.inputs import parse_sglang_command
from tests.cli_helpers import run_cli
from tests.launch_corpus import CORPUS, MULTI_NODE, SHAPES

ROOT = Path(__file__).resolve().parents[1]


def test_the_corpus_is_large_enough() -> None:
    assert len(CORPUS) >= 40


@pytest.mark.parametrize(("text", "layout"), CORPUS, ids=[str(i) for i in range(len(CORPUS))])
def test_every_pasted_command_reads_its_layout(text: str, layout: dict[str, Any]) -> None:
    assert parse_sglang_command(text).values == layout


def test_shell_expansions_are_unknown_not_errors() -> None:
    parsed = parse_sglang_command(
        "python3 -m sglang.launch_server --tp 16 --nnodes 2 --node-rank $NODE_RANK"
    )
    assert parsed.unknown_values == {"node_rank": "$NODE_RANK"}
    assert any("$NODE_RANK" in n for n in parsed.notes)


def test_flags_are_sorted_into_known_and_unknown() -> None:
    parsed = parse_sglang_command(
        "sglang serve --model-path x --tp 2 --trust-remote-code --enable-torch-compile --tp-sizee 4"
    )
    assert parsed.ignored == ["--trust-remote-code"]
    assert parsed.model_path == "x"
    assert parsed.unknown_flags == ["--tp-sizee"]
    # --enable-torch-compile is read: check_server_args refuses it with
    # --disable-cuda-graph-padding (GRAPH-PADDING-COMPILE).
    assert parsed.values == {"tp_size": 2, "enable_torch_compile": True}


def job_rules(text: str) -> list[tuple[str, int]]:
    return [(issue.rule, issue.line) for issue in parse_sglang_command(text).job]


def test_a_multi_node_script_is_one_job() -> None:
    """Each disagreement between the nodes is its own issue, naming the node's line; the
    layout read is the first node's."""
    assert parse_sglang_command(MULTI_NODE).values == {"tp_size": 16, "nnodes": 2}
    assert job_rules(MULTI_NODE) == []
    other_tp = MULTI_NODE.replace(
        "--tp 16 --nnodes 2 --node-rank 1", "--tp 8 --nnodes 2 --node-rank 1"
    )
    assert job_rules(other_tp) == [("JOB-ONE-LAYOUT", 2)]
    assert "on tp_size" in parse_sglang_command(other_tp).job[0].message
    same_rank = MULTI_NODE.replace("--node-rank 1", "--node-rank 0")
    assert job_rules(same_rank) == [("JOB-NODE-RANKS", 2)]
    other_addr = MULTI_NODE.replace("10.0.0.1:5000 &\n", "10.0.0.2:5000 &\n", 1)
    assert job_rules(other_addr) == [("JOB-DIST-INIT", 2)]
    everything = other_tp.replace("--node-rank 0", "--node-rank 1").replace(
        "10.0.0.1", "10.9.9.9", 1
    )
    assert [r for r, _ in job_rules(everything)] == [
        "JOB-ONE-LAYOUT",
        "JOB-DIST-INIT",
        "JOB-NODE-RANKS",
    ]


def test_validate_reports_a_broken_job_as_violations(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    script = tmp_path / "job.sh"
    script.write_text(MULTI_NODE.replace("--node-rank 1", "--node-rank 0"))
    run = run_cli(capsys, "validate", "--sglang-file", str(script), "--json")
    assert run.code == 1
    import json

    report = json.loads(run.out)
    assert [v["rule"] for v in report["violations"]] == ["JOB-NODE-RANKS"]


@pytest.mark.parametrize(
    ("command", "release", "refused", "elsewhere"),
    [
        ("--tp 8 --enable-ep-moe", "0.5.19", ["--enable-ep-moe"], True),  # removed in 2025
        ("--tp 8 --enable-prefill-context-parallel", "0.5.23", ["--enable-prefill-context"], True),
        ("--tp 8 --enable-prefill-context-parallel", "0.5.19", [], False),
        ("--tp 8 --attn-dp-size 2", "0.5.19", ["--attn-dp-size (did", "0.5.23 takes it"], True),
        ("--tp 8 --attn-dp-size 2", "0.5.23", [], False),
        ("--tp 8 --tp-sizee 2", "0.5.23", ["--tp-sizee"], False),
        ("--pp 2", "0.5.23", ["--pp (ambiguous: it abbreviates"], True),  # --pp-size and more
        # meshsat's "auto" is 0.4's unset value, but its parser has no such choice.
        ("--tp 2 --load-balance-method auto", "0.4.6.post5", ["--load-balance-method auto"], True),
        ("--tp 2 --load-balance-method auto", "0.5.23", [], False),
        ("--tp 2 --load-balance=shortest_queue", "0.4.6.post5", [], False),
        ("--tp 2 --tokenizer-mode fast", "0.4.6.post5", ["--tokenizer-mode fast (invalid"], False),
        ("--tp 8 --moe-a2a-backend deepepp", "0.5.23", ["--moe-a2a-backend deepepp"], False),
        ("--tp 8 --cp-strategy ring", "0.5.23", ["--cp-strategy ring (invalid choice"], False),
    ],
)
def test_flags_are_judged_by_the_chosen_releases_table(
    capsys: pytest.CaptureFixture[str],
    command: str,
    release: str,
    refused: list[str],
    elsewhere: bool,
) -> None:
    """Against the releases' own argparse tables (recorded by fidelity/): a flag (or value)
    the release refuses is an error, with or without --strict: where another recorded
    release takes it (the command was written for that one) that release is named; one that
    no recorded release takes (a typo) starts on none. `--tp`
    is argparse's unique prefix of `--tp-size`, which SGLang accepts."""
    import json

    text = f"python -m sglang.launch_server {command}"
    for strict in (False, True):
        args = ["validate", "--sglang", text, "-V", release, "--json"]
        run = run_cli(capsys, *args, *(["--strict"] if strict else []))
        report = json.loads(run.out)
        error = True
        entries = report["violations"]
        assert not [w for w in report["warnings"] if w["rule"] == "CMD-UNKNOWN-FLAG"]
        flagged = [v for v in entries if v["rule"] == "CMD-UNKNOWN-FLAG"]
        assert len(flagged) == (1 if refused else 0)
        for flag in refused:
            assert flag in flagged[0]["message"]
        if refused:
            assert (" take" in flagged[0]["message"]) == elsewhere
        if refused and error:  # a flag absent from the release may break its rules too
            assert run.code == 1 and not report["valid"]


def _release_parser(release: str) -> Any:
    """argparse itself, rebuilt from the release's recorded flag table: the oracle for which
    one-value options refuse which values (choices, abbreviations, int conversion)."""
    import argparse
    import json

    table = json.loads((FLAG_DUMPS / f"{release}.json").read_text(encoding="utf-8"))

    class Refused(Exception):
        pass

    class Parser(argparse.ArgumentParser):
        def error(self, message: str) -> Any:  # argparse exits; the oracle raises instead
            raise Refused(message)

    parser = Parser(add_help=False)
    for entry in table["flags"]:
        options = [o for o in entry["flags"] if o.startswith("--")]
        if not options:
            continue
        if entry["nargs"] is None and entry["action"] not in NO_VALUE:
            typed = int if entry.get("type") == "int" else str
            parser.add_argument(*options, dest=entry["dest"], type=typed, choices=entry["choices"])
        else:
            parser.add_argument(*options, dest=entry["dest"], nargs="*")
    return parser, Refused, table


FLAG_DUMPS = Path(__file__).resolve().parent.parent / "fidelity" / "flags"
#: Actions that take no value, whatever their nargs says.
NO_VALUE = {"_StoreTrueAction", "DeprecatedStoreTrueAction", "BooleanOptionalAction"}


@pytest.mark.parametrize("release", ["0.4.6.post5", "0.5.23"])
@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_refused_choices_match_the_releases_argparse(release: str, data: st.DataObject) -> None:
    from meshsat.solver.inputs.sglang_cmdline import refused_values

    parser, refused_error, table = _release_parser(release)
    with_choices = [e for e in table["flags"] if e.get("choices") and e["nargs"] is None]
    entry = data.draw(st.sampled_from(with_choices))
    option = data.draw(st.sampled_from([o for o in entry["flags"] if o.startswith("--")]))
    # The whole option, or any abbreviation of it that argparse reads as that one option.
    cut = data.draw(st.integers(min_value=3, max_value=len(option)))
    flag = option[:cut]
    value = data.draw(
        st.one_of(
            st.sampled_from([str(c) for c in entry["choices"]]), st.text("abc_01", max_size=6)
        )
    )
    try:
        parser.parse_args([flag, value])
        expected = False
    except refused_error as e:
        if "invalid choice" not in str(e):  # ambiguous or not an option: another check's
            return
        expected = True
    assert bool(refused_values([(flag, value)], release)) == expected, (flag, value)


# --- round trip: any layout, written in any supported shape, reads back ------------------
SIZES = st.sampled_from([1, 2, 4, 8, 16])
LAYOUTS = st.fixed_dictionaries(
    {},
    optional={
        "tp_size": SIZES, "dp_size": SIZES, "pp_size": SIZES, "ep_size": SIZES,
        "attn_cp_size": SIZES, "moe_dp_size": SIZES, "dcp_size": SIZES,
        "enable_dp_attention": st.just(True), "enable_prefill_cp": st.just(True),
        "cp_strategy": st.sampled_from(["zigzag", "interleave"]),
        "moe_a2a_backend": st.sampled_from(["deepep", "mooncake", "flashinfer"]),
    },
)  # fmt: skip
FLAG = {
    "tp_size": "--tp", "dp_size": "--dp-size", "pp_size": "--pp", "ep_size": "--ep-size",
    "attn_cp_size": "--attn-cp-size", "moe_dp_size": "--moe-dp-size", "dcp_size": "--dcp-size",
    "enable_dp_attention": "--enable-dp-attention", "enable_prefill_cp": "--enable-prefill-cp",
    "cp_strategy": "--cp-strategy", "moe_a2a_backend": "--moe-a2a-backend",
}  # fmt: skip


def render(layout: dict[str, Any], shape: str, equals: bool) -> str:
    words = ["--model-path", "/models/x"]
    for name, value in layout.items():
        if value is True:
            words.append(FLAG[name])
        elif equals:
            words.append(f"{FLAG[name]}={value}")
        else:
            words += [FLAG[name], shlex.quote(str(value))]
    launcher = "python3 -m sglang.launch_server"
    if shape == "continuations":
        return launcher + " \\\n" + " \\\n".join(f"  {w}" for w in words) + "\n"
    if shape == "column0":
        return launcher + " \\\n" + " \\\n".join(words)
    if shape == "env":
        return "CUDA_VISIBLE_DEVICES=0,1 NCCL_DEBUG=INFO " + launcher + " " + " ".join(words)
    if shape == "docker":
        return (
            "docker run --gpus all --ipc=host -e HF_TOKEN=$HF_TOKEN lmsysorg/sglang:latest "
            + launcher
            + " "
            + " ".join(words)
            + " > server.log 2>&1 &"
        )
    return launcher + " " + " ".join(words)


@settings(max_examples=120)
@given(
    LAYOUTS,
    st.sampled_from(["plain", "continuations", "column0", "env", "docker"]),
    st.booleans(),
)
def test_rendered_layouts_read_back(layout: dict[str, Any], shape: str, equals: bool) -> None:
    assert parse_sglang_command(render(layout, shape, equals)).values == layout


# --- rewrite: a script carries a new layout, everything else byte for byte -------------------
def _without_layout(text: str) -> str:
    """The text with every layout flag (and its value) cut out, blanks collapsed."""
    import re

    from meshsat.solver.inputs.launch import read_launch_commands
    from meshsat.solver.inputs.sglang_cmdline import parse_launch

    spans = sorted(
        (span for c in read_launch_commands(text) for v in parse_launch(c).spans.values()
         for span in v),
        reverse=True,
    )  # fmt: skip
    for start, stop in spans:
        text = text[:start] + text[stop:]
    return re.sub(r"[ \t]+", " ", text).strip()


@settings(max_examples=80)
@given(
    LAYOUTS,
    LAYOUTS,
    st.sampled_from(["plain", "continuations", "column0", "env", "docker"]),
    st.booleans(),
    st.booleans(),
)
def test_a_rewritten_script_reads_back_as_the_new_layout(
    old: dict[str, Any], new: dict[str, Any], shape: str, equals: bool, attn_dp: bool
) -> None:
    from meshsat.solver.inputs import config_from_values
    from meshsat.solver.inputs.rewrite import rewrite_script
    from meshsat.solver.inputs.spelling import spelled
    from meshsat.solver.lang.config import Config

    text = "# launch\n" + render(old, shape, equals).replace(
        "--model-path /models/x", "--model-path /models/x --trust-remote-code --port 30000"
    )
    target = Config.model_validate(new)
    out, notes = rewrite_script(text, target, attn_dp_spelling=attn_dp)
    assert notes == []
    read = config_from_values(parse_sglang_command(out).values)
    assert spelled(read, attn_dp) == spelled(target, attn_dp)
    assert _without_layout(out) == _without_layout(text)
    if spelled(config_from_values(old), attn_dp) == spelled(target, attn_dp):
        assert out == text  # nothing to change: not one byte moves


def test_validate_rewrite_prints_the_fixed_script(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    script = tmp_path / "launch.sh"
    script.write_text(
        "#!/bin/bash\n# two replicas of attention\n"
        "python3 -m sglang.launch_server --model-path m \\\n"
        "  --tp 8 --dp 3 --enable-dp-attention \\\n  --port 30000 > log 2>&1 &\n"
    )
    run = run_cli(capsys, "validate", "--sglang-file", str(script), "--rewrite")
    assert run.code == 0
    assert run.out == (
        "#!/bin/bash\n# two replicas of attention\n"
        "python3 -m sglang.launch_server --model-path m \\\n"
        "  --tp 8 --attn-dp-size 4 \\\n  --port 30000 > log 2>&1 &\n"
    )
    assert "dp_size: 3 -> 4" in run.err
    fixed = run_cli(capsys, "validate", "--sglang", run.out)
    assert fixed.code == 0


# --- bad input ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("python3 -m sglang.launch_server --tp 'eight", "cannot parse the launch command"),
        ("python3 -m sglang.launch_server --model-path x --tp", "--tp expects a value (line 1)"),
        ("vllm serve meta-llama/Llama-3.1-8B --tensor-parallel-size 8", "not an SGLang launch"),
        ("# a script of comments\n# only\n", "not an SGLang launch"),  # bashlex crashed here
    ],
)
def test_bad_commands_are_one_line(
    capsys: pytest.CaptureFixture[str], text: str, says: str
) -> None:
    r = run_cli(capsys, "validate", "--sglang", text)
    assert r.code == 2 and says in r.err and r.err.count("\n") == 1 and r.out == ""


def test_hostile_files_exit_two_at_once(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    binary = tmp_path / "a.bin"
    binary.write_bytes(bytes(range(256)) * 64)
    big = tmp_path / "big.sh"
    with big.open("wb") as f:
        f.truncate(50 * 1024 * 1024)
    for path, says in ((binary, "not UTF-8"), (big, "bytes; a launch script is at most")):
        start = time.perf_counter()
        r = run_cli(capsys, "validate", "--sglang-file", str(path))
        assert time.perf_counter() - start < 1.0  # the bound the issue sets for hostile input
        assert r.code == 2 and says in r.err and r.err.count("\n") == 1


def test_a_script_file_and_standard_input(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = tmp_path / "launch.sh"
    script.write_text(MULTI_NODE, encoding="utf-8")
    r = run_cli(capsys, "validate", "--sglang-file", str(script), "--json")
    assert r.code == 0
    import io
    import json

    assert json.loads(r.out)["resolved"]["tp_size"] == 16
    monkeypatch.setattr("sys.stdin", io.StringIO("sglang serve --tp 4 --dp 3"))
    r = run_cli(capsys, "validate", "--sglang", "-", "--json")
    assert json.loads(r.out)["resolved"]["dp_size"] == 3


# --- --model-path: the model facts a launch command names ----------------------------------
def test_model_path_gives_the_model_facts(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A local directory, then the Hugging Face cache, then the embedded catalogue: the facts
    decide the verdict (attention TP 32 divides 64 heads, not 48)."""
    import json

    from meshsat.solver.memory.models import catalogue_config

    facts = dict(catalogue_config("meta-llama/Llama-3.1-70B-Instruct"))
    local = tmp_path / "llama"
    local.mkdir()
    (local / "config.json").write_text(json.dumps(facts))
    hub = tmp_path / "hub"
    snapshot = hub / "models--acme--tiny" / "snapshots" / "abc"
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text(json.dumps({**facts, "num_attention_heads": 48}))
    monkeypatch.setenv("HF_HUB_CACHE", str(hub))

    def check(model_path: str) -> tuple[list[str], str]:
        run = run_cli(
            capsys, "validate", "--json", "--sglang",
            f"python -m sglang.launch_server --model-path {model_path} --tp 32",
        )  # fmt: skip
        return [v["rule"] for v in json.loads(run.out)["violations"]], run.err

    assert check(str(local)) == ([], "")
    rules, err = check("acme/tiny")
    assert len(rules) == 1 and "local Hugging Face cache" in err
    rules, err = check("meta-llama/Llama-3.1-70B-Instruct")
    assert rules == [] and "embedded facts" in err
    rules, err = check("nobody/nothing")
    assert rules == [] and "rules that need model facts are not checked" in err


@pytest.mark.parametrize(
    ("text", "layout", "note"),
    [(t, lay, n) for _, t, lay, n in SHAPES],
    ids=[name for name, *_ in SHAPES],
)
def test_every_pasted_shape_reads_its_layout_and_says_how(
    text: str, layout: dict[str, Any], note: str | None
) -> None:
    """Each shape of issue 23 reads as the layout a person meant; what was not read (a
    prompt, a variable, a placeholder, a missing --config file) is said in a note, and no
    word of it becomes an unknown flag."""
    parsed = parse_sglang_command(text)
    assert parsed.values == layout
    assert not parsed.unknown_flags
    if note is not None:
        assert any(note in n for n in parsed.notes), parsed.notes
    assert not any(v.startswith("$") for _, v in parsed.given)


def test_a_config_file_is_read_under_the_command(tmp_path: Path) -> None:
    """SGLang's --config YAML: its flags first, the command's own override them (0.5.23's
    ConfigArgumentMerger); relative paths are found next to the script."""
    (tmp_path / "sgl.yaml").write_text(
        "model-path: deepseek-ai/DeepSeek-V3\ntp-size: 8\nenable-dp-attention: true\n"
        "dp-size: 4\nmoe_a2a_backend: deepep\nenable-eplb: false\ncuda-graph-bs: [1, 2, 4]\n"
    )
    for text in (
        "python3 -m sglang.launch_server --config sgl.yaml --dp-size 8",
        "sglang serve --config=sgl.yaml --dp 8",
    ):
        parsed = parse_sglang_command(text, (tmp_path,))
        assert parsed.values == {
            "tp_size": 8,
            "enable_dp_attention": True,
            "dp_size": 8,
            "moe_a2a_backend": "deepep",
        }
        assert parsed.model_path == "deepseek-ai/DeepSeek-V3"
        assert any("read 6 flag(s)" in n for n in parsed.notes), parsed.notes
    (tmp_path / "sgl.json").write_text("{}")
    parsed = parse_sglang_command("sglang serve --config sgl.json --tp 2", (tmp_path,))
    assert parsed.values == {"tp_size": 2}
    assert any("only YAML" in n for n in parsed.notes)


@pytest.mark.parametrize(
    ("version", "refused"),
    [
        ("0.5.23", ["enable_dp_attention"]),
        ("0.5.19", ["prefill_cp_mode"]),
        ("0.5.18", ["prefill_cp_mode"]),
    ],
)
def test_a_config_key_the_release_merger_refuses_is_said(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, version: str, refused: list[str]
) -> None:
    """0.5.23's --config merger refuses `enable-dp-attention` (a deprecated on/off action:
    "Unsupported config option 'enable_dp_attention' with action
    'DeprecatedStoreTrueAction'") though its command line takes the flag; 0.5.18's and
    0.5.19's refuse the legacy `prefill-cp-mode` alias instead. The oracle is each
    release's own merger (fidelity/config_refused.json), shipped in the flag table."""
    from meshsat.solver.inputs.sglang_cmdline import refused_in_config

    (tmp_path / "sgl.yaml").write_text(
        "tp-size: 4\nenable-dp-attention: true\ndp-size: 4\nprefill-cp-mode: in-seq-split\n"
    )
    (tmp_path / "run.sh").write_text("python -m sglang.launch_server --config sgl.yaml\n")
    run = run_cli(capsys, "validate", "-V", version, "--sglang-file", str(tmp_path / "run.sh"),
                  "--json")  # fmt: skip
    report = json.loads(run.out)
    said = " ".join(w["message"] for w in report["warnings"] + report["violations"])
    for key in ("enable_dp_attention", "prefill_cp_mode"):
        assert (f"{key} (--config)" in said) == (key in refused), (version, said)
    recorded = json.loads((ROOT / "fidelity" / "config_refused.json").read_text())
    keys = sorted(recorded.get(version, {}))
    assert [k for k, _ in refused_in_config(keys, version)] == [f"{k} (--config)" for k in keys]


def test_a_manifest_list_is_not_rewritten_in_place() -> None:
    from meshsat.solver.errors import InputError
    from meshsat.solver.inputs.rewrite import rewrite_script
    from meshsat.solver.lang.config import Config
    from tests.launch_corpus import K8S

    with pytest.raises(InputError, match="manifest"):
        rewrite_script(K8S, Config(tp_size=4), attn_dp_spelling=True)
