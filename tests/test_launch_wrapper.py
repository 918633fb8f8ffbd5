"""`meshsat launch`: what it judges of the command, and what the command runs with.

Each test is one defect found in the wrapper: a container's or a remote process's devices
judged by this shell's CUDA_VISIBLE_DEVICES; SIGPIPE and SIGXFSZ left ignored in the program
it execs; a flag no SGLang release takes launched (though `validate` refuses it); a `--`
read as a layout error instead of what SGLang's parser says of it.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli_helpers import run_cli

ROOT = Path(__file__).resolve().parent.parent
TYPO = ["python", "-m", "sglang.launch_server", "--tp", "8", "--enable-dp-atention"]
DOCKER = ["docker", "run", "--gpus", "all", "lmsysorg/sglang"]
SERVER = ["python3", "-m", "sglang.launch_server", "--tp", "8"]


def _launch(capsys: pytest.CaptureFixture[str], *words: str, mode: str = "enforce") -> object:
    return run_cli(capsys, "launch", "-V", "0.5.23", "--mode", mode, "--dry-run", "--", *words)


@pytest.mark.parametrize(
    ("words", "code"),
    [
        (SERVER, 1),  # started here: it inherits the list
        (["env", *SERVER], 1),
        ([*DOCKER, *SERVER], 0),  # the container gets --gpus all, and no such variable
        (["ssh", "node1", *SERVER], 0),
        (["docker", "run", "-e", "CUDA_VISIBLE_DEVICES", *DOCKER[2:], *SERVER], 1),  # passed on
        (["docker", "run", "-e", "CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7", *DOCKER[2:], *SERVER], 0),
    ],
)
def test_only_a_process_that_inherits_it_is_judged_by_this_shells_device_list(
    words: list[str], code: int, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    r = run_cli(capsys, "launch", "-V", "0.5.23", "--dry-run", "--", *words)
    assert r.code == code, r.err
    assert ("JOB-VISIBLE-DEVICES" in r.err) == (code == 1)


def test_a_prefix_before_docker_run_does_not_reach_the_container(
    capsys: pytest.CaptureFixture[str],
) -> None:
    line = "CUDA_VISIBLE_DEVICES=0,1 " + " ".join([*DOCKER, *SERVER])
    r = run_cli(capsys, "validate", "--sglang", line, "-V", "0.5.23")
    assert r.code == 0, r.out


def test_the_program_runs_with_the_signals_python_ignored_set_back(tmp_path: Path) -> None:
    """`python` here is a shell script that prints its own ignored signals; SIGHUP, ignored
    by whoever started meshsat (as `nohup` does), stays ignored, as it would bare."""
    program = tmp_path / "python"
    program.write_text("#!/bin/sh\nexec grep SigIgn /proc/self/status\n", encoding="utf-8")
    program.chmod(program.stat().st_mode | stat.S_IXUSR)
    env = {**os.environ, "PATH": f"{tmp_path}{os.pathsep}{os.environ['PATH']}",
           "PYTHONPATH": str(ROOT)}  # fmt: skip
    out = subprocess.run(
        [sys.executable, "-m", "meshsat", "launch", "-V", "0.5.23", "--", *TYPO[:5]],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_IGN),
    )
    assert out.returncode == 0, out.stderr
    ignored = int(out.stdout.split()[1], 16)
    assert not ignored & (1 << (signal.SIGPIPE - 1) | 1 << (signal.SIGXFSZ - 1))
    assert ignored & 1 << (signal.SIGHUP - 1)


def test_a_flag_no_release_takes_stops_the_launch_as_validate_refuses_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    said = run_cli(capsys, "validate", "--sglang", " ".join(TYPO), "-V", "0.5.23", "--json")
    assert said.code == 1 and json.loads(said.out)["violations"][0]["rule"] == "CMD-UNKNOWN-FLAG"
    r = _launch(capsys, *TYPO)
    assert r.code == 1 and "[CMD-UNKNOWN-FLAG]" in r.err
    assert "did you mean --enable-dp-attention?" in r.err and "no valid layout" not in r.err
    verdict = run_cli(capsys, "launch", "-V", "0.5.23", "--json", "--", *TYPO)
    assert verdict.code == 1 and json.loads(verdict.out)["valid"] is False
    warned = _launch(capsys, *TYPO, mode="warn")
    assert warned.code == 0 and "launching anyway" in warned.err
    assert _launch(capsys, *TYPO, mode="off").err == ""
    # A flag of another release (0.4.6's --enable-ep-moe) stops it too, naming the release.
    older = _launch(capsys, *TYPO[:5], "--enable-ep-moe")
    assert older.code == 1 and "[CMD-UNKNOWN-FLAG]" in older.err and "-V 0.4.6.post5" in older.err


def test_a_double_dash_is_refused_as_sglangs_parser_refuses_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """SGLang's parser is a plain `argparse` `parse_args` with no positional argument:
    `--` and every word after it are "unrecognized arguments" (exit 2), a trailing one too,
    so meshsat says that, in one line, and runs nothing."""
    parser = argparse.ArgumentParser(exit_on_error=False)
    parser.add_argument("--tp", type=int)
    with pytest.raises((SystemExit, argparse.ArgumentError)):
        parser.parse_args(["--tp", "8", "--"])
    r = _launch(capsys, *TYPO[:5], "--")
    assert r.code == 2 and len(r.err.strip().splitlines()) == 1
    assert "unrecognized arguments: --)" in r.err
    r = run_cli(capsys, "validate", "--sglang", " ".join([*TYPO[:5], "--", "--dp", "2"]))
    assert r.code == 2 and "unrecognized arguments: -- --dp 2" in r.err
