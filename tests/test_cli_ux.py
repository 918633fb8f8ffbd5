"""Regressions found by using the commands as a new user would (one test per defect)."""

from __future__ import annotations

from pathlib import Path

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


_NODE = "python3 -m sglang.launch_server --model-path m --nnodes 2 --tp {tp} "
_NODE += "--dist-init-addr {addr}:5000 --node-rank {rank}{extra}\n"


def _script(tmp_path: Path, *nodes: dict[str, object]) -> str:
    path = tmp_path / "job.sh"
    path.write_text("".join(_NODE.format(**{"extra": ""} | n) for n in nodes))
    return str(path)


def test_fix_does_not_call_a_script_valid_that_validate_refuses(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two nodes that disagree (tp, --dist-init-addr): validate exits 1 (JOB-*), and fix
    said "already valid ... nothing to change" with exit 0 (JSON valid_input true), since
    it fixes the first node's layout only. It must say what it leaves wrong and exit 1."""
    import json

    script = _script(
        tmp_path,
        {"tp": 16, "addr": "10.0.0.1", "rank": 0},
        {"tp": 8, "addr": "10.0.0.2", "rank": 1},
    )
    assert run_cli(capsys, "validate", "--sglang-file", script).code == 1
    run = run_cli(capsys, "fix", "--sglang-file", script)
    assert run.code == 1, run.out
    assert "already valid" not in run.out
    assert "not fixed: JOB-ONE-LAYOUT" in run.out and "not fixed: JOB-DIST-INIT" in run.out
    doc = json.loads(run_cli(capsys, "fix", "--sglang-file", script, "--json").out)
    assert doc["valid_input"] is False
    assert [u["rule"] for u in doc["unfixed"]] == ["JOB-ONE-LAYOUT", "JOB-DIST-INIT"]
    # a layout fix is still printed; the script stays refused for its ranks
    script = _script(
        tmp_path,
        {"tp": 8, "addr": "10.0.0.1", "rank": 0, "extra": " --ep 3"},
        {"tp": 8, "addr": "10.0.0.1", "rank": 2, "extra": " --ep 3"},
    )
    run = run_cli(capsys, "fix", "--sglang-file", script)
    assert run.code == 1 and "✓ fixed" in run.out and "not fixed: JOB-NODE-RANKS" in run.out
    # nodes that agree: unchanged behaviour
    script = _script(
        tmp_path,
        {"tp": 16, "addr": "10.0.0.1", "rank": 0},
        {"tp": 16, "addr": "10.0.0.1", "rank": 1},
    )
    run = run_cli(capsys, "fix", "--sglang-file", script)
    assert run.code == 0 and "already valid" in run.out and "not fixed" not in run.out


def test_rewrite_does_not_say_unchanged_when_it_changed_the_script(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`validate --rewrite` on nodes that disagree rewrote the second node to the first's
    layout but noted "the layout is already valid; the script is unchanged"; and it left
    the second node's --dist-init-addr wrong without a word."""
    script = _script(
        tmp_path,
        {"tp": 16, "addr": "10.0.0.1", "rank": 0},
        {"tp": 8, "addr": "10.0.0.2", "rank": 1},
    )
    run = run_cli(capsys, "validate", "--sglang-file", script, "--rewrite")
    assert run.code == 0 and run.out != Path(script).read_text()
    assert "--tp 16 --dist-init-addr 10.0.0.2:5000 --node-rank 1" in run.out
    assert "script is unchanged" not in run.err
    assert "edit by hand: JOB-DIST-INIT" in run.err


def test_fix_gpus_does_not_call_a_changed_count_kept(capsys: pytest.CaptureFixture[str]) -> None:
    """`fix --set tp_size=8 --gpus 3` printed "tiers: GPU count kept" above "GPU count
    changes: 8 → 3" (the search keeps --gpus, not the input's count)."""
    run = run_cli(capsys, "fix", "--set", "tp_size=8", "--gpus", "3")
    assert run.code == 0 and "GPU count changes: 8 → 3" in run.out
    assert "GPU count kept" not in run.out and "GPU count 8 → 3 as --gpus asks" in run.out
    run = run_cli(capsys, "fix", "--set", "tp_size=8", "--set", "ep_size=3", "--gpus", "8")
    assert run.code == 0 and "GPU count kept" in run.out


def test_text_that_only_mentions_sglang_is_not_a_launch(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A quoted word that names SGLang but launches nothing is not read as a launch
    (quoted launches are: tests/test_quoted_launches.py)."""
    run = run_cli(capsys, "validate", "--sglang", "echo 'python3 -m sglang' ready")
    assert run.code == 2 and "not an SGLang launch command" in run.err


def test_readme_count_example_is_what_count_answers() -> None:
    """README's `solver.count(4096)  # 86385` was 0.5.19's figure; the default is now the
    newest pack, which answers otherwise. The README's figures are read, not copied."""
    import re

    from meshsat import solver
    from meshsat.solver.packs import get_pack

    readme = (Path(__file__).parents[1] / "README.md").read_text()
    m = re.search(
        r"solver\.count\(4096\)  # (\d+) on SGLang ([\d.]+) \((\d+) on ([\d.]+)\)", readme
    )
    assert m is not None
    assert m[2] == get_pack(None).version  # the default where SGLang is not installed
    assert solver.count(4096, sglang_version=m[2]) == int(m[1])
    assert solver.count(4096, sglang_version=m[4]) == int(m[3])


def test_enumerate_json_help_says_the_shape_it_prints(capsys: pytest.CaptureFixture[str]) -> None:
    """`enumerate --help` said --json prints "one JSON object"; it prints an array of
    layouts (and with --count a number)."""
    import json

    listed = json.loads(run_cli(capsys, "enumerate", "--gpus", "8", "--limit", "3", "--json").out)
    assert isinstance(listed, list) and len(listed) == 3
    assert all(isinstance(row, dict) for row in listed)
    counted = run_cli(capsys, "enumerate", "--gpus", "8", "--limit", "3", "--count", "--json")
    assert json.loads(counted.out) == 3
    text = " ".join(run_cli(capsys, "enumerate", "--help").out.split())
    assert "one JSON object" not in text
    assert "one JSON array of objects on stdout (with --count, the number)" in text


def test_rewrite_with_set_says_the_set_values_went_in(capsys: pytest.CaptureFixture[str]) -> None:
    """`--sglang "... --tp 8" --set tp_size=4 --rewrite` prints `--tp 4` and noted "the
    script is unchanged" (then, one commit later, "the other nodes now carry it")."""
    command = "python -m sglang.launch_server --tp 8"
    run = run_cli(capsys, "validate", "--sglang", command, "--set", "tp_size=4", "--rewrite")
    assert run.code == 0 and run.out == "python -m sglang.launch_server --tp 4\n"
    assert "unchanged" not in run.err and "other nodes" not in run.err
    assert "the script now carries the values given with --set" in run.err
    run = run_cli(capsys, "validate", "--sglang", command, "--rewrite")
    assert run.out == command + "\n" and "the script is unchanged" in run.err


def test_rewrite_json_is_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`validate --rewrite --json` printed the bare script: not JSON. It prints the web
    API's `/api/rewrite` document, for one job and for a PD deployment."""
    import json

    command = "python -m sglang.launch_server --tp 8 --dp 3 --enable-dp-attention"
    plain = run_cli(capsys, "validate", "--sglang", command, "--rewrite")
    run = run_cli(capsys, "validate", "--sglang", command, "--rewrite", "--json")
    assert run.code == plain.code == 0
    assert json.loads(run.out) == {"script": plain.out.rstrip("\n"), "notes": ["dp_size: 3 -> 4"]}
    pd = tmp_path / "pd.sh"
    pd.write_text(
        "python3 -m sglang.launch_server --model-path m --disaggregation-mode prefill --tp 8 "
        "--port 30000 --host 10.0.0.1 &\n"
        "python3 -m sglang.launch_server --model-path m --disaggregation-mode decode --tp 8 "
        "--port 30001 --host 10.0.0.2 &\n"
        "python3 -m sglang_router.launch_router --pd-disaggregation "
        "--prefill http://10.0.0.1:30000 --decode http://10.0.0.2:30001\n"
    )
    plain = run_cli(capsys, "validate", "--sglang-file", str(pd), "--rewrite")
    line = run_cli(capsys, "validate", "--sglang-file", str(pd), "--rewrite", "--format", "jsonl")
    assert line.code == plain.code == 0 and line.out.count("\n") == 1
    assert json.loads(line.out)["script"].rstrip("\n") == plain.out.rstrip("\n")


def test_a_value_glued_to_a_flag_that_takes_none_is_refused_as_sglang_does(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """SGLang 0.5.23's own parser (argparse) exits on `--enable-dp-attention=true` and
    `--trust-remote-code=1` ("ignored explicit argument 'true'", checked in the release's
    fidelity virtualenv); meshsat read them as meant and called the launch valid without a
    word. They are CMD-UNKNOWN-FLAG now, an error: no recorded release takes a value there;
    `--tp=4` is not."""
    import json

    command = "python -m sglang.launch_server --tp=4 --dp-size=2 --enable-dp-attention=true"
    command += " --trust-remote-code=1"
    run = run_cli(capsys, "validate", "--sglang", command, "--json")
    doc = json.loads(run.out)
    # Read as DP attention over 2 groups: 0.5.23 resolves it to --attn-dp-size 2.
    assert run.code == 1 and (doc["resolved"]["attn_dp_size"], doc["resolved"]["dp_size"]) == (2, 1)
    (flag,) = [w for w in doc["violations"] if w["rule"] == "CMD-UNKNOWN-FLAG"]
    assert flag["message"].startswith("SGLang's parser refuses ")
    assert "--enable-dp-attention=true (takes no value)" in flag["message"]
    assert "--trust-remote-code=1 (takes no value)" in flag["message"]
    assert "--tp=4" not in flag["message"]
    plain = "python -m sglang.launch_server --tp=4 --dp-size=2 --enable-dp-attention"
    assert "CMD-UNKNOWN-FLAG" not in run_cli(capsys, "validate", "--sglang", plain).out


def test_stdin_that_is_not_utf8_is_said_as_for_a_file() -> None:
    """Bytes that are not UTF-8 on standard input reached the reader as lone surrogates:
    `meshsat: error: unexpected word '\\udc80\\udc81' ...`. A file says "not UTF-8 text
    (byte N)"; standard input now says the same."""
    import io

    from meshsat.solver.cli import main

    raw = b"python -m sglang.launch_server --tp 8 \x80\x81"
    for flag in ("--sglang", "--sglang-file"):
        stdin = io.TextIOWrapper(io.BytesIO(raw), encoding="utf-8", errors="surrogateescape")
        out, err = io.StringIO(), io.StringIO()
        with pytest.raises(SystemExit) as exit_:
            main(["validate", flag, "-"], stdin=stdin, stdout=out, stderr=err)
        assert exit_.value.code == 2 and out.getvalue() == ""
        assert err.getvalue() == "meshsat: error: standard input: not UTF-8 text (byte 38)\n"


_PD_MANIFEST = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: prefill}
spec:
  template:
    spec:
      containers:
      - name: prefill
        command: ["python3", "-m", "sglang.launch_server", "--model-path", "m",
                  "--disaggregation-mode", "prefill", "--tp", "8", "--port", "30000"]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: decode}
spec:
  template:
    spec:
      containers:
      - name: decode
        command:
        - sh
        - -c
        - |
          echo starting
          python3 -m sglang.launch_server --model-path m --disaggregation-mode decode \\
            --tp 8 --port 30001
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: router}
spec:
  template:
    spec:
      containers:
      - name: router
        command: ["python3", "-m", "sglang_router.launch_router", "--pd-disaggregation",
                  "--prefill", "http://prefill:30000", "--decode", "http://decode:30001"]
"""


def test_manifest_lines_name_where_each_launch_is(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A `sh -c` script's launch was on "line 1" (its line in the script), and the next
    container's words were looked for from the manifest's top, so the router was placed
    on the decode's script line. Each is named by its own line in the manifest."""
    import json

    path = tmp_path / "pd.yaml"
    path.write_text(_PD_MANIFEST)
    lines = _PD_MANIFEST.splitlines()
    decode = 1 + next(i for i, x in enumerate(lines) if "--disaggregation-mode decode" in x)
    router = 1 + next(i for i, x in enumerate(lines) if "sglang_router" in x)
    doc = json.loads(run_cli(capsys, "validate", "--sglang-file", str(path), "--json").out)
    assert [(r["server"], r["lines"]) for r in doc["roles"]] == [
        ("prefill@9", [9]),
        (f"decode@{decode}", [decode]),
    ]
    said = " ".join(f["message"] for f in doc["deployment"]["findings"])
    assert f"the router on line {router} " in said and "line 1 " not in said


def test_fix_of_a_pd_manifest_keeps_each_servers_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`fix --sglang-file pd.yaml` printed each manifest server's command without its
    `--model-path` (SGLang requires one), unlike `fix` on one server's manifest."""
    import json

    path = tmp_path / "pd.yaml"
    path.write_text(_PD_MANIFEST.replace('"--tp", "8"', '"--tp", "3"'))
    run = run_cli(capsys, "fix", "--sglang-file", str(path), "--json")
    commands: list[str] = []

    def walk(node: object) -> None:
        if isinstance(node, dict):
            commands.extend(v for k, v in node.items() if k == "command_line")
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(json.loads(run.out))
    assert len(commands) >= 2 and all("--model-path m " in c for c in commands), commands
    assert any("--disaggregation-mode prefill" in c for c in commands)


def test_fields_lists_only_flags_the_release_parses(capsys: pytest.CaptureFixture[str]) -> None:
    """`fields -V 0.5.23` listed `--disable-piecewise-cuda-graph`, which 0.5.23's parser
    refuses (it left after 0.5.19), and `fields -V 0.4.6.post5` `--moe-a2a-backend`, which
    that release does not have (it sets the backend with --enable-deepep-moe). Every flag
    listed must be in the release's recorded flag table, or abbreviate one of it alone."""
    import json

    from meshsat.solver.inputs.sglang_cmdline import release_flags
    from meshsat.solver.packs import known_versions

    for version in known_versions():
        table = release_flags(version)
        assert table is not None
        doc = json.loads(run_cli(capsys, "fields", "-V", version, "--json").out)
        for row in doc["fields"]:
            for flag in row["flags"]:
                fits = [option for option in table if option.startswith(flag)]
                assert flag in table or len(fits) == 1, (version, row["field"], flag)
        flags = {row["field"]: row["flags"] for row in doc["fields"]}
        if version == "0.5.23":
            assert flags["disable_prefill_cuda_graph"] == ["--disable-prefill-cuda-graph"]
        if version == "0.4.6.post5":
            assert flags["moe_a2a_backend"] == ["--enable-deepep-moe"]
    table_view = run_cli(capsys, "fields", "-V", "0.4.6.post5").out
    assert "(no flag in" in table_view  # the table wraps the cell


def test_fix_command_uses_flags_the_release_has(capsys: pytest.CaptureFixture[str]) -> None:
    """`fix -V 0.4.6.post5` printed `--moe-a2a-backend deepep`, which that release's parser
    refuses (it spells the backend `--enable-deepep-moe`): the printed command, read back
    on the same release, must name no flag it would refuse."""
    import json

    args = ("--set", "tp_size=8", "--set", "moe_a2a_backend=deepep", "--set", "ep_size=4")
    doc = json.loads(run_cli(capsys, "fix", *args, "-V", "0.4.6.post5", "--json").out)
    command = doc["fixes"][0]["command_line"]
    assert "--enable-deepep-moe" in command and "--moe-a2a-backend" not in command
    back = json.loads(
        run_cli(capsys, "validate", "--sglang", command, "-V", "0.4.6.post5", "--json").out
    )
    assert back["valid"] and not [w for w in back["warnings"] if w["rule"] == "CMD-UNKNOWN-FLAG"]
    assert back["resolved"]["moe_a2a_backend"] == "deepep"
    newest = json.loads(run_cli(capsys, "fix", *args, "--json").out)["fixes"][0]["command_line"]
    assert "--moe-a2a-backend deepep" in newest


def test_csv_has_its_header_when_there_is_no_row(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A valid layout's `--format csv` (no violation), a fix with nothing to change, a
    diff of a release with itself, a valid PD deployment: each printed one empty line, which
    a CSV reader takes for a file without columns (pandas: EmptyDataError). The header is
    written, as it is when there are rows."""
    import csv
    import io

    pd = tmp_path / "pd.yaml"
    pd.write_text(_PD_MANIFEST)
    cases = {
        ("validate", "--set", "tp_size=8"): ["severity", "rule", "message", "detail"],
        ("fix", "--set", "tp_size=8"): ["fix", "field", "old", "new"],
        ("diff", "0.5.23", "0.5.23"): ["what", "change", "id"],
        ("validate", "--sglang-file", str(pd)): ["server", "severity", "rule", "message", "detail"],
        ("fix", "--sglang-file", str(pd)): ["server", "field", "old", "new"],
        ("launch", "--dry-run", "--format", "csv", "--", "sglang", "serve", "--tp", "2"): ["rule"],
    }
    for args, header in cases.items():
        extra = () if "launch" in args else ("--format", "csv")
        run = run_cli(capsys, *args, *extra)
        assert run.code == 0, (args, run.err)
        rows = list(csv.reader(io.StringIO(run.out)))
        assert rows and rows[0] == header, (args, run.out)
    with_rows = run_cli(
        capsys, "fix", "--set", "tp_size=8", "--set", "ep_size=3", "--format", "csv"
    )
    assert with_rows.out.splitlines() == ["fix,field,old,new", "1,ep_size,3,4"]


def test_launch_json_runs_nothing_even_with_the_check_off(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`launch --help`: "--json (or --format) prints the verdict on stdout instead and runs
    nothing". With --mode off (or MESHSAT_SGLANG=off in the environment) it printed nothing
    and ran the command. It must print the verdict and never exec."""
    import json
    import os

    ran: list[list[str]] = []

    def execvp(program: str, argv: list[str]) -> None:
        ran.append(argv)
        raise SystemExit(99)

    monkeypatch.setattr(os, "execvp", execvp)
    command = ("--", "python3", "-m", "sglang.launch_server", "--tp", "8", "--dp", "3")
    command += ("--enable-dp-attention",)
    run = run_cli(capsys, "launch", "--mode", "off", "--json", *command)
    assert not ran and run.code == 0
    assert json.loads(run.out)["first"] == "DPATTN-TP-DIV"
    monkeypatch.setenv("MESHSAT_SGLANG", "off")
    run = run_cli(capsys, "launch", "--format", "jsonl", *command)
    assert not ran and json.loads(run.out)["valid"] is False
    assert run_cli(capsys, "launch", "--mode", "enforce", "--json", *command).code == 1


def test_a_layout_over_the_gpu_bound_is_refused_by_fix_and_groups(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Each size is bounded by 2^20 GPUs, but dp·tp is not: `fix` answered on
    1,099,511,627,776 GPUs and `groups` summarised them, while the README's bounds say the
    GPU count of fix and groups is refused above 2^20 (and `groups()`'s rank map of 2^40
    ranks never finishes). Both are one line, exit 2."""
    from meshsat.solver.errors import InputError
    from meshsat.solver.groups import plan_layout

    huge = ("--set", "tp_size=1048576", "--set", "dp_size=1048576")
    for args in (("fix", *huge, "--set", "ep_size=3"), ("groups", *huge)):
        run = run_cli(capsys, *args)
        assert run.code == 2 and run.out == "", (args, run.out[:200])
        assert run.err == (
            "meshsat: error: the layout uses 1099511627776 GPUs; "
            + ("fix works up to the limit" if args[0] == "fix" else "above the limit")
            + " of 1048576 GPUs\n"
        )
    with pytest.raises(InputError):
        plan_layout({"tp_size": 1 << 20, "dp_size": 1 << 20}, sglang_version="0.5.23")
    assert run_cli(capsys, "groups", "--set", "tp_size=1024", "--set", "dp_size=1024").code == 0


def test_a_decodes_own_fix_is_not_lost_under_the_pair_rules(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A decode at `--tp 3` for a model of 32 heads is fixed on its own (tp 3 -> 1, plain DP
    3), then follows its prefill's page size. The second step replaced the first in the
    report: "decode@2: no layout change" (JSON: no change, valid_input true) above a command
    whose --tp 3 was gone. The changes are told against the user's layout."""
    import json

    script = tmp_path / "pd.sh"
    script.write_text(
        "python3 -m sglang.launch_server --model-path Qwen/Qwen3-8B --disaggregation-mode "
        "prefill --tp 4 --host 10.0.0.1 --port 30000 --page-size 16 &\n"
        "python3 -m sglang.launch_server --model-path Qwen/Qwen3-8B --disaggregation-mode "
        "decode --tp 3 --host 10.0.0.2 --port 30001 --page-size 32 &\n"
        "python3 -m sglang_router.launch_router --pd-disaggregation "
        "--prefill http://10.0.0.1:30000 --decode http://10.0.0.2:30001\n"
    )
    run = run_cli(capsys, "fix", "--sglang-file", str(script))
    assert run.code == 0
    assert "decode@2: tp_size: 3 -> 1, dp_size: 1 -> 3; --page-size 16" in run.out
    doc = json.loads(run_cli(capsys, "fix", "--sglang-file", str(script), "--json").out)
    decode = doc["roles"][1]
    assert decode["valid_input"] is False and decode["violations"] == [
        "MODEL-HEADS",
        "MODEL-KV-HEADS",
    ]
    changes = decode["fixes"][0]["changes"]
    assert changes == [
        {"field": "tp_size", "old": 3, "new": 1},
        {"field": "dp_size", "old": 1, "new": 3},
    ]
    assert decode["flags"] == [{"flag": "--page-size", "value": "16"}]


def test_fix_with_gpus_past_the_visible_list_is_not_called_fixed(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`CUDA_VISIBLE_DEVICES=0,1 ... --tp 4`: fix fits the layout to the list (tp 2, exit 0);
    with `--gpus 4` the fix keeps 4 ranks on a 2-device list, which validate refuses
    (JOB-VISIBLE-DEVICES): it is listed as not fixed, exit 1, as the other launch checks."""
    command = "CUDA_VISIBLE_DEVICES=0,1 python -m sglang.launch_server --tp 4"
    fitted = run_cli(capsys, "fix", "--sglang", command)
    assert fitted.code == 0 and "--tp 2" in fitted.out and "not fixed" not in fitted.out
    forced = run_cli(capsys, "fix", "--sglang", command, "--gpus", "4")
    assert forced.code == 1 and "✗ not fixed: JOB-VISIBLE-DEVICES" in forced.out
    assert run_cli(capsys, "validate", "--sglang", command.replace("4", "2")).code == 0


def test_windows_line_endings_are_named_in_the_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A script saved with CR LF: bash reads `\\` CR LF as an escaped CR, not a
    continuation, so the CR is a word; the one error line says why and what to run."""
    script = tmp_path / "launch.sh"
    script.write_bytes(b"python -m sglang.launch_server --model-path m \\\r\n  --tp 4\r\n")
    run = run_cli(capsys, "validate", "--sglang-file", str(script))
    assert run.code == 2 and run.err.count("\n") == 1
    assert "Windows line endings (CR LF)" in run.err and "dos2unix" in run.err


@pytest.mark.parametrize(
    ("last", "refused"),
    [("--enable-dp-attention", True), ("--model-path m", True), ("--tp 8", False)],
)
def test_a_carriage_return_on_a_lines_last_word_is_named(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, last: str, refused: bool
) -> None:
    """Without continuations, each CR LF line's CR stays on its last word: a flag or a
    path SGLang cannot take (it was a CMD-UNKNOWN-FLAG warning, exit 0), but a number
    SGLang's `int`/`float` types read through (`int("8\r") == 8`)."""
    assert int("8\r") == 8  # what SGLang's `type=int` does with the word
    script = tmp_path / "launch.sh"
    script.write_bytes(f"python -m sglang.launch_server --dp 2 {last}\r\n".encode())
    run = run_cli(capsys, "validate", "--sglang-file", str(script))
    assert run.code == (2 if refused else 0), run.out + run.err
    assert ("dos2unix" in run.err) == refused and "Traceback" not in run.err


def test_environment_variables_are_not_called_flags(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    script = tmp_path / "launch.sh"
    script.write_text(
        "export HF_TOKEN=abc\n"
        "NCCL_DEBUG=INFO python -m sglang.launch_server --model-path m --tp 2 --port 3000\n"
    )
    run = run_cli(capsys, "validate", "--sglang-file", str(script))
    assert run.code == 0
    notes = [line for line in run.err.splitlines() if "not checked" in line or "not read" in line]
    assert notes == [
        "note: 1 flag(s) not checked by meshsat (not layout flags; SGLang still reads them): "
        "--port",
        "note: 2 environment variable(s) not read by meshsat (none sets a layout field): "
        "HF_TOKEN NCCL_DEBUG",
    ]
