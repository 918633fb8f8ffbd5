"""meshsat's SGLang plugin and `meshsat launch`, against the real SGLang 0.5.23.

The oracle is SGLang's own launch: `python -m fidelity.plugin_launch 0.5.23` ran
`python -m sglang.launch_server` and `sglang serve` in a venv with meshsat installed (CPU
only) and recorded, per case, the exit status, meshsat's lines and how far SGLang got
(tests/fixtures/plugin/). The same arguments were launched with `MESHSAT_SGLANG=off`, so the
record also holds SGLang's own verdict on them. Here, without SGLang:
- the record shows meshsat stopping every layout SGLang rejects, before SGLang's error, and
  letting every layout SGLang resolves go on, with the proof line;
- meshsat today prints exactly the recorded lines for the recorded arguments;
- the hook itself (registration, modes, help, meshsat's own failures) in-process, with
  SGLang's `HookRegistry` replaced by a recorder of what is registered.
"""

from __future__ import annotations

import json
import os
import stat
import sys
import types
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path
from typing import Any, ClassVar

import pytest

from meshsat import sglang_plugin
from meshsat.sglang_plugin import LAUNCH_SERVER, SERVE, Mode, mode_from_env
from meshsat.solver.integrations.launch_guard import judge_argv, judge_words
from tests.cli_helpers import run_cli

ROOT = Path(__file__).resolve().parents[1]
RECORD = json.loads((ROOT / "tests/fixtures/plugin/0.5.23.json").read_text("utf-8"))
CASES = {c["id"]: c for c in RECORD["cases"]}
INVALID_CP = [
    "--model-path", "fidelity/models/deepseek_v3", "--tp", "8", "--attn-dp-size", "3",
    "--attn-cp-size", "3",
]  # fmt: skip
VALID = ["--model-path", "fidelity/models/deepseek_v3", "--tp", "8", "--attn-dp-size", "2"]


def _pairs() -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """(checked, unchecked) launches of the same arguments."""
    for c in RECORD["cases"]:
        if c["mode"] == "off":
            continue
        twin = next(
            (o for o in RECORD["cases"] if o["mode"] == "off" and o["argv"] == c["argv"]), None
        )
        if twin is not None:
            yield c, twin


def test_record_is_of_the_real_release_and_covers_every_outcome() -> None:
    assert RECORD["sglang"] == "0.5.23"
    stages = {c["stage"] for c in RECORD["cases"]}
    assert {"stopped-by-meshsat", "resolution-error", "past-resolution"} <= stages
    assert {c["launcher"] for c in RECORD["cases"]} == {"launch_server", "serve"}
    assert len(list(_pairs())) >= 3


def test_meshsat_stops_what_sglang_rejects_before_sglang_does() -> None:
    for checked, unchecked in _pairs():
        if unchecked["stage"] != "resolution-error":
            continue
        assert unchecked["sglang_error"], unchecked["id"]
        if checked["mode"] in (None, "enforce"):
            assert checked["stage"] == "stopped-by-meshsat", checked["id"]
            assert checked["rc"] != 0 and checked["sglang_error"] is None
            assert "rejects this layout" in checked["meshsat"][0]
            assert any(line.strip() == "fixed command:" for line in checked["meshsat"])
        else:  # warn: meshsat's message, then SGLang's own error
            assert "launching anyway" in checked["meshsat"][0]
            assert checked["stage"] == "resolution-error"


def test_a_layout_sglang_resolves_goes_on_with_the_proof_line() -> None:
    for checked, unchecked in _pairs():
        if unchecked["stage"] != "past-resolution" or checked["stage"] == "stopped-by-meshsat":
            continue
        assert checked["stage"] == "past-resolution", checked["id"]
        assert checked["sglang_error"] == unchecked["sglang_error"]
        assert len(checked["meshsat"]) == 1
        assert checked["meshsat"][0].startswith("[meshsat] launch layout valid for SGLang 0.5.23")


def test_model_rules_sglang_checks_only_when_building_the_model_stop_the_launch_early() -> None:
    """`--tp 3` on a 32-head model gets past SGLang's argument resolution (it fails later,
    loading the model); meshsat stops it at once."""
    assert CASES["model-heads-off"]["stage"] == "past-resolution"
    assert CASES["model-heads-enforce"]["stage"] == "stopped-by-meshsat"
    assert "[MODEL-HEADS]" in "\n".join(CASES["model-heads-enforce"]["meshsat"])


