"""What the command line does when its output cannot be written or it is interrupted
(issue 28, items 1-4, 8 and 12): closed streams, a reader that leaves, a full disk,
Ctrl-C while the CLI is still loading, the stand-in pack for `--sglang-version installed`,
and control characters in echoed input.

The pipe, stream and signal cases run in subprocesses, since what is tested is what the
operating system hands the process; the exit status expected is always the command's own
verdict, measured in-process on the same input (the oracle), so a reader that leaves or a
closed stdout must not change it.
"""

from __future__ import annotations

import errno
import io
import os
import re
import shlex
import signal
import stat
import subprocess
import sys
import warnings
from importlib import metadata
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from meshsat.solver.cli.printable import printable
from meshsat.solver.packs import NEWEST, installed_pack
from tests.cli_helpers import Run, run_cli

ROOT = Path(__file__).resolve().parent.parent
CONSOLE_SCRIPT = Path(sys.executable).with_name("meshsat")
#: The three ways in: the console script (or its exact code), `python -m meshsat`, and
#: `python -m meshsat.solver.cli` (which loads pydantic and rich before its __main__).
ENTRIES = {
    "console script": [str(CONSOLE_SCRIPT)]
    if CONSOLE_SCRIPT.exists()
    else [sys.executable, "-c", "import sys; from meshsat.entry import main; sys.exit(main())"],
    "python -m meshsat": [sys.executable, "-m", "meshsat"],
    "python -m meshsat.solver.cli": [sys.executable, "-m", "meshsat.solver.cli"],
}
INVALID = ["validate", "--example", "dp-cp-conflict"]
VALID = ["validate", "--set", "tp_size=8"]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def _shell(line: str, env: dict[str, str] | None = None) -> Run:
    """`line` under bash; its status is the meshsat process's own ($? of the first)."""
    proc = subprocess.run(
        ["bash", "-c", line],
        capture_output=True,
        text=True,
        env=env or ENV,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    return Run(proc.returncode, proc.stdout, proc.stderr)


def _command(entry: str, args: list[str]) -> str:
    return " ".join(shlex.quote(a) for a in [*ENTRIES[entry], *args])


def _verdict(capsys: pytest.CaptureFixture[str], args: list[str]) -> int:
    """The oracle: the exit status of the same command run in-process, output readable."""
    return run_cli(capsys, *args).code


def assert_no_traceback(run: Run) -> None:
    assert "Traceback" not in run.err, run.err


# --- item 1: a closed stream ------------------------------------------------------------
@pytest.mark.parametrize(
    ("entry", "args"), [("console script", VALID), ("python -m meshsat.solver.cli", INVALID)]
)
def test_closed_stdout_keeps_the_verdict(
    entry: str, args: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    run = _shell(_command(entry, args) + " >&-")
    assert_no_traceback(run)
    assert run.code == _verdict(capsys, args), (args, run.err)


def test_closed_stderr_still_exits_2_on_bad_input() -> None:
    run = _shell(_command("console script", ["validate", "--set", "tp_size=x"]) + " 2>&-")
    assert run.code == 2 and run.out == ""


# --- item 2: a write error other than a closed pipe -------------------------------------
def test_full_disk_is_one_error_line_and_exit_2() -> None:
    run = _shell(_command("console script", ["rules"]) + " > /dev/full")
    assert run.code == 2
    assert run.err == "meshsat: error: cannot write output: No space left on device\n"


class _FailingStream(io.StringIO):
    """stdout whose every write fails with `code` after `after` characters went through."""

    def __init__(self, code: int, after: int = 0) -> None:
        super().__init__()
        self.code, self.after = code, after

    def write(self, text: str) -> int:
        if self.tell() + len(text) > self.after:
            raise OSError(self.code, os.strerror(self.code))
        return super().write(text)


def _run_into(
    stream: io.StringIO, args: list[str], monkeypatch: pytest.MonkeyPatch
) -> tuple[int, str]:
    """Run the CLI in-process with `stream` as stdout; the exit status and stderr."""
    from meshsat.solver.cli import main

    err = io.StringIO()
    monkeypatch.setattr(sys, "stdout", stream)
    monkeypatch.setattr(sys, "stderr", err)
    try:
        main(args)
    except SystemExit as exc:
        return (exc.code if isinstance(exc.code, int) else 0), err.getvalue()
    raise AssertionError("main() always exits")


COMMANDS = [
    INVALID,
    VALID,
    ["fix", "--set", "tp_size=3", "--pin", "tp_size", "--gpus", "8"],  # no fix: exit 1
    ["groups", "--set", "tp_size=3", "--set", "dp_size=2", "--set", "enable_dp_attention=true"],
    ["groups", "--set", "tp_size=8", "--set", "attn_cp_size=2"],
    ["enumerate", "--gpus", "64"],
    ["enumerate", "--gpus", "8", "--where", "tp > 8"],  # none: exit 1
    ["enumerate", "--gpus", "64", "--count"],
    ["rules", "--format", "csv"],
    ["diff", "0.5.19", "0.5.23", "--json"],
]


def _cut_points(capsys: pytest.CaptureFixture[str], args: list[str]) -> tuple[int, int]:
    """Where to fail: at the first character, and half-way through the real output."""
    return 0, len(run_cli(capsys, *args).out) // 2


@pytest.mark.parametrize("args", COMMANDS, ids=lambda a: " ".join(a)[:40])
def test_every_write_error_is_exit_2_and_one_line(
    args: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for after in _cut_points(capsys, args):
        code, err = _run_into(_FailingStream(errno.ENOSPC, after), args, monkeypatch)
        assert code == 2, (args, after, err)
        assert err == "meshsat: error: cannot write output: No space left on device\n"
        code, err = _run_into(_FailingStream(errno.EIO, after), args, monkeypatch)
        assert (code, err) == (2, "meshsat: error: cannot write output: Input/output error\n")


# --- item 4: a reader that leaves -------------------------------------------------------
@pytest.mark.parametrize("args", COMMANDS, ids=lambda a: " ".join(a)[:40])
def test_a_reader_that_leaves_does_not_change_the_exit_status(
    args: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    expected = _verdict(capsys, args)
    for after in _cut_points(capsys, args):
        code, err = _run_into(_FailingStream(errno.EPIPE, after), args, monkeypatch)
        assert code == expected, (args, after, err)
        assert "error" not in err


def _reader_gone(args: list[str]) -> Run:
    """Run the console script with its stdout a pipe whose reader closed before it wrote."""
    read, write = os.pipe()
    os.close(read)  # the reader left at once: every write meets EPIPE
    try:
        proc = subprocess.run(
            [*ENTRIES["console script"], *args],
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            env=ENV,
            timeout=120,
        )
    finally:
        os.close(write)
    return Run(proc.returncode, "", proc.stderr)


def test_closed_pipe_keeps_the_verdict_in_a_subprocess(
    capsys: pytest.CaptureFixture[str],
) -> None:
    run = _reader_gone(INVALID)
    assert (run.code, run.err) == (_verdict(capsys, INVALID), "")
    # A listing stops at the next flush (millions of layouts would follow), exit 0.
    run = _reader_gone(["enumerate", "--gpus", "720720"])
    assert (run.code, run.err) == (0, "")
    # The issue's own repro: whatever `true` and meshsat race to, the verdict stays 1.
    run = _shell(_command("console script", INVALID) + " | true; exit ${PIPESTATUS[0]}")
    assert run.code == 1 and run.err == ""


# --- item 3: Ctrl-C while the CLI loads -------------------------------------------------
#: Installed by a sitecustomize: SIGINT arrives the moment pydantic starts to load,
#: inside the import of the CLI, wherever a real Ctrl-C would hit half of the time.
_INTERRUPT_AT_IMPORT = """
import os, signal, sys

class _Interrupt:
    def find_spec(self, name, path=None, target=None):
        if name == "pydantic":
            sys.meta_path.remove(self)
            os.kill(os.getpid(), signal.SIGINT)
        return None

sys.meta_path.insert(0, _Interrupt())
"""


@pytest.mark.parametrize("entry", list(ENTRIES))
def test_ctrl_c_while_loading_exits_130_silently(entry: str, tmp_path: Path) -> None:
    (tmp_path / "sitecustomize.py").write_text(_INTERRUPT_AT_IMPORT)
    env = {**ENV, "PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT}"}
    run = _shell(_command(entry, INVALID), env)
    assert (run.code, run.err, run.out) == (130, "", "")


def _python_sigint() -> None:
    """SIGINT as an interactive shell hands it to a child, whatever this run inherited: a
    `.ci/run` started in the background of a shell without job control ignores it, and a
    child Python then keeps it ignored instead of installing its own handler."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_importing_meshsat_leaves_sigint_alone(tmp_path: Path) -> None:
    """The start-up handler is for the command line only: a library import, or another
    `python -m meshsat...` tool (the cp demo cleans up its own processes), keeps Python's."""
    check = "import signal; assert signal.getsignal(signal.SIGINT) is signal.default_int_handler"
    proc = subprocess.run(
        [sys.executable, "-c", "import meshsat, meshsat.solver; " + check],
        env=ENV,
        capture_output=True,
        timeout=60,
        preexec_fn=_python_sigint,
    )
    assert proc.returncode == 0, proc.stderr
    # A module of the package that is no CLI, run with -m: at exit, Python's handler still.
    (tmp_path / "sitecustomize.py").write_text(
        "import atexit, os, signal\n"
        "atexit.register(lambda: os._exit(\n"
        "    0 if signal.getsignal(signal.SIGINT) is signal.default_int_handler else 3))\n"
    )
    tool = [sys.executable, "-m", "meshsat.solver.lang.limits"]
    env = {**ENV, "PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT}"}
    run = subprocess.run(tool, env=env, capture_output=True, timeout=60, preexec_fn=_python_sigint)
    assert run.returncode == 0


# --- item 8: the stand-in for --sglang-version installed --------------------------------
@pytest.fixture
def no_sglang(monkeypatch: pytest.MonkeyPatch) -> object:
    def version(name: str) -> str:
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(metadata, "version", version)
    installed_pack.cache_clear()
    yield None
    installed_pack.cache_clear()


def test_installed_without_sglang_is_one_note_naming_the_pack(
    no_sglang: object, capsys: pytest.CaptureFixture[str]
) -> None:
    run = run_cli(capsys, "validate", "--set", "tp_size=8", "--sglang-version", "installed")
    assert run.code == 0
    notes = [line for line in run.err.splitlines() if "not installed" in line]
    assert len(notes) == 1 and notes[0].startswith("note: ")
    assert NEWEST.version in notes[0]


def test_check_warns_once_with_meshsats_class(no_sglang: object) -> None:
    from meshsat import solver

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            assert solver.check({"tp_size": 2}).sglang_version == NEWEST.version
    assert [w.category for w in caught] == [solver.MeshsatWarning]
    assert NEWEST.version in str(caught[0].message)


# --- item 12: control characters in echoed input ----------------------------------------
_RAW_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def test_pasted_escape_sequences_are_shown_not_run(capsys: pytest.CaptureFixture[str]) -> None:
    cmd = "python -m sglang.launch_server --tp 8 --x\x1b[2J --y\x07\x9b31m"
    run = run_cli(capsys, "validate", "--sglang", cmd)
    assert run.code == 1  # flags no SGLang release takes, shown escaped in the refusal
    assert "--x\\x1b[2J" in run.out and "--y\\x07\\x9b31m" in run.out
    assert not _RAW_CONTROL.search(run.out + run.err)
    for args in (
        ["validate", "--config", "/nonexistent/\x1b]0;pwned\x07.yaml"],  # an error line
        ["validate", "--sglang", "python -m sglang.launch_server --tp 8 --model-path \x1b[2J"],
        ["enumerate", "--gpus", "4", "--set", "eplb_algorithm=\x1b[2J", "--command", "-f", "table"],
    ):
        run = run_cli(capsys, *args)
        assert not _RAW_CONTROL.search(run.out + run.err), (args, run.out, run.err)


def test_escaping_keeps_the_consoles_own_styles() -> None:
    """On a colour terminal rich writes escape codes of its own: those must stay."""
    from meshsat.solver.cli.output import _Console

    buffer = io.StringIO()
    console = _Console(file=buffer, force_terminal=True, color_system="standard", highlight=False)
    console.print("[bold]verdict[/bold] --x\x1b[2J")
    text = buffer.getvalue()
    assert "\x1b[1m" in text and "--x\\x1b[2J" in text and "\x1b[2J" not in text


@given(st.text())
def test_printable_escapes_every_control_character_and_nothing_else(text: str) -> None:
    shown = printable(text)
    assert not _RAW_CONTROL.search(shown)
    assert not re.search("[\u202a-\u202e\u2066-\u2069]", shown)
    if not _RAW_CONTROL.search(text) and not re.search("[\u202a-\u202e\u2066-\u2069]", text):
        assert shown == text
    # Reading the escapes back gives the text (backslashes the user typed stay as typed).
    back = re.sub(
        r"\\x([0-9a-f]{2})|\\u([0-9a-f]{4})",
        lambda m: chr(int(m.group(1) or m.group(2), 16)),
        shown,
    )
    if "\\" not in text:
        assert back == text


# --- a file the command writes itself: `plan --plot` ------------------------------------
PLAN = ["plan", "-m", "Qwen/Qwen3-8B", "--gpu", "H100", "-n", "2", "--engine", "roofline"]


def test_plot_never_replaces_what_is_not_a_regular_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The atomic rename would put the PNG in place of a FIFO, a directory or (as root) a
    device node: refused before any work, so nothing is printed before the error line."""
    fifo = tmp_path / "p.png"
    os.mkfifo(fifo)
    for target in (fifo, tmp_path, tmp_path / "missing" / "p.png"):
        run = run_cli(capsys, *PLAN, "--plot", str(target))
        assert (run.code, run.out) == (2, ""), (target, run.err)
        assert run.err.startswith("meshsat: error: ") and run.err.count("\n") == 1
    assert stat.S_ISFIFO(os.stat(fifo).st_mode) and tmp_path.is_dir()


def test_a_librarys_warning_is_one_note(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A library's warning while the plot is drawn (matplotlib's on an empty legend, here
    raised by its own `Axes.legend`) is a note on one line, not a `file:line: UserWarning`
    with its source line. When nothing fits, no chart is drawn at all (it was an empty one,
    and that warning)."""
    pytest.importorskip("matplotlib")
    from matplotlib import _api
    from matplotlib.axes import Axes

    png = tmp_path / "p.png"
    args = ["plan", "-m", "deepseek-ai/DeepSeek-V3", "-n", "1", "--gpu-memory", "80GiB"]
    run = run_cli(capsys, *args, "--engine", "roofline", "--plot", str(png))
    assert run.code == 1 and not png.is_file() and "Warning" not in run.err, run.err
    original = Axes.legend

    def legend(self: Axes, *a: object, **k: object) -> object:
        _api.warn_external("No artists with labels found to put in legend.")
        return original(self, *a, **k)

    monkeypatch.setattr(Axes, "legend", legend)
    args = ["plan", "-m", "Qwen/Qwen3-0.6B", "-n", "1", "--gpu", "H100", "--top", "1"]
    run = run_cli(capsys, *args, "--engine", "roofline", "--plot", str(png))
    assert run.code == 0 and png.is_file()
    warned = [line for line in run.err.splitlines() if "Warning" in line]
    assert len(warned) == 1 and warned[0].startswith("note: UserWarning: "), run.err
    assert ".py:" not in run.err
