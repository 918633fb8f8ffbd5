"""A launch script is read once and parsed once, however many questions a command asks of it
(is it a PD deployment? which server? which layout?). Standard input and pipes give their
text only once, so a second read would see nothing: `--sglang-file -`, `--sglang -` and a
FIFO (`<(...)`) must answer as the same script in a regular file does.

The script is one prefill server of a public PD recipe (tests/fixtures/pd/): it names PD
flags, so the deployment test has to parse it, yet it is one job. Oracles: the same server
with its two PD flags deleted (a plain script, which never meets the deployment reader) for
the layout; the regular file for standard input and the pipe. Reads are counted where the
text comes in (the file opened, standard input read), parses at the shell parse itself.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path

import pytest

import meshsat.solver.inputs.launch as launch
import meshsat.solver.inputs.layout_input as layout_input
from tests.cli_helpers import Run, run_cli

FIXTURES = Path(__file__).parent / "fixtures" / "pd"
RECIPE = FIXTURES / "sglang-docs-deepseek-nixl.sh"
#: The recipe's prefill server: its two nodes (the lines before `# decode 0`).
SERVER = RECIPE.read_text().split("# decode 0")[0]
PD_FLAGS = ("--disaggregation-transfer-backend nixl", "--disaggregation-mode prefill")
#: The same server without its PD flags: a script the deployment reader never looks into.
PLAIN = "\n".join(line for line in SERVER.splitlines() if line.strip(" \\") not in PD_FLAGS)


@pytest.fixture
def counts(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """How often a script file is opened, standard input read, and launch text parsed."""
    seen: Counter[str] = Counter()
    real_open, real_stdin, real_parse = Path.open, layout_input._stdin, launch._parse

    def opened(self: Path, *args: object, **kwargs: object) -> object:
        mode = str(args[0] if args else kwargs.get("mode", "r"))
        if self.suffix == ".sh" and "r" in mode:
            seen["reads"] += 1
        return real_open(self, *args, **kwargs)  # type: ignore[call-overload]

    def stdin() -> str:
        seen["reads"] += 1
        return real_stdin()

    def parse(source: str) -> object:
        seen["parses"] += 1
        return real_parse(source)

    monkeypatch.setattr(Path, "open", opened)
    monkeypatch.setattr(layout_input, "_stdin", stdin)
    monkeypatch.setattr(launch, "_parse", parse)
    return seen


def _script(tmp_path: Path, text: str, name: str = "server.sh") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _piped(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, text: str, *args: str
) -> Run:
    monkeypatch.setattr(sys, "stdin", io.StringIO(text))
    return run_cli(capsys, *args)


@pytest.mark.parametrize(
    "args",
    [
        ("groups", "--json"),
        ("groups", "--rank", "3", "--json"),
        ("validate", "--json"),
        ("fix", "--json"),
    ],
)
def test_a_one_server_pd_script_is_read_and_parsed_once(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    counts: Counter[str],
    args: tuple[str, ...],
) -> None:
    path = _script(tmp_path, SERVER)
    run = run_cli(capsys, *args, "--sglang-file", str(path))
    assert run.code == 0, run.err
    assert counts == {"reads": 1, "parses": 1}, counts


def test_the_pd_flags_do_not_change_a_servers_groups(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The layout handed on from the deployment test is the one the plain reader reads."""
    for args in (("groups", "--json"), ("groups", "--rank", "9", "--json")):
        ours = run_cli(capsys, *args, "--sglang-file", str(_script(tmp_path, SERVER)))
        plain = run_cli(capsys, *args, "--sglang-file", str(_script(tmp_path, PLAIN, "p.sh")))
        assert ours.code == plain.code == 0, (ours.err, plain.err)
        assert json.loads(ours.out) == json.loads(plain.out)


@pytest.mark.parametrize("text", [SERVER, RECIPE.read_text()], ids=["one server", "deployment"])
def test_standard_input_answers_as_the_file(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    counts: Counter[str],
    text: str,
) -> None:
    """`--sglang-file -` and `--sglang -` read standard input once; the answer is the file's."""
    from_file = run_cli(capsys, "groups", "--json", "--sglang-file", str(_script(tmp_path, text)))
    assert from_file.code == 0, from_file.err
    for flag in ("--sglang-file", "--sglang"):
        counts.clear()
        run = _piped(capsys, monkeypatch, text, "groups", "--json", flag, "-")
        assert run.code == 0, (flag, run.err)
        assert json.loads(run.out) == json.loads(from_file.out), flag
        assert counts["reads"] == 1, (flag, counts)


def test_a_deployment_on_standard_input_is_refused_by_a_one_server_command(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for flag in ("--sglang-file", "--sglang"):
        run = _piped(capsys, monkeypatch, RECIPE.read_text(), "groups", "--rank", "0", flag, "-")
        assert (run.code, run.out) == (2, ""), run.err
        assert run.err.startswith("meshsat: error: standard input holds a PD deployment (2 ")


def test_a_pipe_is_read_once(tmp_path: Path) -> None:
    """A FIFO gives its text once: a second open would wait for a writer that never comes
    (the timeout turns that into a failure). A fresh process, as a shell's `<(cat x)`."""
    fifo = tmp_path / "server.fifo"
    os.mkfifo(fifo)

    def write() -> None:
        with open(fifo, "w") as f:
            f.write(SERVER)

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    args = [sys.executable, "-m", "meshsat", "groups", "--json", "--sglang-file", str(fifo)]
    root = Path(__file__).parents[1]
    piped = subprocess.run(args, capture_output=True, text=True, timeout=60, cwd=root)
    writer.join(timeout=1)
    assert piped.returncode == 0, piped.stderr
    plain = subprocess.run(
        [*args[:-1], str(_script(tmp_path, SERVER))], capture_output=True, text=True, cwd=root
    )
    assert json.loads(piped.stdout) == json.loads(plain.stdout)


def test_what_is_neither_a_file_nor_a_pipe_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    for path in ("/dev/null", str(FIXTURES)):
        run = run_cli(capsys, "groups", "--sglang-file", path)
        assert run.code == 2 and run.out == "", run.err
        assert run.err == f"meshsat: error: --sglang-file {path}: not a regular file or a pipe\n"