def test_off_checks_nothing_and_says_so() -> None:
    for c in RECORD["cases"]:
        if c["mode"] == "off":
            assert c["meshsat"] == [
                "[meshsat] MESHSAT_SGLANG=off: the launch layout is not checked"
            ]


@pytest.mark.parametrize(
    "case_id",
    [c["id"] for c in RECORD["cases"] if c["mode"] != "off" and "--config" not in c["argv"]],
)
def test_meshsat_today_prints_the_recorded_lines(case_id: str) -> None:
    case = CASES[case_id]
    launcher = LAUNCH_SERVER if case["launcher"] == "launch_server" else SERVE
    mode = Mode(case["mode"] or "enforce")
    cwd = os.getcwd()
    os.chdir(ROOT)  # the recorded model paths are relative to the repository
    try:
        verdict = judge_argv(case["argv"], launcher, environ={}, sglang_version="0.5.23")
    finally:
        os.chdir(cwd)
    text = verdict.summary() if verdict.valid else verdict.message(mode)
    lines = [line for line in text.splitlines()]
    lines[0] = lines[0].split("checked in")[0] + "checked in _ ms)" if verdict.valid else lines[0]
    assert lines == case["meshsat"]


def test_the_config_file_layout_is_judged() -> None:
    """`--config` is merged by SGLang's own merger inside the hook; the record shows the
    file's layout (tp 8, attn_cp 3) judged."""
    case = CASES["invalid-config-file"]
    assert case["stage"] == "stopped-by-meshsat"
    assert "[CP-TP-DIV]" in "\n".join(case["meshsat"])


@pytest.mark.parametrize(
    ("environ", "stopped"),
    [({}, False), ({"ASCEND_RT_VISIBLE_DEVICES": "0,1,2,3,4,5,6,7"}, True)],
)
def test_an_npu_launch_is_judged_on_its_node(environ: dict[str, str], stopped: bool) -> None:
    """32 NPUs on 2 nodes: an Atlas A3 node (16) holds its half, as the docs' Qwen3 decode
    servers run; a process that sees 8 NPUs (an A2 node) cannot. The guard stopped both
    when it took every node for 8 GPUs."""
    argv = ["--model-path", "m", "--device", "npu", "--tp", "32", "--nnodes", "2"]
    verdict = judge_argv(argv, environ=environ, sglang_version="0.5.23", with_fix=False)
    assert ("TOPO-NODE-GPUS" in {v.rule for v in verdict.report.violations}) == stopped


@pytest.mark.parametrize("entry", ["argv", "words"])
def test_a_visible_devices_list_short_of_the_ranks_stops_the_launch(
    capsys: pytest.CaptureFixture[str], entry: str
) -> None:
    """A process that sees 2 GPUs cannot start tp 4 (rank 2 asks for a GPU it does not see):
    `validate` on the same command and environment says JOB-VISIBLE-DEVICES, and so must
    the guard, whose fixed command (fitted to the list) `validate` then accepts."""
    argv = ["--model-path", "Qwen/Qwen3-8B", "--tp", "4"]
    environ = {"CUDA_VISIBLE_DEVICES": "0,1"}
    words = [*LAUNCH_SERVER, *argv]
    verdict = (
        judge_argv(argv, environ=environ, sglang_version="0.5.23")
        if entry == "argv"
        else judge_words(words, environ=environ, sglang_version="0.5.23")
    )
    line = "CUDA_VISIBLE_DEVICES=0,1 " + " ".join(words)
    cli = run_cli(capsys, "validate", "--sglang", line, "--sglang-version", "0.5.23", "--json")
    wrong = {v["rule"] for v in json.loads(cli.out)["violations"]}
    assert not verdict.valid and cli.code == 1
    assert {v.rule for v in verdict.report.violations} == wrong == {"JOB-VISIBLE-DEVICES"}
    assert verdict.fixed_command is not None and "--tp 2" in verdict.fixed_command
    fixed = run_cli(
        capsys, "validate", "--sglang", "CUDA_VISIBLE_DEVICES=0,1 " + verdict.fixed_command,
        "--sglang-version", "0.5.23",
    )  # fmt: skip
    assert fixed.code == 0, fixed.out + fixed.err
    fine = judge_argv(argv, environ={"CUDA_VISIBLE_DEVICES": "0,1,2,3"}, sglang_version="0.5.23")
    assert fine.valid


# --- the hook, in-process ------------------------------------------------------------------


class _Registry:
    hooks: ClassVar[list[tuple[str, Any, str]]] = []

    @classmethod
    def register(cls, target: str, hook: Any, hook_type: str) -> None:
        cls.hooks.append((target, hook, hook_type))


@pytest.fixture
def fake_sglang(monkeypatch: pytest.MonkeyPatch) -> type[_Registry]:
    """SGLang's hook registry, as far as `register()` uses it (names from 0.5.23)."""
    module = types.ModuleType("sglang.srt.plugins.hook_registry")
    module.HookRegistry = _Registry  # type: ignore[attr-defined]
    module.HookType = types.SimpleNamespace(BEFORE="before")  # type: ignore[attr-defined]
    for name in ("sglang", "sglang.srt", "sglang.srt.plugins"):
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    monkeypatch.setitem(sys.modules, "sglang.srt.plugins.hook_registry", module)
    _Registry.hooks = []
    return _Registry


def test_the_entry_point_is_in_the_package_metadata() -> None:
    eps = metadata.entry_points(group="sglang.srt.plugins")
    ours = [ep for ep in eps if ep.name == "meshsat"]
    assert len(ours) == 1
    assert ours[0].load() is sglang_plugin.register


def test_register_hooks_before_prepare_server_args(
    fake_sglang: type[_Registry], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MESHSAT_SGLANG", raising=False)
    sglang_plugin.register()
    assert fake_sglang.hooks == [
        (
            "sglang.srt.server_args.prepare_server_args",
            sglang_plugin.before_prepare_server_args,
            "before",
        )
    ]


def test_off_registers_nothing(
    fake_sglang: type[_Registry],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("MESHSAT_SGLANG", "OFF")
    sglang_plugin.register()
    assert fake_sglang.hooks == []
    assert "not checked" in capsys.readouterr().err


def test_an_unknown_mode_is_said_and_the_default_kept() -> None:
    assert mode_from_env({}) == (Mode.enforce, None)
    assert mode_from_env({"MESHSAT_SGLANG": " Warn "}) == (Mode.warn, None)
    mode, problem = mode_from_env({"MESHSAT_SGLANG": "enforced"})
    assert mode is Mode.enforce and problem is not None and "enforced" in problem


def test_hook_stops_an_invalid_layout_and_passes_a_valid_one(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(ROOT)
    monkeypatch.delenv("MESHSAT_SGLANG", raising=False)
    assert sglang_plugin.before_prepare_server_args(VALID) is None
    assert "launch layout valid" in capsys.readouterr().err
    with pytest.raises(SystemExit) as stopped:
        sglang_plugin.before_prepare_server_args(INVALID_CP)
    assert stopped.value.code == 1
    assert "[CP-TP-DIV]" in capsys.readouterr().err
    monkeypatch.setenv("MESHSAT_SGLANG", "warn")
    assert sglang_plugin.before_prepare_server_args(argv=INVALID_CP) is None
    assert "launching anyway" in capsys.readouterr().err


def test_hook_leaves_help_and_unreadable_arguments_to_sglang(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("MESHSAT_SGLANG", raising=False)
    assert sglang_plugin.before_prepare_server_args([*INVALID_CP, "--help"]) is None
    assert capsys.readouterr().err == ""
    # A flag without its value: SGLang's parser says so; meshsat does not stop the launch.
    assert sglang_plugin.before_prepare_server_args(["--tp"]) is None
    assert "not checked" in capsys.readouterr().err


def test_a_failure_inside_meshsat_never_stops_the_server(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("boom")

    monkeypatch.setattr("meshsat.solver.integrations.launch_guard.validate", broken)
    assert sglang_plugin.before_prepare_server_args(INVALID_CP) is None
    assert "internal error" in capsys.readouterr().err


# --- meshsat launch ------------------------------------------------------------------------


@pytest.fixture
def fake_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An `sglang` on PATH that writes the words it was run with (what exec handed it)."""
    seen = tmp_path / "argv.json"
    script = tmp_path / "sglang"
    script.write_text(
        f"#!{sys.executable}\nimport json, sys\n"
        f"open({str(seen)!r}, 'w').write(json.dumps(sys.argv[1:]))\n",
        encoding="utf-8",
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    return seen


def test_launch_judges_then_runs_the_command_unchanged(fake_server: Path, tmp_path: Path) -> None:
    import subprocess

    words = ["sglang", "serve", "--tp", "8", "--attn-dp-size", "2", "--port", "30000"]
    env = {**os.environ, "MESHSAT_SGLANG": "enforce"}
    cli = [sys.executable, "-m", "meshsat", "launch", "--sglang-version", "0.5.23", "--"]
    ok = subprocess.run([*cli, *words], env=env, capture_output=True, text=True, check=False)
    assert ok.returncode == 0, ok.stderr
    assert "launch layout valid for SGLang 0.5.23" in ok.stderr
    assert json.loads(fake_server.read_text()) == words[1:]


def test_launch_does_not_run_an_invalid_layout(
    fake_server: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    r = run_cli(capsys, "launch", "-V", "0.5.23", "--", "sglang", "serve", "--tp", "8",
                "--attn-cp-size", "3")  # fmt: skip
    assert r.code == 1
    assert "[CP-TP-DIV]" in r.err and "fixed command:" in r.err
    assert not fake_server.exists()


def test_launch_refuses_what_is_not_an_sglang_launch(capsys: pytest.CaptureFixture[str]) -> None:
    r = run_cli(capsys, "launch", "--dry-run", "--", "echo", "hello")
    assert r.code == 2
    assert r.err.startswith("meshsat: error: ") and len(r.err.strip().splitlines()) == 1
    r = run_cli(capsys, "launch", "--dry-run")
    assert r.code == 2


def test_launch_dry_run_and_modes(capsys: pytest.CaptureFixture[str]) -> None:
    cmd = ["python", "-m", "sglang.launch_server", "--tp", "8", "--attn-cp-size", "3"]
    r = run_cli(capsys, "launch", "-V", "0.5.23", "--dry-run", "--", *cmd)
    assert r.code == 1 and "[CP-TP-DIV]" in r.err
    r = run_cli(capsys, "launch", "-V", "0.5.23", "--mode", "warn", "--dry-run", "--", *cmd)
    assert r.code == 0 and "launching anyway" in r.err
    r = run_cli(capsys, "launch", "-V", "0.5.23", "--mode", "off", "--dry-run", "--", *cmd)
    assert r.code == 0 and r.err == ""


def test_the_start_up_path_loads_neither_z3_torch_nor_a_tuner() -> None:
    """A valid launch judged by the hook: no solver, no torch, no optuna in the process."""
    import subprocess

    code = (
        "import sys\n"
        "from meshsat.sglang_plugin import Mode, check_arguments\n"
        f"assert check_arguments({VALID!r}, Mode.enforce) == 0\n"
        "from meshsat import solver\n"
        "solver.check({'tp_size': 8, 'attn_dp_size': 2})\n"
        "heavy = ('z3', 'torch', 'optuna', 'ray', 'aiconfigurator_core')\n"
        "print(sorted(m for m in heavy if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[]"
    assert "launch layout valid" in out.stderr


def test_registering_imports_nothing_of_meshsat_solver() -> None:
    """SGLang imports the entry point in every process that loads plugins: it must cost
    nothing there; the rules load only when the hook runs."""
    import subprocess

    code = (
        "import sys\n"
        "import meshsat.sglang_plugin\n"
        "print(sorted(m for m in ('meshsat.solver', 'pydantic', 'yaml') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_launch_json_is_the_verdict(capsys: pytest.CaptureFixture[str]) -> None:
    cmd = ["sglang", "serve", "--tp", "8", "--attn-cp-size", "3"]
    r = run_cli(capsys, "launch", "-V", "0.5.23", "--json", "--", *cmd)
    data = json.loads(r.out)
    assert r.code == 1 and data["valid"] is False
    assert "CP-TP-DIV" in [v["rule"] for v in data["violations"]]
    assert data["fixed_command"].startswith("sglang serve --tp 8 --attn-cp-size ")
